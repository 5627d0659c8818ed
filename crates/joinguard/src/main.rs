//! The joinguard binary: parses flags and hands them to the library. No logic lives here.

use std::process::ExitCode;

use clap::Parser;
use joinguard::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    joinguard::logging::init(cli.verbose);
    let code = match cli.command {
        Command::Preflight(args) => joinguard::preflight::run_cli(*args),
        Command::Version => joinguard::output::print_version(),
        Command::UpdateStatus(args) => joinguard::status::run_cli(*args),
        Command::Trace(_) => joinguard::output::unbuilt("trace"),
        Command::Monitor(args) => joinguard::monitor::run_cli(args),
    };
    ExitCode::from(code)
}
