//! The joinguard binary: parses flags, maps them onto the core's specs, builds the one runtime
//! and turns what the core returns into output and an exit code (`commands`). No logic lives
//! here.

use std::process::ExitCode;

use joinguard::cli::{Command, EtcdCommand};
use joinguard::{commands, output};
use joinguard_core::Ending;

fn main() -> ExitCode {
    // kubeadm's spellings (`--v=5`, `-v 5`, `--node_name`) are rewritten before clap parses.
    let cli = joinguard::cli::parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit());
    joinguard::logging::init(cli.verbosity(), cli.log_tag());
    for w in &cli.warnings {
        output::say(w);
    }
    let ending = match cli.command {
        Command::Version(args) => joinguard::version::print_version(args),
        Command::Completion(args) => joinguard::manual::run_completion(args),
        Command::Man(args) => joinguard::manual::run_man(args),
        command => match commands::runtime() {
            Ok(rt) => match command {
                Command::Preflight(args) => commands::preflight(&rt, (*args).into()),
                Command::UpdateStatus(args) => commands::update_status(&rt, (*args).into()),
                Command::Trace(args) => commands::trace(&rt, (*args).into()),
                Command::Monitor(args) => commands::monitor(&rt, &args.config, args.listen),
                Command::Etcd(EtcdCommand::Promote(args)) => joinguard::etcd::promote(&rt, *args),
                Command::Etcd(EtcdCommand::Cleanup(args)) => joinguard::etcd::cleanup(&rt, *args),
                Command::Version(_) | Command::Completion(_) | Command::Man(_) => Ending::Done,
            },
            Err(e) => {
                output::say(&format!("joinguard: cannot start the runtime: {e}"));
                Ending::Failed
            }
        },
    };
    ExitCode::from(ending.code())
}
