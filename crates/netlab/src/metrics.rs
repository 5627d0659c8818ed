//! Reading samples out of a Prometheus text exposition (etcd's `/metrics`, joinguard's monitor):
//! the sum of a metric over all its label sets ([`metric_sum`]), or one labelled sample
//! ([`metric_sample`]).
//!
//! This module owns a small reader of the sample lines: names, quoted label values (which may
//! hold `}`, `,` and escaped quotes), and the value, with an optional timestamp after it. It must
//! not be used to validate an exposition: tests that judge a format check it with the Python
//! `prometheus-client` parser, not with this.

/// Sums the samples of metric `name` in a Prometheus text exposition, ignoring labels.
/// `None` when there is no sample of that exact name, or when one of them does not parse.
pub fn metric_sum(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for line in text.lines() {
        match sample_line(line, name) {
            Line::Sample { value, .. } => *sum.get_or_insert(0.0) += value,
            Line::Other => {}
            Line::Malformed => return None,
        }
    }
    sum
}

/// The value of the first sample of metric `name` whose labels include every `(label, value)`
/// of `labels` (other labels may be present). Lines that do not parse are passed over.
pub fn metric_sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| match sample_line(line, name) {
        Line::Sample {
            labels: have,
            value,
        } => labels
            .iter()
            .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
            .then_some(value),
        Line::Other | Line::Malformed => None,
    })
}

/// One line of an exposition, as seen when looking for metric `name`.
enum Line {
    /// A sample of exactly that name.
    Sample {
        labels: Vec<(String, String)>,
        value: f64,
    },
    /// A comment, a blank line, or another metric (`<name>_bucket` among them).
    Other,
    /// A sample of that name that does not parse.
    Malformed,
}

fn sample_line(line: &str, name: &str) -> Line {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Line::Other;
    }
    let Some(rest) = line.strip_prefix(name) else {
        return Line::Other;
    };
    let (labels, value_part) = if let Some(inner) = rest.strip_prefix('{') {
        match parse_labels(inner) {
            Some(x) => x,
            None => return Line::Malformed,
        }
    } else if rest.starts_with([' ', '\t']) {
        (Vec::new(), rest)
    } else {
        // A longer name with this prefix, e.g. `<name>_bucket`.
        return Line::Other;
    };
    match value_part
        .split_whitespace()
        .next()
        .and_then(|v| v.parse::<f64>().ok())
    {
        Some(value) => Line::Sample { labels, value },
        None => Line::Malformed,
    }
}

/// Parses `k="v",k2="v2"}` (the text after `{`) into pairs and returns what follows the `}`.
/// Label values are quoted and may contain `}`, `,` and the escapes `\\`, `\"` and `\n`.
fn parse_labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    let mut rest = s.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, after_key) = rest.split_once('=')?;
        let mut chars = after_key.trim_start().strip_prefix('"')?.char_indices();
        let quoted = &after_key.trim_start()[1..];
        let mut value = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((key.trim().to_string(), value));
        rest = quoted[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"# HELP etcd_server_is_leader Whether or not this member is a leader.
# TYPE etcd_server_is_leader gauge
etcd_server_is_leader 1
# TYPE etcd_server_proposals_committed_total gauge
etcd_server_proposals_committed_total 42
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.001"} 3
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 9
etcd_disk_wal_fsync_duration_seconds_sum 0.5
etcd_disk_wal_fsync_duration_seconds_count 9
etcd_server_version{server_version="3.4.23"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",note="a } b"} 5
grpc_server_handled_total{grpc_code="OK",grpc_method="Put"} 2.5e+00
"#;

    #[test]
    fn metric_sum_ignores_labels_and_longer_names() {
        assert_eq!(metric_sum(SAMPLE, "etcd_server_is_leader"), Some(1.0));
        assert_eq!(
            metric_sum(SAMPLE, "etcd_server_proposals_committed_total"),
            Some(42.0)
        );
        assert_eq!(
            metric_sum(SAMPLE, "etcd_disk_wal_fsync_duration_seconds_bucket"),
            Some(12.0)
        );
        assert_eq!(
            metric_sum(SAMPLE, "etcd_disk_wal_fsync_duration_seconds_count"),
            Some(9.0)
        );
        assert_eq!(metric_sum(SAMPLE, "grpc_server_handled_total"), Some(7.5));
        assert_eq!(metric_sum(SAMPLE, "etcd_server_version"), Some(1.0));
        assert_eq!(metric_sum(SAMPLE, "etcd_server"), None);
        assert_eq!(
            metric_sum(SAMPLE, "etcd_disk_wal_fsync_duration_seconds"),
            None
        );
    }

    #[test]
    fn metric_sum_of_a_malformed_sample_is_none() {
        assert_eq!(metric_sum("x 1\nx{a=\"b\" 2\n", "x"), None);
        assert_eq!(metric_sum("x 1\nx two\n", "x"), None);
    }

    #[test]
    fn metric_sample_matches_every_given_label_exactly() {
        let v = |name, labels: &[(&str, &str)]| metric_sample(SAMPLE, name, labels);
        assert_eq!(
            v("grpc_server_handled_total", &[("grpc_method", "Put")]),
            Some(2.5)
        );
        assert_eq!(
            v(
                "grpc_server_handled_total",
                &[("grpc_method", "Range"), ("note", "a } b")]
            ),
            Some(5.0)
        );
        // A label value that only contains the wanted one is not a match.
        assert_eq!(
            v("grpc_server_handled_total", &[("grpc_method", "Pu")]),
            None
        );
        assert_eq!(v("grpc_server_handled_total", &[("code", "OK")]), None);
        assert_eq!(v("etcd_server_is_leader", &[]), Some(1.0));
        assert_eq!(
            v(
                "etcd_disk_wal_fsync_duration_seconds_bucket",
                &[("le", "+Inf")]
            ),
            Some(9.0)
        );
        assert_eq!(
            metric_sample(
                "m{path=\"/a\\\"b\",x=\"1\"} 3 1700000000000\n",
                "m",
                &[("path", "/a\"b")]
            ),
            Some(3.0),
            "escaped quote, and a timestamp after the value"
        );
    }
}
