//! Traces of failing targets: after a check run, every host whose latency or loss check failed is
//! traced with TCP SYNs to the port that failed (the path the join's own connections take),
//! within what is left of `--timeout`, and the traces are added to the report.
//!
//! This module decides what to trace and with how much time; the tracer measures and the report
//! prints. It never changes a verdict.

use std::time::Duration;

use crate::check::{CheckName, Status};
use crate::preflight::report::{Report, TargetTrace};
use crate::trace::report::TracedPath;
use crate::trace::{self, TraceError, TraceInput, TraceProtocol};

/// Probes per hop of a preflight trace: enough for a loss figure per hop, as mtr's default.
const CYCLES: u32 = 10;
/// At least this many, or the trace is not worth its time.
const MIN_CYCLES: u32 = 3;
/// Between cycles. Faster than mtr's 1 s so a failing preflight is not held up for long; the
/// attribution uses only what persists to later hops, so a router that rate-limits its answers
/// (Linux: about 1/s per destination after a burst of 6, `net.ipv4.icmp_ratelimit`) is not
/// blamed for the loss it shows.
const INTERVAL: Duration = Duration::from_millis(200);
/// One probe's wait: 1 s, as the ICMP loss probe's late limit.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The report needs a moment after the traces.
const MARGIN: Duration = Duration::from_millis(150);

/// The checks whose failure a trace can explain.
fn traced(name: CheckName) -> bool {
    matches!(
        name,
        CheckName::EtcdPeerLatency
            | CheckName::EtcdClientLatency
            | CheckName::EtcdQuorumReadLatency
            | CheckName::EtcdDialTime
            | CheckName::ApiServerLatency
            | CheckName::PacketLoss
    )
}

/// Traces the hosts of the failed latency and loss checks of `report` within `left`, and adds the
/// traces (or a note saying why there are none) to it.
pub async fn attach(report: &mut Report, left: Duration, notes: &dyn crate::notes::Notes) {
    // One trace per host, to the port of its first failing check (checks are in target order).
    let mut plan: Vec<(String, String, u16, Vec<CheckName>)> = Vec::new();
    for c in report
        .checks
        .iter()
        .filter(|c| c.status == Status::Error && traced(c.name))
    {
        let Some((host, port)) = c.target.rsplit_once(':') else {
            continue;
        };
        let host = host.trim_matches(|ch| ch == '[' || ch == ']').to_string();
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        match plan.iter_mut().find(|p| p.1 == host) {
            Some(p) => {
                if !p.3.contains(&c.name) {
                    p.3.push(c.name);
                }
            }
            None => plan.push((c.target.clone(), host, port, vec![c.name])),
        }
    }
    if plan.is_empty() {
        return;
    }
    let budget = left.saturating_sub(MARGIN);
    let fit = budget
        .saturating_sub(PROBE_TIMEOUT)
        .as_millis()
        .checked_div(INTERVAL.as_millis())
        .unwrap_or(0);
    let cycles = u32::try_from(fit).unwrap_or(u32::MAX).min(CYCLES);
    if cycles < MIN_CYCLES {
        report.notes.push(format!(
            "no time was left in --timeout to trace the failing targets (needs about {:.1}s); \
             give --timeout more room, or run `joinguard trace {} --protocol tcp --port {}`",
            (PROBE_TIMEOUT + INTERVAL * MIN_CYCLES).as_secs_f64(),
            plan[0].1,
            plan[0].2
        ));
        return;
    }
    let hosts: Vec<String> = plan
        .iter()
        .map(|p| {
            format!(
                "{} ({})",
                p.0,
                p.3.iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    notes.note(&format!(
        "[preflight] Tracing the path to {} with TCP SYNs, {cycles} cycles (about {:.1}s)",
        hosts.join(", "),
        (INTERVAL * (cycles - 1) + INTERVAL).as_secs_f64()
    ));
    let mut set = tokio::task::JoinSet::new();
    for (i, (target, host, port, checks)) in plan.iter().cloned().enumerate() {
        set.spawn(async move {
            let r = match trace::command::resolve(&host).await {
                Ok(addr) => {
                    let spec = TraceInput {
                        label: host.clone(),
                        target: addr,
                        protocol: TraceProtocol::Tcp,
                        port: Some(port),
                        cycles,
                        max_hops: 30,
                        interval: INTERVAL,
                        probe_timeout: PROBE_TIMEOUT,
                        timeout: budget,
                        dns: false,
                        size: None,
                    };
                    trace::trace(&spec).await.map_err(|e| match e {
                        TraceError::NoPrivilege(_) => (true, e.to_string()),
                        e => (false, e.to_string()),
                    })
                }
                Err(e) => Err((false, format!("TARGET `{host}`: {e}"))),
            };
            (i, target, checks, r)
        });
    }
    let mut done = Vec::new();
    while let Some(j) = set.join_next().await {
        if let Ok(x) = j {
            done.push(x);
        }
    }
    done.sort_by_key(|d| d.0);
    let mut traces = Vec::new();
    for (_, target, checks, r) in done {
        match r {
            Ok(t) => traces.push(TargetTrace {
                check_target: target,
                checks,
                path: TracedPath::new(t),
            }),
            Err((true, msg)) => {
                let n = format!("the failing targets were not traced: {msg}");
                if !report.notes.contains(&n) {
                    report.notes.push(n);
                }
            }
            Err((false, msg)) => report
                .notes
                .push(format!("{target}: the trace failed: {msg}")),
        }
    }
    if !traces.is_empty() {
        report.traces = Some(traces);
    }
}
