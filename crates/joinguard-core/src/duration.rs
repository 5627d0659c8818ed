//! Durations as joinguard's flags and the monitor's YAML spell them (`100ms`, `1s`, `5m`,
//! `1m30s`, kubeadm's and etcd's style). Foundation: imports nothing from the crate.

use std::time::Duration;

/// Durations like kubeadm's: `100ms`, `1s`, `5m`, `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration like 100ms, 30s or 5m ({e})"))
}
