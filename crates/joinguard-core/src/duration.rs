//! Durations as joinguard's flags and the monitor's YAML spell them (`100ms`, `1s`, `5m`,
//! `1m30s`, kubeadm's and etcd's style). Foundation: imports nothing from the crate.

use std::time::Duration;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{text}` is not a duration like 100ms, 30s or 5m ({source})")]
pub struct DurationError {
    pub text: String,
    #[source]
    pub source: humantime::DurationError,
}

/// Durations like kubeadm's: `100ms`, `1s`, `5m`, `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    humantime::parse_duration(s).map_err(|source| DurationError {
        text: s.to_string(),
        source,
    })
}

/// A Go `time.Duration` string as metav1.Duration prints and parses it: `40s`, `2m0s`, `1h`,
/// `1.5s`, `500ms`. Negative durations are refused.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_end);
        let n: f64 = num.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let secs = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}
