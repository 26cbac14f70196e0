//! The entry of every binary: its `main` and its `start`, written once.
//!
//! Each `main.rs` is one call to [`main`]; each crate's `start` is one call to [`serve`].

use std::future::Future;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser};

use crate::compat_flags::FOREIGN_VALUE_FLAGS;
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
    let matches = accept_foreign_flags(CommandLine::<A>::command())
        .name(binary)
        .bin_name(binary)
        .about(about)
        .version(env!("CARGO_PKG_VERSION"))
        .get_matches();
    let mut command_line = match CommandLine::<A>::from_arg_matches(&matches) {
        Ok(parsed) => parsed,
        Err(e) => e.exit(),
    };
    command_line.common.compat.foreign = foreign_flags_given(&matches);
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

/// `command` with a hidden argument for each CAPMAAS manager flag it does not define itself
/// ([`FOREIGN_VALUE_FLAGS`]), so a manifest written for CAPMAAS starts every binary.
fn accept_foreign_flags(command: clap::Command) -> clap::Command {
    FOREIGN_VALUE_FLAGS.iter().fold(command, |command, name| {
        if command.get_arguments().any(|a| a.get_long() == Some(name)) {
            command
        } else {
            command.arg(
                clap::Arg::new(*name)
                    .long(*name)
                    .hide(true)
                    .value_name("VALUE"),
            )
        }
    })
}

/// The foreign flags [`accept_foreign_flags`] added that were given, as `--name=value`.
fn foreign_flags_given(matches: &clap::ArgMatches) -> Vec<String> {
    FOREIGN_VALUE_FLAGS
        .iter()
        .filter_map(|name| {
            let value = matches.try_get_one::<String>(name).ok().flatten()?;
            Some(format!("--{name}={value}"))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, clap::Args)]
    struct NoOwnFlags {}

    #[derive(Debug, Clone, clap::Args)]
    struct WithWebhookPort {
        #[arg(long, default_value_t = 9443)]
        webhook_port: u16,
    }

    fn parse<A: Args>(argv: &[&str]) -> CommandLine<A> {
        let matches = accept_foreign_flags(CommandLine::<A>::command())
            .try_get_matches_from(argv)
            .unwrap();
        let mut parsed = CommandLine::<A>::from_arg_matches(&matches).unwrap();
        parsed.common.compat.foreign = foreign_flags_given(&matches);
        parsed
    }

    #[test]
    fn capmaas_manager_flags_start_every_binary_and_are_reported_where_unused() {
        let argv = ["x", "--machine-concurrency=4", "--webhook-port", "9444"];
        let plain = parse::<NoOwnFlags>(&argv);
        assert_eq!(
            plain.common.compat.ignored(),
            ["--machine-concurrency=4", "--webhook-port=9444"]
        );
        let webhook = parse::<WithWebhookPort>(&argv);
        assert_eq!(webhook.own.webhook_port, 9444, "the binary's own flag wins");
        assert_eq!(webhook.common.compat.ignored(), ["--machine-concurrency=4"]);
        let none = parse::<NoOwnFlags>(&["x"]);
        assert!(none.common.compat.ignored().is_empty());
    }
}
