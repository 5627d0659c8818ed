//! Logs: `tracing` to stderr, never stdout (stdout carries only the report, so `-o json` stays
//! parseable). `RUST_LOG` overrides `-v`.

/// Installs the subscriber: warn by default, -v info, -vv debug, -vvv trace.
pub fn init(verbose: u8) {
    joinguard_core::logging::set_verbosity(verbose);
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal: logs captured to a file or a CI log stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
