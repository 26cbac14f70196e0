//! Leader election against a real kube-apiserver (capmaas-testenv).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmaas_runtime::leader::{Election, LeaderElectionConfig, spawn_election};
use capmaas_runtime::{BoxError, CommonArgs, Runtime, Term};
use capmaas_runtime::{Fence, Fenced};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

fn config(lease: &str, identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
        fence_margin: Duration::from_millis(500),
        ..LeaderElectionConfig::new(lease, NS, identity)
    }
}

async fn wait_until(rx: &mut watch::Receiver<bool>, leader: bool, within: Duration) {
    tokio::time::timeout(within, rx.wait_for(|l| *l == leader))
        .await
        .unwrap_or_else(|_| panic!("not leader={leader} within {within:?}"))
        .unwrap();
}

async fn holder(api: &Api<Lease>, name: &str) -> Option<String> {
    api.get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
}

fn start(
    client: kube::Client,
    lease: &str,
    identity: &str,
) -> (Election, CancellationToken, Arc<Mutex<Vec<bool>>>) {
    let token = CancellationToken::new();
    let changes = Arc::new(Mutex::new(Vec::new()));
    let log = changes.clone();
    let config = config(lease, identity);
    let fence = Fence::new(config.fence_validity());
    let election = spawn_election(client, config, fence, token.clone(), move |l| {
        log.lock().unwrap().push(l);
    })
    .unwrap();
    (election, token, changes)
}

#[tokio::test]
async fn exactly_one_leader_and_takeover_after_release() {
    let env = capmaas_testenv::TestEnv::api_server_only().await.unwrap();
    let client = env.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let lease = "capmaas-test-leader";

    // Both start at once and compete.
    let (first, second) = (
        start(client.clone(), lease, "replica-a"),
        start(client.clone(), lease, "replica-b"),
    );
    let (mut first_rx, mut second_rx) = (first.0.leader.clone(), second.0.leader.clone());
    tokio::time::timeout(Duration::from_secs(20), async {
        tokio::select! {
            r = first_rx.wait_for(|l| *l) => { r.unwrap(); }
            r = second_rx.wait_for(|l| *l) => { r.unwrap(); }
        }
    })
    .await
    .expect("nobody became leader");
    let first_leads = *first.0.leader.borrow();
    let ((mut a, a_stop, a_changes), (mut b, b_stop, b_changes)) = if first_leads {
        (first, second)
    } else {
        (second, first)
    };
    let (a_id, b_id) = if first_leads {
        ("replica-a", "replica-b")
    } else {
        ("replica-b", "replica-a")
    };

    // Several lease periods pass: the leader keeps renewing, the other never leads.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(*a.leader.borrow());
    assert!(!*b.leader.borrow());
    assert!(b_changes.lock().unwrap().is_empty());
    assert_eq!(holder(&leases, lease).await.as_deref(), Some(a_id));

    // a shuts down: it steps down, releases the lease, and b takes over.
    a_stop.cancel();
    wait_until(&mut a.leader, false, Duration::from_secs(5)).await;
    tokio::time::timeout(Duration::from_secs(10), a.task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*a_changes.lock().unwrap(), vec![true, false]);
    wait_until(&mut b.leader, true, Duration::from_secs(15)).await;
    assert_eq!(holder(&leases, lease).await.as_deref(), Some(b_id));

    b_stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), b.task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*b_changes.lock().unwrap(), vec![true, false]);
    assert_eq!(holder(&leases, lease).await, None, "released on shutdown");
}

#[tokio::test]
async fn runtime_runs_controller_as_leader_and_releases_on_shutdown() {
    let env = capmaas_testenv::TestEnv::api_server_only().await.unwrap();
    let kubeconfig = env.kubeconfig_path().display().to_string();
    let args = CommonArgs::try_parse_from([
        "test",
        "--metrics-bind-addr=0",
        "--health-addr=127.0.0.1:0",
        "--leader-elect",
        "--leader-election-namespace=default",
        "--leader-election-id=capmaas-runtime-test",
        &format!("--kubeconfig={kubeconfig}"),
    ])
    .unwrap();
    let token = CancellationToken::new();
    let runtime = Runtime::builder("runtime-test")
        .with_args(args)
        .without_telemetry()
        .with_shutdown_token(token.clone())
        .build()
        .await
        .unwrap();
    let (started_tx, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let run = tokio::spawn(runtime.run(move |ctx: Term| {
        let started = started_tx.clone();
        async move {
            // Prove the client works and this term is the leader's.
            let leases: Api<Lease> = Api::namespaced(ctx.clients.api.clone(), "default");
            let holder = leases
                .get("capmaas-runtime-test")
                .await?
                .spec
                .and_then(|s| s.holder_identity);
            started
                .send(holder)
                .map_err(|e| BoxError::from(e.to_string()))?;
            ctx.health.mark_ready();
            ctx.cancel.cancelled().await;
            Ok::<(), BoxError>(())
        }
    }));
    let holder = tokio::time::timeout(Duration::from_secs(20), started_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        holder.is_some(),
        "the controller runs only once the lease is held"
    );

    token.cancel();
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    assert_eq!(
        holder_after(&leases).await,
        None,
        "the lease is released on shutdown"
    );
}

async fn holder_after(api: &Api<Lease>) -> Option<String> {
    holder(api, "capmaas-runtime-test").await
}

/// A client that forwards to `inner` but holds every Lease PATCH (the renewals) while `stall`
/// is `true`: an API server that stops answering the leader's renewals.
fn stallable(inner: kube::Client, stall: watch::Receiver<bool>) -> kube::Client {
    let namespace = inner.default_namespace().to_owned();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (inner, mut stall) = (inner.clone(), stall.clone());
        async move {
            if request.method() == http::Method::PATCH && request.uri().path().contains("/leases/")
            {
                let _ = stall.wait_for(|stalled| !*stalled).await;
            }
            inner.send(request).await
        }
    });
    kube::Client::new(service, namespace)
}

