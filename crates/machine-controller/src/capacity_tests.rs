use super::*;
use capmaas_api::common::{ConsumerReference, HostSelector};
use capmaas_api::host::MaasHostStatus;
use capmaas_api::inventory::ClaimNamespaces;
use capmaas_api::{MaasInventory, MaasMachineTemplate};
use serde_json::json;

use crate::decide::spec_request;
use crate::test_support::unclaimed_host;

fn host(name: &str, cpu: i32, mem: i64) -> MaasHost {
    let mut h = unclaimed_host(name);
    h.metadata.namespace = Some("ns".into());
    h.status = Some(MaasHostStatus {
        zone: Some("az1".into()),
        pool: Some("default".into()),
        cpu_count: Some(cpu),
        memory_mib: Some(mem),
        storage_gib: Some(500),
        architecture: Some("amd64/generic".into()),
        tags: Some(vec!["virtual".into()]),
        provisioning_state: Some(ProvisioningState::Available),
        ..MaasHostStatus::default()
    });
    h
}

fn with_status(mut h: MaasHost, f: impl FnOnce(&mut MaasHostStatus)) -> MaasHost {
    if let Some(s) = h.status.as_mut() {
        f(s);
    }
    h
}

fn template(spec: &serde_json::Value) -> MaasMachineTemplate {
    let mut base = json!({"minCPU": 2, "minMemory": 4096, "image": "ubuntu/jammy"});
    if let (Some(b), Some(extra)) = (base.as_object_mut(), spec.as_object()) {
        b.extend(extra.clone());
    }
    let mut t: MaasMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasMachineTemplate",
        "metadata": {"name": "workers", "namespace": "ns", "generation": 1},
        "spec": {"template": {"spec": base}}
    }))
    .unwrap();
    t.metadata.generation = Some(1);
    t
}

fn own_namespace() -> Claimable {
    Claimable::new("ns", std::iter::empty::<&MaasInventory>())
}

fn fit_of<'h>(t: &MaasMachineTemplate, hosts: &'h [MaasHost]) -> Fit<'h> {
    smallest_fit(
        &spec_request(&t.spec.template.spec),
        hosts.iter(),
        &own_namespace(),
    )
}

fn fit_name(fit: &Fit<'_>) -> Option<String> {
    match fit {
        Fit::Host(h) => Some(h.name_any()),
        Fit::NoHost(_) => None,
    }
}

fn at(secs: i64) -> Time {
    Time(jiff::Timestamp::from_second(secs).unwrap())
}

#[test]
fn the_smallest_fitting_host_gives_the_shape_free_or_not() {
    let claimed = {
        let mut h = host("small-claimed", 4, 8192);
        h.spec.consumer_ref = Some(ConsumerReference {
            api_version: "infrastructure.cluster.x-k8s.io/v1beta1".into(),
            kind: "MaasMachine".into(),
            name: "m".into(),
            uid: "u".into(),
            namespace: None,
        });
        with_status(h, |s| {
            s.provisioning_state = Some(ProvisioningState::Deployed);
        })
    };
    let hosts = [
        host("big", 32, 131_072),
        host("mid", 8, 16384),
        claimed,
        host("same-cpu-more-mem", 4, 16384),
        host("too-small", 1, 2048),
    ];
    let t = template(&json!({}));
    assert_eq!(
        fit_name(&fit_of(&t, &hosts)).as_deref(),
        Some("small-claimed")
    );
    let Fit::Host(h) = fit_of(&t, &hosts) else {
        panic!("a host fits")
    };
    let capacity = capacity(h);
    assert_eq!(capacity["cpu"], Quantity("4".into()));
    assert_eq!(capacity["memory"], Quantity("8Gi".into()));
    assert_eq!(capacity["ephemeral-storage"], Quantity("500Gi".into()));
    assert_eq!(
        node_info(h),
        TemplateNodeInfo {
            architecture: Some("amd64".into()),
            operating_system: Some("linux".into())
        }
    );
}

