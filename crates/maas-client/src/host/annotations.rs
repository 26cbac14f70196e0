//! Markers maas-client keeps on MAAS machines (workload annotations) and on MaasHosts
//! (Kubernetes annotations), and their pure encodings.
//!
//! MAAS workload annotation keys must match `[\w.-]+` (a `/` crashes MAAS with a 500), hence
//! the dotted `capmaas.*` keys. They are wiped by MAAS on release, which suits them: they
//! describe one allocation.

use std::collections::BTreeMap;
use std::time::Duration;

use capmaas_api::common::{EraseMode, ReleasePolicy};
use maas_api_client::ReleaseRequest;

/// MAAS annotation: the installation (agent_name) holding the machine.
pub const INSTALLATION: &str = "capmaas.installation";
/// MAAS annotation: `<namespace>/<name>` of the MaasHost.
pub const HOST: &str = "capmaas.host";
/// MAAS annotation: `<kind>/<name>` of the consumer.
pub const CONSUMER: &str = "capmaas.consumer";
/// MAAS annotation: UID of the consumer.
pub const CONSUMER_UID: &str = "capmaas.consumer-uid";
/// MAAS annotation: erase mode to use on release (`None`, `Quick`, `Secure`, `Full`).
pub const RELEASE_ERASE: &str = "capmaas.release-erase";
/// MAAS annotation: `true` to force the release.
pub const RELEASE_FORCE: &str = "capmaas.release-force";

/// MaasHost annotation: reboot progress (`off`, or `on:<unix seconds>`).
pub const REBOOT_STATE: &str = "maas.cluster.x-k8s.io/reboot-state";
/// MaasHost annotation: failed deployments counted for the current request.
pub const DEPLOY_FAILURES: &str = "maas.cluster.x-k8s.io/deploy-failures";

/// Progress of a reboot request, persisted on the MaasHost as [`REBOOT_STATE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebootState {
    /// No reboot in progress.
    Idle,
    /// Power-off requested (or about to be); the host stays off while a request exists.
    PoweringOff,
    /// Power-on sent; `since` is how long ago.
    PoweringOn {
        /// Time since the power-on was sent.
        since: Duration,
    },
}

/// The workload annotations a machine allocated for `host` must carry.
pub fn desired_machine_annotations(
    installation: &str,
    host_namespace: &str,
    host_name: &str,
    consumer: Option<(&str, &str, &str)>,
    release: Option<&ReleasePolicy>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::from([
        (INSTALLATION.to_owned(), installation.to_owned()),
        (HOST.to_owned(), format!("{host_namespace}/{host_name}")),
    ]);
    if let Some((kind, name, uid)) = consumer {
        out.insert(CONSUMER.to_owned(), format!("{kind}/{name}"));
        out.insert(CONSUMER_UID.to_owned(), uid.to_owned());
    }
    let policy = release.cloned().unwrap_or_default();
    out.insert(RELEASE_ERASE.to_owned(), format!("{:?}", policy.erase));
    out.insert(RELEASE_FORCE.to_owned(), policy.force.to_string());
    out
}

/// The erase of a release when no policy can be found for one of our allocations (nothing
/// recorded on the machine, no `spec.provisioning`), or the recorded one cannot be read:
/// secure erase where the disks support it, else MAAS overwrites them completely.
pub const SAFEST_ERASE: EraseMode = EraseMode::Secure;

/// The erase mode recorded in [`RELEASE_ERASE`]; an unreadable value is [`SAFEST_ERASE`],
/// never weaker than what was asked.
pub fn recorded_erase(value: &str) -> EraseMode {
    match value {
        "None" => EraseMode::None,
        "Quick" => EraseMode::Quick,
        "Secure" => EraseMode::Secure,
        "Full" => EraseMode::Full,
        _ => SAFEST_ERASE,
    }
}

/// The release request for one of our machines: the policy recorded on it at allocation
/// ([`RELEASE_ERASE`], [`RELEASE_FORCE`]), else `spec`'s, else [`SAFEST_ERASE`].
///
/// Every release the gateway sends is built here (host release, deployment retry, orphan
/// sweep), and so is every retry of one that failed (5xx, Releasing failed, Failed disk
/// erasing): MAAS keeps the workload annotations until a release completes, so a retry
/// carries the same erase flags and is never downgraded to a release without erase.
pub fn release_request(
    machine_annotations: &BTreeMap<String, String>,
    spec_policy: Option<&ReleasePolicy>,
    comment: String,
) -> ReleaseRequest {
    let erase = machine_annotations
        .get(RELEASE_ERASE)
        .map(|mode| recorded_erase(mode))
        .or_else(|| spec_policy.map(|p| p.erase))
        .unwrap_or(SAFEST_ERASE);
    let force = machine_annotations
        .get(RELEASE_FORCE)
        .map(|f| f == "true")
        .or_else(|| spec_policy.map(|p| p.force))
        .unwrap_or(false);
    ReleaseRequest {
        comment: Some(comment),
        erase: erase != EraseMode::None,
        quick_erase: erase == EraseMode::Quick,
        secure_erase: erase == EraseMode::Secure,
        force,
    }
}

