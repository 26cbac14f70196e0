//! Shared helpers for the HTTP-level tests: start a simulator, sign requests, call the API.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod net;

use maas_sim::{RunningSim, SimConfig, Simulator};
use reqwest::{Client, Method, Response};

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

/// How many times `op` was counted in one of the simulator's per-operation counters.
pub fn count(map: &std::collections::BTreeMap<String, u64>, op: &str) -> u64 {
    map.get(op).copied().unwrap_or(0)
}
