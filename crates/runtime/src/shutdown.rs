//! One cancellation token for the whole process, cancelled on SIGTERM or SIGINT.
//!
//! Every long-running part (controllers via `graceful_shutdown_on(token.cancelled_owned())`, the
//! admin server, leader election) watches the same token, so there is one signal handler instead
//! of several competing ones. A second signal exits at once, for a stuck shutdown.

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::{Error, Result};

/// Exit status used when a second signal forces exit (128 + SIGINT, like a shell).
pub const FORCED_EXIT_CODE: i32 = 130;

/// Installs SIGTERM/SIGINT handlers and returns the token they cancel. Must be called inside a
/// Tokio runtime, once per process.
pub fn shutdown_on_signals() -> Result<CancellationToken> {
    let token = CancellationToken::new();
    let signals = os_signals()?;
    tokio::spawn(watch_signals(signals, token.clone(), || {
        std::process::exit(FORCED_EXIT_CODE)
    }));
    Ok(token)
}

#[cfg(unix)]
fn os_signals() -> Result<impl Stream<Item = &'static str> + Unpin + Send + 'static> {
    use std::task::Poll;
    use tokio::signal::unix::{SignalKind, signal};

    let mut term = signal(SignalKind::terminate()).map_err(Error::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(Error::Signal)?;
    Ok(futures::stream::poll_fn(move |cx| {
        if let Poll::Ready(Some(())) = term.poll_recv(cx) {
            return Poll::Ready(Some("SIGTERM"));
        }
        if let Poll::Ready(Some(())) = int.poll_recv(cx) {
            return Poll::Ready(Some("SIGINT"));
        }
        Poll::Pending
    }))
}

#[cfg(not(unix))]
fn os_signals() -> Result<impl Stream<Item = &'static str> + Unpin + Send + 'static> {
    Ok(Box::pin(futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok()?;
        Some(("CTRL-C", ()))
    })))
}

/// Cancels `token` on the first signal and calls `force` on the second.
async fn watch_signals<S, F>(mut signals: S, token: CancellationToken, force: F)
where
    S: Stream<Item = &'static str> + Unpin,
    F: FnOnce(),
{
    let Some(first) = signals.next().await else {
        return;
    };
    info!(
        signal = first,
        "shutting down gracefully; send the signal again to exit immediately"
    );
    token.cancel();
    if let Some(second) = signals.next().await {
        warn!(signal = second, "second signal: exiting immediately");
        force();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn first_signal_cancels_second_forces() {
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let token = CancellationToken::new();
        let forced = Arc::new(AtomicBool::new(false));
        let f = forced.clone();
        let task = tokio::spawn(watch_signals(rx, token.clone(), move || {
            f.store(true, Ordering::SeqCst);
        }));
        tokio::task::yield_now().await;
        assert!(!token.is_cancelled());

        tx.unbounded_send("SIGTERM").unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(1), token.cancelled())
            .await
            .unwrap();
        assert!(!forced.load(Ordering::SeqCst));

        tx.unbounded_send("SIGINT").unwrap();
        task.await.unwrap();
        assert!(forced.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn closed_signal_stream_cancels_nothing() {
        let token = CancellationToken::new();
        watch_signals(futures::stream::empty(), token.clone(), || {
            unreachable!("no signal")
        })
        .await;
        assert!(!token.is_cancelled());
    }

    #[tokio::test]
    async fn real_handlers_install() {
        let token = shutdown_on_signals().unwrap();
        assert!(!token.is_cancelled());
    }
}
