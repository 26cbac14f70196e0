//! What one reconcile of a MaasDataTemplate knows, read from the reflector stores.

use std::sync::Arc;

use capmaas_api::{MaasData, MaasDataTemplate};
use capmaas_runtime::error::Failed;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::context::Ctx;
use crate::error::Result;
use crate::template::decide::{Observed, orphaned};

/// A MaasDataTemplate and the MaasData that use it.
#[derive(Debug)]
pub struct State {
    /// The template.
    pub template: Arc<MaasDataTemplate>,
    /// Its namespace.
    pub ns: String,
    /// The MaasData of the template.
    pub data: Vec<Arc<MaasData>>,
    /// Of those, the ones no live claim will release ([`orphaned`]).
    pub orphans: Vec<MaasData>,
}

impl State {
    /// Reads the template's MaasData and their claims from the stores.
    pub fn observe(ctx: &Ctx, template: Arc<MaasDataTemplate>) -> Result<Self> {
        let ns = template.namespace().ok_or(Failed::missing("namespace"))?;
        let name = template.name_any();
        let data: Vec<Arc<MaasData>> = ctx
            .data
            .state()
            .into_iter()
            .filter(|d| {
                d.namespace().as_deref() == Some(ns.as_str()) && d.spec.template.name == name
            })
            .collect();
        let live_claim_uid = |claim: &str| {
            ctx.claims
                .get(&ObjectRef::new(claim).within(&ns))
                .and_then(|c| c.uid())
        };
        let orphans = orphaned(&data, live_claim_uid)
            .into_iter()
            .cloned()
            .collect();
        Ok(Self {
            template,
            ns,
            data,
            orphans,
        })
    }

    /// The view [`crate::template::decide::decide`] takes.
    pub fn observed(&self) -> Observed<'_> {
        Observed {
            template: &self.template,
            data: &self.data,
        }
    }
}
