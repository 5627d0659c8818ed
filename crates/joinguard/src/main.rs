//! The joinguard binary: parses flags and hands them to the library. No logic lives here.

use std::process::ExitCode;

use clap::Parser;
use joinguard::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    joinguard::logging::init(cli.verbose);
    let code = match cli.command {
        Command::Preflight(args) => joinguard::preflight::run_cli(*args),
        Command::Version(args) => joinguard::output::print_version(args),
        Command::Completion(args) => joinguard::manual::run_completion(args),
        Command::Man(args) => joinguard::manual::run_man(args),
        Command::UpdateStatus(args) => joinguard::status::run_cli(*args),
        Command::Trace(args) => joinguard::trace::command::run_cli(*args),
        Command::Monitor(args) => joinguard::monitor::run_cli(args),
    };
    ExitCode::from(code)
}
