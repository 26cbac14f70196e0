//! The committed CRDs and reference document equal freshly generated ones.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmaas_api::generate::{REGENERATE_COMMAND, drifted_files, generated_files, workspace_root};

#[test]
fn committed_files_match_generated() {
    let drifted = drifted_files(&workspace_root()).expect("compare generated files");
    assert!(
        drifted.is_empty(),
        "generated files are out of date; run {REGENERATE_COMMAND}:\n{}",
        drifted
            .iter()
            .map(|p| format!("  {}", p.display()))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn generation_is_deterministic_and_complete() {
    let first = generated_files().unwrap();
    let second = generated_files().unwrap();
    assert_eq!(first, second);
    assert_eq!(
        first
            .iter()
            .filter(|f| f.path.starts_with("deploy/crds"))
            .count(),
        15,
        "14 CRDs and their kustomization.yaml"
    );
    let kustomization = first
        .iter()
        .find(|f| f.path.ends_with("deploy/crds/kustomization.yaml"))
        .unwrap();
    for crd in first.iter().filter(|f| f.path.starts_with("deploy/crds")) {
        let name = crd.path.file_name().unwrap().to_str().unwrap();
        if name != "kustomization.yaml" {
            assert!(
                kustomization.contents.contains(&format!("- {name}\n")),
                "{name} not listed"
            );
        }
    }
    let reference = first
        .iter()
        .find(|f| f.path.ends_with("crd-reference.md"))
        .unwrap();
    for kind in ["MaasHost", "MaasIPPool", "MaasData"] {
        assert!(
            reference.contents.contains(&format!("## {kind}\n")),
            "reference lacks {kind}"
        );
    }
    assert!(
        reference
            .contents
            .contains("spec.providerID is immutable once set")
    );
}

#[test]
fn drift_check_reports_changed_and_stale_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    assert_eq!(capmaas_api::generate::write_files(root).unwrap().len(), 16);
    assert!(drifted_files(root).unwrap().is_empty());
    let crd = root.join("deploy/crds/infrastructure.cluster.x-k8s.io_maashosts.yaml");
    std::fs::write(&crd, "edited").unwrap();
    let stale = root.join("deploy/crds/infrastructure.cluster.x-k8s.io_maasoldkinds.yaml");
    std::fs::write(&stale, "old").unwrap();
    let drifted = drifted_files(root).unwrap();
    assert_eq!(drifted.len(), 2, "{drifted:?}");
    let rewritten = capmaas_api::generate::write_files(root).unwrap();
    assert_eq!(rewritten.len(), 2, "{rewritten:?}");
    assert!(!stale.exists());
    assert!(drifted_files(root).unwrap().is_empty());
}
