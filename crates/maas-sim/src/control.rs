//! Control endpoints outside the MAAS API (unauthenticated, for tests and benchmarks):
//! `GET|PUT /_sim/faults`, `GET /_sim/stats`, `POST /_sim/reset-stats`, `GET /_sim/machines`,
//! and per machine `POST /_sim/machines/{id}/break`, `PUT /_sim/machines/{id}/power`
//! (`{"power_state": "off"}`), `POST /_sim/machines/{id}/tags/{tag}`, `DELETE /_sim/machines/{id}`;
//! VM hosts: `GET /_sim/vm-hosts` (with `used` and composed machines), `POST /_sim/vm-hosts`
//! (a [`VmHostSpec`] as JSON: creates one as if MAAS had registered it), and
//! `GET /_sim/vm-host-events` (registered, composed, updated, decomposed, deleted).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use serde_json::json;

use crate::error::ApiError;
use crate::faults::FaultConfig;
use crate::handle::{HandleError, MachineView, SimHandle, VmHostSpec, apply_faults};
use crate::model::PowerState;
use crate::respond::{HttpResponse, error_response, json_response};
use crate::shared::Shared;

pub(crate) fn handle(shared: &Arc<Shared>, req: &Request<Bytes>) -> HttpResponse {
    let path = req.uri().path().trim_end_matches('/');
    let method = req.method();
    if let Some(rest) = path.strip_prefix("/_sim/machines/") {
        let handle = SimHandle {
            shared: shared.clone(),
        };
        return machine_action(&handle, method, rest, req.body());
    }
    match (method, path) {
        (&Method::GET, "/_sim/faults") => {
            let world = shared.lock();
            json_response(StatusCode::OK, &json!(world.faults))
        }
        (&Method::PUT | &Method::POST, "/_sim/faults") => {
            match serde_json::from_slice::<FaultConfig>(req.body()) {
                Ok(faults) => match faults.validate() {
                    Ok(()) => {
                        let mut world = shared.lock();
                        apply_faults(&mut world, faults);
                        json_response(StatusCode::OK, &json!(world.faults))
                    }
                    Err(message) => error_response(ApiError::bad_request(message)),
                },
                Err(e) => error_response(ApiError::bad_request(format!(
                    "invalid fault configuration: {e}"
                ))),
            }
        }
        (&Method::GET, "/_sim/stats") => {
            let mut world = shared.lock();
            world.advance();
            let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
            for m in &world.machines {
                *by_status.entry(m.status.constant()).or_default() += 1;
            }
            let total: u64 = world.counts.values().sum();
            json_response(
                StatusCode::OK,
                &json!({"calls": world.counts, "total_calls": total, "machines_by_status": by_status,
                    "outage": world.outage_until_ms.is_some(), "applied": world.effects.applied,
                    "lost_answers": world.effects.lost, "injected_errors": world.effects.injected,
                    "timeouts": world.effects.timed_out}),
            )
        }
        (&Method::POST | &Method::PUT | &Method::GET, "/_sim/reset-stats") => {
            let mut world = shared.lock();
            world.counts.clear();
            world.effects.clear();
            json_response(StatusCode::OK, &json!({"reset": true}))
        }
        (&Method::GET, "/_sim/machines") => {
            let mut world = shared.lock();
            world.advance();
            let views: Vec<MachineView> = world.machines.iter().map(MachineView::of).collect();
            json_response(StatusCode::OK, &json!(views))
        }
        (&Method::GET, "/_sim/vm-hosts") => {
            let handle = SimHandle {
                shared: shared.clone(),
            };
            json_response(StatusCode::OK, &json!(handle.vm_hosts()))
        }
        (&Method::GET, "/_sim/vm-host-events") => {
            let handle = SimHandle {
                shared: shared.clone(),
            };
            json_response(StatusCode::OK, &json!(handle.vm_host_events()))
        }
        (&Method::POST, "/_sim/vm-hosts") => {
            let handle = SimHandle {
                shared: shared.clone(),
            };
            match serde_json::from_slice::<VmHostSpec>(req.body()) {
                Ok(spec) => match handle.add_vm_host(spec) {
                    Ok(id) => json_response(StatusCode::OK, &json!({"id": id})),
                    Err(e) => error_response(ApiError::bad_request(e.to_string())),
                },
                Err(e) => error_response(ApiError::bad_request(format!("invalid VM host: {e}"))),
            }
        }
        (_, "/_sim/vm-hosts" | "/_sim/vm-host-events") => {
            error_response(ApiError::method_not_allowed("GET, POST"))
        }
        (_, "/_sim/faults" | "/_sim/stats" | "/_sim/reset-stats" | "/_sim/machines") => {
            error_response(ApiError::method_not_allowed("GET, PUT"))
        }
        _ => error_response(ApiError::unknown_endpoint(req.uri().path())),
    }
}

#[derive(serde::Deserialize)]
struct PowerBody {
    power_state: String,
}

fn machine_action(handle: &SimHandle, method: &Method, rest: &str, body: &Bytes) -> HttpResponse {
    let parts: Vec<&str> = rest.split('/').collect();
    let result = match (method, parts.as_slice()) {
        (&Method::GET, [id]) => match handle.machine(id) {
            Some(view) => return json_response(StatusCode::OK, &json!(view)),
            None => Err(HandleError::NoSuchMachine((*id).to_owned())),
        },
        (&Method::DELETE, [id]) => handle.remove_machine(id),
        (&Method::POST, [id, "break"]) => handle.break_machine(id),
        (&Method::POST, [id, "tags", tag]) => handle.add_tag(id, tag),
        (&Method::PUT | &Method::POST, [id, "power"]) => {
            let power = serde_json::from_slice::<PowerBody>(body)
                .ok()
                .and_then(|b| PowerState::parse(&b.power_state));
            match power {
                Some(power) => handle.set_power(id, power),
                None => {
                    return error_response(ApiError::bad_request(
                        "expected {\"power_state\": \"on\"|\"off\"|\"unknown\"|\"error\"}",
                    ));
                }
            }
        }
        _ => {
            return error_response(ApiError::unknown_endpoint(&format!(
                "/_sim/machines/{rest}"
            )));
        }
    };
    match result {
        Ok(()) => json_response(StatusCode::OK, &json!({"ok": true})),
        Err(e) => error_response(ApiError::text(StatusCode::NOT_FOUND, e.to_string())),
    }
}
