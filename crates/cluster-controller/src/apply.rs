//! A live, unpaused MaasCluster: endpoint, DNS record, status.

use capmaas_api::capi::{Cluster, ContractObjectReference};
use capmaas_api::conditions::{self as cond, reasons};
use capmaas_api::keys::{LABEL_CLUSTER_NAME, LABEL_CONTROL_PLANE};
use capmaas_api::{MaasCluster, MaasDNSRecord, MaasDNSRecordSpec, MaasMachine};
use capmaas_runtime::conditions::{ConditionStatus, NewCondition};
use capmaas_runtime::error::{Failed, failed};
use capmaas_runtime::status::now;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use tracing::info;

use crate::addresses::{
    addresses_differ, control_plane_addresses, plan_addresses, published_subnets,
};
use crate::context::Ctx;
use crate::decide::{DnsName, failure_domains, owned_by, reason};
use crate::error::{Error, Result};
use crate::hosted::{EndpointStep, hosting, settle_endpoint, waiting_condition};
use crate::prober::{ClusterRef, ProbeState};
use crate::status::{
    StatusParts, api_server_condition, build_status, dns_name, load_balancer_condition,
    load_balancer_reason,
};
use crate::writes::{announce_api_server, set_endpoint, write_status};

/// The owner Cluster as a normal pass needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner<'a> {
    /// The Cluster's name.
    pub(crate) name: &'a str,
    /// The Cluster.
    pub(crate) cluster: &'a Cluster,
    /// Its `spec.controlPlaneRef`, which tells whether the control plane is hosted.
    pub(crate) control_plane_ref: Option<&'a ContractObjectReference>,
}

