//! A client that misbehaves on purpose, for the tests of a server's limits (timeouts that cut
//! off slow heads and bodies): the server under test is in-process, the client a raw stream.

use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Writes `prefix` at once, then `bytes` one at a time, `every` apart, reading meanwhile: what
/// the server sent, and when (after `prefix`) it closed the connection (`None`: still open
/// after the last byte).
pub async fn trickle<S>(
    stream: S,
    prefix: &[u8],
    bytes: &[u8],
    every: Duration,
) -> std::io::Result<(String, Option<Duration>)>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rx, mut tx) = tokio::io::split(stream);
    tx.write_all(prefix).await?;
    tx.flush().await?;
    let started = Instant::now();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        // EOF, close_notify or a reset: either way the server let go.
        let _ = rx.read_to_end(&mut got).await;
        (
            String::from_utf8_lossy(&got).into_owned(),
            started.elapsed(),
        )
    });
    for b in bytes {
        if reader.is_finished() {
            break;
        }
        // A write after the server closed may fail; the reader has the answer.
        if tx.write_all(&[*b]).await.is_err() || tx.flush().await.is_err() {
            break;
        }
        tokio::time::sleep(every).await;
    }
    if reader.is_finished() {
        let (got, at) = reader.await.map_err(std::io::Error::other)?;
        Ok((got, Some(at)))
    } else {
        reader.abort();
        Ok((String::new(), None))
    }
}
