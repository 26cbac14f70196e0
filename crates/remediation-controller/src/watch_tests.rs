#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

use super::*;
use crate::fixtures::{UID, annotate, cluster, host, machine, remediation};
use crate::keys::reboot_key;

fn store(objects: Vec<MaasRemediation>) -> Store<MaasRemediation> {
    let mut writer = Writer::default();
    let reader = writer.as_reader();
    writer.apply_watcher_event(&Event::Init);
    for o in objects {
        writer.apply_watcher_event(&Event::InitApply(o));
    }
    writer.apply_watcher_event(&Event::InitDone);
    reader
}

#[test]
fn a_host_wakes_the_remediations_whose_request_it_carries() {
    let mut other = remediation();
    other.metadata.name = Some("m2".into());
    other.metadata.uid = Some("other-uid".into());
    let store = store(vec![remediation(), other]);
    let mut h = host("h1", "off");
    assert!(map_host(&store, &h).is_empty());
    annotate(&mut h, &reboot_key(UID), "ns/m1");
    annotate(&mut h, "reboot.maas.cluster.x-k8s.io/someone-else", "x");
    let woken = map_host(&store, &h);
    assert_eq!(woken.len(), 1);
    assert_eq!(woken[0].name, "m1");
    h.metadata.namespace = Some("elsewhere".into());
    assert!(map_host(&store, &h).is_empty());
}

#[test]
fn machines_and_clusters_wake_their_remediations() {
    let r = map_machine(&machine()).unwrap();
    assert_eq!(
        (r.name.as_str(), r.namespace.as_deref()),
        ("m1", Some("ns"))
    );
    let store = store(vec![remediation()]);
    assert_eq!(map_cluster(&store, &cluster()).len(), 1);
    let mut other = cluster();
    other.metadata.name = Some("c2".into());
    assert!(map_cluster(&store, &other).is_empty());
}
