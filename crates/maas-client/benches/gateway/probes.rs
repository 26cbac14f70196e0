//! What the gateway benchmark reads besides the simulator's and the API server's counters
//! (those are in the test support, `ApiWrites`): the gateway's reconcile counters and its
//! memory.

use std::collections::BTreeMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Samples of a Prometheus text page: `name{labels}` to value.
pub(crate) struct Counts(pub BTreeMap<String, f64>);

impl Counts {
    /// The sum of the samples whose `name{labels}` contains every one of `parts`.
    pub(crate) fn get(&self, parts: &[&str]) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| parts.iter().all(|p| k.contains(p)))
            .map(|(_, v)| *v)
            .sum()
    }

    /// The increase of every counter since `before`.
    pub(crate) fn since(&self, before: &Self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), v - before.0.get(k).copied().unwrap_or(0.0)))
                .collect(),
        )
    }
}

/// The gateway's reconcile counters and durations (`capmaas_reconcile_*`), read from its
/// metrics port.
pub(crate) async fn gateway_metrics(port: u16) -> Counts {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    Counts(
        text.lines()
            .filter(|l| l.starts_with("capmaas_reconcile"))
            .filter_map(|l| {
                let (labels, value) = l.rsplit_once(' ')?;
                Some((labels.to_owned(), value.parse::<f64>().ok()?))
            })
            .collect(),
    )
}

/// A port free right now, for the gateway's metrics server.
pub(crate) fn free_port() -> u16 {
    capmaas_testenv::free_port().expect("a free loopback port")
}

/// CPU time process `pid` has used (user and system), in clock ticks (1/100 s).
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    capmaas_testenv::cpu_time_of(pid)
        .map_or(0, |t| u64::try_from(t.as_millis() / 10).unwrap_or(u64::MAX))
}
