//! Fault injection: per-operation errors and latency, failing deploys/releases/erases, outages.

use std::time::Duration;

use http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ErrorBody};

/// Faults for one operation key (e.g. `machine.deploy`, `machines.allocate`, or `*` for all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpFault {
    /// Operation key as in `call_counts()`, or `*`.
    pub op: String,
    /// Probability in `0.0..=1.0` that a call fails.
    #[serde(default)]
    pub error_rate: f64,
    /// HTTP status of an injected failure (default 503).
    #[serde(default = "default_status")]
    pub status: u16,
    /// Delay added before every call of this operation, in milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// `Retry-After` seconds on injected failures (409 always carries 5 as MAAS does).
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// Body of injected failures; a status-specific MAAS text by default.
    #[serde(default)]
    pub body: Option<String>,
}

fn default_status() -> u16 {
    503
}

/// All active faults. Settable at start (config, `--faults FILE`) and at run time
/// (`PUT /_sim/faults`, `SimHandle::set_faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultConfig {
    /// Per-operation error rates and latencies.
    #[serde(default)]
    pub ops: Vec<OpFault>,
    /// The next N deployments (any machine) end in Failed deployment (11).
    #[serde(default)]
    pub fail_next_deploys: u32,
    /// Deployments of these machines end in Failed deployment (11) until removed.
    #[serde(default)]
    pub fail_deploy_system_ids: Vec<String>,
    /// The next deployment of each listed machine fails (one entry consumed per deployment).
    #[serde(default)]
    pub fail_next_deploy_system_ids: Vec<String>,
    /// The next N releases (without erase) end in Releasing failed (13).
    #[serde(default)]
    pub fail_next_releases: u32,
    /// The next N disk erasures end in Failed disk erasing (15).
    #[serde(default)]
    pub fail_next_erases: u32,
    /// Deployments of these machines lose power: Failed deployment with `power_state: error`.
    #[serde(default)]
    pub power_fail_system_ids: Vec<String>,
    /// Start an outage of this many seconds when applied: every MAAS API call answers 503.
    #[serde(default)]
    pub outage_seconds: Option<u64>,
}

impl FaultConfig {
    /// The faults that apply to `op`: the first exact match, else a `*` entry.
    pub(crate) fn for_op(&self, op: &str) -> Option<&OpFault> {
        self.ops
            .iter()
            .find(|f| f.op == op)
            .or_else(|| self.ops.iter().find(|f| f.op == "*"))
    }

    /// Rejects values that cannot mean anything (a rate outside 0..=1, a non-error status).
    pub fn validate(&self) -> Result<(), String> {
        for fault in &self.ops {
            if !(0.0..=1.0).contains(&fault.error_rate) {
                return Err(format!(
                    "error_rate of {} must be within 0.0..=1.0",
                    fault.op
                ));
            }
            if StatusCode::from_u16(fault.status)
                .map_or(true, |s| !(s.is_client_error() || s.is_server_error()))
            {
                return Err(format!("status of {} must be a 4xx or 5xx code", fault.op));
            }
        }
        Ok(())
    }
}

/// Latency to add before `op` runs.
pub(crate) fn latency(faults: &FaultConfig, op: &str) -> Duration {
    faults
        .for_op(op)
        .map_or(Duration::ZERO, |f| Duration::from_millis(f.latency_ms))
}

/// Decides whether `op` fails, given a uniform random `roll` in `0.0..1.0`.
pub(crate) fn injected_error(faults: &FaultConfig, op: &str, roll: f64) -> Option<ApiError> {
    let fault = faults.for_op(op)?;
    if fault.error_rate <= 0.0 || roll >= fault.error_rate {
        return None;
    }
    let status = StatusCode::from_u16(fault.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    Some(fault_error(
        status,
        fault.body.as_deref(),
        fault.retry_after,
    ))
}

/// The answer MAAS gives for an injected status.
pub(crate) fn fault_error(
    status: StatusCode,
    body: Option<&str>,
    retry_after: Option<u64>,
) -> ApiError {
    // Serialization failures after MAAS's own retries: Django HTML page + Retry-After: 5.
    if status == StatusCode::CONFLICT {
        return ApiError {
            status,
            body: ErrorBody::Html(body.unwrap_or(RETRY_EXHAUSTED_HTML).to_owned()),
            headers: vec![("retry-after", retry_after.unwrap_or(5).to_string())],
        };
    }
    let text = body.map_or_else(|| default_text(status).to_owned(), ToOwned::to_owned);
    let error = ApiError::text(status, text);
    match retry_after {
        Some(seconds) => error.with_header("retry-after", seconds.to_string()),
        None => error,
    }
}

const RETRY_EXHAUSTED_HTML: &str = "<html><head><title>409 Conflict</title></head><body><h1>Conflict</h1>\
<p>The request could not be completed due to a conflict (serialization failure); retry later.</p></body></html>";

fn default_text(status: StatusCode) -> &'static str {
    match status.as_u16() {
        500 => "Internal server error (simulated fault).",
        502 => "Bad Gateway",
        503 => "Unable to connect to any rack controller; no connections available.",
        504 => "Timed out waiting for a response from the rack controller.",
        _ => "Simulated fault.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(op: &str, rate: f64, status: u16) -> OpFault {
        OpFault {
            op: op.to_owned(),
            error_rate: rate,
            status,
            latency_ms: 7,
            retry_after: None,
            body: None,
        }
    }

    #[test]
    fn exact_op_wins_over_wildcard() {
        let cfg = FaultConfig {
            ops: vec![fault("*", 1.0, 500), fault("machine.deploy", 0.0, 503)],
            ..Default::default()
        };
        assert!(injected_error(&cfg, "machine.deploy", 0.0).is_none());
        assert_eq!(
            injected_error(&cfg, "machines.read", 0.99).map(|e| e.status.as_u16()),
            Some(500)
        );
        assert_eq!(latency(&cfg, "machine.deploy"), Duration::from_millis(7));
    }

    #[test]
    fn rate_is_compared_with_roll() {
        let cfg = FaultConfig {
            ops: vec![fault("machines.allocate", 0.2, 503)],
            ..Default::default()
        };
        assert!(injected_error(&cfg, "machines.allocate", 0.1).is_some());
        assert!(injected_error(&cfg, "machines.allocate", 0.2).is_none());
        assert!(injected_error(&cfg, "machines.read", 0.0).is_none());
    }

    #[test]
    fn conflict_is_html_with_retry_after() {
        let err = fault_error(StatusCode::CONFLICT, None, None);
        assert!(matches!(err.body, ErrorBody::Html(_)));
        assert_eq!(err.headers, vec![("retry-after", "5".to_owned())]);
        let err = fault_error(StatusCode::SERVICE_UNAVAILABLE, None, Some(10));
        assert_eq!(err.headers, vec![("retry-after", "10".to_owned())]);
    }

    #[test]
    fn validation_rejects_bad_rates_and_statuses() {
        assert!(
            FaultConfig {
                ops: vec![fault("x", 1.5, 503)],
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            FaultConfig {
                ops: vec![fault("x", 0.5, 200)],
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            FaultConfig {
                ops: vec![fault("x", 0.5, 409)],
                ..Default::default()
            }
            .validate()
            .is_ok()
        );
    }
}