#[test]
fn the_templates_constraints_are_respected() {
    let hosts = [
        with_status(host("small-other-pool", 2, 4096), |s| {
            s.pool = Some("gpu".into());
        }),
        with_status(host("small-other-zone", 2, 4096), |s| {
            s.zone = Some("az2".into());
        }),
        with_status(host("small-no-tag", 2, 4096), |s| s.tags = None),
        with_status(host("small-disk", 2, 4096), |s| s.storage_gib = Some(100)),
        host("fits", 16, 65536),
    ];
    let t = template(&json!({
        "minCPU": 2, "minMemory": 4096, "resourcePool": "default", "failureDomain": "az1",
        "tags": ["virtual"], "minDiskSize": 200
    }));
    assert_eq!(fit_name(&fit_of(&t, &hosts)).as_deref(), Some("fits"));
    // minCPU and minMemory.
    let t = template(&json!({"minCPU": 24}));
    assert_eq!(fit_name(&fit_of(&t, &hosts)), None);
    let t = template(&json!({"minMemory": 32768}));
    assert_eq!(fit_name(&fit_of(&t, &hosts)).as_deref(), Some("fits"));
    // hostSelector on the host's labels.
    let mut labelled = host("labelled", 64, 262_144);
    labelled.labels_mut().insert("rack".into(), "r1".into());
    let hosts = [host("plain", 2, 4096), labelled];
    let mut t = template(&json!({}));
    t.spec.template.spec.host_selector = Some(HostSelector {
        match_labels: Some([("rack".to_owned(), "r1".to_owned())].into()),
        match_expressions: None,
    });
    assert_eq!(fit_name(&fit_of(&t, &hosts)).as_deref(), Some("labelled"));
}

#[test]
fn only_hosts_the_namespace_may_claim_count() {
    let mut other = host("other-ns", 2, 4096);
    other.metadata.namespace = Some("elsewhere".into());
    let hosts = [other.clone(), host("own", 8, 16384)];
    let t = template(&json!({}));
    assert_eq!(fit_name(&fit_of(&t, &hosts)).as_deref(), Some("own"));
    // An inventory of `elsewhere` admitting `ns`: its hosts count.
    let mut imported = other;
    imported
        .labels_mut()
        .insert(keys::LABEL_HOST_INVENTORY.into(), "pool".into());
    let mut inventory: MaasInventory = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "MaasInventory",
        "metadata": {"name": "pool", "namespace": "elsewhere"},
        "spec": {"resourcePool": "default"}
    }))
    .unwrap();
    inventory.spec.claim_namespaces = Some(ClaimNamespaces::all());
    let hosts = [imported, host("own", 8, 16384)];
    let claimable = Claimable::new("ns", [&inventory]);
    let fit = smallest_fit(
        &spec_request(&t.spec.template.spec),
        hosts.iter(),
        &claimable,
    );
    assert_eq!(fit_name(&fit).as_deref(), Some("other-ns"));
}

#[test]
fn hosts_that_will_not_serve_are_left_out_busy_ones_are_not() {
    let mut unhealthy = host("unhealthy", 2, 4096);
    unhealthy
        .annotations_mut()
        .insert(keys::ANNOTATION_HOST_UNHEALTHY.into(), "true".into());
    let mut deleting = host("deleting", 2, 4096);
    deleting.metadata.deletion_timestamp = Some(at(1));
    let mut rebooting = host("rebooting", 4, 4096);
    rebooting
        .annotations_mut()
        .insert("reboot.maas.cluster.x-k8s.io/r1".into(), String::new());
    let hosts = [
        unhealthy,
        deleting,
        with_status(host("missing", 2, 4096), |s| s.missing = Some(true)),
        with_status(host("broken", 2, 4096), |s| {
            s.provisioning_state = Some(ProvisioningState::Broken);
        }),
        with_status(host("unreported", 2, 4096), |s| s.cpu_count = None),
        rebooting,
        with_status(host("deploying", 6, 4096), |s| {
            s.provisioning_state = Some(ProvisioningState::Deploying);
        }),
    ];
    let t = template(&json!({}));
    assert_eq!(fit_name(&fit_of(&t, &hosts)).as_deref(), Some("rebooting"));
}

#[test]
fn none_fits_says_why() {
    let hosts = [
        host("small", 2, 4096),
        with_status(host("gone", 64, 4096), |s| s.missing = Some(true)),
    ];
    let t = template(&json!({"minCPU": 16}));
    let Fit::NoHost(message) = fit_of(&t, &hosts) else {
        panic!("nothing fits")
    };
    assert_eq!(
        message,
        "no MaasHost fits the template among 2: 1 missing from MAAS; 1 below minCPU 16"
    );
    let Fit::NoHost(message) = fit_of(&t, &[]) else {
        panic!("nothing fits")
    };
    assert!(
        message.starts_with("no MaasHost this namespace may claim"),
        "{message}"
    );
}