/// The normal pass: endpoint, DNS record, probe, status.
pub(crate) async fn apply(
    api: &Api<MaasCluster>,
    mc: &MaasCluster,
    key: &ClusterRef,
    owner: &Owner<'_>,
    ctx: &Ctx,
) -> Result<Action> {
    let (cluster_name, cluster) = (owner.name, owner.cluster);
    let previous = mc.status.as_ref();
    let generation = mc.metadata.generation;
    let failure_domains = failure_domains(&mc.spec);
    let probe = ctx.prober.ensure(key, cluster_name);
    let failed_status = |problem: &str, probe: &ProbeState| {
        let lb = NewCondition::new(
            cond::LOAD_BALANCER_READY,
            ConditionStatus::False,
            reasons::LOAD_BALANCER_FAILED,
        )
        .message(problem);
        let parts = StatusParts {
            provisioned: false,
            dns_name: previous
                .and_then(|s| s.network.as_ref())
                .and_then(|n| n.dns_name.clone()),
            failure_domains: failure_domains.clone(),
            load_balancer: lb,
            api_server: api_server_condition(probe),
            generation,
        };
        build_status(previous, parts, &now())
    };

    let status_dns_name = previous
        .and_then(|s| s.network.as_ref())
        .and_then(|n| n.dns_name.as_deref());
    let step =
        hosting(mc.annotations(), owner.control_plane_ref, &ctx.hosted).and_then(|hosting| {
            settle_endpoint(cluster_name, &mc.spec, status_dns_name, cluster, &hosting)
        });
    let plan = match step {
        Ok(EndpointStep::Settled(plan)) => plan,
        Ok(EndpointStep::WaitForProvider(why)) => {
            let waiting = waiting_condition(&why, cluster_name);
            let parts = StatusParts {
                provisioned: false,
                dns_name: None,
                failure_domains,
                load_balancer: waiting.clone(),
                api_server: api_server_condition(&probe),
                generation,
            };
            let status = build_status(previous, parts, &now());
            write_status(api, mc, &status, ctx).await?;
            if load_balancer_reason(previous) != Some(reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT) {
                info!(why, "waiting for the hosted control plane's endpoint");
                ctx.base
                    .events
                    .normal(
                        mc,
                        reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT,
                        &waiting.message,
                    )
                    .await;
            }
            announce_api_server(ctx, mc, previous, &status).await;
            // The provider's write to this MaasCluster, or to the Cluster, wakes us.
            return Ok(Action::requeue(ctx.base.sync_period));
        }
        Err(problem) => {
            write_status(api, mc, &failed_status(&problem, &probe), ctx).await?;
            ctx.base
                .events
                .warning(mc, "InvalidEndpoint", &problem)
                .await;
            return Err(Error::InvalidSpec(problem));
        }
    };
    let was_waiting =
        load_balancer_reason(previous) == Some(reason::WAITING_FOR_CONTROL_PLANE_ENDPOINT);
    let note = format!(
        "control-plane endpoint {}:{}",
        plan.endpoint.host, plan.endpoint.port
    );
    let mc = if plan.patch_spec {
        let updated = set_endpoint(api, mc, &plan.endpoint).await?;
        ctx.base.events.normal(&updated, "EndpointSet", &note).await;
        updated
    } else {
        if was_waiting {
            // The hosted control plane's provider wrote it on this MaasCluster.
            let note = format!("{note}, set by the hosted control plane's provider");
            ctx.base.events.normal(mc, "EndpointSet", &note).await;
        }
        mc.clone()
    };
    let record = match &plan.dns {
        Some(dns) => match ensure_dns_record(&mc, dns, plan.adopt, cluster_name, ctx).await {
            Ok(record) => Some(record),
            Err(e @ (Error::InvalidSpec(_) | Error::DnsRecordConflict(_))) => {
                write_status(api, &mc, &failed_status(&e.to_string(), &probe), ctx).await?;
                ctx.base
                    .events
                    .warning(&mc, reasons::LOAD_BALANCER_FAILED, &e.to_string())
                    .await;
                return Err(e);
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let parts = StatusParts {
        provisioned: true,
        dns_name: dns_name(&plan, previous),
        failure_domains,
        load_balancer: load_balancer_condition(&plan, record.as_ref()),
        api_server: api_server_condition(&probe),
        generation,
    };
    let status = build_status(previous, parts, &now());
    write_status(api, &mc, &status, ctx).await?;
    announce_api_server(ctx, &mc, previous, &status).await;
    Ok(Action::requeue(ctx.base.sync_period))
}

/// Creates or updates the MaasDNSRecord; writes only when the address set or TTL changes.
/// `adopt`: the name is CAPMAAS's, and the record takes over the MAAS resource CAPMAAS made.
async fn ensure_dns_record(
    mc: &MaasCluster,
    dns: &DnsName,
    adopt: bool,
    cluster: &str,
    ctx: &Ctx,
) -> Result<MaasDNSRecord> {
    let ns = mc.namespace().ok_or(Failed::missing("namespace"))?;
    let uid = mc.uid().ok_or(Failed::missing("uid"))?;
    let records: Api<MaasDNSRecord> = Api::namespaced(ctx.base.client.clone(), &ns);
    let existing = records
        .get_opt(&dns.name)
        .await
        .map_err(failed("get MaasDNSRecord"))?;
    if let Some(record) = &existing {
        if !owned_by(record, &uid) {
            return Err(Error::DnsRecordConflict(dns.name.clone()));
        }
        if record.metadata.deletion_timestamp.is_some() {
            // Deleted by someone; it is recreated once the gateway has let it go.
            return Ok(record.clone());
        }
    }
    let options = mc.spec.dns_record.clone().unwrap_or_default();
    let subnets = published_subnets(&options).map_err(Error::InvalidSpec)?;
    let machines = Api::<MaasMachine>::namespaced(ctx.base.client.clone(), &ns)
        .list(&ListParams::default().labels(&format!(
            "{LABEL_CLUSTER_NAME}={cluster},{LABEL_CONTROL_PLANE}"
        )))
        .await
        .map_err(failed("list MaasMachines"))?;
    let live = control_plane_addresses(&machines.items, cluster, &subnets);
    let current = existing
        .as_ref()
        .map(|r| r.spec.addresses.as_deref().unwrap_or_default());
    let plan = plan_addresses(&live, current);
    let unchanged = existing.as_ref().is_some_and(|r| {
        !addresses_differ(current, &plan.addresses)
            && r.spec.ttl == options.ttl
            && r.spec.domain == dns.domain
            && r.spec.adopts_existing() == adopt
    });
    if let (true, Some(record)) = (unchanged, existing) {
        return Ok(record);
    }
    if plan.kept_previous {
        info!("no live control-plane address; keeping the published ones");
    }
    let desired = MaasDNSRecord {
        metadata: ObjectMeta {
            name: Some(dns.name.clone()),
            namespace: Some(ns.clone()),
            labels: Some([(LABEL_CLUSTER_NAME.to_owned(), cluster.to_owned())].into()),
            owner_references: mc.controller_owner_ref(&()).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: MaasDNSRecordSpec {
            name: dns.name.clone(),
            domain: dns.domain.clone(),
            addresses: Some(plan.addresses.clone()),
            ttl: options.ttl,
            adopt_existing: adopt.then_some(true),
        },
        status: None,
    };
    let params = PatchParams::apply(&ctx.base.field_manager).force();
    let record = records
        .patch(&dns.name, &params, &Patch::Apply(&desired))
        .await
        .map_err(failed("apply MaasDNSRecord"))?;
    let note = format!("{} -> [{}]", dns.fqdn(), plan.addresses.join(", "));
    info!(record = dns.name, addresses = ?plan.addresses, "MaasDNSRecord written");
    ctx.base.events.normal(mc, "DNSRecordUpdated", &note).await;
    Ok(record)
}
