//! What a MaasDataClaim made (its MaasData, its IPAddressClaims): labelled with the claim's
//! name and owned by its UID, so a re-created claim of the same name is someone else.

use std::fmt::Debug;

use capmaas_api::{MaasDataClaim, keys};
use capmaas_runtime::error::{Failed, failed};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Whether `obj` was made for this very claim (owner UID).
pub fn made_for<K: Resource>(obj: &K, claim: &MaasDataClaim) -> bool {
    let uid = claim.uid();
    obj.owner_references()
        .iter()
        .any(|o| o.kind == MaasDataClaim::kind(&()) && Some(&o.uid) == uid.as_ref())
}

/// Every object `api` lists that was made for `claim`, found by label on the API server (not
/// the cache, so one made just before a crash is not missed).
pub async fn list_made_for<K>(
    api: &Api<K>,
    claim: &MaasDataClaim,
    action: &'static str,
) -> Result<Vec<K>, Failed>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mine =
        ListParams::default().labels(&format!("{}={}", keys::LABEL_DATA_CLAIM, claim.name_any()));
    let made = api.list(&mine).await.map_err(failed(action))?;
    Ok(made
        .items
        .into_iter()
        .filter(|o| made_for(o, claim))
        .collect())
}
