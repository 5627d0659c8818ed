//! Durations as joinguard's flags and the monitor's YAML spell them (`100ms`, `1s`, `5m`,
//! `1m30s`, kubeadm's and etcd's style). Foundation: imports nothing from the crate.

use std::time::Duration;

/// The longest duration any flag or config field takes: a day. A deadline, a wait or an interval
/// beyond it is a typo (`--timeout 500000000y`), and one far beyond it would overflow the clock
/// arithmetic of the deadline it sets.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// A duration that could not be read, or that no input of joinguard takes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error("`{text}` is not a duration like 100ms, 30s or 5m ({source})")]
    Unreadable {
        text: String,
        #[source]
        source: humantime::DurationError,
    },
    #[error("`{text}` is longer than 24h, the longest duration joinguard takes")]
    TooLong { text: String },
    #[error("`{text}`: a duration cannot be negative; give e.g. 30s")]
    Negative { text: String },
}

/// Durations like kubeadm's: `100ms`, `1s`, `5m`, `1m30s`; at most [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    if s.trim_start().starts_with('-') {
        return Err(DurationError::Negative {
            text: s.to_string(),
        });
    }
    let d = humantime::parse_duration(s).map_err(|source| DurationError::Unreadable {
        text: s.to_string(),
        source,
    })?;
    if d > MAX_DURATION {
        return Err(DurationError::TooLong {
            text: s.to_string(),
        });
    }
    Ok(d)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_past_a_day_are_refused_with_the_limit() {
        assert_eq!(parse_duration("24h"), Ok(MAX_DURATION));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        for long in ["500000000y", "25h", "2days"] {
            let e = parse_duration(long).unwrap_err();
            assert!(matches!(e, DurationError::TooLong { .. }), "{long}: {e}");
            assert!(e.to_string().contains("longer than 24h"), "{e}");
        }
        assert!(matches!(
            parse_duration("soon"),
            Err(DurationError::Unreadable { .. })
        ));
    }

    #[test]
    fn negative_durations_are_refused_as_negative() {
        for negative in ["-1s", "-0s", " -5m"] {
            let e = parse_duration(negative).unwrap_err();
            assert!(
                matches!(e, DurationError::Negative { .. }),
                "{negative}: {e}"
            );
            assert!(e.to_string().contains("cannot be negative"), "{e}");
        }
    }
}
