//! One watch per kind for all three IPAM controllers: a [`Feed`] fills a cache from a watch
//! and hands a copy of every touched object (created, changed, deleted) to each subscriber —
//! a controller's trigger stream — with back-pressure. kube's shared streams drop deletions,
//! and a deletion is exactly what frees an address; hence this small fan-out.

use std::fmt::Debug;

use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Objects a subscriber may fall behind by before the watch waits for it.
const BUFFER: usize = 1024;

/// A watch of `K`, its cache, and the subscribers of its events.
pub(crate) struct Feed<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    store: Store<K>,
    subscribers: Vec<mpsc::Sender<K>>,
    ready: watch::Sender<bool>,
}

impl<K> Feed<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A feed of `api`'s objects.
    pub(crate) fn new(api: Api<K>, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store();
        Self {
            api,
            config,
            writer,
            store,
            subscribers: Vec::new(),
            ready: watch::Sender::new(false),
        }
    }

    /// The cache this feed fills.
    pub(crate) fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Turns `true` once the cache holds the first full list and the hook has seen it. Unlike
    /// `Store::wait_until_ready`, any number of tasks may wait on it at once (kube's store
    /// wakes only the last of several early waiters).
    pub(crate) fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    /// A new stream of every touched object, from the first list on.
    pub(crate) fn subscribe(
        &mut self,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static {
        let (tx, rx) = mpsc::channel(BUFFER);
        self.subscribers.push(tx);
        rx.map(Ok)
    }

    /// Watches until `cancel` fires: each event goes to the cache, then to `hook` (with the
    /// cache), then its object to every subscriber.
    pub(crate) async fn run(
        self,
        cancel: CancellationToken,
        mut hook: impl FnMut(&Event<K>, &Store<K>) + Send,
    ) {
        let Self {
            api,
            config,
            mut writer,
            store,
            mut subscribers,
            ready,
        } = self;
        let kind = K::kind(&()).into_owned();
        let pump = async move {
            let events = watcher::watcher(api, config).default_backoff();
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(e) => {
                        warn!(kind, error = %capmaas_runtime::error_chain(&e), "watch failed; retrying");
                        continue;
                    }
                };
                writer.apply_watcher_event(&event);
                hook(&event, &store);
                if matches!(event, Event::InitDone) {
                    ready.send_replace(true);
                }
                let (Event::Apply(obj) | Event::Delete(obj) | Event::InitApply(obj)) = &event
                else {
                    continue;
                };
                for subscriber in &mut subscribers {
                    // A closed subscriber is a controller that stopped with the term.
                    let _ = subscriber.send(obj.clone()).await;
                }
            }
        };
        tokio::select! {
            () = cancel.cancelled() => {}
            () = pump => {}
        }
    }
}

impl<K> std::fmt::Debug for Feed<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("kind", &K::kind(&()))
            .field("subscribers", &self.subscribers.len())
            .finish_non_exhaustive()
    }
}
