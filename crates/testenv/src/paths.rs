//! Where the test control plane lives: the repository, the cache of built binaries, kubectl;
//! and the benchmarks' environment knobs.

use std::path::{Path, PathBuf};

/// The value of environment variable `name` (surrounding white space ignored), or `default`
/// when it is unset or does not parse: the knobs of the benchmarks (`BENCH_*` sizes, rates,
/// durations), where a typo should fall back to the documented default, not abort a long run.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The repository root (this crate lives in `crates/testenv`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The cache folder holding the built binaries and the CAPI CRDs
/// (`CAPMAAS_TESTENV_DIR`, default `<repo>/.cache/testenv`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("CAPMAAS_TESTENV_DIR")
        .map_or_else(|| repo_root().join(".cache/testenv"), PathBuf::from)
}

/// The kubectl built with the control plane (same version), or `kubectl` from `PATH`.
pub fn kubectl() -> PathBuf {
    let built = cache_dir().join("bin/kubectl");
    if built.is_file() {
        built
    } else {
        PathBuf::from("kubectl")
    }
}
