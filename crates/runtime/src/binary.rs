//! The entry of every binary: its `main` and its `start`, written once.
//!
//! Each `main.rs` is one call to [`main`]; each crate's `start` is one call to [`serve`].

use std::future::Future;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser};

use crate::error::{BoxError, error_chain};
use crate::flags::CommonArgs;
use crate::runtime::{Runtime, Term};

/// The command line of a binary: the flags every binary shares, and its own.
#[derive(Debug, Parser)]
struct CommandLine<A: Args> {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    own: A,
}

/// A binary's whole `main`: parses the common flags and the binary's own (`A`), runs `start` on
/// a multi-threaded Tokio runtime and turns its result into the exit code ([`exit_code`]).
/// `--help` shows `about`, `--version` the workspace version.
pub fn main<A, F, Fut>(binary: &'static str, about: &'static str, start: F) -> ExitCode
where
    A: Args,
    F: FnOnce(CommonArgs, A) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let matches = CommandLine::<A>::command()
        .name(binary)
        .bin_name(binary)
        .about(about)
        .version(env!("CARGO_PKG_VERSION"))
        .get_matches();
    let command_line = match CommandLine::<A>::from_arg_matches(&matches) {
        Ok(parsed) => parsed,
        Err(e) => e.exit(),
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    match tokio {
        Ok(tokio) => exit_code(
            binary,
            tokio.block_on(start(command_line.common, command_line.own)),
        ),
        Err(e) => exit_code(binary, Err(e)),
    }
}

/// A binary's `start`: builds the [`Runtime`] of `binary` from the common flags, with
/// `default_concurrency` when `--concurrency` is not given, and runs `run` in each leadership
/// term with a copy of the binary's own flags.
pub async fn serve<A, F, Fut>(
    binary: &str,
    default_concurrency: u16,
    common: CommonArgs,
    args: A,
    run: F,
) -> Result<(), BoxError>
where
    A: Clone,
    F: Fn(Term, A) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let runtime = Runtime::builder(binary)
        .with_args(common)
        .default_concurrency(default_concurrency)
        .build()
        .await?;
    runtime.run(move |term| run(term, args.clone())).await?;
    Ok(())
}

/// What a binary's `main` returns: success, or the error with its whole chain on stderr (the
/// logger may not be up yet) and exit code 1.
pub fn exit_code<E>(binary: &str, result: std::result::Result<(), E>) -> ExitCode
where
    E: Into<BoxError>,
{
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let e: BoxError = e.into();
            #[allow(clippy::print_stderr)] // the one place a binary reports a fatal error
            {
                eprintln!("{binary}: {}", error_chain(e.as_ref()));
            }
            ExitCode::FAILURE
        }
    }
}
