//! Lost answers ("MAAS did it but the answer was lost"): the operation takes effect, then the
//! answer is an error or never comes; the applied and lost counts say what really happened.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{count, impatient, one_deployed, op_fault, start_instant, status_text, unanswered};
use maas_sim::{FaultConfig, LostAnswer, NodeStatus, PowerState};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn error_mode_applies_then_answers_the_error() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let id = t.first_id();
    state
        .add_lost_answer(LostAnswer::error("machines.allocate", 502).times(2))
        .unwrap();
    let mine = [("system_id", id.as_str()), ("agent_name", "lost")];
    t.expect_post("machines/?op=allocate", &mine, (502, "Bad Gateway"))
        .await;
    assert_eq!(
        t.status_and_agent(&id),
        (NodeStatus::Allocated, "lost".to_owned()),
        "the allocation happened although the answer was an error"
    );
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 1);
    assert_eq!(count(&state.lost_answer_counts(), "machines.allocate"), 1);

    // A call MAAS refuses gets its real answer and does not use the fault up.
    let resp = t.post("machines/?op=allocate", &mine).await;
    assert_eq!(resp.status(), 409);
    assert_eq!(state.faults().lost_answers[0].times, Some(1));
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 1);
    assert_eq!(count(&state.call_counts(), "machines.allocate"), 2);

    // The second (last) lost answer, then answers arrive again.
    assert_eq!(t.post("machines/?op=allocate", &[]).await.status(), 502);
    assert_eq!(state.faults().lost_answers[0].times, Some(0));
    assert_eq!(t.post("machines/?op=allocate", &[]).await.status(), 200);
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 3);
    assert_eq!(count(&state.lost_answer_counts(), "machines.allocate"), 2);
}

#[tokio::test]
async fn timeout_mode_withholds_the_answer() {
    let t = start_instant(2).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    state
        .add_lost_answer(LostAnswer::timeout("machine.deploy", Duration::from_millis(800)).once())
        .unwrap();
    let started = Instant::now();
    let err = unanswered(
        t.signed_op(&impatient(200), &id, "deploy")
            .form(&[("distro_series", "jammy")]),
    )
    .await;
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(700));
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.power_on_count),
        (NodeStatus::Deployed, 1),
        "deployed although the client never got an answer"
    );
    assert_eq!(count(&state.applied_counts(), "machine.deploy"), 1);
    assert_eq!(count(&state.lost_answer_counts(), "machine.deploy"), 1);

    // A patient client waits `hold_ms`, then sees the connection closed without an answer.
    let other = t.allocate(&[]).await;
    state
        .add_lost_answer(LostAnswer::timeout("machine.deploy", Duration::from_millis(300)).once())
        .unwrap();
    let started = Instant::now();
    let err = unanswered(t.signed_op(&t.client, &other, "deploy")).await;
    assert!(!err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(state.machine(&other).unwrap().status, NodeStatus::Deployed);
    // The next call is answered normally.
    let (status, _) = status_text(t.get(&format!("machines/{other}/"), &[]).await).await;
    assert_eq!(status, 200);
    assert_eq!(count(&state.applied_counts(), "machine.deploy"), 2);
}

#[tokio::test]
async fn hold_zero_drops_the_connection_at_once() {
    let (t, id) = one_deployed().await;
    let state = t.sim.state();
    state
        .add_lost_answer(LostAnswer::timeout("machine.release", Duration::ZERO).once())
        .unwrap();
    let err = unanswered(t.signed_op(&t.client, &id, "release")).await;
    assert!(!err.is_timeout(), "{err:?}");
    assert_eq!(state.machine(&id).unwrap().status, NodeStatus::Ready);
    assert_eq!(state.machine(&id).unwrap().releases.len(), 1);
}

