//! The verbosity the process runs with, for the few decisions that depend on `-v` (which
//! accepted-and-unused kubeadm flags to list). The binary sets it when it installs the log
//! subscriber; the core only reads it and logs through `tracing`.

use std::sync::atomic::{AtomicU8, Ordering};

static VERBOSITY: AtomicU8 = AtomicU8::new(0);

/// The `-v` count the process runs with (klog's `--v` already mapped onto it).
pub fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Records the `-v` count (the binary's logging init calls this once).
pub fn set_verbosity(verbose: u8) {
    VERBOSITY.store(verbose, Ordering::Relaxed);
}
