//! The progress sink: the lines a person watching a command wants to see while it runs
//! (`[preflight] Discovering the cluster CA from ...`). The core never writes to stderr itself;
//! the caller passes a [`Notes`] and decides where the lines go (the binary writes each to
//! stderr at once, so they appear in the order things happen; a test can collect them).
//! Foundation: imports nothing from the crate.

/// Where a command's progress lines go. One line per call, without a trailing newline.
pub trait Notes: Send + Sync {
    fn note(&self, line: &str);

    /// How far a long measurement is: `done` of `total` streams finished, `elapsed` since it
    /// started. `total` can grow (targets found in etcd's member list join the run). Called
    /// at each change; the default shows nothing.
    fn progress(&self, _done: usize, _total: usize, _elapsed: std::time::Duration) {}

    /// The measurement is over (the report follows).
    fn progress_done(&self) {}
}

/// Drops every line (for callers that want none).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Notes for Silent {
    fn note(&self, _line: &str) {}
}