#[tokio::test]
async fn stalled_renewal_fences_the_leader_before_a_standby_takes_over() {
    let env = capmaas_testenv::TestEnv::api_server_only().await.unwrap();
    let client = env.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let lease = "capmaas-fence-test";
    // Renewed 2 s after the last one, valid 4 s for others, fenced 1 s before that; the request
    // timeout is long so that the fence deadline, not a failed request, ends the term.
    let config = |identity: &str| LeaderElectionConfig {
        fence_margin: Duration::from_secs(1),
        request_timeout: Duration::from_secs(60),
        lease_duration: Duration::from_secs(4),
        grace: Duration::from_secs(2),
        ..LeaderElectionConfig::new(lease, NS, identity)
    };

    let (stall_tx, stall_rx) = watch::channel(false);
    let a_stop = CancellationToken::new();
    let a_fence = Fence::new(config("replica-a").fence_validity());
    let mut a = spawn_election(
        stallable(client.clone(), stall_rx),
        config("replica-a"),
        a_fence.clone(),
        a_stop.clone(),
        |_| {},
    )
    .unwrap();
    wait_until(&mut a.leader, true, Duration::from_secs(20)).await;
    assert!(a_fence.check().is_ok());

    let b_stop = CancellationToken::new();
    let b_fence = Fence::new(config("replica-b").fence_validity());
    let mut b = spawn_election(
        client.clone(),
        config("replica-b"),
        b_fence.clone(),
        b_stop.clone(),
        |_| {},
    )
    .unwrap();
    // Several renewals go through; b stands by, its fence closed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(*a.leader.borrow() && a_fence.is_valid());
    assert!(!*b.leader.borrow() && b_fence.check() == Err(Fenced));

    // The API server stops answering a's renewals.
    stall_tx.send_replace(true);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let deadline = a_fence.deadline().expect("a leads");
    let (a_lost, b_won) = tokio::time::timeout(Duration::from_secs(30), async {
        let (a_rx, b_rx) = (&mut a.leader, &mut b.leader);
        let a_lost = async {
            a_rx.wait_for(|l| !*l).await.unwrap();
            tokio::time::Instant::now()
        };
        let b_won = async {
            b_rx.wait_for(|l| *l).await.unwrap();
            let won = tokio::time::Instant::now();
            assert_eq!(a_fence.check(), Err(Fenced), "a is fenced once b leads");
            won
        };
        tokio::join!(a_lost, b_won)
    })
    .await
    .expect("a kept leading or b never took over");
    assert!(
        a_lost >= deadline,
        "a led until its fence deadline ({deadline:?}), stepped down at {a_lost:?}"
    );
    assert!(
        a_lost < b_won,
        "a stepped down ({a_lost:?}) before b took over ({b_won:?})"
    );
    assert_eq!(holder(&leases, lease).await.as_deref(), Some("replica-b"));

    // The stalled renewal finally lands on b's Lease: it does not make a leader again.
    stall_tx.send_replace(false);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let now = tokio::time::Instant::now();
    assert!(!*a.leader.borrow(), "a leads again");
    assert_eq!(
        a_fence.check(),
        Err(Fenced),
        "a unfenced: {:?} now {now:?}",
        a_fence.deadline()
    );
    assert!(*b.leader.borrow() && b_fence.is_valid());

    a_stop.cancel();
    b_stop.cancel();
    for task in [a.task, b.task] {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
    }
}

/// A holder whose clock runs an hour behind keeps renewing: its `renewTime` always looks long
/// expired, yet nobody takes the Lease from it, since expiry is judged by when this replica saw
/// the Lease last change. Once the holder stops renewing, the Lease is taken one lease duration
/// later.
#[tokio::test]
async fn a_holder_with_a_skewed_clock_keeps_its_lease_while_it_renews() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::{Patch, PatchParams, PostParams};
    let env = capmaas_testenv::TestEnv::api_server_only().await.unwrap();
    let client = env.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let lease = "capmaas-skew-leader";
    let an_hour_ago = || MicroTime(jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1));
    let mut held: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": lease},
        "spec": {"holderIdentity": "skewed", "leaseDurationSeconds": 3}
    }))
    .unwrap();
    if let Some(spec) = held.spec.as_mut() {
        spec.renew_time = Some(an_hour_ago());
        spec.acquire_time = Some(an_hour_ago());
    }
    leases.create(&PostParams::default(), &held).await.unwrap();
    let renewing = CancellationToken::new();
    let renewer = {
        let (leases, renewing) = (leases.clone(), renewing.clone());
        tokio::spawn(async move {
            while !renewing.is_cancelled() {
                let patch = serde_json::json!({"spec": {"renewTime": an_hour_ago()}});
                leases
                    .patch(lease, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
        })
    };

    let (mut candidate, stop, changes) = start(client.clone(), lease, "candidate");
    // Three lease durations of renewals stamped an hour in the past.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(
        changes.lock().unwrap().is_empty(),
        "took the Lease of a live holder: {:?}",
        changes.lock().unwrap()
    );
    assert_eq!(holder(&leases, lease).await.as_deref(), Some("skewed"));

    renewing.cancel();
    renewer.await.unwrap();
    wait_until(&mut candidate.leader, true, Duration::from_secs(15)).await;
    assert_eq!(holder(&leases, lease).await.as_deref(), Some("candidate"));
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), candidate.task)
        .await
        .unwrap()
        .unwrap();
}
