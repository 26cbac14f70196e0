//! The ceiling of the test world: the same Machines, CAPI core and API servers on the same
//! cores, with none of our binaries. A null provider in the bench process answers each
//! MaasMachine the moment CAPI creates it with what the CAPI contract needs to call it
//! provisioned — `spec.providerID`, `status.initialization.provisioned` and `status.ready`
//! (our API version is v1beta1, declaring contract v1beta2: CAPI reads the former, v1beta1
//! readers the latter) — and registers a Ready Node with that providerID in the workload
//! cluster, as if the server had booted at once. The MaasCluster is made provisioned the same
//! way. What is left is CAPI core's own pace on this machine: our throughput is shown as a
//! fraction of it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::audit::NULL_PROVIDER_USER;
use super::run::{Session, declare};
use super::{BenchResult, Provider};
use crate::error::{Error, Result};
use crate::harness::{Harness, HarnessConfig, dynamic_api};
use crate::kubelet;

const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Measures `machines` Machines with the null provider.
pub async fn run_ceiling(machines: usize, timeout: Duration) -> Result<BenchResult> {
    Box::pin(run_inner(machines, timeout)).await
}

async fn run_inner(machines: usize, timeout: Duration) -> Result<BenchResult> {
    let harness = Harness::start(HarnessConfig {
        // No inventory is declared; the simulator only needs to exist for the harness.
        machines: 1,
        log_filter: "warn".into(),
        our_controllers: false,
        audit_log: true,
        ..HarnessConfig::default()
    })
    .await?;
    let spec = declare(&harness, machines).await?;
    // Its own user, so that the audit log tells its writes from CAPI core's and the bench's.
    let management = harness
        .management
        .user_client(NULL_PROVIDER_USER, &["system:masters"])
        .await?;
    let provider = NullProvider {
        maas_clusters: dynamic_api(
            &management,
            &spec.namespace,
            INFRA_GROUP,
            "v1beta1",
            "MaasCluster",
        )
        .await?,
        maas_machines: dynamic_api(
            &management,
            &spec.namespace,
            INFRA_GROUP,
            "v1beta1",
            "MaasMachine",
        )
        .await?,
        nodes: Api::all(harness.workload.client()),
        dns_domain: spec.dns_domain.clone(),
        answered: Arc::default(),
    };
    let cancel = CancellationToken::new();
    let _stop = cancel.clone().drop_guard();
    tokio::spawn(provider.clone().clusters(cancel.clone()));
    tokio::spawn(provider.machines(cancel));
    let session = Session::begin(&harness, &spec).await?;
    session
        .measure(&harness, &spec, Provider::Null, None, timeout)
        .await
}

#[derive(Clone)]
struct NullProvider {
    maas_clusters: Api<DynamicObject>,
    maas_machines: Api<DynamicObject>,
    nodes: Api<Node>,
    dns_domain: String,
    /// MaasMachines already answered (each is answered once, by its own task).
    answered: Arc<Mutex<BTreeSet<String>>>,
}

impl NullProvider {
    /// Every MaasCluster gets an endpoint and is provisioned.
    async fn clusters(self, cancel: CancellationToken) {
        let events = watcher::watcher(self.maas_clusters.clone(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        let mut events = std::pin::pin!(events);
        loop {
            let cluster = tokio::select! {
                () = cancel.cancelled() => return,
                next = events.next() => match next {
                    Some(Ok(cluster)) => cluster,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "null provider: MaasCluster watch failed");
                        continue;
                    }
                    None => return,
                },
            };
            if cluster.data["status"]["initialization"]["provisioned"] == true {
                continue;
            }
            if let Err(e) = self.provision_cluster(&cluster).await {
                tracing::warn!(error = %e, "null provider: MaasCluster not provisioned");
            }
        }
    }

    async fn provision_cluster(&self, cluster: &DynamicObject) -> Result<()> {
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let endpoint = json!({"spec": {"controlPlaneEndpoint": {
            "host": format!("{name}.{}", self.dns_domain), "port": 6443
        }}});
        self.maas_clusters
            .patch(&name, &PatchParams::default(), &Patch::Merge(&endpoint))
            .await
            .map_err(Error::kube(format!(
                "null provider: endpoint of MaasCluster {name}"
            )))?;
        self.maas_clusters
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(provisioned()))
            .await
            .map_err(Error::kube(format!(
                "null provider: provisioning MaasCluster {name}"
            )))?;
        Ok(())
    }

    /// Every new MaasMachine is answered on its own task, so that 200 created at once are
    /// answered at once too: the ceiling must not be this loop's pace.
    async fn machines(self, cancel: CancellationToken) {
        let events = watcher::watcher(self.maas_machines.clone(), watcher::Config::default())
            .default_backoff();
        let mut events = std::pin::pin!(events);
        loop {
            let machine = tokio::select! {
                () = cancel.cancelled() => return,
                next = events.next() => match next {
                    Some(Ok(Event::Apply(machine) | Event::InitApply(machine))) => machine,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "null provider: MaasMachine watch failed");
                        continue;
                    }
                    None => return,
                },
            };
            let name = machine.metadata.name.clone().unwrap_or_default();
            let new = self
                .answered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.clone());
            if new {
                let provider = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = provider.provision_machine(&name).await {
                        tracing::warn!(error = %e, "null provider: MaasMachine not provisioned");
                    }
                });
            }
        }
    }

    async fn provision_machine(&self, name: &str) -> Result<()> {
        let provider_id = format!("maas:///null/{name}");
        let params = PatchParams::default();
        let spec = Patch::Merge(json!({"spec": {"providerID": provider_id}}));
        let (node, spec) = tokio::join!(
            kubelet::register(&self.nodes, name, &[], Some(&provider_id)),
            self.maas_machines.patch(name, &params, &spec),
        );
        node?;
        spec.map_err(Error::kube(format!(
            "null provider: providerID of MaasMachine {name}"
        )))?;
        self.maas_machines
            .patch_status(name, &PatchParams::default(), &Patch::Merge(provisioned()))
            .await
            .map_err(Error::kube(format!(
                "null provider: provisioning MaasMachine {name}"
            )))?;
        Ok(())
    }
}

/// The provisioned signal of both contract versions.
fn provisioned() -> serde_json::Value {
    json!({"status": {"ready": true, "initialization": {"provisioned": true}}})
}
