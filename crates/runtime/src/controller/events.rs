//! Kubernetes Events, published the same way by every controller.

use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource};
use tracing::{debug, warn};

use crate::error::error_chain;

/// The API server refuses an Event `note` longer than this (bytes).
pub const MAX_NOTE_BYTES: usize = 1024;

/// Publishes Events for one binary; cheap to clone. Build it once per term: the recorder's
/// cache turns repeats of the same Event into a series instead of new objects.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

impl Events {
    /// Events reported as `capmaas-<binary>` (instance from `POD_NAME`).
    pub fn new(client: Client, binary: &str) -> Self {
        Self {
            recorder: crate::event_recorder(client, binary),
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

    /// An Event on `obj`. Events are for humans: a failure to record one is logged and never
    /// fails the reconcile. The note is cut to what the API server accepts.
    pub async fn publish<K>(&self, obj: &K, type_: EventType, reason: &str, note: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncate(note, MAX_NOTE_BYTES).to_owned()),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        match self.recorder.publish(&event, &obj.object_ref(&())).await {
            Ok(()) => {}
            // A refusal is a deployment missing a rule, which someone must fix; anything else
            // (a namespace being deleted, a brief outage) is noise.
            Err(kube::Error::Api(status)) if status.code == 403 => {
                warn!(reason, error = %status.message, "cannot publish event: forbidden");
            }
            Err(e) => debug!(reason, error = %error_chain(&e), "cannot publish event"),
        }
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
