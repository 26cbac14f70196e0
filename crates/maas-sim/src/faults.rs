//! Fault injection: per-operation errors and latency, calls that time out without taking
//! effect, failing deploys/releases/erases, outages, and lost answers (the operation takes
//! effect, its answer does not arrive).

use std::collections::BTreeMap;
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
// Every field defaults, so a faults file names only the faults it wants.
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Per-operation error rates and latencies.
    pub ops: Vec<OpFault>,
    /// The next N deployments (any machine) end in Failed deployment (11).
    pub fail_next_deploys: u32,
    /// Deployments of these machines end in Failed deployment (11) until removed.
    pub fail_deploy_system_ids: Vec<String>,
    /// The next deployment of each listed machine fails (one entry consumed per deployment).
    pub fail_next_deploy_system_ids: Vec<String>,
    /// The next N releases (without erase) end in Releasing failed (13).
    pub fail_next_releases: u32,
    /// The next N disk erasures end in Failed disk erasing (15).
    pub fail_next_erases: u32,
    /// Deployments of these machines lose power: Failed deployment with `power_state: error`.
    pub power_fail_system_ids: Vec<String>,
    /// Start an outage of this many seconds when applied: every MAAS API call answers 503.
    pub outage_seconds: Option<u64>,
    /// "MAAS did it but the answer was lost": successful calls whose answer is replaced by an
    /// error or withheld *after* the operation took effect (see [`LostAnswer`]).
    pub lost_answers: Vec<LostAnswer>,
    /// Calls that time out *before* taking effect: nothing happens in the simulated MAAS, the
    /// connection is held, then closed without an answer (see [`TimeoutFault`]).
    pub timeouts: Vec<TimeoutFault>,
}

/// A pre-effect timeout: a call of `op` is not carried out (MAAS never got to it, or the
/// region controller hung before touching the database); the connection is held for
/// `hold_ms`, then closed without a response. A client whose request timeout is shorter than
/// `hold_ms` times out; with `hold_ms: 0` it sees the connection dropped.
///
/// Decided after the per-operation errors of [`FaultConfig::ops`] (a call that gets an injected
/// error does not also time out) and after authentication; a call that times out takes no effect,
/// so it neither counts as applied nor can lose its answer ([`LostAnswer`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutFault {
    /// Operation key as in `call_counts()`, or `*` for every operation. An exact key wins over
    /// `*`.
    pub op: String,
    /// Probability in `0.0..=1.0` that a call times out (default 1).
    #[serde(default = "always")]
    pub rate: f64,
    /// How long the connection is held before it is closed, in milliseconds (default 0).
    #[serde(default)]
    pub hold_ms: u64,
}

impl TimeoutFault {
    /// Every call of `op` is held for `hold`, then dropped without an answer or an effect.
    pub fn new(op: impl Into<String>, hold: Duration) -> Self {
        Self {
            op: op.into(),
            rate: 1.0,
            hold_ms: u64::try_from(hold.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// A call times out with probability `rate`.
    #[must_use]
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = rate;
        self
    }
}

/// Decides whether a call of `op` times out before taking effect, given a uniform random `roll`
/// in `0.0..1.0`; the answer is how long to hold the connection.
pub(crate) fn timed_out(faults: &FaultConfig, op: &str, roll: f64) -> Option<Duration> {
    let fault = faults
        .timeouts
        .iter()
        .find(|f| f.op == op)
        .or_else(|| faults.timeouts.iter().find(|f| f.op == "*"))?;
    if fault.rate <= 0.0 || roll >= fault.rate {
        return None;
    }
    Some(Duration::from_millis(fault.hold_ms))
}

/// How the answer of a [`LostAnswer`] fault is lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LostAnswerMode {
    /// The answer is replaced by an error (`status`, 503 by default), as a proxy or a region
    /// controller failing after the database commit would answer.
    #[default]
    Error,
    /// No answer at all: the connection is held for `hold_ms`, then closed without a response.
    /// A client whose timeout is shorter than `hold_ms` times out; with `hold_ms: 0` it sees the
    /// connection dropped.
    Timeout,
}

/// A commit-then-fail fault: a call of `op` that succeeds takes effect in the simulated MAAS
/// (and counts in [`crate::SimHandle::applied_counts`]), then its answer is lost.
///
/// Only successful calls lose their answer: a call MAAS refuses (409, 400, 403...) gets its real
/// answer and does not use up `times`. Faults injected before the operation (`ops`, outages)
/// are decided first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LostAnswer {
    /// Operation key as in `call_counts()` (`machines.allocate`, `machine.deploy`,
    /// `machine.release`, `machine.power_on`, ...), or `*` for every operation. An exact key
    /// wins over `*`.
    pub op: String,
    /// How the answer is lost.
    #[serde(default)]
    pub mode: LostAnswerMode,
    /// HTTP status replacing the answer in [`LostAnswerMode::Error`] (default 503).
    #[serde(default = "default_status")]
    pub status: u16,
    /// `Retry-After` seconds on the replacing error.
    #[serde(default)]
    pub retry_after: Option<u64>,
    /// Body of the replacing error; a status-specific MAAS text by default.
    #[serde(default)]
    pub body: Option<String>,
    /// How long the connection is held before it is closed in [`LostAnswerMode::Timeout`].
    #[serde(default)]
    pub hold_ms: u64,
    /// Probability in `0.0..=1.0` that a successful call loses its answer (default 1).
    #[serde(default = "always")]
    pub rate: f64,
    /// How many more answers to lose; counts down, the fault stays listed at 0 and is then
    /// inactive. `None` (the default): no limit.
    #[serde(default)]
    pub times: Option<u32>,
}

