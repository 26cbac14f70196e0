//! Deleting a claim's MaasData (their finalizer off; their Secrets follow by garbage
//! collection).

use capmaas_api::{MaasData, MaasDataClaim};
use kube::api::Api;

use crate::claim::index::delete_exact;
use crate::claim::owned::list_made_for;
use crate::context::Ctx;
use crate::error::Result;

/// Deletes every MaasData made for this claim.
pub(crate) async fn delete_data(ctx: &Ctx, claim: &MaasDataClaim, ns: &str) -> Result<()> {
    let api: Api<MaasData> = Api::namespaced(ctx.base.client.clone(), ns);
    for data in list_made_for(&api, claim, "list MaasData of the claim").await? {
        delete_exact(ctx, &api, &data).await?;
    }
    Ok(())
}
