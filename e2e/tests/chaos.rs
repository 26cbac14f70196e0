//! The chaos run at test size: 12 machines (1 control plane + 11 workers) on 14
//! simulated servers, a random controller SIGKILLed and restarted every 3 s, 10 % 5xx, 2 %
//! timeouts, 2 % commit-then-fail and a 10 s MAAS outage while they are provisioned, scaled
//! to 6 and deleted. Every harm count must be 0 (`just chaos` is the full size).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_e2e::chaos::{ChaosConfig, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_harms_nothing() {
    let config = ChaosConfig::small();
    let machines = config.machines;
    let report = run(config).await.unwrap();
    println!("{}", report.table());
    let details = format!("\n{}", report.table());
    assert!(
        report.incomplete_phases().is_empty(),
        "phases timed out: {:?}{details}",
        report.incomplete_phases()
    );
    assert_eq!(report.provisioned, machines, "{details}");
    assert!(report.leaked.is_empty(), "MAAS machines leaked{details}");
    assert!(
        report.claimed_twice.is_empty(),
        "hosts claimed twice{details}"
    );
    assert!(
        report
            .addresses_given_twice
            .as_ref()
            .is_none_or(std::collections::BTreeMap::is_empty),
        "addresses given twice{details}"
    );
    assert!(
        report.weak_erase_releases.is_empty(),
        "servers released without the requested erase{details}"
    );
    assert_eq!(report.harm(), 0, "{details}");
    // The chaos really happened.
    assert!(report.injected.kills.values().sum::<u64>() > 0, "{details}");
    assert!(report.injected.errors > 0, "{details}");
    assert!(
        report.releases >= machines,
        "every server was released{details}"
    );
}
