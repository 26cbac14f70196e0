//! Reading a request body within a size cap and a memory budget shared by every request of a
//! server, instead of buffering whatever arrives.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Body;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::BoxError;

/// Bytes that requests of one server may hold at once (bodies being received, or whatever a
/// handler charges for its work), shared by all its connections. A reservation waits until its
/// bytes are free; the request timeout bounds the wait. Cheap to clone (one budget).
#[derive(Debug, Clone)]
pub struct MemoryBudget {
    semaphore: Arc<Semaphore>,
    total: usize,
}

impl MemoryBudget {
    /// A budget of `total` bytes (at most 4 GiB, what one reservation can name).
    pub fn new(total: usize) -> Self {
        let total = total.min(u32::MAX as usize);
        Self {
            semaphore: Arc::new(Semaphore::new(total)),
            total,
        }
    }

    /// The whole budget.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes not reserved right now.
    pub fn available(&self) -> usize {
        self.semaphore.available_permits()
    }

    /// Holds `bytes` of the budget until the reservation is dropped, waiting for them to be
    /// free. More than the whole budget can never be granted: that is an error at once.
    pub async fn reserve(&self, bytes: usize) -> Result<Reservation, OverBudget> {
        let over = OverBudget {
            wanted: bytes,
            total: self.total,
        };
        let n = u32::try_from(bytes).map_err(|_| over)?;
        if bytes > self.total {
            return Err(over);
        }
        // The semaphore is never closed; an error would mean it was.
        let permit = self
            .semaphore
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(|_| over)?;
        Ok(Reservation { permit })
    }
}

/// More bytes were asked of a [`MemoryBudget`] than it has in total.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{wanted} bytes wanted, more than the whole budget of {total}")]
pub struct OverBudget {
    /// Bytes asked for.
    pub wanted: usize,
    /// The budget.
    pub total: usize,
}

/// Bytes held of a [`MemoryBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    permit: OwnedSemaphorePermit,
}

impl Reservation {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.permit.num_permits()
    }

    /// Gives back everything above `bytes` (no-op when holding less).
    pub fn shrink_to(&mut self, bytes: usize) {
        let excess = self.bytes().saturating_sub(bytes);
        if excess > 0 {
            drop(self.permit.split(excess));
        }
    }
}

/// A body read whole, with the budget it holds; drop both together once done with the bytes.
#[derive(Debug)]
pub struct ReadBody {
    /// The body.
    pub bytes: Bytes,
    /// Its share of the budget: its length.
    pub reservation: Reservation,
}

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// `Content-Length` announced more than the cap: refused before reading a byte.
    #[error("request body of {declared} bytes is larger than the limit of {limit} bytes")]
    Declared {
        /// The announced length.
        declared: u64,
        /// The cap.
        limit: usize,
    },
    /// A body of unannounced length went over the cap while streaming.
    #[error("request body is larger than the limit of {limit} bytes")]
    Streamed {
        /// The cap.
        limit: usize,
    },
    /// The cap is larger than the budget: a configuration error, refused rather than waited on.
    #[error("request body cannot be buffered: {0}")]
    Budget(#[from] OverBudget),
    /// The connection failed or the client sent something malformed.
    #[error("reading the request body")]
    Read(#[source] BoxError),
}

impl BodyError {
    /// The status to answer with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Declared { .. } | Self::Streamed { .. } | Self::Budget(_) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::Read(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// Reads `body` whole if it is at most `limit` bytes, holding its size of `budget` meanwhile.
///
/// - A length announced over `limit` (`Content-Length`, or HTTP/2's) is refused before a byte
///   is read or any budget is taken.
/// - Budget is reserved before reading: the announced length, or `limit` when none is
///   announced (trimmed to the real length once read). Waiting for budget reads nothing, so a
///   waiting client is held back by flow control, not buffered.
/// - While streaming, more than `limit` bytes is refused ([`Limited`]), whatever was announced.
pub async fn read_body<B>(
    body: B,
    limit: usize,
    budget: &MemoryBudget,
) -> Result<ReadBody, BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let hint = body.size_hint();
    let declared = hint.exact();
    if hint.lower() > limit as u64 {
        return Err(BodyError::Declared {
            declared: hint.lower(),
            limit,
        });
    }
    let expected = declared.map_or(limit, |n| usize::try_from(n).unwrap_or(limit));
    let mut reservation = budget.reserve(expected).await?;
    // With an announced length, one allocation of exactly that; otherwise grow as it comes.
    let mut buffer = BytesMut::with_capacity(declared.map_or(8 * 1024, |_| expected));
    let body = Limited::new(body, limit);
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            if e.downcast_ref::<LengthLimitError>().is_some() {
                BodyError::Streamed { limit }
            } else {
                BodyError::Read(e)
            }
        })?;
        if let Ok(data) = frame.into_data() {
            buffer.extend_from_slice(&data);
        }
    }
    reservation.shrink_to(buffer.len());
    Ok(ReadBody {
        bytes: buffer.freeze(),
        reservation,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use http_body_util::{Full, StreamBody};
    use hyper::body::Frame;

    fn chunked(chunks: Vec<&'static [u8]>) -> impl Body<Data = Bytes, Error = BoxError> {
        StreamBody::new(futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, BoxError>(Frame::data(Bytes::from_static(c)))),
        ))
    }

    #[tokio::test]
    async fn an_announced_length_over_the_cap_is_refused_without_budget() {
        let budget = MemoryBudget::new(100);
        let err = read_body(Full::new(Bytes::from(vec![0; 11])), 10, &budget)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                BodyError::Declared {
                    declared: 11,
                    limit: 10
                }
            ),
            "{err}"
        );
        assert_eq!(err.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_stream_over_the_cap_is_refused_and_its_budget_returned() {
        let budget = MemoryBudget::new(100);
        let err = read_body(chunked(vec![b"12345", b"67890", b"x"]), 10, &budget)
            .await
            .unwrap_err();
        assert!(matches!(err, BodyError::Streamed { limit: 10 }), "{err}");
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_body_holds_its_length_until_dropped() {
        let budget = MemoryBudget::new(100);
        let read = read_body(chunked(vec![b"12345", b"678"]), 50, &budget)
            .await
            .unwrap();
        assert_eq!(&read.bytes[..], b"12345678");
        // The cap was reserved for an unannounced length, then trimmed to what came.
        assert_eq!(read.reservation.bytes(), 8);
        assert_eq!(budget.available(), 92);
        drop(read);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_reservation_waits_for_budget_and_never_exceeds_it() {
        let budget = MemoryBudget::new(10);
        let first = budget.reserve(8).await.unwrap();
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(5).await.map(|r| r.bytes()) }
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "5 of 10 granted while 8 are held");
        drop(first);
        assert_eq!(waiting.await.unwrap().unwrap(), 5);
        assert!(budget.reserve(11).await.is_err());
    }
}
