//! What the claim tests (`data_claims`, `kill_replicas`) and the claims bench share.
// Each includes this module and uses a part of it.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeSet;

use capmaas_api::MaasData;
use capmaas_testenv::TestEnv;
use kube::api::ListParams;
use kube::{Api, Client};

/// An API server with the garbage collector (it removes what a MaasData owns), its client
/// and a new namespace named after `prefix`.
pub(crate) async fn env_with_namespace(prefix: &str) -> (TestEnv, Client, String) {
    let env = TestEnv::builder()
        .controller_manager(true)
        .start()
        .await
        .unwrap();
    let client = env.client();
    let ns = env.create_namespace(prefix).await.unwrap();
    (env, client, ns)
}

/// Every MaasData of `ns`, and the distinct indexes they hold.
pub(crate) async fn data_and_indexes(client: &Client, ns: &str) -> (Vec<MaasData>, BTreeSet<i32>) {
    let data = Api::<MaasData>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let indexes = data.iter().map(|d| d.spec.index).collect();
    (data, indexes)
}