/// Reads the reboot progress at `now` (unix seconds). An unreadable value counts as
/// `PoweringOff`: finishing a cycle is safer than forgetting that one started.
pub fn reboot_state(value: Option<&str>, now: i64) -> RebootState {
    match value {
        None => RebootState::Idle,
        Some(v) => match v.strip_prefix("on:").map(str::parse::<i64>) {
            Some(Ok(sent)) => RebootState::PoweringOn {
                since: Duration::from_secs(u64::try_from(now.saturating_sub(sent)).unwrap_or(0)),
            },
            _ => RebootState::PoweringOff,
        },
    }
}

/// The annotation value for a power-on sent at `now`.
pub fn powering_on(now: i64) -> String {
    format!("on:{now}")
}

/// Failed deployments recorded on the host (absent or unreadable = 0).
pub fn deploy_failures(value: Option<&str>) -> u32 {
    value.and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_annotations_use_maas_safe_keys() {
        let policy = ReleasePolicy {
            erase: EraseMode::Quick,
            force: false,
        };
        let a = desired_machine_annotations(
            "capmaas-x",
            "ns",
            "h1",
            Some(("MaasMachine", "m1", "uid-1")),
            Some(&policy),
        );
        for key in a.keys() {
            maas_api_client::validate_annotation_key(key).unwrap();
        }
        assert_eq!(a[HOST], "ns/h1");
        assert_eq!(a[CONSUMER], "MaasMachine/m1");
        let release = release_request(&a, None, "bye".into());
        assert!(release.erase && release.quick_erase && !release.force);
        let full = ReleasePolicy {
            erase: EraseMode::Full,
            force: true,
        };
        let spec = release_request(&BTreeMap::new(), Some(&full), "bye".into());
        assert!(spec.erase && !spec.quick_erase && !spec.secure_erase && spec.force);
    }

    #[test]
    fn release_never_goes_without_the_erase_asked_for() {
        let annotations = |erase: Option<&str>| {
            let policy = ReleasePolicy::default();
            let mut a = desired_machine_annotations("i", "ns", "h", None, Some(&policy));
            match erase {
                Some(mode) => a.insert(RELEASE_ERASE.to_owned(), mode.to_owned()),
                None => a.remove(RELEASE_ERASE),
            };
            a
        };
        let secure = ReleasePolicy {
            erase: EraseMode::Secure,
            force: false,
        };
        // Recorded on the machine: wins over the spec, also after the spec is gone.
        let r = release_request(&annotations(Some("Secure")), None, "c".into());
        assert!(r.erase && r.secure_erase && !r.quick_erase);
        let r = release_request(&annotations(Some("Full")), Some(&secure), "c".into());
        assert!(r.erase && !r.secure_erase && !r.quick_erase);
        // An explicit "no erase" policy is honoured.
        let r = release_request(&annotations(Some("None")), None, "c".into());
        assert!(!r.erase && !r.secure_erase && !r.quick_erase);
        // Nothing recorded: the spec's policy.
        let r = release_request(&annotations(None), Some(&secure), "c".into());
        assert!(r.erase && r.secure_erase);
        // Nothing found at all, or an unreadable record: the safest erase.
        for a in [
            BTreeMap::new(),
            annotations(None),
            annotations(Some("garbage")),
        ] {
            let r = release_request(&a, None, "c".into());
            assert!(r.erase && r.secure_erase && !r.quick_erase, "{a:?}");
        }
        assert_eq!(recorded_erase("none"), SAFEST_ERASE);
    }

    #[test]
    fn reboot_state_round_trip() {
        assert_eq!(reboot_state(None, 100), RebootState::Idle);
        assert_eq!(reboot_state(Some("off"), 100), RebootState::PoweringOff);
        assert_eq!(reboot_state(Some("garbage"), 100), RebootState::PoweringOff);
        assert_eq!(
            reboot_state(Some(&powering_on(40)), 100),
            RebootState::PoweringOn {
                since: Duration::from_secs(60)
            }
        );
        assert_eq!(deploy_failures(Some("2")), 2);
        assert_eq!(deploy_failures(Some("x")), 0);
    }
}
