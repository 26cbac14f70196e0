//! A herd: 20 machines of one Cluster turn unhealthy at once (a rack went down) and their 20
//! MaasRemediations are created together, against a real API server that is also the workload
//! cluster, with a fake gateway and kubelets for every host. Every one is served: each host
//! gets exactly one power-off and one power-on, each Node is restored, each remediation ends
//! `Ready=True Remediated`, and while they are in progress each status says it is on attempt 1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use capmaas_api::conditions::reasons::{WAITING_FOR_NODE, WAITING_FOR_POWER_OFF};
use capmaas_api::remediation::RemediationPhase;
use capmaas_api::{MaasHost, MaasRemediation};
use capmaas_testenv::{TestEnv, eventually};
use common::*;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

const N: usize = 20;
const RETRY_LIMIT: i32 = 2;

async fn list<K>(client: &kube::Client, ns: &str) -> Vec<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

/// Waits until there are [`N`] remediations and `check` holds for each; returns them.
async fn all_remediations(
    client: &kube::Client,
    ns: &str,
    what: &str,
    secs: u64,
    check: impl Fn(&MaasRemediation) -> bool,
) -> Vec<MaasRemediation> {
    eventually(what, Duration::from_secs(secs), || async {
        let items = list::<MaasRemediation>(client, ns).await;
        (items.len() == N && items.iter().all(&check)).then_some(items)
    })
    .await
}

/// Waits until [`N`] hosts have (`true`) or lack (`false`) a reboot request.
async fn all_hosts_requested(client: &kube::Client, ns: &str, wanted: bool) {
    let what = if wanted {
        "a reboot request on every host"
    } else {
        "every reboot request withdrawn"
    };
    eventually(what, Duration::from_secs(30), || async {
        let hosts = list::<MaasHost>(client, ns).await;
        (hosts.len() == N && hosts.iter().all(|h| requested(h) == wanted)).then_some(())
    })
    .await;
}

fn in_progress(r: &MaasRemediation, reason: &str) -> bool {
    condition(r, "RemediationInProgress").is_some_and(|c| c.status == "True" && c.reason == reason)
}

fn remediated(r: &MaasRemediation) -> bool {
    condition(r, "Ready").is_some_and(|c| c.status == "True" && c.reason == "Remediated")
}

/// The status of remediation `m<i>` says it is in `phase` of attempt 1 of [`RETRY_LIMIT`] on
/// host `h<i>`.
fn assert_on_attempt_one(r: &MaasRemediation, phase: RemediationPhase, reason: &str) {
    let name = r.name_any();
    let status = r.status.as_ref().unwrap();
    assert_eq!(status.retry_count, Some(1), "{name}: retryCount");
    assert_eq!(status.phase, Some(phase), "{name}: phase");
    assert!(status.last_remediated.is_some(), "{name}: lastRemediated");
    let progress = condition(r, "RemediationInProgress").unwrap();
    assert_eq!(
        (progress.status.as_str(), progress.reason.as_str()),
        ("True", reason),
        "{name}"
    );
    let host = format!("MaasHost h{} ", &name[1..]);
    assert!(
        progress
            .message
            .starts_with(&format!("attempt 1 of {RETRY_LIMIT}: "))
            && progress.message.contains(&host),
        "{name}: {}",
        progress.message
    );
}

#[tokio::test]
async fn twenty_unhealthy_at_once_are_all_served() {
    let env = TestEnv::without_controller_manager().await.unwrap();
    let client = env.client();
    let ns = env.create_namespace("rem-herd").await.unwrap();
    let herd = create_herd(&env, &ns, N).await;
    let _controller = start_controller(&env).await;
    let gateway = start_herd_gateway(&client, &herd, Duration::ZERO);
    gateway.hold_off.store(true, Ordering::SeqCst);
    create_herd_remediations(&client, &herd, RETRY_LIMIT, 600).await;

    // Attempt 1 has begun for every one: request on the host, server still on, so no Node
    // fenced yet (the fence waits for MAAS to report the server off).
    let started = all_remediations(&client, &ns, "every remediation on attempt 1", 30, |r| {
        in_progress(r, WAITING_FOR_POWER_OFF)
    })
    .await;
    for r in &started {
        assert_on_attempt_one(r, RemediationPhase::Running, WAITING_FOR_POWER_OFF);
    }
    all_hosts_requested(&client, &ns, true).await;
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..N {
        let node = nodes.get(&herd.node(i)).await.unwrap();
        assert!(
            !has_out_of_service(&node),
            "{} fenced while on",
            herd.node(i)
        );
    }

    // Every server off and held off: each remediation waits for its Node, still on attempt 1.
    gateway.hold_on.store(true, Ordering::SeqCst);
    gateway.hold_off.store(false, Ordering::SeqCst);
    let waiting = all_remediations(&client, &ns, "every server off", 30, |r| {
        in_progress(r, WAITING_FOR_NODE)
    })
    .await;
    for r in &waiting {
        assert_on_attempt_one(r, RemediationPhase::Waiting, WAITING_FOR_NODE);
    }
    all_hosts_requested(&client, &ns, false).await;

    // Back on: every Node back, every remediation Remediated after that one attempt.
    gateway.hold_on.store(false, Ordering::SeqCst);
    let done = all_remediations(&client, &ns, "every remediation Ready", 60, remediated).await;
    for r in &done {
        let name = r.name_any();
        assert_eq!(r.status.as_ref().unwrap().retry_count, Some(1), "{name}");
        let progress = condition(r, "RemediationInProgress").unwrap();
        assert_eq!(
            (progress.status.as_str(), progress.reason.as_str()),
            ("False", "Remediated"),
            "{name}"
        );
        assert!(
            progress
                .message
                .ends_with(&format!("after attempt 1 of {RETRY_LIMIT}")),
            "{name}: {}",
            progress.message
        );
    }

    // Settled: nothing more happens while CAPI has not deleted the objects.
    tokio::time::sleep(Duration::from_secs(2)).await;
    {
        let counts = gateway.counts();
        for i in 0..N {
            let host = herd_host(i);
            let cycle = (
                counts.offs.get(&host).copied().unwrap_or(0),
                counts.ons.get(&host).copied().unwrap_or(0),
            );
            assert_eq!(cycle, (1, 1), "{host}: exactly one power cycle");
        }
        assert!(
            counts.fenced_before_off.is_empty(),
            "fenced while the server still ran: {:?}",
            counts.fenced_before_off
        );
        let mut fenced_while_off = counts.fenced_while_off.clone();
        fenced_while_off.sort();
        fenced_while_off.dedup();
        assert_eq!(
            fenced_while_off.len(),
            N,
            "every Node fenced while its server was off"
        );
    }
    for i in 0..N {
        let name = herd.node(i);
        let node = nodes.get(&name).await.unwrap();
        assert!(!has_out_of_service(&node), "{name}: fence removed");
        assert_eq!(
            node.labels().get("team").map(String::as_str),
            Some("blue"),
            "{name}"
        );
        assert_eq!(
            node.annotations().get("note").map(String::as_str),
            Some("keep me"),
            "{name}"
        );
        assert!(
            !node
                .annotations()
                .contains_key("remediation.maas.cluster.x-k8s.io/fenced-by"),
            "{name}"
        );
    }
    for r in list::<MaasRemediation>(&client, &ns).await {
        assert_eq!(r.status.unwrap().retry_count, Some(1), "no second attempt");
    }
    assert_eq!(events(&client, &ns, "RemediationStarted").await.len(), N);
    assert_eq!(events(&client, &ns, "Remediated").await.len(), N);
}
