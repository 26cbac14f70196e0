//! Shared helpers for the HTTP-level tests: start a simulator, sign requests, call the API.
#![allow(dead_code, unreachable_pub)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod net;

use maas_sim::{NodeStatus, OpFault, RunningSim, SimConfig, Simulator};
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::Value;

static NONCE: AtomicU64 = AtomicU64::new(1);

/// A PLAINTEXT OAuth header (as the MAAS docs' curl example and python-libmaas send it).
pub fn plaintext_header(key: &str) -> String {
    let parts: Vec<&str> = key.split(':').collect();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let nonce = NONCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "OAuth realm=\"OAuth\", oauth_version=\"1.0\", oauth_signature_method=\"PLAINTEXT\", \
oauth_consumer_key=\"{}\", oauth_token=\"{}\", oauth_signature=\"%26{}\", oauth_nonce=\"n{nonce}-{}\", oauth_timestamp=\"{now}\"",
        parts[0],
        parts[1],
        parts[2],
        std::process::id()
    )
}

pub struct TestSim {
    pub sim: RunningSim,
    pub client: Client,
    pub key: String,
}

pub fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder().build().unwrap()
}

pub async fn start(cfg: SimConfig) -> TestSim {
    let sim = Simulator::start(cfg).await.unwrap();
    let key = sim.api_key();
    TestSim {
        sim,
        client: client(),
        key,
    }
}

/// A client that gives up after `ms`, to see a held connection as a timeout.
pub fn impatient(ms: u64) -> Client {
    Client::builder()
        .timeout(std::time::Duration::from_millis(ms))
        .build()
        .unwrap()
}

/// A fault on `op` with the default body.
pub fn op_fault(
    op: &str,
    error_rate: f64,
    status: u16,
    latency_ms: u64,
    retry_after: Option<u64>,
) -> OpFault {
    OpFault {
        op: op.into(),
        error_rate,
        status,
        latency_ms,
        retry_after,
        body: None,
    }
}

/// `machines` machines that take `timings` for each transition.
pub async fn start_timed(machines: usize, timings: maas_sim::Timings) -> TestSim {
    start(SimConfig {
        machines,
        timings,
        ..SimConfig::default()
    })
    .await
}

/// One machine, allocated and deployed at once; its id.
pub async fn one_deployed() -> (TestSim, String) {
    let t = start_instant(1).await;
    let id = t.deployed(&[]).await;
    (t, id)
}

pub async fn start_instant(machines: usize) -> TestSim {
    start(SimConfig {
        machines,
        ..SimConfig::instant()
    })
    .await
}

impl TestSim {
    /// Absolute URL of `path` below `/MAAS/api/2.0/`.
    pub fn api(&self, path: &str) -> String {
        format!("{}api/2.0/{path}", self.sim.url())
    }

    pub fn root(&self) -> String {
        self.sim.url().trim_end_matches("/MAAS/").to_owned()
    }

    /// A signed request of `client` (which may differ from the default one), not yet sent.
    pub fn signed(&self, client: &Client, method: Method, path: &str) -> RequestBuilder {
        client
            .request(method, self.api(path))
            .header("Authorization", plaintext_header(&self.key))
    }

    /// Absolute URL of the simulator's own control endpoint `path` below `/_sim/`.
    pub fn control(&self, path: &str) -> String {
        format!("{}/_sim/{path}", self.root())
    }

    /// Sends an unsigned request to a control endpoint.
    pub async fn control_send(&self, method: Method, path: &str) -> Response {
        sent(self.client.request(method, self.control(path))).await
    }

    /// PUTs `body` as is (no content type) to a control endpoint.
    pub async fn control_put(&self, path: &str, body: &'static str) -> Response {
        sent(self.client.put(self.control(path)).body(body)).await
    }

    /// PUTs `body` as JSON to a control endpoint.
    pub async fn control_put_json(&self, path: &str, body: &Value) -> Response {
        sent(self.client.put(self.control(path)).json(body)).await
    }

    /// A signed `POST machines/{id}/?op={op}` of `client`, not yet sent.
    pub fn signed_op(&self, client: &Client, id: &str, op: &str) -> RequestBuilder {
        self.signed(client, Method::POST, &format!("machines/{id}/?op={op}"))
    }

    /// The JSON a control endpoint answers a GET with.
    pub async fn control_json(&self, path: &str) -> Value {
        self.control_send(Method::GET, path)
            .await
            .json()
            .await
            .unwrap()
    }

    pub async fn call(&self, method: Method, path: &str, form: &[(&str, &str)]) -> Response {
        let mut req = self
            .client
            .request(method.clone(), self.api(path))
            .header("Authorization", plaintext_header(&self.key));
        if method == Method::GET || method == Method::DELETE {
            req = req.query(form);
        } else {
            req = req.form(form);
        }
        req.send().await.unwrap()
    }

