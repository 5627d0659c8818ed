//! Monitor scale benchmark: the release `joinguard monitor` binary probing 1,000 and 10,000 TCP
//! targets at a 1 s interval, then the same with 10% of the targets blackholed.
//!
//! Run: `cargo bench -p joinguard --bench monitor_scale` (60 s per scenario, about 5 minutes;
//! `JOINGUARD_BENCH_QUICK=1` runs 10 s per scenario for local iteration; `JOINGUARD_BENCH_TARGETS`
//! picks the rows of one size, `JOINGUARD_BENCH_BIN` another joinguard build). Root is needed
//! (netlab), unless `JOINGUARD_BENCH_LOOPBACK=1`.
//! Prints a markdown table and writes `target/bench/monitor-scale.json`.
//!
//! Targets are listeners in this process. By default (root needed) they live in a netlab host
//! (`tgt`) and the monitor in another (`mon`), joined by netlab's forwarder with no impairment:
//! the targets' side of each handshake (SYN, the child socket, the accept) then runs in the
//! forwarder's writes, as it would on the remote hosts a real monitor probes, and the monitor is
//! charged only its own work. `JOINGUARD_BENCH_LOOPBACK=1` keeps the targets on loopback
//! (127.77.0.0/16, 100 ports per address, no root): loopback runs the receiver's TCP inline in
//! the sender's system call, so the monitor's CPU then also carries the targets' half of every
//! handshake (the layout of the figures before 2026-12-06).
//! Healthy listeners accept and close. A blackholed listener has a backlog of 0 and one
//! connection already queued and never accepted: its accept queue is full, so Linux drops every
//! further SYN (no SYN-ACK, no RST; `tcp_abort_on_overflow` is 0 by default) and the monitor's
//! connect stalls until its probe timeout, exactly like a target behind a blackholing firewall.
//! The bench checks on every 50th blackholed listener that a connect really stalls.
//!
//! Measured on the monitor process only (the listeners' accept work is in this process):
//! CPU from /proc/<pid>/stat (utime + stime over the measured window, in % of one core), peak
//! RSS from /proc/<pid>/status (VmHWM), and the scheduling lag from the monitor's own
//! `joinguard_probe_schedule_lag_seconds` histogram (the window's increase; p99 interpolated
//! within the bucket as PromQL's histogram_quantile does, and the bucket's upper bound).

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

#[path = "scale/fabric.rs"]
mod fabric;

use std::time::Duration;

use fabric::{
    bench_out_dir, measure_monitor, raise_nofile, start_monitor, start_targets, targets_runtime,
    utc_date, Fabric, WARMUP,
};

#[derive(serde::Serialize)]
struct Row {
    targets: usize,
    blackholed: usize,
    seconds: f64,
    cpu_pct_one_core: f64,
    peak_rss_mb: f64,
    lag_p50_ms: f64,
    lag_p99_ms: f64,
    lag_p99_bucket_le_ms: f64,
    lag_max_bucket_le_ms: f64,
    probes_per_s: f64,
    failures_per_s: f64,
    rounds_skipped_per_s: f64,
}

fn run(
    rt: &tokio::runtime::Runtime,
    fabric: &Fabric,
    dir: &std::path::Path,
    scenario: usize,
    n: usize,
    blackholed: usize,
    measure: Duration,
) -> Row {
    let _targets = start_targets(rt, fabric, scenario, n, blackholed);
    let m = start_monitor(fabric, dir, scenario, n);
    let w = measure_monitor(fabric, &m, measure);
    let secs = w.seconds;
    let lag = w.lag();
    let delta = |name: &str| w.increase(name) / secs;
    Row {
        targets: n,
        blackholed,
        seconds: secs,
        cpu_pct_one_core: w.cpu_seconds / secs * 100.0,
        peak_rss_mb: w.peak_rss_mb,
        lag_p50_ms: lag.p50 * 1000.0,
        lag_p99_ms: lag.p99 * 1000.0,
        lag_p99_bucket_le_ms: lag.p99_le * 1000.0,
        lag_max_bucket_le_ms: lag.max_le * 1000.0,
        probes_per_s: delta("joinguard_probe_attempts_total"),
        failures_per_s: delta("joinguard_probe_failures_total"),
        rounds_skipped_per_s: delta("joinguard_probe_rounds_skipped_total"),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let quick = std::env::var_os("JOINGUARD_BENCH_QUICK").is_some();
    let measure = if quick {
        Duration::from_secs(10)
    } else {
        Duration::from_secs(60)
    };
    let nofile = raise_nofile();
    eprintln!(
        "monitor_scale: RLIMIT_NOFILE {nofile}; {measure:?} per scenario after {WARMUP:?} warm-up"
    );
    let rt = targets_runtime();
    let dir = tempfile::tempdir().unwrap();
    let fabric = Fabric::from_env();
    eprintln!("monitor_scale: targets on {}", fabric.name());
    let mut rows = Vec::new();
    // JOINGUARD_BENCH_TARGETS=10000 runs the rows of that size only.
    let only: Option<usize> = std::env::var("JOINGUARD_BENCH_TARGETS")
        .ok()
        .and_then(|v| v.parse().ok());
    for (scenario, (n, holes)) in [(1000, 0), (1000, 100), (10_000, 0), (10_000, 1000)]
        .into_iter()
        .enumerate()
        .filter(|(_, (n, _))| only.is_none_or(|o| o == *n))
    {
        eprintln!("monitor_scale: {n} targets, {holes} blackholed ...");
        let r = run(&rt, &fabric, dir.path(), scenario, n, holes, measure);
        eprintln!(
            "  cpu {:.1}% rss {:.1} MB lag p99 {:.2} ms",
            r.cpu_pct_one_core, r.peak_rss_mb, r.lag_p99_ms
        );
        rows.push(r);
    }
    println!("| targets | blackholed | CPU (% of one core) | peak RSS (MB) | lag p50 (ms) | lag p99 (ms) | p99 bucket <= (ms) | worst bucket <= (ms) | probes/s | failures/s | rounds skipped/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {:.0} | {:.0} | {:.0} |",
            r.targets,
            r.blackholed,
            r.cpu_pct_one_core,
            r.peak_rss_mb,
            r.lag_p50_ms,
            r.lag_p99_ms,
            r.lag_p99_bucket_le_ms,
            r.lag_max_bucket_le_ms,
            r.probes_per_s,
            r.failures_per_s,
            r.rounds_skipped_per_s
        );
    }
    let out = bench_out_dir();
    let json = serde_json::json!({
        "schemaVersion": 1,
        "bench": "monitor_scale",
        "interval_s": 1,
        "probe_timeout_ms": 900,
        "measure_s": measure.as_secs(),
        "quick": quick,
        "fabric": fabric.name(),
        "date": utc_date(),
        "rows": rows,
    });
    // A partial run never replaces the whole table docs/benchmarks.md is rendered from.
    let path = out.join(if only.is_some() {
        "monitor-scale-partial.json"
    } else {
        "monitor-scale.json"
    });
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    eprintln!("monitor_scale: wrote {}", path.display());
}
