use std::collections::BTreeSet;

use super::*;

fn policy(erase: EraseMode, force: bool) -> ReleasePolicy {
    ReleasePolicy { erase, force }
}

#[test]
fn an_identity_names_installation_host_and_release_policy() {
    let value = agent_name(
        "capmaas-prod",
        "dc1",
        "srv-12",
        &policy(EraseMode::Quick, false),
    );
    assert_eq!(value, "capmaas-prod;dc1/srv-12;Q0");
    assert_eq!(
        recorded_policy(&value),
        Some(policy(EraseMode::Quick, false))
    );
    assert!(made_by(&value, "capmaas-prod"));
    // An installation whose id extends ours is another installation.
    assert!(!made_by(&value, "capmaas"));
    assert!(!made_by(&value, "capmaas-prod-2"));
    // The previous version's form: ours, with no policy in it.
    assert!(made_by("capmaas-prod", "capmaas-prod"));
    assert_eq!(recorded_policy("capmaas-prod"), None);
}

#[test]
fn every_policy_has_its_own_identity_and_reads_back() {
    let values: BTreeSet<String> = POLICIES
        .iter()
        .map(|p| agent_name("i", "ns", "h", p))
        .collect();
    assert_eq!(values.len(), POLICIES.len());
    for p in POLICIES {
        assert_eq!(recorded_policy(&agent_name("i", "ns", "h", &p)), Some(p));
    }
    let all = candidates("i", "ns", "h");
    assert_eq!(all.len(), POLICIES.len() + 1);
    assert_eq!(all.last().map(String::as_str), Some("i"));
    assert!(values.iter().all(|v| all.contains(v)));
    // Another host of the same installation has none of them.
    let other = candidates("i", "ns", "h2");
    assert!(values.iter().all(|v| !other[..POLICIES.len()].contains(v)));
}

#[test]
fn a_long_host_name_is_digested_to_stay_within_maas_limit() {
    let installation = "x".repeat(63);
    let namespace = "n".repeat(63);
    let name = "a".repeat(253);
    let release = policy(EraseMode::Full, true);
    let value = agent_name(&installation, &namespace, &name, &release);
    assert!(value.len() <= MAX_AGENT_NAME, "{}", value.len());
    assert_eq!(value.len(), 63 + 1 + 33 + 1 + 2);
    assert_eq!(recorded_policy(&value), Some(release.clone()));
    assert!(made_by(&value, &installation));
    // Stable, and different for another host.
    assert_eq!(
        value,
        agent_name(&installation, &namespace, &name, &release)
    );
    let other = agent_name(&installation, &namespace, &"b".repeat(253), &release);
    assert_ne!(value, other);
    // A value that just fits stays readable.
    let fits = "h".repeat(MAX_AGENT_NAME - "i;ns/;N0".len());
    let readable = agent_name("i", "ns", &fits, &ReleasePolicy::default());
    assert_eq!(readable.len(), MAX_AGENT_NAME);
    assert!(readable.contains(&fits));
}

#[test]
fn values_this_version_did_not_write_carry_no_policy() {
    for odd in [
        "",
        "i;ns/h",
        "i;ns/h;X0",
        "i;ns/h;N2",
        "i;ns/h;n0",
        "i;ns/h;N00",
    ] {
        assert_eq!(recorded_policy(odd), None, "{odd}");
    }
}
