use super::*;

fn fault(op: &str, rate: f64, status: u16) -> OpFault {
    OpFault {
        op: op.to_owned(),
        error_rate: rate,
        status,
        latency_ms: 7,
        retry_after: None,
        body: None,
    }
}

#[test]
fn exact_op_wins_over_wildcard() {
    let cfg = FaultConfig {
        ops: vec![fault("*", 1.0, 500), fault("machine.deploy", 0.0, 503)],
        ..Default::default()
    };
    assert!(injected_error(&cfg, "machine.deploy", 0.0).is_none());
    assert_eq!(
        injected_error(&cfg, "machines.read", 0.99).map(|e| e.status.as_u16()),
        Some(500)
    );
    assert_eq!(latency(&cfg, "machine.deploy"), Duration::from_millis(7));
}

#[test]
fn rate_is_compared_with_roll() {
    let cfg = FaultConfig {
        ops: vec![fault("machines.allocate", 0.2, 503)],
        ..Default::default()
    };
    assert!(injected_error(&cfg, "machines.allocate", 0.1).is_some());
    assert!(injected_error(&cfg, "machines.allocate", 0.2).is_none());
    assert!(injected_error(&cfg, "machines.read", 0.0).is_none());
}

#[test]
fn conflict_is_html_with_retry_after() {
    let err = fault_error(StatusCode::CONFLICT, None, None);
    assert!(matches!(err.body, ErrorBody::Html(_)));
    assert_eq!(err.headers, vec![("retry-after", "5".to_owned())]);
    let err = fault_error(StatusCode::SERVICE_UNAVAILABLE, None, Some(10));
    assert_eq!(err.headers, vec![("retry-after", "10".to_owned())]);
}

