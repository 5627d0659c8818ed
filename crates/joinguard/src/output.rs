//! Everything the binary writes for a person or a program: the report on stdout, whole or not at
//! all, and every progress, note and error line on stderr. Commands, progress bars and the
//! generated documentation all write through here.

use std::io::Write;

use joinguard_core::{Output, Render};

/// Writes `text` to stdout. A closed pipe (`joinguard ... | head`) is not an error worth a panic.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Writes raw bytes to stdout (completion scripts, man pages), like [`stdout`].
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

/// A command's result on stdout, rendered whole first (the one render signature,
/// [`Render::render`]), so a failure to render prints nothing rather than half a document.
pub fn print(result: &dyn Render, output: Output) {
    let mut buf = Vec::new();
    if result.render(output, &mut buf).is_ok() {
        stdout_bytes(&buf);
    }
}

/// A progress or error line for a human, on stderr.
pub fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
