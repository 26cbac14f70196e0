//! What a release is made of, checked on every CI run:
//! - the release workflow (`.github/workflows/release.yaml`) passes actionlint (built from its Go
//!   module into the test control plane's cache by `hack/testenv/tools.sh`), builds the images
//!   with `hack/images.sh` and publishes what `hack/clusterctl-repo.sh` renders;
//! - one release line everywhere: the workspace version (what `--version` prints) is the tag
//!   of every image in `deploy/`, and `deploy/clusterctl/metadata.yaml` names its series;
//! - one image, built without a daemon from the debug program CI has already built
//!   (`hack/images.sh --profile dev`), unpacked again: it runs as a non-root user and its
//!   entrypoint prints the component's version (the release builds the same image around a
//!   static program; docs/install.md, "Images").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use capmaas_testenv::{cache_dir, repo_root};
use serde_json::Value;

const WORKFLOW: &str = ".github/workflows/release.yaml";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn the_release_workflow_passes_actionlint_and_publishes_what_clusterctl_reads() {
    let actionlint = cache_dir().join("bin/actionlint");
    assert!(
        actionlint.is_file(),
        "{} is missing: run `bash hack/just testenv`",
        actionlint.display()
    );
    let out = run(Command::new(&actionlint)
        .current_dir(repo_root())
        .arg("-no-color")
        .arg(WORKFLOW));
    assert!(out.trim().is_empty(), "{out}");

    let workflow = &yaml_documents(&repo_root().join(WORKFLOW))[0];
    assert_eq!(workflow["on"]["push"]["tags"][0], "v[0-9]+.[0-9]+.[0-9]+");
    let steps: Vec<String> = workflow["jobs"]["release"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str().map(ToOwned::to_owned))
        .collect();
    let script = steps.join("\n");
    for needed in [
        "bash hack/images.sh --arch amd64 --arch arm64 --tag \"${GITHUB_REF_NAME}\"",
        "--check",
        "skopeo copy",
        "crane index append",
        "bash hack/clusterctl-repo.sh target/clusterctl-repo \"${GITHUB_REF_NAME}\"",
        "gh release create",
        "target/clusterctl-repo/infrastructure-maas/${GITHUB_REF_NAME}/",
        "target/images/*.spdx.json",
    ] {
        assert!(
            script.contains(needed),
            "the workflow does not run {needed}"
        );
    }
    for script in ["hack/images.sh", "hack/clusterctl-repo.sh"] {
        assert!(repo_root().join(script).is_file(), "{script}");
    }
}

#[test]
fn the_workspace_version_is_the_release_line_of_the_images_and_metadata() {
    let version = env!("CARGO_PKG_VERSION");
    let tag = format!("v{version}");
    let mut images = 0;
    for component in capmaas_e2e::overlay::COMPONENTS {
        let path = repo_root().join(format!("deploy/base/{component}/deployment.yaml"));
        for doc in yaml_documents(&path) {
            for c in doc["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                assert_eq!(
                    c["image"],
                    format!("ghcr.io/capmaas-rs/{component}:{tag}"),
                    "{component}"
                );
                images += 1;
            }
        }
    }
    assert_eq!(images, 6);
    let metadata = &yaml_documents(&repo_root().join("deploy/clusterctl/metadata.yaml"))[0];
    let mut parts = version.split('.').map(|p| p.parse::<u64>().unwrap());
    let (major, minor) = (parts.next().unwrap(), parts.next().unwrap());
    let series = metadata["releaseSeries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["major"] == major && s["minor"] == minor)
        .unwrap_or_else(|| panic!("metadata.yaml has no series {major}.{minor}"));
    assert_eq!(series["contract"], "v1beta2");
}

#[test]
fn an_image_is_built_without_a_daemon_and_runs_as_non_root() {
    let program = repo_root().join("target/debug/webhook-server");
    assert!(
        program.is_file(),
        "{} is missing: `cargo build --workspace --bins` first",
        program.display()
    );
    let out = run(Command::new("bash").current_dir(repo_root()).args([
        "hack/images.sh",
        "--profile",
        "dev",
        "--no-sbom",
        "--check",
        "webhook-server",
    ]));
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        out.contains(&format!(
            "entrypoint /manager prints 'webhook-server {version}'"
        )),
        "{out}"
    );
    let checked = out.lines().find(|l| l.starts_with("checked")).unwrap();
    assert!(!checked.contains("user 0,"), "{checked}");
    // The size, for the record (the release image holds a static program instead).
    println!("{checked}");
    let archive = repo_root().join(format!(
        "target/images/webhook-server_v{version}_linux_amd64.oci.tar"
    ));
    assert!(archive.is_file(), "{}", archive.display());
}
