//! VMs composed on an LXD VM host for `MaasHost.spec.vms`: composed exactly once (also after a
//! lost answer and a SIGKILL between the compose and its record), imported as a MaasHost with
//! the composition's labels, deleted in MAAS when the entry goes before anyone claimed the VM,
//! a refusal reported once without a compose loop, and the whole life of a claimed VM. Real
//! API server, MAAS simulator, gateway in-process (the binary for the SIGKILL).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::host::MaasHost;
use capmaas_api::keys;
use capmaas_api::lxd::ComposedVm;
use kube::api::{Api, Patch, PatchParams};
use maas_sim::{LostAnswer, RunningSim, SimHandle, VmHostEventKind};
use support::*;

const COMPOSE: &str = "vm-host.compose";
/// The field manager machine-controller's `spec.vms` entries are written with in these tests.
const VMS_MANAGER: &str = "test-machine-controller-vms";

/// A VM host: the first of two imported hosts, deployed with `registerVMHost` until its
/// MaasHost shows `status.vmHost`. Returns the host's name and its MAAS VM host id.
async fn vm_host(client: &kube::Client, ns: &str) -> (String, i64) {
    let ids = import_hosts(client, ns, 2).await;
    let lxd = ids[0].clone();
    request_deploy_adjusted(client, ns, &lxd, "lxd0", |p| {
        p.register_vm_host = Some(true);
    })
    .await;
    let id = eventually("status.vmHost", Duration::from_secs(30), || async {
        host(client, ns, &lxd)
            .await
            .status
            .and_then(|s| s.vm_host)
            .map(|v| v.id)
    })
    .await;
    (lxd, id)
}

