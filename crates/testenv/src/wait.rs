//! Waiting in tests: poll an asynchronous check until it yields a value or time runs out.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

/// How often [`eventually`] runs its check.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Runs `check` until it yields `Ok(Some(value))`, then returns `Ok(Some(value))`; returns
/// `Ok(None)` once `timeout` has passed without a value, and the first error `check` returns.
///
/// `check` runs at once, then every `every` (plus its own run time); the last run starts at
/// or after the deadline, so a value that appears just in time is still seen. Uses tokio's
/// clock, so it also works with a paused test clock.
pub async fn poll_until<T, E, F, Fut>(
    timeout: Duration,
    every: Duration,
    mut check: F,
) -> Result<Option<T>, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await? {
            return Ok(Some(value));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        tokio::time::sleep(every).await;
    }
}

/// Runs `check` every [`POLL_INTERVAL`] until it yields `Some(value)` and returns the value.
///
/// # Panics
///
/// When `timeout` passes first, with a message naming `what` ("timed out waiting for
/// {what}"), which fails the test.
///
/// ```no_run
/// # async fn demo(client: kube::Client) {
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Namespace;
///
/// let api: kube::Api<Namespace> = kube::Api::all(client);
/// let ns = capmaas_testenv::eventually("namespace demo", Duration::from_secs(10), || async {
///     api.get_opt("demo").await.ok().flatten()
/// })
/// .await;
/// # let _ = ns;
/// # }
/// ```
// A test helper: a timeout is a test failure, reported by panicking like `assert!`.
#[allow(clippy::panic)]
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let found = poll_until(timeout, POLL_INTERVAL, || {
        let run = check();
        async move { Ok::<_, Infallible>(run.await) }
    })
    .await;
    match found {
        Ok(Some(value)) => value,
        Ok(None) => panic!("timed out waiting for {what} (after {timeout:?})"),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn returns_the_first_value() {
        let runs = AtomicUsize::new(0);
        let value = eventually("the third run", Duration::from_secs(5), || async {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            (n == 3).then_some(n)
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for the impossible")]
    async fn panics_naming_what_was_awaited() {
        eventually("the impossible", Duration::from_millis(300), || async {
            None::<()>
        })
        .await;
    }

    #[tokio::test]
    async fn poll_until_times_out_with_none_and_passes_errors_on() {
        let started = tokio::time::Instant::now();
        let none: Result<Option<()>, &str> = poll_until(
            Duration::from_millis(300),
            Duration::from_millis(50),
            || async { Ok(None) },
        )
        .await;
        assert_eq!(none, Ok(None));
        assert!(started.elapsed() >= Duration::from_millis(300));

        let failed: Result<Option<()>, &str> = poll_until(
            Duration::from_secs(5),
            Duration::from_millis(50),
            || async { Err("broken") },
        )
        .await;
        assert_eq!(failed, Err("broken"));
    }
}
