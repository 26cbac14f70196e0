//! Allocation speed of the IPAM provider's pure parts, side by side with a linear scan of the
//! Metal3 IPAM kind, in the same run. Prints numbers, asserts nothing (`cargo bench -p
//! data-controller --bench ipam`).
//!
//! Each case fills a pool from empty to full, one allocation at a time:
//! - `allocator, sequential` / `allocator, random`: [`Allocator::allocate`] (free-interval
//!   index, `O(S · log F)` per allocation);
//! - `index + IPAddress, sequential`: what one claim costs the controller in memory: a
//!   [`UsageIndex::allocate`] (reservation) and the watch event of the created `IPAddress`
//!   ([`UsageIndex::apply`]), including building the object;
//! - `linear scan (Metal3 kind)`: per allocation, the in-use set is rebuilt from the list of
//!   `IPAddress` addresses (strings) and the range is walked from its start, formatting each
//!   candidate, until a free one — `O(n)` per allocation, `O(n²)` to fill. Stopped after
//!   [`SCAN_BUDGET`]; the rate is over the allocations done by then (it only gets slower).
//!
//! The claims-per-second figure against a real API server is a separate benchmark; a caller
//! can reuse [`pool`] and [`report`] for its rows.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::cast_precision_loss
)]

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmaas_api::capi_ipam::{IPAddress, IPAddressClaimReference, IPAddressSpec, IPPoolReference};
use capmaas_api::ipam::{AllocationStrategy, IpPoolRange};
use capmaas_api::{MaasIPPool, MaasIPPoolSpec};
use data_controller::ipam::{Allocator, PoolKey, PoolLayout, UsageIndex};

/// Time the linear scan may take per pool size.
const SCAN_BUDGET: Duration = Duration::from_secs(20);

/// A MaasIPPool of `size` IPv4 addresses starting at `10.<second>.0.0` (prefix 8, so no
/// network or broadcast address falls inside).
pub fn pool(second: u8, size: u32) -> MaasIPPool {
    let first = Ipv4Addr::new(10, second, 0, 0);
    let last = Ipv4Addr::from(u32::from(first) + size - 1);
    let mut pool = MaasIPPool::new(
        "bench",
        MaasIPPoolSpec {
            pools: vec![IpPoolRange {
                start: Some(first.to_string()),
                end: Some(last.to_string()),
                prefix: Some(8),
                ..IpPoolRange::default()
            }],
            prefix: None,
            gateway: None,
            dns_servers: None,
            exclusions: None,
            pre_allocations: None,
            name_prefix: "bench".into(),
            cluster_name: None,
            allocation_strategy: AllocationStrategy::Sequential,
            maas_subnet: None,
        },
    );
    pool.metadata.namespace = Some("bench".into());
    pool.metadata.uid = Some("uid-bench".into());
    pool.metadata.generation = Some(1);
    pool
}

/// One printed row: `allocations` done in `elapsed`.
pub fn report(case: &str, size: u32, allocations: u64, elapsed: Duration, note: &str) {
    let rate = allocations as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "{case:<34} {size:>7} {allocations:>9} {:>10.3} s {rate:>14.0} /s  {note}",
        elapsed.as_secs_f64()
    );
}

fn fill_allocator(layout: &Arc<PoolLayout>, strategy: AllocationStrategy) -> (u64, Duration) {
    let mut allocator = Allocator::new(layout.clone());
    let mut rng = fastrand::Rng::with_seed(7);
    let start = Instant::now();
    let mut n = 0u64;
    while allocator.allocate(strategy, rng.u128(..)).is_some() {
        n += 1;
    }
    (n, start.elapsed())
}

fn address_object(ip: IpAddr, n: u64) -> IPAddress {
    let mut a = IPAddress::new(
        &format!("bench-{}", ip.to_string().replace('.', "-")),
        IPAddressSpec {
            claim_ref: IPAddressClaimReference {
                name: format!("claim-{n}"),
            },
            pool_ref: IPPoolReference::maas_ip_pool("bench"),
            address: ip.to_string(),
            prefix: 8,
            gateway: None,
        },
    );
    a.metadata.namespace = Some("bench".into());
    a.metadata.uid = Some(format!("uid-{n}"));
    a
}

fn fill_index(pool: &MaasIPPool) -> (u64, Duration) {
    let mut index = UsageIndex::new();
    let key = PoolKey::of(pool);
    index.layout(pool).unwrap();
    let start = Instant::now();
    let mut n = 0u64;
    while let Some(ip) = index.allocate(&key, AllocationStrategy::Sequential, 0, Instant::now()) {
        index.note_created(&address_object(ip, n));
        n += 1;
    }
    (n, start.elapsed())
}

/// Metal3 IPAM's way: the listed addresses into a set, then a walk from the start.
fn fill_linear(first: u32, size: u32) -> (u64, Duration, bool) {
    let mut listed: Vec<String> = Vec::new();
    let start = Instant::now();
    loop {
        if start.elapsed() > SCAN_BUDGET {
            return (listed.len() as u64, start.elapsed(), false);
        }
        let in_use: HashSet<&str> = listed.iter().map(String::as_str).collect();
        let free = (0..size)
            .map(|i| Ipv4Addr::from(first + i).to_string())
            .find(|candidate| !in_use.contains(candidate.as_str()));
        match free {
            Some(ip) => listed.push(ip),
            None => return (listed.len() as u64, start.elapsed(), true),
        }
    }
}

fn main() {
    println!(
        "{:<34} {:>7} {:>9} {:>12} {:>16}",
        "case", "pool", "allocs", "time", "allocations/s"
    );
    for (second, size) in [(1u8, 10_000u32), (2, 65_536)] {
        let pool = pool(second, size);
        let layout = Arc::new(PoolLayout::from_spec(&pool.spec).unwrap());
        assert_eq!(layout.positions(), u128::from(size));
        let (n, t) = fill_allocator(&layout, AllocationStrategy::Sequential);
        report("allocator, sequential", size, n, t, "");
        let (n, t) = fill_allocator(&layout, AllocationStrategy::Random);
        report("allocator, random", size, n, t, "");
        let (n, t) = fill_index(&pool);
        report("index + IPAddress, sequential", size, n, t, "");
        let first = u32::from(Ipv4Addr::new(10, second, 0, 0));
        let (n, t, full) = fill_linear(first, size);
        let note = if full {
            String::new()
        } else {
            format!("stopped after {}s at {n} of {size}", SCAN_BUDGET.as_secs())
        };
        report("linear scan (Metal3 kind)", size, n, t, &note);
    }
}
