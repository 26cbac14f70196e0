//! Lost answers ("MAAS did it but the answer was lost"): the operation takes effect, then the
//! answer is an error or never comes; the applied and lost counts say what really happened.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{count, start_instant, status_text};
use maas_sim::{FaultConfig, LostAnswer, NodeStatus, OpFault, PowerState};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn error_mode_applies_then_answers_the_error() {
    let t = start_instant(3).await;
    let state = t.sim.state();
    let id = state.machines()[0].system_id.clone();
    state
        .add_lost_answer(LostAnswer::error("machines.allocate", 502).times(2))
        .unwrap();
    let resp = t
        .post(
            "machines/?op=allocate",
            &[("system_id", &id), ("agent_name", "lost")],
        )
        .await;
    let (status, body) = status_text(resp).await;
    assert_eq!((status, body.as_str()), (502, "Bad Gateway"));
    let view = state.machine(&id).unwrap();
    assert_eq!(
        (view.status, view.agent_name.as_str()),
        (NodeStatus::Allocated, "lost"),
        "the allocation happened although the answer was an error"
    );
    assert_eq!(count(&state.applied_counts(), "machines.allocate"), 1);
    assert_eq!(count(&state.lost_answer_counts(), "machines.allocate"), 1);

    // A call MAAS refuses gets its real answer and does not use the fault up.
    let resp = t
        .post(
            "machines/?op=allocate",
            &[("system_id", &id), ("agent_name", "lost")],
        )
        .await;
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
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = impatient
        .post(t.api(&format!("machines/{id}/?op=deploy")))
        .header("Authorization", common::plaintext_header(&t.key))
        .form(&[("distro_series", "jammy")])
        .send()
        .await
        .unwrap_err();
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
    let err = t
        .client
        .post(t.api(&format!("machines/{other}/?op=deploy")))
        .header("Authorization", common::plaintext_header(&t.key))
        .send()
        .await
        .unwrap_err();
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
    let t = start_instant(1).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
    state
        .add_lost_answer(LostAnswer::timeout("machine.release", Duration::ZERO).once())
        .unwrap();
    let err = t
        .client
        .post(t.api(&format!("machines/{id}/?op=release")))
        .header("Authorization", common::plaintext_header(&t.key))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
    assert_eq!(state.machine(&id).unwrap().status, NodeStatus::Ready);
    assert_eq!(state.machine(&id).unwrap().releases.len(), 1);
}

#[tokio::test]
async fn noop_repeats_and_reads_are_not_applied() {
    let t = start_instant(1).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
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
    let t = start_instant(1).await;
    let state = t.sim.state();
    let id = t.allocate(&[]).await;
    t.json(Method::POST, &format!("machines/{id}/?op=deploy"), &[])
        .await;
    state.set_power(&id, PowerState::Off).unwrap();
    state
        .add_lost_answer(LostAnswer::error("machine.power_on", 500).once())
        .unwrap();
    let (status, body) =
        status_text(t.post(&format!("machines/{id}/?op=power_on"), &[]).await).await;
    assert_eq!(
        (status, body.as_str()),
        (500, "Internal server error (simulated fault).")
    );
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
            ops: vec![OpFault {
                op: "machines.allocate".into(),
                error_rate: 1.0,
                status: 503,
                latency_ms: 0,
                retry_after: None,
                body: None,
            }],
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
    let faults = format!("{}/_sim/faults", t.root());
    let config = json!({"lost_answers": [
        {"op": "machines.allocate", "times": 1, "status": 503, "retry_after": 7},
        {"op": "machine.deploy", "mode": "timeout", "hold_ms": 0, "times": 1}
    ]});
    let resp = t.client.put(&faults).json(&config).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let resp = t.post("machines/?op=allocate", &[]).await;
    assert_eq!(
        (
            resp.status().as_u16(),
            resp.headers()["retry-after"].to_str().unwrap()
        ),
        (503, "7")
    );
    let id = t
        .sim
        .state()
        .machines()
        .into_iter()
        .find(|m| m.status == NodeStatus::Allocated)
        .unwrap()
        .system_id;
    let deployed = t
        .client
        .post(t.api(&format!("machines/{id}/?op=deploy")))
        .header("Authorization", common::plaintext_header(&t.key))
        .send()
        .await;
    assert!(deployed.is_err());

    let active: Value = t
        .client
        .get(&faults)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(active["lost_answers"][0]["times"], 0);
    assert_eq!(active["lost_answers"][1]["mode"], "timeout");
    let stats_url = format!("{}/_sim/stats", t.root());
    let stats: Value = t
        .client
        .get(&stats_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["applied"]["machines.allocate"], 1);
    assert_eq!(stats["applied"]["machine.deploy"], 1);
    assert_eq!(stats["lost_answers"]["machines.allocate"], 1);
    assert_eq!(stats["lost_answers"]["machine.deploy"], 1);
    let reset = format!("{}/_sim/reset-stats", t.root());
    assert_eq!(t.client.post(&reset).send().await.unwrap().status(), 200);
    let stats: Value = t
        .client
        .get(&stats_url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
        let resp = t.client.put(&faults).json(&bad).send().await.unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }
    let active: Value = t
        .client
        .get(&faults)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(active["lost_answers"].as_array().map(Vec::len), Some(2));
}
