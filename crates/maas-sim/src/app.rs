//! One HTTP request through the MAAS front door: URL, body, op, auth, faults, handler.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use rand::Rng;
use serde_json::Value;

use crate::api::{self, Call, Caller, Reply};
use crate::auth::{self, AuthRequest, Strictness};
use crate::error::ApiError;
use crate::faults;
use crate::params::{Params, parse_body, parse_urlencoded};
use crate::respond::{HttpResponse, error_response, reply_response};
use crate::routes::{self, RouteMatch};
use crate::shared::Shared;

/// Largest request body accepted (boot resource uploads are not simulated).
const MAX_BODY: usize = 16 * 1024 * 1024;
const API_ROOT: &str = "/MAAS/api/2.0/";

/// `scheme://host[:port]` as the client addressed us.
fn origin<B>(scheme: &str, req: &Request<B>) -> String {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(ToOwned::to_owned)
        .or_else(|| req.uri().authority().map(ToString::to_string))
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{scheme}://{}", host.to_ascii_lowercase())
}

/// Why a MAAS API call gets no successful answer.
#[derive(Debug)]
enum Failure {
    /// A MAAS error answer (refused, injected, or replacing a lost answer).
    Api(ApiError),
    /// The operation took effect but its answer is withheld: hold the connection this long,
    /// then close it without a response.
    NoAnswer(Duration),
    /// The operation did not take effect and times out: hold the connection this long, then
    /// close it without a response.
    TimedOut(Duration),
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Self::Api(error)
    }
}

/// Handles one request of any kind (MAAS API, legacy paths, control endpoints).
///
/// `Err` closes the connection without an answer (a lost-answer fault in timeout mode).
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<HttpResponse, faults::AnswerWithheld>
where
    B: hyper::body::Body<Data = Bytes> + Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(error_response(ApiError::text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body rejected: {e}"),
            )));
        }
    };
    let req = Request::from_parts(parts, body);
    let path = req.uri().path().to_owned();
    if path.starts_with("/_sim/") {
        return Ok(crate::control::handle(&shared, &req));
    }
    let mut response = match maas(&shared, &req, &path).await {
        Ok(reply) => reply_response(reply),
        Err(Failure::Api(error)) => {
            tracing::debug!(path = %path, status = error.status.as_u16(), category = error.category(), "MAAS API error");
            error_response(error)
        }
        Err(Failure::NoAnswer(hold)) => {
            tracing::info!(path = %path, hold_ms = hold.as_millis(), "operation applied, answer withheld (lost-answer fault)");
            tokio::time::sleep(hold).await;
            return Err(faults::AnswerWithheld);
        }
        Err(Failure::TimedOut(hold)) => {
            tracing::info!(path = %path, hold_ms = hold.as_millis(), "operation not applied, connection held then dropped (timeout fault)");
            tokio::time::sleep(hold).await;
            return Err(faults::AnswerWithheld);
        }
    };
    if let Ok(hash) = HeaderValue::from_str(&shared.api_hash) {
        response.headers_mut().insert("x-maas-api-hash", hash);
    }
    Ok(response)
}

