//! Writes `deploy/crds/*.yaml` and `docs/crd-reference.md`; with `--check`,
//! writes nothing and exits non-zero naming the files that differ.

use std::path::PathBuf;
use std::process::ExitCode;

use capmaas_api::generate::{REGENERATE_COMMAND, drifted_files, workspace_root, write_files};

const USAGE: &str = "usage: crdgen [--check] [--root <workspace dir>]";

fn main() -> ExitCode {
    let mut check = false;
    let mut root = workspace_root();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--root" => {
                let Some(dir) = args.next() else {
                    eprintln!("--root needs a directory\n{USAGE}");
                    return ExitCode::from(2);
                };
                root = PathBuf::from(dir);
            }
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let result = if check {
        drifted_files(&root)
    } else {
        write_files(&root)
    };
    match result {
        Ok(paths) if check && !paths.is_empty() => {
            eprintln!("generated files are out of date; run {REGENERATE_COMMAND}:");
            for path in paths {
                eprintln!("  {}", path.display());
            }
            ExitCode::FAILURE
        }
        Ok(paths) => {
            for path in paths {
                eprintln!("updated {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::FAILURE
        }
    }
}
