//! Deleting a claim's MaasData (their finalizer off; their Secrets follow by garbage
//! collection).

use capmaas_api::{MaasData, MaasDataClaim, keys};
use capmaas_runtime::error::failed;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::claim::index::{delete_exact, owned_by};
use crate::context::Ctx;
use crate::error::Result;

/// Deletes every MaasData made for this claim (found by label on the API server, so one made
/// just before a crash is not missed).
pub(crate) async fn delete_data(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<()> {
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    let mine =
        ListParams::default().labels(&format!("{}={}", keys::LABEL_DATA_CLAIM, claim.name_any()));
    let made = api
        .list(&mine)
        .await
        .map_err(failed("list MaasData of the claim"))?;
    for data in made.items.iter().filter(|d| owned_by(d, claim)) {
        delete_exact(ctx, &api, data).await?;
    }
    Ok(())
}
