//! What the benches against a real API server (`cargo bench`, `harness = false`) start with:
//! their logs on request, and the build they measure.

use crate::env::TestEnv;
use crate::process::{Process, peak_rss_kib};

/// Logs to stderr, filtered by `RUST_LOG`, when it is set; otherwise nothing is logged, so the
/// bench's printed figures stand alone.
pub fn log_to_stderr_if_asked() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
}

/// The build profile (`debug`, or optimised as `cargo bench` builds) and the number of cores:
/// what the figures depend on most, printed before them.
pub fn profile_and_cores() -> (&'static str, usize) {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "optimised (bench profile)"
    };
    (profile, cores)
}

/// The peak resident memory, in MiB rounded, of this process and of `env`'s kube-apiserver
/// (`?` where it cannot be read): what a bench reports last.
pub fn peak_rss_mib(env: &TestEnv) -> (String, String) {
    let apiserver = env
        .processes()
        .iter()
        .find(|p| p.name() == "kube-apiserver")
        .and_then(Process::peak_resident_memory_kib);
    (mib(peak_rss_kib(std::process::id())), mib(apiserver))
}

// Memory sizes far below 2^52 KiB: the conversion is exact.
#[allow(clippy::cast_precision_loss)]
fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "?".into(), |k| format!("{:.0}", k as f64 / 1024.0))
}
