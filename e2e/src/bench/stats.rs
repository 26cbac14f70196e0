//! Percentiles of samples (seconds, possibly negative: a hop whose second step came first).

/// The `p`-th percentile (0–100) of `samples` by the nearest-rank method: the smallest sample
/// with at least `p` % of the samples at or below it. Nearest rank, not interpolation, so
/// every number printed is one a machine really took. None when there are no samples.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let rank = (p.clamp(0.0, 100.0) / 100.0 * super::count(n)).ceil();
    // rank is in 0..=n; index rank − 1, at least 0.
    let index = (1..=n)
        .find(|i| super::count(*i) >= rank)
        .unwrap_or(n)
        .saturating_sub(1);
    sorted.get(index).copied()
}

/// Median and 99th percentile.
pub fn p50_p99(samples: &[f64]) -> Option<(f64, f64)> {
    Some((percentile(samples, 50.0)?, percentile(samples, 99.0)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&samples, 50.0), Some(50.0));
        assert_eq!(percentile(&samples, 99.0), Some(99.0));
        assert_eq!(percentile(&samples, 100.0), Some(100.0));
        assert_eq!(percentile(&samples, 0.0), Some(1.0));
        // Order does not matter, and with few samples the p99 is the largest.
        assert_eq!(p50_p99(&[3.0, -1.0, 2.0]), Some((2.0, 3.0)));
        assert_eq!(p50_p99(&[7.5]), Some((7.5, 7.5)));
        assert_eq!(p50_p99(&[]), None);
    }
}
