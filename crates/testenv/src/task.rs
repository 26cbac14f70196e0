//! A background task a test starts (a fake gateway, a watcher) that must not outlive the value
//! holding it: a task left running would keep writing to the API server of the next test.

use std::future::Future;

use tokio::task::JoinHandle;

/// A spawned task aborted when this value is dropped.
#[derive(Debug)]
pub struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    /// Spawns `task` on the current tokio runtime.
    pub fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