fn always() -> f64 {
    1.0
}

impl LostAnswer {
    /// Every successful call of `op` takes effect, then answers `status` instead.
    pub fn error(op: impl Into<String>, status: u16) -> Self {
        Self {
            op: op.into(),
            mode: LostAnswerMode::Error,
            status,
            retry_after: None,
            body: None,
            hold_ms: 0,
            rate: 1.0,
            times: None,
        }
    }

    /// Every successful call of `op` takes effect, then gets no answer: the connection is held
    /// for `hold` and closed.
    pub fn timeout(op: impl Into<String>, hold: Duration) -> Self {
        Self {
            mode: LostAnswerMode::Timeout,
            hold_ms: u64::try_from(hold.as_millis()).unwrap_or(u64::MAX),
            ..Self::error(op, default_status())
        }
    }

    /// Only the next `n` successful calls lose their answer.
    #[must_use]
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Only the next successful call loses its answer.
    #[must_use]
    pub fn once(self) -> Self {
        self.times(1)
    }

    /// A successful call loses its answer with probability `rate`.
    #[must_use]
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = rate;
        self
    }

    fn armed(&self) -> bool {
        self.times != Some(0)
    }
}

/// What becomes of the answer of a call that took effect.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lost {
    /// Answer this error instead.
    Error(ApiError),
    /// Answer nothing: hold the connection this long, then close it.
    NoAnswer(Duration),
}

/// Decides whether the answer of a successful `op` is lost, consuming one of the fault's
/// `times`. `roll` (uniform in `0.0..1.0`) is drawn only when a fault with `rate < 1` applies.
pub(crate) fn lose_answer(
    faults: &mut FaultConfig,
    op: &str,
    roll: impl FnOnce() -> f64,
) -> Option<Lost> {
    let index = faults
        .lost_answers
        .iter()
        .position(|f| f.op == op && f.armed())
        .or_else(|| {
            faults
                .lost_answers
                .iter()
                .position(|f| f.op == "*" && f.armed())
        })?;
    let fault = &mut faults.lost_answers[index];
    if fault.rate <= 0.0 || (fault.rate < 1.0 && roll() >= fault.rate) {
        return None;
    }
    if let Some(times) = fault.times.as_mut() {
        *times -= 1;
    }
    Some(match fault.mode {
        LostAnswerMode::Error => {
            let status =
                StatusCode::from_u16(fault.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            Lost::Error(fault_error(
                status,
                fault.body.as_deref(),
                fault.retry_after,
            ))
        }
        LostAnswerMode::Timeout => Lost::NoAnswer(Duration::from_millis(fault.hold_ms)),
    })
}

/// Per operation key: calls that took effect, and answers lost after taking effect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EffectCounts {
    /// Successful calls that changed the simulated MAAS (a no-op such as releasing a Ready
    /// machine, or a read, is not counted).
    pub(crate) applied: BTreeMap<String, u64>,
    /// Answers lost through [`FaultConfig::lost_answers`] (whether or not the call changed
    /// anything).
    pub(crate) lost: BTreeMap<String, u64>,
    /// Errors injected before the operation: [`FaultConfig::ops`] and outage refusals.
    pub(crate) injected: BTreeMap<String, u64>,
    /// Calls held and dropped without effect through [`FaultConfig::timeouts`].
    pub(crate) timed_out: BTreeMap<String, u64>,
}

impl EffectCounts {
    pub(crate) fn clear(&mut self) {
        self.applied.clear();
        self.lost.clear();
        self.injected.clear();
        self.timed_out.clear();
    }
}

/// The error a connection task returns to make hyper close the connection without answering.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("answer withheld by a lost-answer or timeout fault")]
pub(crate) struct AnswerWithheld;

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
            check_rate(fault.error_rate, || format!("error_rate of {}", fault.op))?;
            check_error_status(fault.status, || format!("status of {}", fault.op))?;
        }
        for lost in &self.lost_answers {
            check_rate(lost.rate, || {
                format!("rate of the lost answers of {}", lost.op)
            })?;
            check_error_status(lost.status, || {
                format!("status of the lost answers of {}", lost.op)
            })?;
            if lost.op.is_empty() {
                return Err("a lost answer needs an op (an operation key or *)".to_owned());
            }
        }
        for timeout in &self.timeouts {
            check_rate(timeout.rate, || {
                format!("rate of the timeouts of {}", timeout.op)
            })?;
            if timeout.op.is_empty() {
                return Err("a timeout needs an op (an operation key or *)".to_owned());
            }
        }
        Ok(())
    }
}

/// A probability must lie in `0.0..=1.0`; `what` names the field in the refusal.
fn check_rate(rate: f64, what: impl FnOnce() -> String) -> Result<(), String> {
    if (0.0..=1.0).contains(&rate) {
        Ok(())
    } else {
        Err(format!("{} must be within 0.0..=1.0", what()))
    }
}

/// An injected failure must carry a 4xx or 5xx status, or the client would read it as an
/// answer; `what` names the field in the refusal.
fn check_error_status(status: u16, what: impl FnOnce() -> String) -> Result<(), String> {
    if StatusCode::from_u16(status).is_ok_and(|s| s.is_client_error() || s.is_server_error()) {
        Ok(())
    } else {
        Err(format!("{} must be a 4xx or 5xx code", what()))
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
#[path = "faults_tests.rs"]
mod tests;
