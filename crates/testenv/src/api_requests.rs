//! What the API server counted of the requests it answered (`apiserver_request_total`), read
//! from its `/metrics`: the one parser of that counter for every test and benchmark that counts
//! writes. Counted by the server itself, so a write that changes nothing counts too.

use std::collections::BTreeMap;

/// The verbs of `apiserver_request_total` that write (`APPLY` is server-side apply).
pub const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "APPLY"];

/// The samples of `metric` in a Prometheus text exposition (`name{labels} value` lines), as
/// (label set, value); samples without labels or with an unreadable value are skipped.
pub fn samples<'a>(text: &'a str, metric: &str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    let prefix = format!("{metric}{{");
    text.lines()
        .filter(move |line| line.starts_with(&prefix))
        .filter_map(|line| {
            let (labels, value) = line.rsplit_once(' ')?;
            Some((labels, value.parse::<f64>().ok()?))
        })
}

/// The value of label `name` in a sample's label set (`{a="x",b="y"}`), empty when absent.
pub fn label(labels: &str, name: &str) -> String {
    labels
        .split(&format!(",{name}=\""))
        .nth(1)
        .or_else(|| labels.split(&format!("{{{name}=\"")).nth(1))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

/// Requests by `(resource[/subresource], verb)`: (all, answered with other than 2xx).
/// Requests to non-resource paths (`/metrics`, `/healthz`) are left out.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ApiRequests(pub BTreeMap<(String, String), (f64, f64)>);

impl ApiRequests {
    /// Reads the counters of the API server `client` talks to.
    pub async fn scrape(client: &kube::Client) -> Result<Self, kube::Error> {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        Ok(Self::parse(&client.request_text(request).await?))
    }

    /// The `apiserver_request_total` samples of a `/metrics` text, summed by resource and verb.
    pub fn parse(metrics: &str) -> Self {
        let mut requests = Self::default();
        for (labels, value) in samples(metrics, "apiserver_request_total") {
            let mut resource = label(labels, "resource");
            if resource.is_empty() {
                continue;
            }
            let subresource = label(labels, "subresource");
            if !subresource.is_empty() {
                resource = format!("{resource}/{subresource}");
            }
            let entry = requests
                .0
                .entry((resource, label(labels, "verb")))
                .or_default();
            entry.0 += value;
            if !label(labels, "code").starts_with('2') {
                entry.1 += value;
            }
        }
        requests
    }

    /// What was counted after `before` (keys with no new request left out).
    #[must_use]
    pub fn since(&self, before: &Self) -> Self {
        let mut delta = Self::default();
        for (key, (all, refused)) in &self.0 {
            let (all_before, refused_before) = before.0.get(key).copied().unwrap_or_default();
            if *all > all_before {
                delta
                    .0
                    .insert(key.clone(), (all - all_before, refused - refused_before));
            }
        }
        delta
    }

    /// The requests counted after `before` once the count has stopped growing: read every
    /// `quiet` until the writes of two readings in a row are the same (at most 30 readings).
    /// Without the API server's own `leases` renewals.
    pub async fn settled(
        client: &kube::Client,
        before: &Self,
        quiet: std::time::Duration,
    ) -> Result<Self, kube::Error> {
        let reading = || async {
            Ok::<_, kube::Error>(Self::scrape(client).await?.since(before).without("leases"))
        };
        let mut last = reading().await?;
        for _ in 0..30 {
            tokio::time::sleep(quiet).await;
            let now = reading().await?;
            let writes = |r: &Self| r.clone().writes().total();
            if (writes(&now) - writes(&last)).abs() < 0.5 {
                return Ok(now);
            }
            last = now;
        }
        Ok(last)
    }

    /// Only the write verbs ([`WRITE_VERBS`]).
    #[must_use]
    pub fn writes(self) -> Self {
        self.verbs(&WRITE_VERBS)
    }

    /// Only the requests with one of `verbs`.
    #[must_use]
    pub fn verbs(mut self, verbs: &[&str]) -> Self {
        self.0.retain(|(_, verb), _| verbs.contains(&verb.as_str()));
        self
    }

    /// Less `n` requests of `resource` with `verb` (those a test made itself); keys left with
    /// none are dropped.
    #[must_use]
    pub fn minus(mut self, resource: &str, verb: &str, n: f64) -> Self {
        if let Some(entry) = self.0.get_mut(&(resource.to_owned(), verb.to_owned())) {
            entry.0 -= n;
        }
        self.0.retain(|_, (all, _)| *all > 0.0);
        self
    }

    /// `resource VERB 1.23 (0.10 not 2xx); …` per one of `n` objects, most first.
    #[allow(clippy::cast_precision_loss)]
    pub fn per(&self, n: usize) -> String {
        let n = n.max(1) as f64;
        let mut rows: Vec<_> = self.0.iter().collect();
        rows.sort_by(|a, b| b.1.0.total_cmp(&a.1.0));
        rows.iter()
            .map(|((resource, verb), (all, refused))| {
                if *refused > 0.0 {
                    format!(
                        "{resource} {verb} {:.2} ({:.2} not 2xx)",
                        all / n,
                        refused / n
                    )
                } else {
                    format!("{resource} {verb} {:.2}", all / n)
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Without the requests to `resource` and its subresources (e.g. `leases`, which the API
    /// server renews on its own).
    #[must_use]
    pub fn without(mut self, resource: &str) -> Self {
        self.0
            .retain(|(r, _), _| r.split_once('/').map_or(r.as_str(), |(main, _)| main) != resource);
        self
    }

    /// Requests by `resource[/subresource]`, whatever the verb.
    pub fn by_resource(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for ((resource, _), (all, _)) in &self.0 {
            *out.entry(resource.clone()).or_default() += all;
        }
        out
    }

    /// All requests.
    pub fn total(&self) -> f64 {
        self.0.values().map(|(all, _)| all).sum()
    }

    /// Requests answered with other than 2xx.
    pub fn refused(&self) -> f64 {
        self.0.values().map(|(_, refused)| refused).sum()
    }
}

#[cfg(test)]
// Counts are whole numbers, exact in f64.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    const METRICS: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="infrastructure.cluster.x-k8s.io",resource="maasmachines",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="infrastructure.cluster.x-k8s.io",resource="maasmachines",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 9
apiserver_request_duration_seconds_bucket{resource="events",verb="POST",le="0.005"} 3
"#;

    #[test]
    fn requests_are_summed_by_resource_and_verb() {
        let requests = ApiRequests::parse(METRICS);
        assert_eq!(
            requests.0[&("maasmachines/status".to_owned(), "PATCH".to_owned())],
            (9.0, 2.0)
        );
        assert_eq!(
            requests.total(),
            9.0 + 3.0 + 5.0 + 4.0,
            "no non-resource path"
        );
        let writes = requests.clone().writes().without("leases");
        assert_eq!(writes.total(), 12.0);
        assert_eq!(writes.refused(), 2.0);
        assert_eq!(writes.by_resource()["events"], 3.0);
        assert_eq!(writes.clone().without("maasmachines").total(), 3.0);
        assert_eq!(
            writes.per(3),
            "maasmachines/status PATCH 3.00 (0.67 not 2xx); events POST 1.00"
        );
        let fewer = writes.minus("events", "POST", 3.0);
        assert_eq!(fewer.total(), 9.0);
        assert!(
            !fewer
                .0
                .contains_key(&("events".to_owned(), "POST".to_owned()))
        );
    }

    #[test]
    fn since_keeps_what_grew() {
        let before = ApiRequests::parse(METRICS);
        let after = ApiRequests::parse(&METRICS.replace("} 3\n", "} 5\n"));
        let delta = after.since(&before);
        assert_eq!(delta.0.len(), 1);
        assert_eq!(
            delta.0[&("events".to_owned(), "POST".to_owned())],
            (2.0, 0.0)
        );
    }

    #[test]
    fn labels_are_read_by_exact_name() {
        let labels = r#"{subresource="status",resource="maashosts",code="200"}"#;
        assert_eq!(label(labels, "resource"), "maashosts");
        assert_eq!(label(labels, "subresource"), "status");
        assert_eq!(label(labels, "verb"), "");
    }
}
