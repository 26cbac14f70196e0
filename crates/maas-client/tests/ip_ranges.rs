//! MaasIPPool with `spec.maasSubnet` → MAAS reserved IP ranges, against a real API server and
//! the MAAS simulator with the gateway in-process: created, moved on edit, deleted with the
//! pool; a range MAAS refuses is reported; a hand-made range is never touched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use capmaas_api::MaasIPPool;
use capmaas_api::conditions::MAAS_RANGES_RESERVED;
use capmaas_api::keys::FINALIZER_MAAS_IP_POOL_RANGES;
use capmaas_runtime::conditions::get_condition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use maas_sim::{IpRangeView, SubnetSpec};
use support::*;

const WAIT: Duration = Duration::from_secs(30);
const COMMENT: &str = "capmaas MaasIPPool";

fn pool(name: &str, pools: &serde_json::Value) -> MaasIPPool {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasIPPool",
        "metadata": { "name": name },
        "spec": { "pools": pools, "namePrefix": name, "maasSubnet": "10.20.0.0/16" },
    }))
    .unwrap()
}

fn ours(ranges: &[IpRangeView]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = ranges
        .iter()
        .filter(|r| r.comment.starts_with(COMMENT))
        .map(|r| (r.start_ip.to_string(), r.end_ip.to_string()))
        .collect();
    out.sort();
    out
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

async fn condition(api: &Api<MaasIPPool>, name: &str) -> Option<(String, String, String)> {
    let p = api.get(name).await.ok()?;
    let conditions = p.status.and_then(|s| s.conditions).unwrap_or_default();
    get_condition(&conditions, MAAS_RANGES_RESERVED)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test]
async fn pool_ranges_are_reserved_in_maas() {
    let (env, client, ns) = api_server("ipranges").await;
    let sim = instant_sim(1).await;
    let state = sim.state();
    let by_hand = state
        .add_ip_range(
            true,
            "10.20.50.1".parse().unwrap(),
            "10.20.50.9".parse().unwrap(),
            "the router team's",
        )
        .unwrap();
    state
        .add_subnet(&SubnetSpec {
            cidr: "10.60.0.0/24".into(),
            dynamic_ranges: vec!["10.60.0.100-10.60.0.200".into()],
            ..SubnetSpec::default()
        })
        .unwrap();
    let gateway = start_in_process(&env, &sim, &ns, &[]).await;
    let api: Api<MaasIPPool> = Api::namespaced(client.clone(), &ns);

    // Created: a start-end range and a subnet entry (its usable addresses).
    api.create(
        &PostParams::default(),
        &pool(
            "prod",
            &serde_json::json!([
                {"start": "10.20.1.10", "end": "10.20.1.50"},
                {"subnet": "10.20.2.0/24"}
            ]),
        ),
    )
    .await
    .unwrap();
    eventually("ranges reserved", WAIT, || async {
        (ours(&state.ip_ranges())
            == [
                pair("10.20.1.10", "10.20.1.50"),
                pair("10.20.2.1", "10.20.2.254"),
            ])
        .then_some(())
    })
    .await;
    let ranges = state.ip_ranges();
    let mine = ranges
        .iter()
        .find(|r| r.start_ip.to_string() == "10.20.1.10")
        .unwrap();
    assert_eq!(mine.comment, format!("capmaas MaasIPPool {ns}/prod"));
    assert_eq!(
        (mine.kind.as_str(), mine.subnet.as_str()),
        ("reserved", "10.20.0.0/16")
    );
    let (status, _, message) = eventually("condition True", WAIT, || async {
        condition(&api, "prod").await.filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(status, "True");
    assert!(message.contains("10.20.1.10-10.20.1.50"), "{message}");
    let p = api.get("prod").await.unwrap();
    assert!(
        p.finalizers()
            .iter()
            .any(|f| f == FINALIZER_MAAS_IP_POOL_RANGES)
    );

    // An edit moves the range (same MAAS object), drops the subnet entry.
    let first_id = mine.id;
    let patch =
        serde_json::json!({"spec": {"pools": [{"start": "10.20.3.1", "end": "10.20.3.99"}]}});
    api.patch("prod", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("range moved", WAIT, || async {
        (ours(&state.ip_ranges()) == [pair("10.20.3.1", "10.20.3.99")]).then_some(())
    })
    .await;
    assert!(
        state.ip_ranges().iter().any(|r| r.id == first_id),
        "updated in place"
    );

    // A range over a dynamic range: MAAS refuses it; the pool says so.
    api.create(
        &PostParams::default(),
        &serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasIPPool",
            "metadata": { "name": "clash" },
            "spec": { "pools": [{"start": "10.60.0.150", "end": "10.60.0.160"}], "namePrefix": "clash",
                      "maasSubnet": "10.60.0.0/24" },
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let (_, reason, message) = eventually("refusal reported", WAIT, || async {
        condition(&api, "clash").await.filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "MAASRangeRefused");
    assert!(
        message.contains("conflicts with an existing range"),
        "{message}"
    );

    // Deleted with the pools; the hand-made range stays untouched throughout.
    api.delete("prod", &DeleteParams::default()).await.unwrap();
    api.delete("clash", &DeleteParams::default()).await.unwrap();
    eventually("pools gone", WAIT, || async {
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    let left = state.ip_ranges();
    assert!(ours(&left).is_empty(), "{left:?}");
    let hand = left.iter().find(|r| r.id == by_hand).unwrap();
    assert_eq!(
        (
            hand.start_ip.to_string(),
            hand.end_ip.to_string(),
            hand.comment.as_str()
        ),
        (
            "10.20.50.1".into(),
            "10.20.50.9".into(),
            "the router team's"
        )
    );
    assert_eq!(left.len(), 2, "the hand-made and the dynamic range");
    gateway.stop().await;
}