#[tokio::test]
async fn noop_repeats_and_reads_are_not_applied() {
    let (t, id) = one_deployed().await;
    let state = t.sim.state();
    state
        .add_lost_answer(LostAnswer::error("machine.release", 503).once())
        .unwrap();
    let release = format!("machines/{id}/?op=release");
    assert_eq!(t.post(&release, &[]).await.status(), 503);
    // The client retries the release: a no-op on a Ready machine, answered 200.
    assert_eq!(t.post(&release, &[]).await.status(), 200);
    assert_eq!(t.get(&format!("machines/{id}/"), &[]).await.status(), 200);
    let (calls, applied) = (state.call_counts(), state.applied_counts());
    assert_eq!(count(&calls, "machine.release"), 2);
    assert_eq!(count(&applied, "machine.release"), 1);
    assert_eq!(count(&applied, "machine.read"), 0);
    assert_eq!(state.machine(&id).unwrap().releases.len(), 1);
}

#[tokio::test]
async fn power_on_lost_answer_powers_on_once() {
    let (t, id) = one_deployed().await;
    let state = t.sim.state();
    state.set_power(&id, PowerState::Off).unwrap();
    state
        .add_lost_answer(LostAnswer::error("machine.power_on", 500).once())
        .unwrap();
    t.expect_post(
        &format!("machines/{id}/?op=power_on"),
        &[],
        (500, "Internal server error (simulated fault)."),
    )
    .await;
    let view = state.machine(&id).unwrap();
    assert_eq!((view.power_state, view.power_on_count), (PowerState::On, 2));
    assert_eq!(count(&state.applied_counts(), "machine.power_on"), 1);
}

#[tokio::test]
async fn faults_before_the_operation_win() {
    let t = start_instant(1).await;
    let state = t.sim.state();
    state
        .set_faults(FaultConfig {
            ops: vec![op_fault("machines.allocate", 1.0, 503, 0, None)],
            lost_answers: vec![LostAnswer::error("machines.allocate", 500).once()],
            ..FaultConfig::default()
        })
        .unwrap();
    assert_eq!(t.post("machines/?op=allocate", &[]).await.status(), 503);
    assert_eq!(state.machines()[0].status, NodeStatus::Ready);
    assert_eq!(state.faults().lost_answers[0].times, Some(1));
    assert!(state.applied_counts().is_empty());
    assert!(state.lost_answer_counts().is_empty());
}

#[tokio::test]
async fn control_api_sets_lost_answers_and_reports_counts() {
    let t = start_instant(2).await;
    let config = json!({"lost_answers": [
        {"op": "machines.allocate", "times": 1, "status": 503, "retry_after": 7},
        {"op": "machine.deploy", "mode": "timeout", "hold_ms": 0, "times": 1}
    ]});
    let resp = t.control_put_json("faults", &config).await;
    assert_eq!(resp.status(), 200);
    let resp = t.post("machines/?op=allocate", &[]).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["retry-after"].to_str().unwrap()
        ),
        (503, "7")
    );
    let id = t.first_in(NodeStatus::Allocated);
    let deployed = t.signed_op(&t.client, &id, "deploy").send().await;
    assert!(deployed.is_err());

    let active = t.control_json("faults").await;
    assert_eq!(active["lost_answers"][0]["times"], 0);
    assert_eq!(active["lost_answers"][1]["mode"], "timeout");
    let stats = t.control_json("stats").await;
    assert_eq!(stats["applied"]["machines.allocate"], 1);
    assert_eq!(stats["applied"]["machine.deploy"], 1);
    assert_eq!(stats["lost_answers"]["machines.allocate"], 1);
    assert_eq!(stats["lost_answers"]["machine.deploy"], 1);
    let reset = t.control_send(Method::POST, "reset-stats").await;
    assert_eq!(reset.status(), 200);
    let stats = t.control_json("stats").await;
    assert_eq!(
        (&stats["applied"], &stats["lost_answers"]),
        (&json!({}), &json!({}))
    );

    // Bad values are refused, the active faults stay.
    for bad in [
        json!({"lost_answers": [{"op": "x", "rate": 2.0}]}),
        json!({"lost_answers": [{"op": "x", "status": 200}]}),
        json!({"lost_answers": [{"op": "x", "mode": "sometimes"}]}),
    ] {
        let resp = t.control_put_json("faults", &bad).await;
        assert_eq!(resp.status(), 400, "{bad}");
    }
    let active = t.control_json("faults").await;
    assert_eq!(active["lost_answers"].as_array().map(Vec::len), Some(2));
}
