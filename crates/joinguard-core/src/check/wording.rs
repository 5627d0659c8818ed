//! The checks' shared wording: how targets, figures, durations, sizes and ids are written in
//! messages, and the message of a target that never answered. Formatting only: no judgement.

use std::collections::BTreeSet;
use std::time::Duration;

use super::model::{CheckName, CheckResult, Status};
use crate::sampling::LatencyFigure;
use crate::stats::{trim_count, Latency, Summary};
use crate::target::Target;

pub(super) fn unreachable(name: CheckName, s: &Summary, head: &str) -> CheckResult {
    let why = s
        .last_failure
        .as_ref()
        .map_or_else(|| "no attempt was made".to_string(), ToString::to_string);
    CheckResult {
        name,
        target: s.target.endpoint.clone(),
        status: Status::Error,
        message: format!(
            "{head}: unreachable, all {} attempts failed (last: {why}); the join needs this \
             path. Check that the endpoint is up and that the network and firewalls pass it",
            s.samples
        ),
        measured: None,
        threshold: None,
    }
}

/// "etcd peer 198.18.0.3:2380 (m2)".
pub(super) fn describe(t: &Target) -> String {
    match &t.member {
        Some(m) => format!("{t} ({m})"),
        None => t.to_string(),
    }
}

pub(super) fn describe_figure(figure: LatencyFigure, l: &Latency, attempts: u32) -> String {
    let base = trim_count(l.n);
    let over = if l.discarded > base {
        format!(
            "{attempts} samples, top {} discarded, {} of them for the host's packet loss",
            l.discarded,
            l.discarded - base
        )
    } else {
        format!("{attempts} samples, top {} discarded", l.discarded)
    };
    match figure {
        LatencyFigure::EffectiveRtt => format!(
            "effective RTT {:.1} ms (p99 {:.1} + jitter {:.1}; {over})",
            l.effective_rtt_ms(),
            l.robust_p99_ms,
            l.robust_jitter_ms
        ),
        LatencyFigure::RobustP99 => format!("p99 {:.1} ms ({over})", l.robust_p99_ms),
        LatencyFigure::P90 => format!("p90 {:.1} ms ({attempts} samples)", l.p90_ms),
    }
}

/// "66.7 ms", "100 ms".
pub(super) fn fmt_ms(ms: f64) -> String {
    format!("{} ms", fmt_num(ms))
}

/// At most one decimal, none when whole.
pub(super) fn fmt_num(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// "100 ms", "1 s", "2 min", as etcd and kubeadm flags are written.
pub(super) fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        fmt_ms(ms)
    } else if ms % 60_000.0 == 0.0 {
        format!("{} min", fmt_num(ms / 60_000.0))
    } else {
        format!("{} s", fmt_num(ms / 1000.0))
    }
}

pub(super) fn fmt_secs(s: f64) -> String {
    if s.is_infinite() {
        "forever (no throughput)".into()
    } else {
        format!("{} s", fmt_num(s))
    }
}

pub(super) fn fmt_bytes(b: f64) -> String {
    const KIB: f64 = 1024.0;
    if b >= KIB * KIB * KIB {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{b:.0} B")
    }
}

pub(super) fn fmt_ids(ids: &BTreeSet<u64>) -> String {
    let v: Vec<String> = ids.iter().map(|i| format!("{i:x}")).collect();
    v.join(", ")
}
