//! The whole remediation walked through pure steps against a fake gateway and kubelet.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_api::host::PowerState;
use kube::ResourceExt;

use super::*;
use crate::fixtures::{T0, UID, annotate, state, t, tainted, time};
use crate::keys::{ANNOTATION_FENCED_BY, REBOOT_STATE, reboot_key};
use crate::node::{has_out_of_service_taint, restore_patch};
use crate::state::{NodeView, remediated};
use crate::status::next_status;

/// The pure world: applies what `act` would write for `step`, then lets a fake gateway and
/// kubelet react. Counts power-offs and power-ons.
struct World {
    s: State,
    offs: u32,
    ons: u32,
}

impl World {
    fn apply(&mut self, step: &Step, now: i64) {
        if let Some(status) = next_status(&self.s, step, &time(now)) {
            self.s.remediation.status = Some(status);
        }
        match step {
            Step::BackupNode => self.s = std::mem::replace(&mut self.s, state()).backed_up(),
            Step::Fence(_) => {
                let power = self
                    .s
                    .host
                    .as_ref()
                    .unwrap()
                    .status
                    .as_ref()
                    .unwrap()
                    .power_state;
                assert_eq!(power, Some(PowerState::Off), "fenced while the server runs");
                let node = tainted(self.s.node().unwrap());
                self.s.node = NodeView::Present(Box::new(node));
            }
            Step::RequestReboot => annotate(self.s.host_mut(), &reboot_key(UID), "ns/m1"),
            Step::ReleaseHost(_) => {
                self.s
                    .host_mut()
                    .metadata
                    .annotations
                    .as_mut()
                    .unwrap()
                    .remove(&reboot_key(UID));
            }
            Step::RestoreNode => {
                let node = self.s.node().unwrap().clone();
                let patch =
                    restore_patch(&node, backup(&self.s.remediation).as_ref(), UID).unwrap();
                let mut value = serde_json::to_value(&node).unwrap();
                if let Some(taints) = patch["spec"].get("taints") {
                    value["spec"]["taints"] = taints.clone();
                }
                value["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(ANNOTATION_FENCED_BY);
                self.s.node = NodeView::Present(Box::new(serde_json::from_value(value).unwrap()));
            }
            _ => {}
        }
        self.gateway(now);
    }

    fn gateway(&mut self, now: i64) {
        let requested = self
            .s
            .host
            .as_ref()
            .unwrap()
            .annotations()
            .keys()
            .any(|k| k.starts_with("reboot."));
        let host = self.s.host_mut();
        let power = host.status.as_ref().unwrap().power_state;
        if requested && power == Some(PowerState::On) {
            annotate(host, REBOOT_STATE, "off");
            host.status.as_mut().unwrap().power_state = Some(PowerState::Off);
            self.offs += 1;
        } else if !requested && power == Some(PowerState::Off) {
            host.metadata
                .annotations
                .as_mut()
                .unwrap()
                .remove(REBOOT_STATE);
            host.status.as_mut().unwrap().power_state = Some(PowerState::On);
            self.ons += 1;
            let node = self.s.node().unwrap().clone();
            let mut node = node;
            let cond = &mut node.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
            cond.status = "True".into();
            cond.last_transition_time = Some(time(now));
            self.s.node = NodeView::Present(Box::new(node));
        }
    }
}

#[test]
fn the_whole_walk_makes_exactly_one_power_cycle_and_restores_the_node() {
    let mut w = World {
        s: state(),
        offs: 0,
        ons: 0,
    };
    let mut steps = Vec::new();
    for i in 0..30 {
        let now = T0 + i;
        let step = decide(&w.s, t(now));
        // A kill at any point is a fresh decide on the same objects: it must agree.
        assert_eq!(decide(&w.s, t(now)), step);
        if matches!(step, Step::Done(_)) {
            break;
        }
        w.apply(&step, now);
        steps.push(step);
    }
    assert_eq!((w.offs, w.ons), (1, 1), "{steps:?}");
    let node = w.s.node().unwrap();
    assert!(!has_out_of_service_taint(node));
    assert_eq!(
        node.labels()
            .get("node-role.kubernetes.io/worker")
            .map(String::as_str),
        Some("")
    );
    assert!(remediated(&w.s.remediation), "{steps:?}");
    assert!(steps.contains(&Step::MarkRemediated));
    let expected_prefix = [
        Step::BackupNode,
        Step::BeginAttempt { attempt: 1 },
        Step::RequestReboot,
        Step::Fence(FenceMode::Taint),
        Step::MarkWaiting,
        Step::ReleaseHost("h1".into()),
        Step::RestoreNode,
        Step::MarkRemediated,
    ];
    assert_eq!(steps, expected_prefix);
}
