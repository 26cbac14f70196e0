//! Where a released machine spends its time in the mass deletion ([`super::deletion`]): for
//! each machine deleted, when its Machine and then its MaasMachine were first seen being deleted
//! (a deletionTimestamp: CAPI core's doing), when machine-controller withdrew its host's
//! deployment request (the ask for the release), when MAAS began releasing the server (the gateway's call), when MAAS
//! had it Ready, when the gateway reported the host `Available`, and when the Machine was gone;
//! p50/p99 since the deletion began and since the machine's step before. It tells who paces a
//! mass deletion: CAPI core and machine-controller (until the withdrawal), the gateway (until
//! the release call and after Ready), MAAS (the release itself).

use std::collections::BTreeMap;
use std::time::Instant;

use maas_sim::{NodeStatus, StatusChange};

use super::stats::p50_p99;
use super::timeline::{Kind, Recorder, first_change, seconds};

/// The steps of one release, in the order they normally happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseStep {
    /// The CAPI Machine got a deletionTimestamp (the MachineSet deleted it).
    MachineDeleting,
    /// Its MaasMachine got a deletionTimestamp (CAPI core deleted it).
    MaasMachineDeleting,
    /// machine-controller withdrew the host's `spec.provisioning`.
    Withdrawn,
    /// MAAS accepted the release call (status Releasing).
    MaasReleasing,
    /// MAAS finished the release (status Ready).
    MaasReady,
    /// The gateway reported it (`status.provisioningState: Available`).
    HostAvailable,
    /// The CAPI Machine was deleted.
    MachineGone,
}

impl ReleaseStep {
    /// Every step, in order.
    pub const ALL: [Self; 7] = [
        Self::MachineDeleting,
        Self::MaasMachineDeleting,
        Self::Withdrawn,
        Self::MaasReleasing,
        Self::MaasReady,
        Self::HostAvailable,
        Self::MachineGone,
    ];

    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Self::MachineDeleting => "CAPI Machine deleting (deletionTimestamp)",
            Self::MaasMachineDeleting => "MaasMachine deleting (deletionTimestamp)",
            Self::Withdrawn => "MaasHost spec.provisioning withdrawn",
            Self::MaasReleasing => "MAAS release call (Releasing)",
            Self::MaasReady => "MAAS Ready",
            Self::HostAvailable => "MaasHost status Available",
            Self::MachineGone => "CAPI Machine gone",
        }
    }
}

/// One step's statistics over the machines that reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseStepRow {
    /// The step.
    pub step: ReleaseStep,
    /// Machines for which it was seen.
    pub seen: usize,
    /// p50 and p99 since the deletion began, seconds.
    pub since_start: Option<(f64, f64)>,
    /// p50 and p99 since the machine's latest earlier step seen, seconds.
    pub hop: Option<(f64, f64)>,
}

/// One machine to delete, as the watches listed it when the deletion began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Released {
    /// Its MaasHost.
    pub(super) host: String,
    /// The host's MAAS system id.
    pub(super) system_id: Option<String>,
    /// The MaasMachine claiming it.
    pub(super) maas_machine: Option<String>,
    /// Its CAPI Machine (the one whose MaasMachine claims the host).
    pub(super) machine: Option<String>,
}

/// The machines to delete: each claimed host of `hosts` (name → system id) with the Machine of
/// `machines` whose MaasMachine claims it.
pub(super) fn released(
    recorder: &Recorder,
    machines: &[String],
    hosts: &BTreeMap<String, Option<String>>,
) -> Vec<Released> {
    hosts
        .iter()
        .map(|(host, system_id)| {
            let consumer = recorder.consumer_of(host);
            let machine = machines
                .iter()
                .find(|m| consumer.is_some() && recorder.infra_of(m) == consumer)
                .cloned();
            Released {
                host: host.clone(),
                system_id: system_id.clone(),
                maas_machine: consumer.map(ToOwned::to_owned),
                machine,
            }
        })
        .collect()
}

