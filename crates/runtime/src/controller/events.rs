//! Kubernetes Events (`events.k8s.io/v1`), published the same way by every controller.
//!
//! The same Event repeated on an object (same type, reason **and note**) within
//! [`SERIES_WINDOW`] of its last sighting becomes a series on the first one (`series.count`,
//! `series.lastObservedTime`: one patch, shown by kubectl as `(x3 over 2m)`); anything else is a
//! new Event. kube's `Recorder` keys its series without the note, so a reason whose note
//! changes (an inventory's `MachinesSkipped` naming other machines, machine-controller's
//! no-host Warning as hosts come and go) was folded into the first Event and the new note was
//! never shown; client-go's events/v1 recorder keys on the note too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::events::{EventType, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{debug, warn};

use crate::error::error_chain;

/// The API server refuses an Event `note` longer than this (bytes).
pub const MAX_NOTE_BYTES: usize = 1024;

/// How long after its last sighting a repeated Event still continues its series (as kube's and
/// client-go's recorders).
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// What makes two Events the same one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    namespace: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    warning: bool,
    reason: String,
    note: String,
}

/// An Event we created, and how often it was seen.
#[derive(Debug, Clone)]
struct Published {
    name: String,
    count: i32,
    last_seen: Instant,
}

/// How often expired series are forgotten: a sweep walks every series of the last
/// [`SERIES_WINDOW`], so not on every publish.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The series seen within the window, and when expired ones were last forgotten.
#[derive(Debug)]
struct SeriesBook {
    by_key: HashMap<SeriesKey, Published>,
    swept: Instant,
}

impl Default for SeriesBook {
    fn default() -> Self {
        Self {
            by_key: HashMap::new(),
            swept: Instant::now(),
        }
    }
}

/// Publishes Events for one binary; cheap to clone (clones share the series). Build it once
/// per term.
#[derive(Clone)]
pub struct Events {
    client: Client,
    reporter: Reporter,
    published: Arc<Mutex<SeriesBook>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// Events reported as `capmaas-<binary>` (instance from `POD_NAME`).
    pub fn new(client: Client, binary: &str) -> Self {
        let pod = std::env::var("POD_NAME").ok();
        Self {
            client,
            reporter: crate::client::event_reporter(binary, pod.as_deref()),
            published: Arc::default(),
        }
    }

    /// A `Normal` Event on `obj`.
    pub async fn normal<K>(&self, obj: &K, reason: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Normal, reason, note).await;
    }

    /// A `Warning` Event on `obj`.
    pub async fn warning<K>(&self, obj: &K, reason: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Warning, reason, note).await;
    }

    /// An Event on `obj`: a new one, or the next of its series. Events are for humans: a failure
    /// to record one is logged and never fails the reconcile. The note is cut to what the API
    /// server accepts.
    pub async fn publish<K>(&self, obj: &K, type_: EventType, reason: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        let regarding = obj.object_ref(&());
        let key = SeriesKey {
            namespace: regarding.namespace.clone(),
            kind: regarding.kind.clone(),
            name: regarding.name.clone(),
            uid: regarding.uid.clone(),
            warning: type_ == EventType::Warning,
            reason: reason.to_owned(),
            note: truncate(note, MAX_NOTE_BYTES).to_owned(),
        };
        let api: Api<KubeEvent> = Api::namespaced(
            self.client.clone(),
            regarding.namespace.as_deref().unwrap_or("default"),
        );
        let result = match self.previous(&key) {
            Some(previous) => match self.continue_series(&api, &previous).await {
                // Gone (the API server's Event TTL): start again.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    self.create(&api, key.clone(), type_, regarding).await
                }
                other => other.map(|()| self.seen_again(&key, &previous)),
            },
            None => self.create(&api, key.clone(), type_, regarding).await,
        };
        match result {
            Ok(()) => {}
            // A refusal is a deployment missing a rule, which someone must fix; anything else
            // (a namespace being deleted, a brief outage) is noise.
            Err(kube::Error::Api(status)) if status.code == 403 => {
                warn!(reason, error = %status.message, "cannot publish event: forbidden");
            }
            Err(e) => debug!(reason, error = %error_chain(&e), "cannot publish event"),
        }
    }

    /// The Event `key` continues, if seen within the window; now and then forgets the expired
    /// ones.
    fn previous(&self, key: &SeriesKey) -> Option<Published> {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if published.swept.elapsed() >= SWEEP_EVERY {
            published
                .by_key
                .retain(|_, p| p.last_seen.elapsed() < SERIES_WINDOW);
            published.swept = Instant::now();
        }
        published
            .by_key
            .get(key)
            .filter(|p| p.last_seen.elapsed() < SERIES_WINDOW)
            .cloned()
    }

    fn seen_again(&self, key: &SeriesKey, previous: &Published) {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        published.by_key.insert(
            key.clone(),
            Published {
                count: previous.count + 1,
                last_seen: Instant::now(),
                ..previous.clone()
            },
        );
    }

    async fn continue_series(
        &self,
        api: &Api<KubeEvent>,
        previous: &Published,
    ) -> Result<(), kube::Error> {
        let series = EventSeries {
            count: previous.count + 1,
            last_observed_time: MicroTime(Timestamp::now()),
        };
        api.patch(
            &previous.name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "series": series })),
        )
        .await
        .map(drop)
    }

    async fn create(
        &self,
        api: &Api<KubeEvent>,
        key: SeriesKey,
        type_: EventType,
        regarding: ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let event = KubeEvent {
            metadata: ObjectMeta {
                // As client-go names them: the object's name and the time in nanoseconds.
                name: Some(format!(
                    "{}.{:x}",
                    regarding
                        .name
                        .as_deref()
                        .unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                namespace: regarding.namespace.clone(),
                ..ObjectMeta::default()
            },
            action: Some("Reconcile".to_owned()),
            reason: Some(key.reason.clone()),
            note: Some(key.note.clone()),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..KubeEvent::default()
        };
        let created = api.create(&PostParams::default(), &event).await?;
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        published.by_key.insert(
            key,
            Published {
                name: created.name_any(),
                count: 1,
                last_seen: Instant::now(),
            },
        );
        Ok(())
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_on_character_boundaries() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ééé", 3), "é");
        assert_eq!(
            truncate(&"x".repeat(2000), MAX_NOTE_BYTES).len(),
            MAX_NOTE_BYTES
        );
    }
}
