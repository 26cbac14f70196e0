//! Leader election against a real kube-apiserver (capmaas-testenv).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmaas_runtime::leader::{Election, LeaderElectionConfig, spawn_election};
use capmaas_runtime::{BoxError, CommonArgs, Context, Runtime};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

fn config(lease: &str, identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
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
    let election = spawn_election(client, config(lease, identity), token.clone(), move |l| {
        log.lock().unwrap().push(l);
    })
    .unwrap();
    (election, token, changes)
}

#[tokio::test]
async fn exactly_one_leader_and_takeover_after_release() {
    let env = capmaas_testenv::TestEnv::builder()
        .controller_manager(false)
        .our_crds(false)
        .capi_crds(false)
        .start()
        .await
        .unwrap();
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
    let env = capmaas_testenv::TestEnv::builder()
        .controller_manager(false)
        .our_crds(false)
        .capi_crds(false)
        .start()
        .await
        .unwrap();
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
    let run = tokio::spawn(runtime.run(move |ctx: Context| {
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
