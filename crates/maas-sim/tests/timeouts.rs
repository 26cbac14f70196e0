//! Pre-effect timeouts: the call is not carried out, the connection is held, then closed
//! without an answer; the counts say what happened.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{count, start_instant, status_text};
use maas_sim::{FaultConfig, LostAnswer, NodeStatus, TimeoutFault};
use serde_json::{Value, json};

#[tokio::test]
async fn a_timed_out_call_takes_no_effect_and_gets_no_answer() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = state.machines()[0].system_id.clone();
    state
        .set_faults(FaultConfig {
            timeouts: vec![TimeoutFault::new(
                "machines.allocate",
                Duration::from_millis(800),
            )],
            // A lost answer on the same op never fires: nothing took effect.
            lost_answers: vec![LostAnswer::error("machines.allocate", 500)],
            ..FaultConfig::default()
        })
        .unwrap();
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = impatient
        .post(t.api("machines/?op=allocate"))
        .header("Authorization", common::plaintext_header(&t.key))
        .form(&[("system_id", id.as_str()), ("agent_name", "late")])
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(700));
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.agent_name.as_str()),
        (NodeStatus::Ready, ""),
        "nothing was allocated"
    );
    assert_eq!(count(&state.call_counts(), "machines.allocate"), 1);
    assert_eq!(count(&state.timeout_counts(), "machines.allocate"), 1);
    assert!(state.applied_counts().is_empty());
    assert!(state.lost_answer_counts().is_empty());

    // A patient client waits `hold_ms`, then sees the connection closed without an answer.
    let started = Instant::now();
    let err = t
        .client
        .post(t.api("machines/?op=allocate"))
        .header("Authorization", common::plaintext_header(&t.key))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert!(
        state
            .machines()
            .iter()
            .all(|m| m.status == NodeStatus::Ready)
    );
    // Other operations are answered.
    let (status, _) = status_text(t.get(&format!("machines/{id}/"), &[]).await).await;
    assert_eq!(status, 200);
    assert_eq!(count(&state.timeout_counts(), "machines.allocate"), 2);
}

#[tokio::test]
async fn injected_errors_win_and_the_control_api_reports_timeouts() {
    let t = start_instant(1).await;
    let faults = format!("{}/_sim/faults", t.root());
    let config = json!({
        "ops": [{"op": "machines.allocate", "error_rate": 1.0, "status": 502}],
        "timeouts": [{"op": "*", "hold_ms": 0}]
    });
    let resp = t.client.put(&faults).json(&config).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(t.post("machines/?op=allocate", &[]).await.status(), 502);
    // hold 0: the connection is dropped at once.
    let id = t.sim.state().machines()[0].system_id.clone();
    let dropped = t
        .client
        .get(t.api(&format!("machines/{id}/")))
        .header("Authorization", common::plaintext_header(&t.key))
        .send()
        .await;
    assert!(dropped.is_err());
    let stats: Value = t
        .client
        .get(format!("{}/_sim/stats", t.root()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["injected_errors"]["machines.allocate"], 1);
    assert_eq!(stats["timeouts"]["machine.read"], 1);
    assert_eq!(stats["timeouts"].get("machines.allocate"), None);
    let bad = json!({"timeouts": [{"op": "*", "rate": 2.0}]});
    let resp = t.client.put(&faults).json(&bad).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    t.client
        .post(format!("{}/_sim/reset-stats", t.root()))
        .send()
        .await
        .unwrap();
    assert!(t.sim.state().timeout_counts().is_empty());
    assert!(t.sim.state().injected_error_counts().is_empty());
}
