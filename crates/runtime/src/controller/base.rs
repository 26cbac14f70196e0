//! What every controller's context holds, built the same way in every leadership term.

use std::time::Duration;

use kube::Client;

use super::Events;
use crate::runtime::Term;

/// The part of a controller's context that every controller has: each `Ctx` embeds one, so
/// none of them builds its client, field manager or Event recorder on its own.
#[derive(Clone)]
pub struct Base {
    /// Client for calls (with read timeouts).
    pub client: Client,
    /// Server-side apply field manager (`capmaas-<binary>`).
    pub field_manager: String,
    /// Events reported as `capmaas-<binary>`; built once, so its cache turns repeats into series.
    pub events: Events,
    /// Requeue of a settled object (`--sync-period`).
    pub sync_period: Duration,
}

impl Base {
    /// The base of one leadership term: its API client, the binary's field manager and Event
    /// reporter, and `--sync-period`.
    pub fn for_term(term: &Term) -> Self {
        let client = term.clients.api.clone();
        Self {
            events: Events::new(client.clone(), &term.settings.binary),
            client,
            field_manager: term.settings.field_manager.clone(),
            sync_period: term.settings.sync_period,
        }
    }
}

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("field_manager", &self.field_manager)
            .field("sync_period", &self.sync_period)
            .finish_non_exhaustive()
    }
}
