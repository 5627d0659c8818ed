//! The one printer. Everything joinguard shows a user on stdout goes through here, so a stray
//! print cannot corrupt `-o json`; diagnostics go to stderr through `tracing` or [`say`].

use std::io::Write;

/// Writes `text` to stdout. A closed pipe (`joinguard ... | head`) is not an error worth a panic.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// A progress or error line for a human, on stderr.
pub fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// `joinguard version`.
pub fn print_version() -> u8 {
    stdout(&format!(
        "joinguard {} ({} {}, rustc-built {})\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        option_env!("JOINGUARD_BUILD").unwrap_or("dev"),
    ));
    0
}

/// A planned command that is not built yet: say so, exit 2 (invalid input, nothing was done).
pub fn unbuilt(name: &str) -> u8 {
    say(&format!(
        "joinguard {name}: not built yet in this version. Planned: see `joinguard --help` and the \
         project's issue tracker. Nothing was done."
    ));
    2
}
