//! Cached watches: a reflector store and the stream that keeps it filled, set up one way.

use futures::Stream;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use super::without_managed_fields;

/// What to keep of each watched object in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The whole object.
    Everything,
    /// The object without its managed fields, which no controller reads and which are most of a
    /// typical object's memory.
    WithoutManagedFields,
}

/// A store of the objects `api` lists and watches, and the stream of touched objects that keeps
/// it filled: poll the stream (give it to `Controller::watches_stream`, or drive it) for the store
/// to see changes. The watch retries with kube's default backoff.
pub fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
    keep: Keep,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let lean = keep == Keep::WithoutManagedFields;
    let objects = watcher(api, config).modify(move |object: &mut K| {
        if lean {
            without_managed_fields(object);
        }
    });
    let stream = reflector::reflector(writer, objects)
        .default_backoff()
        .touched_objects();
    (store, stream)
}
