//! The progress sink: the lines a person watching a command wants to see while it runs
//! (`[preflight] Discovering the cluster CA from ...`). The core never writes to stderr itself;
//! the caller passes a [`Notes`] and decides where the lines go (the binary writes each to
//! stderr at once, so they appear in the order things happen; a test can collect them).
//! Foundation: imports nothing from the crate.

/// Where a command's progress lines go. One line per call, without a trailing newline.
pub trait Notes: Send + Sync {
    fn note(&self, line: &str);
}

/// Drops every line (for callers that want none).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Notes for Silent {
    fn note(&self, _line: &str) {}
}