#[test]
fn lost_answer_counts_down_and_exact_op_wins() {
    let mut cfg = FaultConfig {
        lost_answers: vec![
            LostAnswer::error("*", 500),
            LostAnswer::error("machines.allocate", 502).times(2),
        ],
        ..Default::default()
    };
    // The status of the error that replaces the answer to `op`; rate 1 needs no roll.
    let lost_status = |cfg: &mut FaultConfig, op: &str| match lose_answer(cfg, op, || {
        panic!("no roll needed at rate 1")
    }) {
        Some(Lost::Error(e)) => Some(e.status.as_u16()),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(lost_status(&mut cfg, "machines.allocate"), Some(502));
    assert_eq!(lost_status(&mut cfg, "machines.allocate"), Some(502));
    assert_eq!(cfg.lost_answers[1].times, Some(0));
    // Used up: the wildcard applies again.
    assert_eq!(lost_status(&mut cfg, "machines.allocate"), Some(500));
    assert_eq!(lost_status(&mut cfg, "machine.deploy"), Some(500));
    assert_eq!(cfg.lost_answers[0].times, None);
}

#[test]
fn lost_answer_once_then_answers_again() {
    let mut cfg = FaultConfig {
        lost_answers: vec![LostAnswer::timeout("machine.deploy", Duration::from_secs(3)).once()],
        ..Default::default()
    };
    assert_eq!(
        lose_answer(&mut cfg, "machine.deploy", || 0.0),
        Some(Lost::NoAnswer(Duration::from_secs(3)))
    );
    assert_eq!(lose_answer(&mut cfg, "machine.deploy", || 0.0), None);
    assert_eq!(lose_answer(&mut cfg, "machine.release", || 0.0), None);
}

#[test]
fn lost_answer_rate_is_compared_with_roll_and_only_hits_consume() {
    let mut cfg = FaultConfig {
        lost_answers: vec![LostAnswer::error("machine.power_on", 503).rate(0.25).once()],
        ..Default::default()
    };
    assert_eq!(lose_answer(&mut cfg, "machine.power_on", || 0.25), None);
    assert_eq!(
        cfg.lost_answers[0].times,
        Some(1),
        "a miss does not consume"
    );
    let lost = lose_answer(&mut cfg, "machine.power_on", || 0.1);
    assert!(matches!(lost, Some(Lost::Error(e)) if e.status == StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(cfg.lost_answers[0].times, Some(0));
    let mut never = FaultConfig {
        lost_answers: vec![LostAnswer::error("*", 503).rate(0.0)],
        ..Default::default()
    };
    assert_eq!(lose_answer(&mut never, "machines.allocate", || 0.0), None);
}

#[test]
fn lost_answer_json_shape_and_defaults() {
    let cfg: FaultConfig = serde_json::from_str(
        r#"{"lost_answers": [
            {"op": "machines.allocate", "times": 1},
            {"op": "machine.deploy", "mode": "timeout", "hold_ms": 5000, "times": 1},
            {"op": "machine.release", "status": 502, "retry_after": 3, "rate": 0.5}
        ]}"#,
    )
    .unwrap();
    assert_eq!(
        cfg.lost_answers,
        vec![
            LostAnswer::error("machines.allocate", 503).once(),
            LostAnswer::timeout("machine.deploy", Duration::from_secs(5)).once(),
            LostAnswer {
                retry_after: Some(3),
                ..LostAnswer::error("machine.release", 502).rate(0.5)
            },
        ]
    );
    assert!(cfg.validate().is_ok());
    assert!(
        serde_json::from_str::<FaultConfig>(r#"{"lost_answers": [{"op": "x", "after": 1}]}"#)
            .is_err(),
        "unknown fields are refused"
    );
    assert!(
        serde_json::from_str::<FaultConfig>(r#"{"lost_answers": [{"op": "x", "mode": "late"}]}"#)
            .is_err()
    );
}

#[test]
fn lost_answer_validation() {
    let with = |lost: LostAnswer| FaultConfig {
        lost_answers: vec![lost],
        ..Default::default()
    };
    assert!(
        with(LostAnswer::error("x", 503).rate(1.5))
            .validate()
            .is_err()
    );
    assert!(with(LostAnswer::error("x", 204)).validate().is_err());
    assert!(with(LostAnswer::error("", 503)).validate().is_err());
    assert!(with(LostAnswer::error("x", 500)).validate().is_ok());
}

#[test]
fn validation_rejects_bad_rates_and_statuses() {
    let with = |op: OpFault| FaultConfig {
        ops: vec![op],
        ..Default::default()
    };
    assert!(with(fault("x", 1.5, 503)).validate().is_err());
    assert!(with(fault("x", 0.5, 200)).validate().is_err());
    assert!(with(fault("x", 0.5, 409)).validate().is_ok());
}

#[test]
fn timeout_rate_is_compared_with_roll_and_exact_op_wins() {
    let cfg = FaultConfig {
        timeouts: vec![
            TimeoutFault::new("*", Duration::from_millis(300)).rate(0.02),
            TimeoutFault::new("machine.deploy", Duration::from_secs(5)),
            TimeoutFault::new("machine.release", Duration::from_secs(5)).rate(0.0),
        ],
        ..Default::default()
    };
    assert_eq!(
        timed_out(&cfg, "machines.allocate", 0.01),
        Some(Duration::from_millis(300))
    );
    assert_eq!(timed_out(&cfg, "machines.allocate", 0.02), None);
    assert_eq!(
        timed_out(&cfg, "machine.deploy", 0.99),
        Some(Duration::from_secs(5)),
        "rate 1: every call"
    );
    assert_eq!(
        timed_out(&cfg, "machine.release", 0.0),
        None,
        "rate 0 on the exact key wins over the wildcard"
    );
    assert_eq!(
        timed_out(&FaultConfig::default(), "machine.deploy", 0.0),
        None
    );
}

#[test]
fn timeout_json_shape_defaults_and_validation() {
    let cfg: FaultConfig = serde_json::from_str(
        r#"{"timeouts": [{"op": "*", "rate": 0.02, "hold_ms": 95000}, {"op": "machine.deploy"}]}"#,
    )
    .unwrap();
    assert_eq!(
        cfg.timeouts,
        vec![
            TimeoutFault::new("*", Duration::from_secs(95)).rate(0.02),
            TimeoutFault::new("machine.deploy", Duration::ZERO),
        ]
    );
    assert!(cfg.validate().is_ok());
    assert!(
        serde_json::from_str::<FaultConfig>(r#"{"timeouts": [{"op": "x", "times": 1}]}"#).is_err(),
        "unknown fields are refused"
    );
    let with = |t: TimeoutFault| FaultConfig {
        timeouts: vec![t],
        ..Default::default()
    };
    assert!(
        with(TimeoutFault::new("x", Duration::ZERO).rate(1.5))
            .validate()
            .is_err()
    );
    assert!(
        with(TimeoutFault::new("", Duration::ZERO))
            .validate()
            .is_err()
    );
}
