//! Pre-effect timeouts: the call is not carried out, the connection is held, then closed
//! without an answer; the counts say what happened.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{count, impatient, start_instant, status_text, unanswered};
use maas_sim::{FaultConfig, LostAnswer, NodeStatus, TimeoutFault};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn a_timed_out_call_takes_no_effect_and_gets_no_answer() {
    let t = start_instant(2).await;
    let id = t.first_id();
    let state = t.sim.state();
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
    let started = Instant::now();
    let err = unanswered(
        t.signed(&impatient(200), Method::POST, "machines/?op=allocate")
            .form(&[("system_id", id.as_str()), ("agent_name", "late")]),
    )
    .await;
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(700));
    assert_eq!(
        t.status_and_agent(&id),
        (NodeStatus::Ready, String::new()),
        "nothing was allocated"
    );
    assert_eq!(count(&state.call_counts(), "machines.allocate"), 1);
    assert_eq!(count(&state.timeout_counts(), "machines.allocate"), 1);
    assert!(state.applied_counts().is_empty());
    assert!(state.lost_answer_counts().is_empty());

    // A patient client waits `hold_ms`, then sees the connection closed without an answer.
    let started = Instant::now();
    let err = unanswered(t.signed(&t.client, Method::POST, "machines/?op=allocate")).await;
    assert!(!err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert!(t.all_in(NodeStatus::Ready));
    // Other operations are answered.
    let (status, _) = status_text(t.get(&format!("machines/{id}/"), &[]).await).await;
    assert_eq!(status, 200);
    assert_eq!(count(&state.timeout_counts(), "machines.allocate"), 2);
}

#[tokio::test]
async fn injected_errors_win_and_the_control_api_reports_timeouts() {
    let t = start_instant(1).await;
    let config = json!({
        "ops": [{"op": "machines.allocate", "error_rate": 1.0, "status": 502}],
        "timeouts": [{"op": "*", "hold_ms": 0}]
    });
    let resp = t.control_put_json("faults", &config).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(t.post("machines/?op=allocate", &[]).await.status(), 502);
    // hold 0: the connection is dropped at once.
    let id = t.first_id();
    let dropped = t
        .signed(&t.client, Method::GET, &format!("machines/{id}/"))
        .send()
        .await;
    assert!(dropped.is_err());
    let stats = t.control_json("stats").await;
    assert_eq!(stats["injected_errors"]["machines.allocate"], 1);
    assert_eq!(stats["timeouts"]["machine.read"], 1);
    assert_eq!(stats["timeouts"].get("machines.allocate"), None);
    let bad = json!({"timeouts": [{"op": "*", "rate": 2.0}]});
    let resp = t.control_put_json("faults", &bad).await;
    assert_eq!(resp.status(), 400);
    t.control_send(Method::POST, "reset-stats").await;
    assert!(t.sim.state().timeout_counts().is_empty());
    assert!(t.sim.state().injected_error_counts().is_empty());
}
