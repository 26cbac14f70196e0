//! The compositions MAAS refused in this term, in memory: a refused composition is asked
//! again only after [`super::decide::REFUSAL_RETRY`] or a spec change, the reconciles our own
//! writes cause included.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::decide::Refusal;

/// A refusal: the generation refused, when, and what MAAS said.
type Held = (Option<i64>, Instant, Refusal);

/// The refusals of this term, by VM host (`<namespace>/<name>`): the generation refused, when,
/// and what MAAS said. Kept in memory: a restart asks MAAS once more.
#[derive(Debug, Clone, Default)]
pub struct Refusals {
    held: Arc<Mutex<HashMap<String, Held>>>,
}

impl Refusals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The refusal of `key`: the generation it was made at, how long ago, and what it was.
    pub fn get(&self, key: &str) -> Option<(Option<i64>, Duration, Refusal)> {
        self.lock()
            .get(key)
            .map(|(g, at, r)| (*g, at.elapsed(), r.clone()))
    }

    /// Remembers a refusal of `key` at `generation`, now.
    pub fn record(&self, key: &str, generation: Option<i64>, refusal: Refusal) {
        self.lock()
            .insert(key.to_owned(), (generation, Instant::now(), refusal));
    }

    /// Forgets the refusal of `key` (a compose went through, or nothing is wanted).
    pub fn clear(&self, key: &str) {
        self.lock().remove(key);
    }
}
