//! A controller running in-process, on its own task, until stopped or dropped: the harness the
//! integration tests and benchmarks of every binary share, so each of them does not keep its own
//! copy of "build [`Runtime::embedded`], spawn [`Runtime::run`], cancel on drop".
//!
//! ```no_run
//! # async fn demo(config: kube::Config) -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use capmaas_runtime::{BoxError, Term, embedded::Running};
//!
//! async fn run(term: Term) -> Result<(), BoxError> {
//!     term.cancel.cancelled().await;
//!     Ok(())
//! }
//!
//! let controller = Running::start("thing-controller", config, &["--concurrency=2"], run).await?;
//! // … drive the API server and watch the controller act …
//! controller.stop(Duration::from_secs(10)).await?;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::time::Duration;

use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::error::{BoxError, Error, Result};
use crate::metrics::MetricsRegistry;
use crate::runtime::{Runtime, Term};

/// A controller running in-process ([`Runtime::embedded`] then [`Runtime::run`] on a spawned
/// task).
///
/// Dropping it cancels the runtime and aborts the task at once, as a kill would: a test that
/// ends, or panics, leaves no controller acting on the next one's objects. [`Running::stop`]
/// stops it gracefully instead and reports how the run ended.
#[derive(Debug)]
pub struct Running {
    stop: CancellationToken,
    metrics: MetricsRegistry,
    // `None` only once `stop` has taken it; kept in an `Option` because `Drop` forbids moving
    // a field out of `self`.
    task: Option<JoinHandle<Result<()>>>,
}

/// How [`Running::stop`] failed.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// The run had not returned when the allowed time was up; its task has been aborted.
    #[error("the controller did not stop within {0:?}")]
    TimedOut(Duration),
    /// The run's task panicked (or was aborted).
    #[error("the controller's task ended abnormally: {0}")]
    Task(#[from] JoinError),
    /// The run returned an error.
    #[error("the controller failed: {0}")]
    Run(#[from] Error),
}

impl Running {
    /// Starts `binary`'s controller against the API server of `config`, with `flags` as on its
    /// command line (e.g. `--namespace=x`, `--concurrency=2`); `controller` is what
    /// [`Runtime::run`] calls in each leadership term.
    ///
    /// # Errors
    ///
    /// When [`Runtime::embedded`] does (a flag it rejects, a client it cannot build).
    pub async fn start<F, Fut, E>(
        binary: &str,
        config: kube::Config,
        flags: &[&str],
        controller: F,
    ) -> Result<Self>
    where
        F: FnMut(Term) -> Fut + Send + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Into<BoxError> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let runtime = Runtime::embedded(binary, config, stop.clone(), flags).await?;
        // Taken before `run` consumes the runtime: benchmarks read the controller's metrics.
        let metrics = runtime.metrics().clone();
        let task = tokio::spawn(runtime.run(controller));
        Ok(Self {
            stop,
            metrics,
            task: Some(task),
        })
    }

    /// The controller's metrics registry (what `/metrics` would serve).
    pub fn metrics(&self) -> &MetricsRegistry {
        &self.metrics
    }

    /// Cancels the runtime and waits up to `within` for the run to return.
    ///
    /// # Errors
    ///
    /// [`StopError::TimedOut`] when it takes longer (the task is then aborted), otherwise how
    /// the run itself ended when not with `Ok`.
    pub async fn stop(mut self, within: Duration) -> std::result::Result<(), StopError> {
        self.stop.cancel();
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        let abort = task.abort_handle();
        match tokio::time::timeout(within, task).await {
            Ok(joined) => Ok(joined??),
            Err(_elapsed) => {
                abort.abort();
                Err(StopError::TimedOut(within))
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
