//! Admission metrics: requests by kind, mode, operation and outcome, and their latency.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of one admission request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Our kind, e.g. `MaasIPPool`; `unknown` for a path that names none.
    pub kind: String,
    /// `mutate` or `validate`.
    pub mode: String,
    /// `CREATE`, `UPDATE`, `DELETE`, or `none` when the review could not be read.
    pub operation: String,
    /// `allowed`, `warned`, `defaulted`, `denied`, or `error`.
    pub outcome: String,
}

/// Labels of the latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    /// `mutate` or `validate`.
    pub mode: String,
}

/// The webhook server's metric families.
#[derive(Clone, Debug)]
pub struct AdmissionMetrics {
    /// `capmaas_admission_requests_total`.
    pub requests: Family<RequestLabels, Counter>,
    /// `capmaas_admission_duration_seconds`: from request received to response written.
    pub duration: Family<ModeLabels, Histogram>,
}

impl AdmissionMetrics {
    /// Registers the families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "Admission reviews answered, by kind, mode, operation and outcome",
            requests.clone(),
        );
        let duration = Family::<ModeLabels, Histogram>::new_with_constructor(|| {
            // 50 µs to ~0.8 s: admission should sit at the low end.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.000_05, 2.0, 15,
            ))
        });
        registry.register(
            "admission_duration_seconds",
            "Time to answer one admission review",
            duration.clone(),
        );
        Self { requests, duration }
    }
}
