//! The rendering step: take the claim's index, read the objects the template refers to,
//! render, write the Secrets (owned by the MaasData, so garbage collection removes them with
//! it), and record the result on the MaasData and the claim.

use capmaas_runtime::error::{Failed, failed};
use std::collections::BTreeMap;

use capmaas_api::capi::{Machine, is_capi_owner};
use capmaas_api::common::{LocalObjectReference, PoolReference};
use capmaas_api::data::MaasDataStatus;
use capmaas_api::{MaasData, MaasDataClaim, MaasDataTemplate, MaasHost, MaasMachine, keys};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::claim::decide::AddressState;
use crate::claim::index;
use crate::context::Ctx;
use crate::error::Result;
use crate::render::{self, AllocatedAddress, ObjectInfo, RenderInput, Rendered};
use crate::writes;

/// The objects a template may read.
#[derive(Debug, Default)]
struct Related {
    machine: Option<ObjectInfo>,
    maas_machine: Option<ObjectInfo>,
    host: Option<MaasHost>,
}

async fn related(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<Related> {
    let mut out = Related::default();
    if let Some(host) = &claim.spec.host_ref {
        // The host may sit in another namespace (an inventory open to the claim's).
        out.host = Api::<MaasHost>::namespaced(ctx.base.client.clone(), host.namespace_or(ns))
            .get_opt(&host.name)
            .await
            .map_err(failed("read MaasHost"))?;
    }
    let owner = claim
        .owner_references()
        .iter()
        .find(|o| o.kind == MaasMachine::kind(&()));
    let maas_machine = match owner {
        Some(o) => Api::<MaasMachine>::namespaced(ctx.base.client.clone(), ns)
            .get_opt(&o.name)
            .await
            .map_err(failed("read MaasMachine"))?,
        None => None,
    };
    if let Some(mm) = &maas_machine {
        let machine = mm
            .owner_references()
            .iter()
            .find(|o| is_capi_owner(o, "Machine"));
        if let Some(o) = machine {
            out.machine = Api::<Machine>::namespaced(ctx.base.client.clone(), ns)
                .get_opt(&o.name)
                .await
                .map_err(failed("read Machine"))?
                .map(|m| ObjectInfo::from(&m.metadata));
        }
    }
    out.maas_machine = maas_machine.map(|m| ObjectInfo::from(&m.metadata));
    Ok(out)
}

/// Name of a rendered Secret of `data`.
pub fn secret_name(data: &str, what: &str) -> String {
    format!("{data}-{what}")
}

async fn write_secret(
    ctx: &Ctx,
    data: &MaasData,
    ns: &str,
    what: &str,
    key: &str,
    value: Option<String>,
) -> Result<Option<LocalObjectReference>> {
    let Some(value) = value else {
        return Ok(None);
    };
    let name = secret_name(&data.name_any(), what);
    let owner = data
        .controller_owner_ref(&())
        .ok_or(Failed::missing("uid"))?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.to_owned()),
            labels: Some(
                [
                    (
                        keys::LABEL_DATA_TEMPLATE.to_owned(),
                        data.spec.template.name.clone(),
                    ),
                    (
                        keys::LABEL_DATA_CLAIM.to_owned(),
                        data.spec.claim.name.clone(),
                    ),
                ]
                .into(),
            ),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some(keys::SECRET_TYPE_RENDERED_DATA.to_owned()),
        data: Some([(key.to_owned(), ByteString(value.into_bytes()))].into()),
        ..Secret::default()
    };
    let mut body = serde_json::to_value(&secret).map_err(failed("serializing the Secret"))?;
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("Secret");
    Api::<Secret>::namespaced(ctx.base.client.clone(), ns)
        .patch(
            &name,
            &PatchParams::apply(&ctx.base.field_manager).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(failed("apply rendered Secret"))?;
    Ok(Some(LocalObjectReference::new(name)))
}

/// What a rendering attempt ended with.
#[derive(Debug)]
pub enum Rendering {
    /// Rendered into this MaasData.
    Done(String),
    /// The template cannot be rendered for this machine; the message names the field.
    Failed(String),
}

/// Takes the index, renders and records. The claim's status is the caller's to write.
pub async fn render(
    ctx: &Ctx,
    claim: &MaasDataClaim,
    ns: &str,
    template: &MaasDataTemplate,
    addresses: &BTreeMap<PoolReference, AddressState>,
) -> Result<Rendering> {
    let data = index::ensure(ctx, claim, ns).await?;
    let objects = related(ctx, claim, ns).await?;
    let bound: BTreeMap<PoolReference, AllocatedAddress> = addresses
        .iter()
        .filter_map(|(pool, state)| match state {
            AddressState::Bound(a) => Some((pool.clone(), a.clone())),
            _ => None,
        })
        .collect();
    let host_info = objects.host.as_ref().map(|h| ObjectInfo::from(&h.metadata));
    let interfaces = objects
        .host
        .as_ref()
        .and_then(|h| h.status.as_ref())
        .and_then(|s| s.interfaces.clone())
        .unwrap_or_default();
    let boot_interface = objects
        .host
        .as_ref()
        .and_then(|h| h.status.as_ref())
        .and_then(|s| s.boot_interface.as_ref());
    let input = RenderInput {
        index: data.spec.index,
        namespace: ns,
        machine: objects.machine.as_ref(),
        maas_machine: objects.maas_machine.as_ref(),
        host: host_info.as_ref(),
        host_interfaces: &interfaces,
        host_boot_interface: boot_interface,
        addresses: &bound,
    };
    let data_api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    match render::render(&template.spec, &input) {
        Ok(Rendered {
            meta_data,
            network_data,
            hostname,
        }) => {
            let meta_ref = write_secret(
                ctx,
                &data,
                ns,
                "metadata",
                keys::META_DATA_SECRET_KEY,
                meta_data,
            )
            .await?;
            let network_ref = write_secret(
                ctx,
                &data,
                ns,
                "networkdata",
                keys::NETWORK_DATA_SECRET_KEY,
                network_data,
            )
            .await?;
            if data.spec.meta_data != meta_ref || data.spec.network_data != network_ref {
                let patch = json!({"spec": {"metaData": meta_ref, "networkData": network_ref}});
                data_api
                    .patch(
                        &data.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .map_err(failed("record rendered Secrets on MaasData"))?;
            }
            let status = MaasDataStatus {
                ready: Some(true),
                error_message: None,
                hostname,
            };
            writes::apply_status(&ctx.base, &data_api, &data.name_any(), &status).await?;
            Ok(Rendering::Done(data.name_any()))
        }
        Err(e) => {
            let message = e.to_string();
            let status = MaasDataStatus {
                ready: Some(false),
                error_message: Some(message.clone()),
                hostname: None,
            };
            if data.status.as_ref() != Some(&status) {
                writes::apply_status(&ctx.base, &data_api, &data.name_any(), &status).await?;
            }
            Ok(Rendering::Failed(message))
        }
    }
}
