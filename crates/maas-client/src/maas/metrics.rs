//! The gateway's MAAS metrics: requests and their latency per operation (one event per HTTP
//! attempt, from the client's observer), rate-limit waits, and whether MAAS is reached in clear.

use std::time::Duration;

use maas_api_client::{RequestEvent, RequestObserver};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    operation: &'static str,
    outcome: &'static str,
}

type LatencyFamily = Family<OperationLabels, Histogram, fn() -> Histogram>;

fn wait_histogram() -> Histogram {
    // 1 ms .. ~33 s: no wait at all lands in the first bucket.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

fn latency_histogram() -> Histogram {
    // 5 ms .. ~160 s: from a cached read to a slow BMC query.
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// MAAS request metrics: `capmaas_maas_requests_total{operation,outcome}` (outcome `ok` or the
/// error kind) and `capmaas_maas_request_duration_seconds{operation}`. One event per HTTP
/// attempt, so retries are visible.
#[derive(Clone, Debug)]
pub struct MaasMetrics {
    requests: Family<OutcomeLabels, Counter>,
    latency: LatencyFamily,
    rate_limit_wait: LatencyFamily,
    plain_http: Gauge,
}

impl MaasMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let this = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            rate_limit_wait: Family::new_with_constructor(wait_histogram),
            plain_http: Gauge::default(),
        };
        registry.register(
            "maas_plain_http",
            "1 while the gateway reaches MAAS over plain http (--maas-allow-insecure-http): the MAAS key travels in clear",
            this.plain_http.clone(),
        );
        registry.register(
            "maas_requests",
            "MAAS API requests by operation and outcome (ok or error kind)",
            this.requests.clone(),
        );
        registry.register(
            "maas_request_duration_seconds",
            "Latency of MAAS API requests by operation",
            this.latency.clone(),
        );
        registry.register(
            "maas_rate_limit_wait_seconds",
            "Time MAAS calls waited for the gateway's rate limit (--maas-rate-limit), by operation",
            this.rate_limit_wait.clone(),
        );
        this
    }

    /// Says whether MAAS is reached over plain http.
    pub fn set_plain_http(&self, plain_http: bool) {
        self.plain_http.set(i64::from(plain_http));
    }

    /// Records how long a call of `operation` waited for the rate limiter.
    pub fn observe_rate_limit_wait(&self, operation: &'static str, waited: Duration) {
        self.rate_limit_wait
            .get_or_create(&OperationLabels { operation })
            .observe(waited.as_secs_f64());
    }

    /// Metrics that are not exported (tests, benchmarks).
    pub fn unregistered() -> Self {
        Self::register(&mut Registry::default())
    }

    /// Requests counted so far for `operation` with `outcome`.
    pub fn count(&self, operation: &'static str, outcome: &'static str) -> u64 {
        self.requests
            .get_or_create(&OutcomeLabels { operation, outcome })
            .get()
    }
}

impl RequestObserver for MaasMetrics {
    fn observe(&self, event: &RequestEvent) {
        self.requests
            .get_or_create(&OutcomeLabels {
                operation: event.operation,
                outcome: event.outcome,
            })
            .inc();
        self.latency
            .get_or_create(&OperationLabels {
                operation: event.operation,
            })
            .observe(event.latency.as_secs_f64());
    }
}
