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

/// The line that ends a stopped run, `joinguard <command>: <error>`, and from `-vv` on the
/// errors behind it, one `caused by:` line each (their debug form at `-vvv`).
pub fn say_error(command: &str, e: &dyn std::error::Error) {
    say(&format!("joinguard {command}: {e}"));
    let verbosity = joinguard_core::logging::verbosity();
    if verbosity < 2 {
        return;
    }
    let top = e.to_string();
    let mut cause = e.source();
    let mut depth = 0;
    while let (Some(c), true) = (cause, depth < 16) {
        // A wrapper whose words are the message's already adds nothing.
        if top.contains(&c.to_string()) {
            cause = c.source();
            depth += 1;
            continue;
        }
        if verbosity >= 3 {
            say(&format!("  caused by: {c} ({c:?})"));
        } else {
            say(&format!("  caused by: {c}"));
        }
        cause = c.source();
        depth += 1;
    }
}