#[test]
fn maas_architectures_map_to_kubernetes_ones() {
    for (maas, kubernetes) in [
        ("amd64/generic", Some("amd64")),
        ("amd64/hwe-22.04", Some("amd64")),
        ("arm64/generic", Some("arm64")),
        ("arm64/xgene-uboot", Some("arm64")),
        ("armhf/generic", Some("arm")),
        ("i386/generic", Some("386")),
        ("ppc64el/generic", Some("ppc64le")),
        ("s390x/generic", Some("s390x")),
        ("riscv64/generic", Some("riscv64")),
        ("AMD64", Some("amd64")),
        ("", None),
        ("sparc/generic", None),
    ] {
        assert_eq!(kubernetes_arch(maas), kubernetes, "{maas}");
    }
    let unknown = with_status(host("h", 2, 4096), |s| s.architecture = None);
    assert_eq!(
        node_info(&unknown),
        TemplateNodeInfo {
            architecture: None,
            operating_system: Some("linux".into())
        }
    );
}

#[test]
fn quantities_take_their_canonical_binary_form() {
    let q = |v, s| binary_quantity(v, s).0;
    assert_eq!(q(16384, MI), "16Gi");
    assert_eq!(q(1536, MI), "1536Mi");
    assert_eq!(q(1_048_576, MI), "1Ti");
    assert_eq!(q(500, GI), "500Gi");
    assert_eq!(q(2048, GI), "2Ti");
    assert_eq!(q(0, MI), "0Mi");
    // Storage MAAS does not report is left out, not written as zero.
    let no_disk = with_status(host("h", 2, 1536), |s| s.storage_gib = None);
    let capacity = capacity(&no_disk);
    assert_eq!(
        capacity.keys().map(String::as_str).collect::<Vec<_>>(),
        ["cpu", "memory"]
    );
    assert_eq!(summary(&capacity), "cpu=2, memory=1536Mi");
}

#[test]
fn the_status_is_written_once_and_follows_the_inventory() {
    let hosts = [host("mid", 8, 16384), host("big", 32, 131_072)];
    let mut t = template(&json!({}));
    let fit = fit_of(&t, &hosts);
    let first = status_change(&t, &fit, &at(100)).expect("a first status");
    assert_eq!(
        first.capacity.as_ref().map(summary).as_deref(),
        Some("cpu=8, memory=16Gi, ephemeral-storage=500Gi")
    );
    let condition = &first.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("CapacityKnown", "True")
    );
    assert_eq!(condition.reason, "SmallestFittingHost");
    assert_eq!(
        condition.message,
        "from MaasHost ns/mid (cpu=8, memory=16Gi, ephemeral-storage=500Gi)"
    );
    assert_eq!(condition.observed_generation, Some(1));
    t.status = Some(first);
    // Nothing changed: nothing to write, whatever the time.
    assert_eq!(status_change(&t, &fit_of(&t, &hosts), &at(200)), None);
    // Another writer's condition is neither a change nor applied back.
    let mut foreign = t.clone();
    if let Some(s) = foreign.status.as_mut() {
        let mut other = s.conditions.clone().unwrap()[0].clone();
        other.type_ = "Other".into();
        s.conditions.as_mut().unwrap().push(other);
    }
    assert_eq!(
        status_change(&foreign, &fit_of(&foreign, &hosts), &at(200)),
        None
    );

    // The mid host goes: the big one's shape, the condition keeps its transition time.
    let bigger_only = [host("big", 32, 131_072)];
    let next = status_change(&t, &fit_of(&t, &bigger_only), &at(300)).expect("a change");
    assert_eq!(
        next.capacity.as_ref().unwrap()["cpu"],
        Quantity("32".into())
    );
    assert_eq!(
        next.conditions.as_ref().unwrap()[0].last_transition_time,
        at(100)
    );
    t.status = Some(next);

    // Nothing fits: capacity and nodeInfo go, the condition says why.
    let none = status_change(&t, &fit_of(&t, &[]), &at(400)).expect("a change");
    assert_eq!(
        (none.capacity.as_ref(), none.node_info.as_ref()),
        (None, None)
    );
    let condition = &none.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "NoHostFits")
    );
    assert_eq!(condition.last_transition_time, at(400));
    t.status = Some(none);
    assert_eq!(status_change(&t, &fit_of(&t, &[]), &at(500)), None);
}
