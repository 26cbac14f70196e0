//! What one reconcile of a MaasDataClaim knows: the template, the MaasData and the addresses
//! from the reflector stores, and whether the claim or its Cluster is paused (the Cluster read
//! from the API server, which this controller does not cache).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use capmaas_api::capi::Cluster;
use capmaas_api::common::PoolReference;
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, keys};
use capmaas_runtime::error::{Failed, failed};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use crate::claim::addresses;
use crate::claim::decide::{AddressState, Observed, recorded_data};
use crate::context::Ctx;
use crate::error::Result;
use crate::render;

/// A MaasDataClaim and what its next step depends on.
#[derive(Debug)]
pub struct State {
    /// The claim.
    pub claim: Arc<MaasDataClaim>,
    /// Its namespace.
    pub ns: String,
    /// Its template, when it exists.
    pub template: Option<Arc<MaasDataTemplate>>,
    /// The claim or its Cluster is paused.
    pub paused: bool,
    /// The pools the template uses.
    pub pools: BTreeSet<PoolReference>,
    /// The address of every pool the template uses.
    pub addresses: BTreeMap<PoolReference, AddressState>,
    /// The MaasData the claim records, when it exists.
    pub data: Option<Arc<MaasData>>,
}

/// Whether the claim, or the Cluster it is labelled with, is paused.
async fn is_paused(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<bool> {
    if claim.annotations().contains_key(keys::ANNOTATION_PAUSED) {
        return Ok(true);
    }
    let Some(cluster) = claim.labels().get(keys::LABEL_CLUSTER_NAME) else {
        return Ok(false);
    };
    let cluster = Api::<Cluster>::namespaced(ctx.base.client.clone(), ns)
        .get_opt(cluster)
        .await
        .map_err(failed("read Cluster"))?;
    Ok(cluster.is_some_and(|c| c.is_paused()))
}

impl State {
    /// Reads everything the decision about `claim` depends on.
    pub async fn observe(ctx: &Ctx, claim: Arc<MaasDataClaim>) -> Result<Self> {
        let ns = claim.namespace().ok_or(Failed::missing("namespace"))?;
        let template = ctx
            .templates
            .get(&ObjectRef::new(&claim.spec.template.name).within(&ns));
        let paused = is_paused(ctx, &claim, &ns).await?;
        let pools = template
            .as_ref()
            .map(|t| render::pools_of(&t.spec))
            .unwrap_or_default();
        let addresses = addresses::observe(ctx, &claim, &ns, &pools);
        let data = recorded_data(&claim).and_then(|n| ctx.data.get(&ObjectRef::new(n).within(&ns)));
        Ok(Self {
            claim,
            ns,
            template,
            paused,
            pools,
            addresses,
            data,
        })
    }

    /// The view [`crate::claim::decide::decide`] takes.
    pub fn observed(&self) -> Observed<'_> {
        Observed {
            claim: &self.claim,
            template: self.template.as_deref(),
            paused: self.paused,
            data: self.data.as_deref(),
            addresses: &self.addresses,
        }
    }
}
