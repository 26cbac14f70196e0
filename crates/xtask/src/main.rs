//! `cargo xtask <check>`: repository checks that read the source tree.
// A command-line check: its report is its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask layout\n\n  layout  no module import cycle and no use of the crate root by a module, in every workspace member";

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("layout") => layout(),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn layout() -> ExitCode {
    let root = xtask::workspace::repo_root();
    match xtask::workspace::violations(&root) {
        Ok(found) if found.is_empty() => {
            println!("layout: every workspace member keeps the module rules");
            ExitCode::SUCCESS
        }
        Ok(found) => {
            for line in &found {
                eprintln!("{line}");
            }
            eprintln!("layout: {} breach(es) of the module rules", found.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!(
                "layout: cannot read the source tree under {}: {e}",
                root.display()
            );
            ExitCode::FAILURE
        }
    }
}