async fn maas(shared: &Shared, req: &Request<Bytes>, path: &str) -> Result<Reply, Failure> {
    if path == "/MAAS/api/version/" {
        return Ok(Reply::Text(StatusCode::OK, "2.0".to_owned()));
    }
    if path.starts_with("/MAAS/api/1.0/") {
        return Err(ApiError::text(
            StatusCode::GONE,
            "The 1.0 API is no longer available. Please use API version 2.0.",
        )
        .into());
    }
    if path == "/MAAS/api/2.0/describe/" {
        let mut world = shared.lock();
        *world.counts.entry("describe.read".to_owned()).or_default() += 1;
        return Ok(Reply::ok(crate::describe::describe(
            &origin(shared.scheme, req),
            world.vm_hosts_supported,
        )));
    }
    let Some(route) = path.strip_prefix(API_ROOT).and_then(routes::match_path) else {
        return Err(ApiError::unknown_endpoint(path).into());
    };
    // MAAS 4.0 / [dev] removed VM hosts: their URLs are unknown endpoints there.
    if route.resource.kind.is_vm_host() && !shared.lock().vm_hosts_supported {
        return Err(ApiError::unknown_endpoint(path).into());
    }
    let query = parse_urlencoded(req.uri().query().unwrap_or("").as_bytes());
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let form = if matches!(*req.method(), Method::POST | Method::PUT) {
        parse_body(content_type, req.body().clone()).await?
    } else {
        Params::default()
    };
    let op = query
        .get_nonempty("op")
        .or_else(|| form.get_nonempty("op"))
        .map(ToOwned::to_owned)
        .or_else(|| route.path_op.clone());
    let action = routes::resolve_action(route.resource, req.method(), op.as_deref())?;
    let op_key = format!("{}.{}", route.resource.stat, action.name);

    let latency = {
        let mut world = shared.lock();
        world.advance();
        *world.counts.entry(op_key.clone()).or_default() += 1;
        if world.outage_until_ms.is_some() {
            *world.effects.injected.entry(op_key.clone()).or_default() += 1;
            return Err(
                faults::fault_error(StatusCode::SERVICE_UNAVAILABLE, None, Some(10)).into(),
            );
        }
        faults::latency(&world.faults, &op_key)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    // A region serves a bounded number of calls at once; the worker is held to the answer.
    let _worker = shared.region.worker().await;
    shared.region.serve(&op_key).await;

    let caller = if route.resource.anon {
        Caller {
            username: String::new(),
            is_admin: false,
        }
    } else {
        authenticate(shared, req, &query, &form)?
    };
    let mut params = query.without_oauth();
    params.extend(form.without_oauth());
    let params = Params::from_pairs(
        params
            .pairs()
            .iter()
            .filter(|(k, _)| k != "op")
            .cloned()
            .collect(),
    );
    let answer = run(shared, &route, action.name, &op_key, &caller, &params);
    if let Ok(Reply::Json(_, Value::Array(machines))) = &answer {
        shared.region.answer(&op_key, machines.len()).await;
    }
    answer
}

fn authenticate(
    shared: &Shared,
    req: &Request<Bytes>,
    query: &Params,
    form: &Params,
) -> Result<Caller, ApiError> {
    let base_url = format!("{}{}", origin(shared.scheme, req), req.uri().path());
    let post_form = if *req.method() == Method::POST {
        form.clone()
    } else {
        Params::default()
    };
    let auth_request = AuthRequest {
        header: req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
        method: req.method().as_str(),
        base_url: &base_url,
        query,
        form: &post_form,
    };
    let index = if shared.strict_auth {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let strictness = Strictness {
            now,
            window: shared.auth_window.as_secs(),
        };
        let mut nonces = shared
            .nonces
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        auth::authenticate(&auth_request, &shared.keys, Some((strictness, &mut nonces)))?
    } else {
        auth::authenticate(&auth_request, &shared.keys, None)?
    };
    let key = &shared.keys[index];
    Ok(Caller {
        username: key.username.clone(),
        is_admin: key.is_admin,
    })
}

fn run(
    shared: &Shared,
    route: &RouteMatch,
    action: &str,
    op_key: &str,
    caller: &Caller,
    params: &Params,
) -> Result<Reply, Failure> {
    let mut world = shared.lock();
    world.advance();
    let roll: f64 = world.rng.0.random();
    if let Some(error) = faults::injected_error(&world.faults, op_key, roll) {
        *world.effects.injected.entry(op_key.to_owned()).or_default() += 1;
        return Err(error.into());
    }
    if !world.faults.timeouts.is_empty() {
        let roll: f64 = world.rng.0.random();
        if let Some(hold) = faults::timed_out(&world.faults, op_key, roll) {
            *world
                .effects
                .timed_out
                .entry(op_key.to_owned())
                .or_default() += 1;
            return Err(Failure::TimedOut(hold));
        }
    }
    // Handlers mark the world dirty when they change it: that tells an applied call from a
    // read or a no-op. The flag (also the state file's) is restored afterwards.
    let dirty_before = std::mem::take(&mut world.dirty);
    let mut call = Call {
        caller,
        params,
        args: &route.args,
        world: &mut world,
    };
    let result = api::dispatch(route.resource.kind, action, &mut call);
    let changed = world.dirty;
    world.dirty |= dirty_before;
    if changed {
        world.note_statuses();
    }
    let reply = result?;
    if changed {
        *world.effects.applied.entry(op_key.to_owned()).or_default() += 1;
    }
    let world = &mut *world;
    let rng = &mut world.rng;
    let Some(lost) = faults::lose_answer(&mut world.faults, op_key, || rng.0.random()) else {
        return Ok(reply);
    };
    *world.effects.lost.entry(op_key.to_owned()).or_default() += 1;
    world.dirty = true; // the fault's countdown is part of the saved state
    Err(match lost {
        faults::Lost::Error(error) => Failure::Api(error),
        faults::Lost::NoAnswer(hold) => Failure::NoAnswer(hold),
    })
}
