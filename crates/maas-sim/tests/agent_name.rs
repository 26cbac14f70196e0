//! `agent_name` as MAAS keeps it: `Node.agent_name` is a `CharField(max_length=255)` checked
//! when the allocation saves the machine (400, nothing changes); the list filter matches any of
//! the values given, exactly; the machine object never shows it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestSim, count, start_instant, status_text};
use maas_sim::NodeStatus;
use reqwest::Method;
use serde_json::{Value, json};

/// The exact body MAAS answers an `agent_name` of `n` characters with (`n` > 255).
fn too_long(n: usize) -> Value {
    json!({
        "agent_name": [format!("Ensure this value has at most 255 characters (it has {n}).")]
    })
}

/// Asserts a 400 with a JSON body equal to `want`.
async fn expect_json_400(resp: reqwest::Response, want: &Value) {
    let status = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    let body = resp.text().await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), *want);
}

/// The system ids `GET machines/` lists for `query`, sorted.
async fn listed(t: &TestSim, query: &[(&str, &str)]) -> Vec<String> {
    let v = t.json(Method::GET, "machines/", query).await;
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["system_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// Asserts that no machine was allocated: all Ready, unowned, no agent name, no status change.
fn assert_untouched(t: &TestSim) {
    for m in t.sim.state().machines() {
        assert_eq!(
            (m.status, m.owner.as_deref(), m.agent_name.as_str()),
            (NodeStatus::Ready, None, ""),
            "{}",
            m.system_id
        );
    }
    assert!(t.sim.state().status_history().values().all(Vec::is_empty));
}

#[tokio::test]
async fn allocate_refuses_an_agent_name_over_255_characters_and_changes_nothing() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let long = "a".repeat(256);
    let resp = t
        .post("machines/?op=allocate", &[("agent_name", &long)])
        .await;
    expect_json_400(resp, &too_long(256)).await;
    // The length is in characters, not bytes: 256 two-byte characters are "256".
    let wide = "é".repeat(256);
    let resp = t
        .post("machines/?op=allocate", &[("agent_name", &wide)])
        .await;
    expect_json_400(resp, &too_long(256)).await;
    // With a system_id too: the machine is found, then refused as it saves.
    let id = t.first_id();
    let resp = t
        .post(
            "machines/?op=allocate",
            &[("system_id", &id), ("agent_name", &"b".repeat(300))],
        )
        .await;
    expect_json_400(resp, &too_long(300)).await;
    assert_untouched(&t);
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 0);
    assert_eq!(count(&state.call_counts(), "machines.allocate"), 3);

    // MAAS checks the value only when it saves an allocation: a dry run answers the machine
    // it would take, and no machine available is still the 409.
    let m = t
        .post_json(
            "machines/?op=allocate",
            &[("agent_name", &long), ("dry_run", "true")],
        )
        .await;
    assert_eq!(m["status_name"], "Ready");
    assert_untouched(&t);
    let (s, body) = status_text(
        t.post(
            "machines/?op=allocate",
            &[("cpu_count", "999"), ("agent_name", &long)],
        )
        .await,
    )
    .await;
    assert_eq!(s, 409, "{body}");
    assert_untouched(&t);
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 0);
}

#[tokio::test]
async fn an_agent_name_of_255_characters_is_allocated_and_listed_by_exact_match() {
    let t = start_instant(3).await;
    let exact = "x".repeat(255);
    let id = t.allocate(&[("agent_name", &exact)]).await;
    assert_eq!(
        t.status_and_agent(&id),
        (NodeStatus::Allocated, exact.clone())
    );
    assert_eq!(listed(&t, &[("agent_name", &exact)]).await, [id.as_str()]);
    // Exact: not a prefix, not a longer value, no trimming, case counts.
    for other in [
        "x".repeat(254),
        "x".repeat(256),
        format!(" {exact}"),
        format!("{exact} "),
        "X".repeat(255),
    ] {
        assert!(
            listed(&t, &[("agent_name", &other)]).await.is_empty(),
            "{other:?}"
        );
    }
    // 255 two-byte characters (510 bytes) are 255 characters: accepted.
    let wide = "é".repeat(255);
    let second = t.allocate(&[("agent_name", &wide)]).await;
    assert_eq!(listed(&t, &[("agent_name", &wide)]).await, [second]);
    assert_eq!(
        count(&t.sim.state().applied_counts(), "machines.allocate"),
        2
    );
}

