//! Writes `deploy/base/webhook-server/webhook-configurations.yaml`; with `--check`, writes
//! nothing and fails when the committed file differs.

use std::process::ExitCode;

use webhook_server::manifests::{MANIFEST_PATH, render_yaml, workspace_root};

fn main() -> ExitCode {
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let path = workspace_root().join(MANIFEST_PATH);
    let rendered = match render_yaml() {
        Ok(yaml) => yaml,
        Err(e) => {
            eprintln!("rendering the webhook configurations: {e}");
            return ExitCode::FAILURE;
        }
    };
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == rendered {
        return ExitCode::SUCCESS;
    }
    if check {
        eprintln!("{MANIFEST_PATH} is out of date; run `just webhooks`");
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::write(&path, rendered) {
        eprintln!("writing {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    eprintln!("updated {MANIFEST_PATH}");
    ExitCode::SUCCESS
}
