//! Runs the python-libmaas 0.6.8 compatibility suite (hack/python-libmaas) against the
//! `maas-sim` binary. Skipped when no Python exists locally; a failure when `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn find_python() -> Option<String> {
    ["python3.11", "python3"]
        .into_iter()
        .map(str::to_owned)
        .find(|p| {
            Command::new(p)
                .arg("-c")
                .arg("import sys")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// Skips locally, fails on CI: the suite must run there.
fn cannot_run(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "python-libmaas suite cannot run on CI: {reason}"
    );
    eprintln!("skipping python-libmaas suite: {reason}");
}

#[test]
fn python_libmaas_against_the_simulator() {
    let root = repo_root();
    let Some(python) = find_python() else {
        cannot_run("no python3.11 or python3 on PATH");
        return;
    };
    let setup = Command::new("bash")
        .arg(root.join("hack/python-libmaas/setup-venv.sh"))
        .env("PYTHON", &python)
        .output()
        .expect("run setup-venv.sh");
    if !setup.status.success() {
        cannot_run(&format!(
            "setup-venv.sh failed: {}{}",
            String::from_utf8_lossy(&setup.stdout),
            String::from_utf8_lossy(&setup.stderr)
        ));
        return;
    }
    let venv_python = std::env::var("LIBMAAS_VENV")
        .map_or_else(|_| root.join(".venv/libmaas"), PathBuf::from)
        .join("bin/python");
    let output = Command::new(venv_python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(root.join("hack/python-libmaas/test_libmaas.py"))
        .env("MAAS_SIM_BIN", env!("CARGO_BIN_EXE_maas-sim"))
        .current_dir(&root)
        .output()
        .expect("run pytest");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "python-libmaas suite failed:\n{report}"
    );
    assert!(
        report.contains(" passed") && !report.contains("failed"),
        "unexpected pytest summary:\n{report}"
    );
}
