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

/// Writes raw bytes to stdout (completion scripts, man pages), like [`stdout`].
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}
