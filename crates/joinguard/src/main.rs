//! The joinguard binary: parses flags and hands them to the library. No logic lives here.

use std::process::ExitCode;

use joinguard::cli::Command;

fn main() -> ExitCode {
    // kubeadm's spellings (`--v=5`, `-v 5`, `--node_name`) are rewritten before clap parses.
    let cli = joinguard::cli::parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    joinguard::logging::init(cli.verbosity());
    let code = match cli.command {
        Command::Preflight(args) => joinguard_core::preflight::run_cli((*args).into()),
        Command::Version(args) => joinguard::version::print_version(args),
        Command::Completion(args) => joinguard::manual::run_completion(args),
        Command::Man(args) => joinguard::manual::run_man(args),
        Command::UpdateStatus(args) => joinguard_core::status::run_cli((*args).into()),
        Command::Trace(args) => joinguard_core::trace::command::run_cli((*args).into()),
        Command::Monitor(args) => joinguard_core::monitor::run_cli(&args.config, args.listen),
    };
    ExitCode::from(code)
}