/// The rows of the releases of a deletion begun at `started`.
pub(super) fn release_steps(
    recorder: &Recorder,
    history: &BTreeMap<String, Vec<StatusChange>>,
    released: &[Released],
    started: Instant,
) -> Vec<ReleaseStepRow> {
    let marks: Vec<[Option<Instant>; ReleaseStep::ALL.len()]> = released
        .iter()
        .map(|r| {
            let maas = |status| {
                let system_id = r.system_id.as_deref()?;
                first_change(history, system_id, status, started)
            };
            let deleting = |kind, name: Option<&str>| recorder.deleting_since(kind, name?, started);
            [
                deleting(Kind::Machine, r.machine.as_deref()),
                deleting(Kind::MaasMachine, r.maas_machine.as_deref()),
                recorder.withdrawn_since(&r.host, started),
                maas(NodeStatus::Releasing),
                maas(NodeStatus::Ready),
                recorder.freed_since(&r.host, started),
                r.machine
                    .as_deref()
                    .and_then(|m| recorder.deleted_at(m))
                    .filter(|at| *at >= started),
            ]
        })
        .collect();
    ReleaseStep::ALL
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut since_start = Vec::new();
            let mut hops = Vec::new();
            for m in &marks {
                let Some(at) = m[i] else { continue };
                since_start.push(seconds(at, started));
                if let Some(previous) = m[..i].iter().rev().flatten().next() {
                    hops.push(seconds(at, *previous));
                }
            }
            ReleaseStepRow {
                step: *step,
                seen: since_start.len(),
                since_start: p50_p99(&since_start),
                hop: p50_p99(&hops),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn each_release_is_joined_from_the_watches_and_the_simulator() {
        let base = Instant::now();
        let mut r = Recorder::default();
        r.observe(
            Kind::Machine,
            "m-0",
            &json!({"spec": {"infrastructureRef": {"name": "mm-0"}}}),
            at(base, 0),
        );
        let host = |provisioning: bool, state: &str| {
            let mut spec = json!({"systemID": "abc", "consumerRef": {"name": "mm-0"}});
            if provisioning {
                spec["provisioning"] = json!({});
            }
            json!({"spec": spec, "status": {"provisioningState": state}})
        };
        r.observe(Kind::Host, "h-0", &host(true, "Deployed"), at(base, 0));
        let started = at(base, 1000);
        let released = released(
            &r,
            &["m-0".to_owned()],
            &BTreeMap::from([("h-0".to_owned(), Some("abc".to_owned()))]),
        );
        assert_eq!(released[0].machine.as_deref(), Some("m-0"));
        r.deleting(Kind::Machine, "m-0", at(base, 1100));
        r.deleting(Kind::MaasMachine, "mm-0", at(base, 1200));
        r.deleting(Kind::MaasMachine, "mm-0", at(base, 1300));
        r.observe(Kind::Host, "h-0", &host(false, "Deployed"), at(base, 1500));
        r.observe(Kind::Host, "h-0", &host(false, "Available"), at(base, 8000));
        r.forget(Kind::Machine, "m-0", at(base, 9000));
        let history = BTreeMap::from([(
            "abc".to_owned(),
            vec![
                // Before the deletion: not this release's.
                StatusChange {
                    status: NodeStatus::Ready,
                    at: at(base, 10),
                },
                StatusChange {
                    status: NodeStatus::Releasing,
                    at: at(base, 2000),
                },
                StatusChange {
                    status: NodeStatus::Ready,
                    at: at(base, 7000),
                },
            ],
        )]);
        let rows = release_steps(&r, &history, &released, started);
        let since: Vec<Option<(f64, f64)>> = rows.iter().map(|row| row.since_start).collect();
        assert_eq!(
            since,
            [
                Some((0.1, 0.1)),
                Some((0.2, 0.2)),
                Some((0.5, 0.5)),
                Some((1.0, 1.0)),
                Some((6.0, 6.0)),
                Some((7.0, 7.0)),
                Some((8.0, 8.0)),
            ]
        );
        assert_eq!(rows[0].hop, None, "the first step has no step before");
        assert_eq!(rows[2].hop.map(|(p50, _)| (p50 * 10.0).round()), Some(3.0));
        assert_eq!(rows[4].hop, Some((5.0, 5.0)), "the release itself");
        assert!(rows.iter().all(|row| row.seen == 1));
    }

    #[test]
    fn a_machine_not_released_yet_is_not_seen() {
        let rows = release_steps(
            &Recorder::default(),
            &BTreeMap::new(),
            &[Released {
                host: "h-0".into(),
                system_id: None,
                maas_machine: None,
                machine: None,
            }],
            Instant::now(),
        );
        assert!(
            rows.iter()
                .all(|row| row.seen == 0 && row.since_start.is_none())
        );
    }
}
