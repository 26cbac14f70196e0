//! Which MaasDataTemplate to reconcile when a MaasData changes (pure).

use capmaas_api::{MaasData, MaasDataTemplate};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

/// The template a MaasData belongs to.
pub fn map_data(data: &MaasData) -> Option<ObjectRef<MaasDataTemplate>> {
    Some(ObjectRef::new(&data.spec.template.name).within(&data.namespace()?))
}
