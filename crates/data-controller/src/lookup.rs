//! Reflector-store lookups the watch mappers of several reconcilers share.

use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

/// The objects of `store` in `of`'s namespace that `related` keeps, given `of`'s name: the
/// ones a change of `of` wakes.
pub fn namespace_mates<K, O>(
    store: &Store<K>,
    of: &O,
    related: impl Fn(&K, &str) -> bool,
) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
    O: ResourceExt,
{
    let ns = of.namespace();
    let name = of.name_any();
    store
        .state()
        .iter()
        .filter(|k| k.namespace() == ns && related(k, &name))
        .map(|k| ObjectRef::from_obj(k.as_ref()))
        .collect()
}
