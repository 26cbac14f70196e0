//! How long MAAS takes to answer: a latency profile.
//!
//! Without one the simulator answers in microseconds, which flatters any client: a real region
//! API spends hundreds of milliseconds on an allocate or a deploy (transactions, rack RPC,
//! preseed rendering), serialises every machine of a listing with its storage and network
//! trees, and serves a bounded number of requests at once. A profile gives each operation its
//! service time, a listing a cost per machine it returns, and the region a number of workers;
//! a call waits for a free worker, and holds it while it is "served". The figures of
//! [`LatencyProfile::region`] and where they come from are in `docs/maas-sim.md`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::SimError;

/// Service times of the simulated region API.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
// Every field defaults, so a profile file names only what it changes.
#[serde(default, deny_unknown_fields)]
pub struct LatencyProfile {
    /// Service time of one call, in milliseconds, per operation key as in `call_counts()`
    /// (`machines.allocate`, `machine.deploy`, …); `*` for every other operation.
    pub ops: BTreeMap<String, u64>,
    /// Extra service time per machine a machine listing returns, in microseconds.
    pub list_per_machine_us: u64,
    /// How many API calls the region serves at once; further calls queue. 0: no limit.
    pub workers: usize,
}

/// Operation keys whose answer is a list of machines, each a full machine object.
const MACHINE_LISTINGS: [&str; 2] = ["machines.read", "machines.list_allocated"];

impl LatencyProfile {
    /// No latency at all: every call is answered as soon as it is handled (the default).
    pub fn none() -> Self {
        Self::default()
    }

    /// A MAAS 3.x region of ordinary size under load, as `docs/maas-sim.md` derives it.
    pub fn region() -> Self {
        let ops = [
            ("machines.allocate", 300),
            ("machine.deploy", 500),
            ("machine.release", 300),
            ("machines.release", 300),
            ("machine.power_on", 200),
            ("machine.power_off", 200),
            ("machine.query_power_state", 1_000),
            ("machine.set_workload_annotations", 100),
            ("machine.set_owner_data", 100),
            ("machine.update", 150),
            ("machine.read", 80),
            ("interface.link_subnet", 150),
            ("interface.unlink_subnet", 150),
            ("machines.read", 60),
            ("machines.list_allocated", 60),
            ("*", 50),
        ];
        Self {
            ops: ops.iter().map(|(op, ms)| ((*op).to_owned(), *ms)).collect(),
            list_per_machine_us: 20_000,
            workers: 8,
        }
    }

    /// The built-in profile called `name` (`none`, `region`), or the JSON profile in the file
    /// `name` names.
    pub fn named(name: &str) -> Result<Self, SimError> {
        match name {
            "none" => Ok(Self::none()),
            "region" => Ok(Self::region()),
            path => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| SimError::io(format!("latency profile {path}"), e))?;
                serde_json::from_str(&text)
                    .map_err(|e| SimError::Config(format!("latency profile {path}: {e}")))
            }
        }
    }

    /// Whether the profile adds nothing.
    pub fn is_none(&self) -> bool {
        self.ops.values().all(|ms| *ms == 0) && self.list_per_machine_us == 0
    }

    /// Service time of one call of `op`, before its answer's size is known.
    pub(crate) fn service(&self, op: &str) -> Duration {
        let ms = self.ops.get(op).or_else(|| self.ops.get("*"));
        Duration::from_millis(ms.copied().unwrap_or(0))
    }

    /// Extra service time of an answer of `op` that returns `machines` machines.
    pub(crate) fn per_answer(&self, op: &str, machines: usize) -> Duration {
        if !MACHINE_LISTINGS.contains(&op) {
            return Duration::ZERO;
        }
        let machines = u64::try_from(machines).unwrap_or(u64::MAX);
        Duration::from_micros(self.list_per_machine_us.saturating_mul(machines))
    }
}

/// The region's workers: a call holds one while it is served.
#[derive(Debug)]
pub(crate) struct Region {
    profile: LatencyProfile,
    workers: Option<Semaphore>,
}

impl Region {
    pub(crate) fn new(profile: LatencyProfile) -> Self {
        let workers =
            (profile.workers > 0 && !profile.is_none()).then(|| Semaphore::new(profile.workers));
        Self { profile, workers }
    }

    /// Waits for a free worker (none to wait for without a limit).
    pub(crate) async fn worker(&self) -> Option<SemaphorePermit<'_>> {
        // The semaphore is never closed, so acquiring fails only if it were.
        self.workers.as_ref()?.acquire().await.ok()
    }

    /// Serves one call of `op`: its service time.
    pub(crate) async fn serve(&self, op: &str) {
        sleep(self.profile.service(op)).await;
    }

    /// Serves the answer of `op` with `machines` machines in it.
    pub(crate) async fn answer(&self, op: &str, machines: usize) {
        sleep(self.profile.per_answer(op, machines)).await;
    }
}

async fn sleep(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_take_their_own_time_or_the_default() {
        let region = LatencyProfile::region();
        assert_eq!(region.service("machine.deploy"), Duration::from_millis(500));
        assert_eq!(region.service("zones.read"), Duration::from_millis(50));
        assert_eq!(
            LatencyProfile::none().service("machine.deploy"),
            Duration::ZERO
        );
        assert!(LatencyProfile::none().is_none() && !region.is_none());
    }

    #[test]
    fn listings_cost_per_machine_and_other_answers_do_not() {
        let region = LatencyProfile::region();
        assert_eq!(
            region.per_answer("machines.read", 100),
            Duration::from_secs(2)
        );
        assert_eq!(
            region.per_answer("machines.list_allocated", 0),
            Duration::ZERO
        );
        assert_eq!(region.per_answer("machine.read", 1), Duration::ZERO);
    }

    #[test]
    fn profiles_read_from_json_name_only_what_they_change() {
        let profile: LatencyProfile =
            serde_json::from_str(r#"{"ops": {"*": 5}, "workers": 2}"#).unwrap();
        assert_eq!(profile.service("machine.deploy"), Duration::from_millis(5));
        assert_eq!(profile.list_per_machine_us, 0);
        assert!(serde_json::from_str::<LatencyProfile>(r#"{"op": {}}"#).is_err());
        assert!(LatencyProfile::named("/nonexistent/profile.json").is_err());
    }

    #[tokio::test]
    async fn a_region_serves_no_more_calls_at_once_than_it_has_workers() {
        let region = Region::new(LatencyProfile {
            workers: 2,
            ..LatencyProfile::region()
        });
        let first = region.worker().await;
        let second = region.worker().await;
        assert!(first.is_some() && second.is_some());
        let third = tokio::time::timeout(Duration::from_millis(50), region.worker()).await;
        assert!(third.is_err(), "a third call waits for a worker");
        drop(first);
        assert!(region.worker().await.is_some());
        assert!(Region::new(LatencyProfile::none()).worker().await.is_none());
    }
}
