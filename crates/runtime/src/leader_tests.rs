use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn identity_prefers_pod_name() {
    assert_eq!(
        leader_identity(Some("mc-7f9-abc"), Some("node1"), "xyz"),
        "mc-7f9-abc"
    );
    assert_eq!(
        leader_identity(Some(" "), Some("node1"), "xyz"),
        "node1-xyz"
    );
    assert_eq!(leader_identity(None, None, "xyz"), "capmaas-xyz");
    let a = identity_from_env();
    assert!(!a.is_empty());
}

#[test]
fn default_lease_names_differ_per_binary() {
    assert_eq!(
        default_lease_name("machine-controller"),
        "capmaas-machine-controller-leader"
    );
    assert_ne!(default_lease_name("a"), default_lease_name("b"));
}

#[test]
fn timings_are_validated() {
    let mut c = LeaderElectionConfig::new("l", "ns", "me");
    assert_eq!(c.validate().unwrap(), (30, 10));
    c.grace = Duration::from_secs(30);
    assert!(c.validate().is_err());
    c.grace = Duration::ZERO;
    assert!(c.validate().is_err());
    c.grace = Duration::from_secs(5);
    assert!(
        c.validate().is_err(),
        "fence margin must be shorter than grace"
    );
    c.grace = Duration::from_secs(6);
    assert_eq!(c.fence_validity(), Duration::from_secs(25));
    assert!(c.validate().is_ok());
    c.request_timeout = Duration::ZERO;
    assert!(c.validate().is_err());
    let empty = LeaderElectionConfig::new("", "ns", "me");
    assert!(empty.validate().is_err());
}

/// A term future that counts starts and finishes cleanly when its token is cancelled.
fn counting(
    starts: Arc<AtomicUsize>,
    stops: Arc<AtomicUsize>,
) -> impl FnMut(CancellationToken) -> std::pin::Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>
{
    move |term: CancellationToken| {
        starts.fetch_add(1, Ordering::SeqCst);
        let stops = stops.clone();
        Box::pin(async move {
            term.cancelled().await;
            stops.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// Reports leadership `leading` to the task watching `tx`, and lets it react.
async fn lead(tx: &watch::Sender<bool>, leading: bool) {
    tx.send(leading).unwrap();
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn runs_only_while_leader_and_restarts_on_regain() {
    let (tx, rx) = watch::channel(false);
    let shutdown = CancellationToken::new();
    let (starts, stops, standby) = (
        Arc::default(),
        Arc::default(),
        Arc::new(AtomicUsize::new(0)),
    );
    let sb = standby.clone();
    let task = tokio::spawn(run_while_leader(
        rx,
        shutdown.clone(),
        Duration::from_secs(5),
        counting(Arc::clone(&starts), Arc::clone(&stops)),
        move || {
            sb.fetch_add(1, Ordering::SeqCst);
        },
    ));
    settle().await;
    assert_eq!(starts.load(Ordering::SeqCst), 0);
    assert_eq!(standby.load(Ordering::SeqCst), 1);

    lead(&tx, true).await;
    assert_eq!(starts.load(Ordering::SeqCst), 1);

    lead(&tx, false).await;
    assert_eq!(stops.load(Ordering::SeqCst), 1);
    assert_eq!(standby.load(Ordering::SeqCst), 2);

    lead(&tx, true).await;
    assert_eq!(starts.load(Ordering::SeqCst), 2);

    shutdown.cancel();
    task.await.unwrap().unwrap();
    assert_eq!(stops.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn stuck_controller_is_dropped_after_drain() {
    let (_tx, rx) = watch::channel(true);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run_while_leader(
        rx,
        shutdown.clone(),
        Duration::from_secs(3),
        |_term| std::future::pending::<Result<(), BoxError>>(),
        || {},
    ));
    settle().await;
    shutdown.cancel();
    let started = tokio::time::Instant::now();
    task.await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn controller_error_is_returned() {
    let (_tx, rx) = watch::channel(true);
    let err = run_while_leader(
        rx,
        CancellationToken::new(),
        Duration::from_secs(1),
        |_term| async { Err::<(), BoxError>("watch failed".into()) },
        || {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Controller(e) if e.to_string() == "watch failed"));
}

#[tokio::test(start_paused = true)]
async fn election_ending_without_shutdown_is_an_error() {
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(run_while_leader(
        rx,
        CancellationToken::new(),
        Duration::from_secs(1),
        |_term| async { Ok::<(), BoxError>(()) },
        || {},
    ));
    settle().await;
    drop(tx);
    assert!(matches!(
        task.await.unwrap(),
        Err(Error::LeaderElectionStopped)
    ));
}

#[tokio::test(start_paused = true)]
async fn always_leader_until_shutdown() {
    let shutdown = CancellationToken::new();
    let changes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let c = changes.clone();
    let mut election = always_leader(shutdown.clone(), move |l| c.lock().unwrap().push(l));
    assert!(*election.leader.borrow());
    shutdown.cancel();
    election.leader.wait_for(|l| !*l).await.unwrap();
    election.task.await.unwrap();
    assert_eq!(*changes.lock().unwrap(), vec![true, false]);
}
