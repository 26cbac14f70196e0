use super::*;
use std::collections::VecDeque;
use tokio::time::Instant;

fn config() -> ProberConfig {
    ProberConfig {
        timeout: Duration::from_secs(1),
        refresh: Duration::from_secs(60),
        min_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(8),
        jitter: false,
    }
}

fn down() -> ProbeState {
    ProbeState::unavailable(probe_reason::API_SERVER_NOT_READY, "connection refused")
}

fn up() -> ProbeState {
    ProbeState::Available {
        version: "v1.36.3".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn backs_off_while_down_refreshes_while_up_and_resets() {
    let script = Arc::new(Mutex::new(VecDeque::from(vec![
        down(),
        down(),
        down(),
        down(),
        down(),
        up(),
        up(),
        down(),
        down(),
    ])));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let probe = {
        let (script, calls) = (script.clone(), calls.clone());
        move || {
            calls.lock().unwrap().push(start.elapsed().as_secs());
            let next = script.lock().unwrap().pop_front().unwrap();
            async move { next }
        }
    };
    let mut reports = Vec::new();
    let report = |s: ProbeState| {
        reports.push(s);
        !script.lock().unwrap().is_empty()
    };
    probe_loop(probe, config(), CancellationToken::new(), report).await;
    assert_eq!(
        *calls.lock().unwrap(),
        // down: 1, 2, 4, 8, 8 (cap); up: 60, 60; down again: back to 1.
        vec![0, 1, 3, 7, 15, 23, 83, 143, 144]
    );
    assert_eq!(reports.len(), 9);
    assert_eq!(reports[5], up());
}

#[tokio::test(start_paused = true)]
async fn stop_ends_the_loop_while_sleeping() {
    let stop = CancellationToken::new();
    let task = tokio::spawn(probe_loop(
        || async { down() },
        config(),
        stop.clone(),
        |_| true,
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!task.is_finished());
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(1), task)
        .await
        .unwrap()
        .unwrap();
}

fn offline_client() -> Client {
    Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap())).unwrap()
}

#[tokio::test]
async fn report_wakes_only_on_change_and_stops_replaced_or_stopped_loops() {
    let (prober, mut woken) =
        Prober::new(offline_client(), config(), None, CancellationToken::new());
    let key: ClusterRef = ObjectRef::new("mc").within("ns");
    let stop = CancellationToken::new();
    prober.lock().insert(
        key.clone(),
        Target {
            cluster: "prod".into(),
            state: ProbeState::Pending,
            stop: stop.clone(),
        },
    );
    assert_eq!(prober.state(&key), ProbeState::Pending);
    assert!(prober.report(&key, &stop, down()));
    assert_eq!(woken.try_recv().unwrap(), key);
    assert!(prober.report(&key, &stop, down()));
    assert!(woken.try_recv().is_err(), "same state: no wake-up");
    assert_eq!(prober.state(&key), down());
    assert!(prober.report(&key, &stop, up()));
    assert_eq!(woken.try_recv().unwrap(), key);

    let stale_loop = CancellationToken::new();
    assert!(
        !prober.report(&key, &stale_loop, down()),
        "a replaced loop stops"
    );
    assert_eq!(prober.state(&key), up());

    assert_eq!(prober.len(), 1);
    prober.stop(&key);
    assert!(stop.is_cancelled());
    assert!(!prober.report(&key, &stop, up()));
    assert!(prober.is_empty());
    assert_eq!(prober.state(&key), ProbeState::Pending);
}

#[tokio::test]
async fn ensure_starts_one_task_per_cluster_and_restarts_on_rename() {
    let cancel = CancellationToken::new();
    let (prober, _woken) = Prober::new(offline_client(), config(), None, cancel.clone());
    let key: ClusterRef = ObjectRef::new("mc").within("ns");
    assert_eq!(prober.ensure(&key, "prod"), ProbeState::Pending);
    let first = prober.lock().get(&key).unwrap().stop.clone();
    prober.ensure(&key, "prod");
    assert_eq!(prober.lock().get(&key).unwrap().stop, first, "kept");
    prober.ensure(&key, "prod-2");
    assert!(first.is_cancelled(), "old loop stopped");
    assert_eq!(prober.len(), 1);
    cancel.cancel();
    assert!(prober.lock().get(&key).unwrap().stop.is_cancelled());
}