#[tokio::test]
async fn deploy_of_a_ready_machine_refuses_an_agent_name_over_255_characters() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = t.first_id();
    let long = "d".repeat(256);
    let resp = t
        .machine_post(&id, "deploy", &[("agent_name", &long)])
        .await;
    expect_json_400(resp, &too_long(256)).await;
    // MAAS allocates a Ready machine before it looks at the image: the agent_name error wins.
    let resp = t
        .machine_post(
            &id,
            "deploy",
            &[("agent_name", &long), ("distro_series", "plan9")],
        )
        .await;
    expect_json_400(resp, &too_long(256)).await;
    assert_untouched(&t);
    let view = state.machine(&id).unwrap();
    assert_eq!((view.power_on_count, view.osystem.as_str()), (0, ""));
    assert_eq!(count(&state.applied_counts(), "machine.deploy"), 0);

    // 255 characters: allocated and deployed in the one call.
    let exact = "d".repeat(255);
    let m = t.machine_op(&id, "deploy", &[("agent_name", &exact)]).await;
    assert_eq!(m["owner"], "admin");
    assert_eq!(t.status_and_agent(&id), (NodeStatus::Deployed, exact));

    // An Allocated machine is not allocated again: deploy ignores agent_name, whatever its
    // length, and the allocation keeps its own.
    let other = t.allocate(&[("agent_name", "mine")]).await;
    t.machine_op(&other, "deploy", &[("agent_name", &long)])
        .await;
    assert_eq!(
        t.status_and_agent(&other),
        (NodeStatus::Deployed, "mine".to_owned())
    );
}

#[tokio::test]
async fn the_agent_name_filter_matches_any_value_exactly_and_is_never_displayed() {
    let t = start_instant(4).await;
    let a = t.allocate(&[("agent_name", "capi-a")]).await;
    let b = t.allocate(&[("agent_name", "capi-b")]).await;
    let c = t.allocate(&[("agent_name", "capi-c")]).await;
    let free = t.first_in(NodeStatus::Ready);
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };

    // Repeated: any of the values (`agent_name__in`).
    assert_eq!(
        listed(&t, &[("agent_name", "capi-a"), ("agent_name", "capi-b")]).await,
        sorted(vec![a.clone(), b.clone()])
    );
    assert_eq!(
        listed(&t, &[("agent_name", "capi-c"), ("agent_name", "nobody")]).await,
        [c.as_str()]
    );
    // Exact: no substring, prefix or case folding.
    for other in ["capi", "capi-", "CAPI-A", "api-a"] {
        assert!(
            listed(&t, &[("agent_name", other)]).await.is_empty(),
            "{other}"
        );
    }
    // The `not_` form excludes any of its values.
    assert_eq!(
        listed(
            &t,
            &[("not_agent_name", "capi-a"), ("not_agent_name", "capi-b")]
        )
        .await,
        sorted(vec![c.clone(), free.clone()])
    );
    // An empty value is a value: the empty agent name of the unallocated machine.
    assert_eq!(listed(&t, &[("agent_name", "")]).await, [free.as_str()]);

    // The machine object has no agent_name (not in MAAS's DISPLAYED_MACHINE_FIELDS), in
    // every answer that shows a machine.
    let allocated = t
        .post_json("machines/?op=allocate", &[("agent_name", "capi-d")])
        .await;
    let mut shown = vec![allocated, t.machine_read(&a, None).await];
    shown.extend(t.get_json("machines/").await.as_array().unwrap().clone());
    shown.extend(
        t.get_json("machines/?op=list_allocated")
            .await
            .as_array()
            .unwrap()
            .clone(),
    );
    let deployed = t.machine_op(&b, "deploy", &[]).await;
    shown.push(deployed);
    for m in &shown {
        assert!(m.get("system_id").is_some());
        assert!(m.get("agent_name").is_none(), "{m}");
    }
}