/// Writes `spec.vms` of the VM host `lxd` as machine-controller would: one entry per
/// `(hostname, cores)`, for MaasMachine `m-<hostname>`; an empty list withdraws them all.
async fn set_vms(client: &kube::Client, ns: &str, lxd: &str, vms: &[(&str, i32)]) {
    let entries: Vec<serde_json::Value> = vms
        .iter()
        .map(|(hostname, cores)| {
            serde_json::json!({
                "hostname": hostname, "cores": cores, "memoryMiB": 2048, "diskGB": 10,
                "consumer": {
                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "MaasMachine", "name": format!("m-{hostname}"),
                    "uid": format!("uid-{hostname}"),
                },
            })
        })
        .collect();
    let patch = serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasHost",
        "spec": { "vms": entries },
    });
    Api::<MaasHost>::namespaced(client.clone(), ns)
        .patch(
            lxd,
            &PatchParams::apply(VMS_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .unwrap();
}

fn records(h: &MaasHost) -> Vec<ComposedVm> {
    h.status
        .as_ref()
        .and_then(|s| s.composed_vms.clone())
        .unwrap_or_default()
}

/// The MaasHosts of VM `hostname`.
async fn vm_hosts_named(client: &kube::Client, ns: &str, hostname: &str) -> Vec<MaasHost> {
    hosts(client, ns)
        .await
        .into_iter()
        .filter(|h| labels(h).get(keys::LABEL_VM_HOSTNAME).map(String::as_str) == Some(hostname))
        .collect()
}

/// The MAAS machines of hostname `hostname`.
fn machines_named(state: &SimHandle, hostname: &str) -> Vec<String> {
    state
        .machines()
        .into_iter()
        .filter(|m| m.hostname == hostname)
        .map(|m| m.system_id)
        .collect()
}

fn applied(state: &SimHandle, op: &str) -> u64 {
    state.applied_counts().get(op).copied().unwrap_or(0)
}

/// Waits until VM `hostname` is recorded with its system id on `lxd` and its MaasHost exists;
/// the system id.
async fn composed(client: &kube::Client, ns: &str, lxd: &str, hostname: &str) -> String {
    eventually("the VM recorded", Duration::from_secs(30), || async {
        let recorded = records(&host(client, ns, lxd).await)
            .into_iter()
            .find(|r| r.hostname == hostname)?
            .system_id?;
        let hosts = vm_hosts_named(client, ns, hostname).await;
        (hosts.len() == 1 && hosts[0].spec.system_id == recorded).then_some(recorded)
    })
    .await
}

fn vms_composed(h: &MaasHost) -> Option<(String, String, String)> {
    let conditions = h.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == "VMsComposed")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Exactly one VM and one MaasHost of `hostname`, composed once.
async fn exactly_one(client: &kube::Client, ns: &str, state: &SimHandle, hostname: &str) {
    assert_eq!(machines_named(state, hostname).len(), 1);
    assert_eq!(vm_hosts_named(client, ns, hostname).await.len(), 1);
    assert_eq!(applied(state, COMPOSE), 1);
    let composed_events = state
        .vm_host_events()
        .into_iter()
        .filter(|e| e.kind == VmHostEventKind::Composed)
        .count();
    assert_eq!(composed_events, 1);
}

/// An API server, a simulator, the gateway in-process and a VM host.
struct Setup {
    _env: capmaas_testenv::TestEnv,
    client: kube::Client,
    ns: String,
    sim: RunningSim,
    gateway: InProcess,
    lxd: String,
    vm_host_id: i64,
}

async fn start(prefix: &str) -> Setup {
    let (env, client, ns) = api_server(prefix).await;
    let sim = instant_sim(2).await;
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let (lxd, vm_host_id) = vm_host(&client, &ns).await;
    Setup {
        _env: env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        vm_host_id,
    }
}

#[tokio::test]
async fn a_vm_entry_is_composed_once_and_imported_with_its_labels() {
    let Setup {
        _env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        vm_host_id,
    } = start("compose").await;
    let state = sim.state();
    set_vms(&client, &ns, &lxd, &[("vm-a-1a2b3", 2)]).await;
    let system_id = composed(&client, &ns, &lxd, "vm-a-1a2b3").await;
    let vm = host(&client, &ns, &system_id).await;
    let vm_labels = labels(&vm);
    assert_eq!(vm_labels[keys::LABEL_COMPOSED_ON], lxd);
    assert_eq!(vm_labels[keys::LABEL_VM_HOSTNAME], "vm-a-1a2b3");
    assert_eq!(vm_labels[keys::LABEL_HOST_INVENTORY], "inv");
    assert!(
        vm_labels.contains_key(keys::LABEL_HOST_POOL),
        "{vm_labels:?}"
    );
    let vm_host_of = eventually("status.vmHostId", Duration::from_secs(30), || async {
        host(&client, &ns, &system_id).await.status?.vm_host_id
    })
    .await;
    assert_eq!(vm_host_of, vm_host_id);
    let condition = eventually("VMsComposed", Duration::from_secs(10), || async {
        vms_composed(&host(&client, &ns, &lxd).await).filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(condition.1, "Composed");
    // A few inventory syncs later: still one of each, the labels kept, and no status write
    // on the VM host while nothing changes (the host controller and the composition each
    // keep to their own fields).
    let before = eventually("the VM host's usage", Duration::from_secs(30), || async {
        let h = host(&client, &ns, &lxd).await;
        let shown = h.status.as_ref()?.vm_host.as_ref()?;
        (shown.cores.used == 2
            && shown.machines.as_deref() == Some(std::slice::from_ref(&system_id)))
        .then_some(h)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = host(&client, &ns, &lxd).await;
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version,
        "no write while nothing changes: {}\n{}",
        serde_json::to_string_pretty(&before).unwrap(),
        serde_json::to_string_pretty(&after).unwrap()
    );
    exactly_one(&client, &ns, &state, "vm-a-1a2b3").await;
    assert_eq!(
        labels(&host(&client, &ns, &system_id).await)[keys::LABEL_COMPOSED_ON],
        lxd
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_lost_compose_answer_still_composes_once() {
    let Setup {
        _env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        ..
    } = start("composelost").await;
    let state = sim.state();
    state
        .add_lost_answer(LostAnswer::error(COMPOSE, 503).once())
        .unwrap();
    set_vms(&client, &ns, &lxd, &[("vm-lost-00001", 1)]).await;
    composed(&client, &ns, &lxd, "vm-lost-00001").await;
    assert_eq!(state.lost_answer_counts().get(COMPOSE).copied(), Some(1));
    exactly_one(&client, &ns, &state, "vm-lost-00001").await;
    gateway.stop().await;
}

#[tokio::test]
async fn sigkill_between_compose_and_record_leaves_one_vm() {
    let (env, client, ns) = api_server("composekill").await;
    let sim = instant_sim(2).await;
    let state = sim.state();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("gateway.log");
    let child = spawn_binary(&sim, &env, &ns, &log, &[]);
    let (lxd, _) = vm_host(&client, &ns).await;
    // Composed in MAAS, the answer held far longer than the test: killed before recording.
    state
        .add_lost_answer(LostAnswer::timeout(COMPOSE, Duration::from_secs(120)).once())
        .unwrap();
    set_vms(&client, &ns, &lxd, &[("vm-kill-00001", 1)]).await;
    eventually("the compose withheld", Duration::from_secs(30), || async {
        (state.lost_answer_counts().get(COMPOSE).copied() == Some(1)).then_some(())
    })
    .await;
    kill_binary(child).await;
    assert_eq!(machines_named(&state, "vm-kill-00001").len(), 1);
    assert_eq!(
        records(&host(&client, &ns, &lxd).await),
        vec![ComposedVm {
            hostname: "vm-kill-00001".into(),
            system_id: None
        }],
        "the intent was recorded before MAAS was asked"
    );
    let child = spawn_binary(&sim, &env, &ns, &log, &[]);
    composed(&client, &ns, &lxd, "vm-kill-00001").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    exactly_one(&client, &ns, &state, "vm-kill-00001").await;
    kill_binary(child).await;
}

#[tokio::test]
async fn an_entry_removed_before_the_claim_deletes_the_vm() {
    let Setup {
        _env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        ..
    } = start("composedrop").await;
    let state = sim.state();
    set_vms(&client, &ns, &lxd, &[("vm-drop-00001", 1)]).await;
    let system_id = composed(&client, &ns, &lxd, "vm-drop-00001").await;
    set_vms(&client, &ns, &lxd, &[]).await;
    eventually("the VM gone", Duration::from_secs(30), || async {
        let gone = records(&host(&client, &ns, &lxd).await).is_empty()
            && vm_hosts_named(&client, &ns, "vm-drop-00001")
                .await
                .is_empty();
        gone.then_some(())
    })
    .await;
    assert!(state.machine(&system_id).is_none());
    assert_eq!(applied(&state, "machine.delete"), 1);
    assert_eq!(applied(&state, COMPOSE), 1);
    gateway.stop().await;
}

#[tokio::test]
async fn a_refused_compose_is_reported_without_a_loop() {
    let Setup {
        _env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        ..
    } = start("composerefused").await;
    let state = sim.state();
    set_vms(&client, &ns, &lxd, &[("vm-big-00001", 1000)]).await;
    let (_, _, message) = eventually("the refusal", Duration::from_secs(30), || async {
        vms_composed(&host(&client, &ns, &lxd).await)
            .filter(|(status, reason, _)| status == "False" && reason == "ComposeRefused")
    })
    .await;
    assert!(
        message.contains("vm-big-00001") && message.contains("Unable to compose"),
        "{message}"
    );
    let before = state.call_counts().get(COMPOSE).copied().unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after = state.call_counts().get(COMPOSE).copied().unwrap_or(0);
    assert_eq!(before, after, "no compose loop");
    assert!(after <= 2, "{after}");
    assert!(machines_named(&state, "vm-big-00001").is_empty());
    // The record says what was asked for, without a system id.
    assert_eq!(
        records(&host(&client, &ns, &lxd).await),
        vec![ComposedVm {
            hostname: "vm-big-00001".into(),
            system_id: None
        }]
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_claimed_vm_is_deployed_released_and_then_forgotten() {
    let Setup {
        _env,
        client,
        ns,
        sim,
        gateway,
        lxd,
        ..
    } = start("composelife").await;
    let state = sim.state();
    set_vms(&client, &ns, &lxd, &[("vm-life-00001", 1)]).await;
    let vm = composed(&client, &ns, &lxd, "vm-life-00001").await;
    // Claimed and asked for as machine-controller does for any host.
    request_deploy_adjusted(&client, &ns, &vm, "m-vm-life", |p| p.hostname = None).await;
    eventually("deployed", Duration::from_secs(30), || async {
        (provisioning_state(&host(&client, &ns, &vm).await).as_deref() == Some("Deployed"))
            .then_some(())
    })
    .await;
    // The request withdrawn: released, and MAAS deletes the VM; its host reads missing.
    clear_provisioning(&client, &ns, &vm, "m-vm-life").await;
    eventually(
        "the VM released and gone",
        Duration::from_secs(30),
        || async {
            let h = Api::<MaasHost>::namespaced(client.clone(), &ns)
                .get_opt(&vm)
                .await
                .unwrap()?;
            (state.machine(&vm).is_none() && h.status?.missing == Some(true)).then_some(())
        },
    )
    .await;
    // Still wanted meanwhile: never composed again.
    assert_eq!(applied(&state, COMPOSE), 1);
    release_request(&client, &ns, &vm).await;
    set_vms(&client, &ns, &lxd, &[]).await;
    eventually(
        "record dropped, host deleted",
        Duration::from_secs(30),
        || async {
            let gone = records(&host(&client, &ns, &lxd).await).is_empty()
                && vm_hosts_named(&client, &ns, "vm-life-00001")
                    .await
                    .is_empty();
            gone.then_some(())
        },
    )
    .await;
    assert_eq!(applied(&state, COMPOSE), 1);
    assert_eq!(
        applied(&state, "machine.delete"),
        0,
        "MAAS deleted it itself"
    );
    gateway.stop().await;
}