    pub async fn get(&self, path: &str, query: &[(&str, &str)]) -> Response {
        self.call(Method::GET, path, query).await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Response {
        self.call(Method::POST, path, form).await
    }

    pub async fn json(
        &self,
        method: Method,
        path: &str,
        form: &[(&str, &str)],
    ) -> serde_json::Value {
        let resp = self.call(method, path, form).await;
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// The JSON of a successful POST of `form`.
    pub async fn post_json(&self, path: &str, form: &[(&str, &str)]) -> Value {
        self.json(Method::POST, path, form).await
    }

    /// The JSON of a successful parameterless GET.
    pub async fn get_json(&self, path: &str) -> Value {
        self.json(Method::GET, path, &[]).await
    }

    /// Asserts the status and body text MAAS answers `method path` with.
    pub async fn expect(
        &self,
        method: Method,
        path: &str,
        form: &[(&str, &str)],
        want: (u16, &str),
    ) {
        let (s, body) = status_text(self.call(method, path, form).await).await;
        assert_eq!((s, body.as_str()), want, "{path}");
    }

    /// Asserts the answer to a POST, the usual refusal shape.
    pub async fn expect_post(&self, path: &str, form: &[(&str, &str)], want: (u16, &str)) {
        self.expect(Method::POST, path, form, want).await;
    }

    /// The answer to `POST machines/{id}/?op={op}`, whatever its status.
    pub async fn machine_post(&self, id: &str, op: &str, form: &[(&str, &str)]) -> Response {
        self.post(&format!("machines/{id}/?op={op}"), form).await
    }

    /// The JSON of a successful `POST machines/{id}/?op={op}`.
    pub async fn machine_op(&self, id: &str, op: &str, form: &[(&str, &str)]) -> Value {
        self.json(Method::POST, &format!("machines/{id}/?op={op}"), form)
            .await
    }

    /// The system id of the first machine.
    pub fn first_id(&self) -> String {
        self.sim.state().machines()[0].system_id.clone()
    }

    /// The JSON of a successful `GET machines/{id}/`, or of `?op={op}` on it when `op` is set.
    pub async fn machine_read(&self, id: &str, op: Option<&str>) -> Value {
        let path = match op {
            Some(op) => format!("machines/{id}/?op={op}"),
            None => format!("machines/{id}/"),
        };
        self.json(Method::GET, &path, &[]).await
    }

    /// The system ids of all machines, in the simulator's order.
    pub fn machine_ids(&self) -> Vec<String> {
        self.sim
            .state()
            .machines()
            .into_iter()
            .map(|m| m.system_id)
            .collect()
    }

    /// The system id of the first machine in `status`.
    pub fn first_in(&self, status: NodeStatus) -> String {
        self.sim
            .state()
            .machines()
            .into_iter()
            .find(|m| m.status == status)
            .unwrap()
            .system_id
    }

    /// The status the simulator holds for machine `id`.
    pub fn status_of(&self, id: &str) -> NodeStatus {
        self.sim.state().machine(id).unwrap().status
    }

    /// The status and agent name the simulator holds for machine `id`.
    pub fn status_and_agent(&self, id: &str) -> (NodeStatus, String) {
        let view = self.sim.state().machine(id).unwrap();
        (view.status, view.agent_name)
    }

    /// Whether every machine is in `status`.
    pub fn all_in(&self, status: NodeStatus) -> bool {
        self.sim
            .state()
            .machines()
            .iter()
            .all(|m| m.status == status)
    }

    /// Allocates a machine with `form` and deploys it at once; its id.
    pub async fn deployed(&self, form: &[(&str, &str)]) -> String {
        let id = self.allocate(form).await;
        self.machine_op(&id, "deploy", &[]).await;
        id
    }

    pub async fn allocate(&self, form: &[(&str, &str)]) -> String {
        let m = self.json(Method::POST, "machines/?op=allocate", form).await;
        m["system_id"].as_str().unwrap().to_owned()
    }
}

/// Status and body text of a response.
pub async fn status_text(resp: Response) -> (u16, String) {
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

/// Asserts the status and body text of a response.
pub async fn expect_answer(resp: Response, want: (u16, &str)) {
    let (status, body) = status_text(resp).await;
    assert_eq!((status, body.as_str()), want);
}

/// The JSON body of a response, after asserting its status.
pub async fn json_with_status(resp: Response, status: u16) -> Value {
    assert_eq!(resp.status(), status);
    resp.json().await.unwrap()
}

pub async fn sent(req: RequestBuilder) -> Response {
    req.send().await.unwrap()
}

/// Sends `req`, which must get no answer (a timeout or a dropped connection): the error.
pub async fn unanswered(req: RequestBuilder) -> reqwest::Error {
    req.send().await.unwrap_err()
}

/// The link of `mode` among an interface's links.
pub fn link_in_mode<'a>(iface: &'a Value, mode: &str) -> &'a Value {
    iface["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mode"] == mode)
        .unwrap()
}

/// Sends `req` and parses the answer as JSON, whatever its status.
pub async fn send_json(req: RequestBuilder) -> Value {
    sent(req).await.json().await.unwrap()
}

/// How many times `op` was counted in one of the simulator's per-operation counters.
pub fn count(map: &std::collections::BTreeMap<String, u64>, op: &str) -> u64 {
    map.get(op).copied().unwrap_or(0)
}
