//! joinguard's monitor against Prometheus' blackbox_exporter (Debian's 0.23.0), probing the same
//! TCP targets at the same interval, one process after the other in turn.
//!
//! Run: `cargo bench -p joinguard --bench blackbox` (root: netlab; the exporter from
//! `apt-get install prometheus-blackbox-exporter`). Two runs of each per size, alternating
//! (joinguard, blackbox_exporter, joinguard, blackbox_exporter), 60 s each after a 5 s warm-up,
//! at 1,000 and 10,000 targets: about 10 minutes. `JOINGUARD_BENCH_QUICK=1` measures 10 s and
//! one run each; `JOINGUARD_BENCH_RUNS` sets the runs of each, `JOINGUARD_BENCH_TARGETS` one
//! size, `JOINGUARD_BENCH_BIN` another joinguard build, `JOINGUARD_BLACKBOX_BIN` another
//! exporter. Prints a markdown table and writes `target/bench/blackbox.json`.
//!
//! The fabric is monitor_scale's (scale/fabric.rs): the prober in netlab host `mon`, the targets
//! (listeners in this process that accept and close) in host `tgt`. Both sides probe by TCP
//! connect with a 900 ms timeout every 1 s:
//! - joinguard: `joinguard monitor` with monitor_scale's configuration (static `api-server`
//!   targets without a CA, so a TCP connect each). Probes are its
//!   `joinguard_probe_attempts_total`, the lag its own `joinguard_probe_schedule_lag_seconds`.
//! - blackbox_exporter: module `tcp_connect` (prober tcp, timeout 900ms, IPv4), driven as
//!   Prometheus drives it: one `GET /probe?module=tcp_connect&target=IP:PORT` per target per
//!   interval, target i at i/n of the interval, over keep-alive HTTP/1.1 connections, with
//!   Prometheus' headers (X-Prometheus-Scrape-Timeout-Seconds 1 and `--timeout-offset=0.1`,
//!   so the exporter's timeout is 900 ms as joinguard's). The driver is this binary run again
//!   as a separate process in `mon` (`blackbox-loadgen`), so its CPU is its own and reported
//!   apart. Probes are the /probe answers with status 200 in the window; failures those without
//!   `probe_success 1`. Its lag is the driver's: how late each answer came back after its
//!   scheduled time (the probe and the HTTP round trip included, so it bounds the exporter's
//!   start lag from above), with the exporter's own `probe_duration_seconds` beside it.
//!   Prometheus also asks for gzip; the driver does not, so the exporter is spared compressing
//!   its answers.
//!
//! Measured on the prober process only: CPU from /proc/<pid>/stat (utime + stime over the
//! window, per 1,000 probes done in it and in % of one core), peak RSS (VmHWM). The 1-minute
//! load average at the end of each run is recorded beside it: the figures move with the host's
//! load, which is why the runs alternate.

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

#[path = "scale/fabric.rs"]
mod fabric;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use fabric::{
    bench_out_dir, clk_tck, cpu_ticks, measure_monitor, peak_rss_mb, raise_nofile, start_monitor,
    start_targets, targets_runtime, utc_date, Fabric, WARMUP,
};
use serde_json::{json, Value};

const BLACKBOX: &str = "/usr/bin/prometheus-blackbox-exporter";
/// The argument that makes this binary the load generator.
const LOADGEN: &str = "blackbox-loadgen";
/// monitor_scale's interval and probe timeout (its monitor configuration is reused).
const INTERVAL: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT_MS: u64 = 900;
/// Keep-alive connections from the driver to the exporter, each carrying one request at a time
/// (at most one per target). Prometheus runs a scrape loop per target and its connection pool
/// grows to what is in flight; 128 connections held blackbox_exporter at 2,800 probes/s on
/// 10,000 targets, all waiting on answers, with the exporter at half of the two cores.
const CONNECTIONS: usize = 1000;

/// One measured run of one prober.
#[derive(serde::Serialize, Clone)]
struct Row {
    targets: usize,
    prober: &'static str,
    run: usize,
    seconds: f64,
    probes: f64,
    probes_per_s: f64,
    failures: f64,
    /// Probes not done because the prober was a whole interval behind (joinguard's
    /// rounds skipped; the driver's requests skipped for blackbox_exporter).
    skipped_per_s: f64,
    cpu_ms_per_1000_probes: f64,
    cpu_pct_one_core: f64,
    peak_rss_mb: f64,
    lag_p50_ms: f64,
    lag_p99_ms: f64,
    /// What the lag columns measure for this prober.
    lag_is: &'static str,
    probe_duration_p50_ms: Option<f64>,
    probe_duration_p99_ms: Option<f64>,
    loadgen_cpu_pct_one_core: Option<f64>,
    load_avg_1m: f64,
}

fn load_avg_1m() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn cpu_seconds(ticks: u64) -> f64 {
    ticks as f64 / clk_tck()
}

/// One run of one prober: where, against which targets, for how long.
#[derive(Clone, Copy)]
struct Trial<'a> {
    fabric: &'a Fabric,
    dir: &'a Path,
    /// monitor_scale's scenario: which ports the targets have.
    scenario: usize,
    n: usize,
    run: usize,
    measure: Duration,
}

fn joinguard_run(trial: &Trial) -> Row {
    let m = start_monitor(trial.fabric, trial.dir, trial.scenario, trial.n);
    let w = measure_monitor(trial.fabric, &m, trial.measure);
    let lag = w.lag();
    let probes = w.increase("joinguard_probe_attempts_total");
    let (secs, cpu) = (w.seconds, w.cpu_seconds);
    Row {
        targets: trial.n,
        prober: "joinguard",
        run: trial.run,
        seconds: secs,
        probes,
        probes_per_s: probes / secs,
        failures: w.increase("joinguard_probe_failures_total"),
        skipped_per_s: w.increase("joinguard_probe_rounds_skipped_total") / secs,
        cpu_ms_per_1000_probes: cpu / probes * 1e6,
        cpu_pct_one_core: cpu / secs * 100.0,
        peak_rss_mb: w.peak_rss_mb,
        lag_p50_ms: lag.p50 * 1000.0,
        lag_p99_ms: lag.p99 * 1000.0,
        lag_is: "start after schedule (own histogram)",
        probe_duration_p50_ms: None,
        probe_duration_p99_ms: None,
        loadgen_cpu_pct_one_core: None,
        load_avg_1m: load_avg_1m(),
    }
}

/// A child process killed and reaped when dropped (on a panic too).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The load generator, spoken to over its stdin and stdout.
struct Driver {
    // Declared first, dropped first: closing stdin ends the driver on its own.
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    child: Reaped,
}

impl Driver {
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to the load generator");
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("read from the load generator");
        assert!(!line.is_empty(), "the load generator exited");
        line
    }
}

fn blackbox_run(trial: &Trial) -> Row {
    let &Trial {
        fabric,
        dir,
        scenario,
        n,
        run,
        measure,
    } = trial;
    let config = dir.join("blackbox.yml");
    std::fs::write(
        &config,
        format!(
            "modules:\n  tcp_connect:\n    prober: tcp\n    timeout: {PROBE_TIMEOUT_MS}ms\n    \
             tcp:\n      preferred_ip_protocol: ip4\n      ip_protocol_fallback: false\n"
        ),
    )
    .unwrap();
    let targets = dir.join(format!("targets-{scenario}.txt"));
    let list: String = (0..n)
        .map(|i| format!("{}\n", fabric.target_addr(scenario, i)))
        .collect();
    std::fs::write(&targets, list).unwrap();
    let addr = fabric.free_monitor_addr();
    let bin = std::env::var_os("JOINGUARD_BLACKBOX_BIN").unwrap_or_else(|| BLACKBOX.into());
    let log = std::fs::File::create(dir.join(format!("blackbox-{scenario}-{run}.log"))).unwrap();
    let exporter = Reaped(
        fabric
            .monitor_command(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--web.listen-address={addr}"))
            // Prometheus sends its scrape timeout (1 s, the interval); the exporter subtracts
            // the offset: 900 ms, the module's timeout and joinguard's.
            .arg("--timeout-offset=0.1")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "start {} (apt-get install prometheus-blackbox-exporter): {e}",
                    bin.to_string_lossy()
                )
            }),
    );
    let pid = exporter.0.id();
    fabric.wait_for_metrics(addr, "blackbox_exporter");
    let connections: usize = std::env::var("JOINGUARD_BENCH_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CONNECTIONS);
    let glog = std::fs::File::create(dir.join(format!("loadgen-{scenario}-{run}.log"))).unwrap();
    let mut child = fabric
        .monitor_command(std::env::current_exe().unwrap().as_os_str())
        .arg(LOADGEN)
        .arg(addr.to_string())
        .arg(&targets)
        .arg(INTERVAL.as_millis().to_string())
        .arg(connections.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(glog)
        .spawn()
        .expect("start the load generator");
    let mut driver = Driver {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child: Reaped(child),
    };
    let gpid = driver.child.0.id();
    std::thread::sleep(WARMUP);
    driver.ask("mark");
    let t0 = Instant::now();
    let (c0, g0) = (cpu_ticks(pid), cpu_ticks(gpid));
    std::thread::sleep(measure);
    let (c1, g1) = (cpu_ticks(pid), cpu_ticks(gpid));
    let secs = t0.elapsed().as_secs_f64();
    let report: Value = serde_json::from_str(&driver.ask("report")).expect("the driver's report");
    let rss = peak_rss_mb(pid);
    drop(driver);
    drop(exporter);
    let num = |k: &str| report[k].as_f64().unwrap_or(f64::NAN);
    if let Some(e) = report["first_error"].as_str() {
        eprintln!(
            "  blackbox: {} requests failed, the first: {e}",
            report["errors"]
        );
    }
    let probes = num("ok") + num("failed");
    let cpu = cpu_seconds(c1 - c0);
    Row {
        targets: n,
        prober: "blackbox_exporter",
        run,
        seconds: secs,
        probes,
        probes_per_s: probes / secs,
        failures: num("failed") + num("errors"),
        skipped_per_s: num("skipped") / secs,
        cpu_ms_per_1000_probes: cpu / probes * 1e6,
        cpu_pct_one_core: cpu / secs * 100.0,
        peak_rss_mb: rss,
        lag_p50_ms: num("late_p50_ms"),
        lag_p99_ms: num("late_p99_ms"),
        lag_is: "answer after schedule (driver)",
        probe_duration_p50_ms: Some(num("probe_duration_p50_ms")),
        probe_duration_p99_ms: Some(num("probe_duration_p99_ms")),
        loadgen_cpu_pct_one_core: Some(cpu_seconds(g1 - g0) / secs * 100.0),
        load_avg_1m: load_avg_1m(),
    }
}

/// The two probers' CPU per 1,000 probes at one size, over all its runs.
#[derive(serde::Serialize)]
struct Pair {
    targets: usize,
    runs_each: usize,
    joinguard_cpu_ms_per_1000_probes: f64,
    blackbox_cpu_ms_per_1000_probes: f64,
    /// joinguard / blackbox_exporter, of the means.
    ratio: f64,
    /// The lowest and highest ratio of a joinguard run to the blackbox_exporter run after it.
    ratio_min: f64,
    ratio_max: f64,
    joinguard_at_most_half: bool,
    load_avg_1m_min: f64,
    load_avg_1m_max: f64,
}

fn pair(rows: &[Row], n: usize) -> Option<Pair> {
    let of = |p: &str| -> Vec<&Row> {
        rows.iter()
            .filter(|r| r.targets == n && r.prober == p)
            .collect()
    };
    let (j, b) = (of("joinguard"), of("blackbox_exporter"));
    if j.is_empty() || b.is_empty() {
        return None;
    }
    let mean =
        |v: &[&Row]| v.iter().map(|r| r.cpu_ms_per_1000_probes).sum::<f64>() / v.len() as f64;
    let ratios: Vec<f64> = j
        .iter()
        .zip(&b)
        .map(|(j, b)| j.cpu_ms_per_1000_probes / b.cpu_ms_per_1000_probes)
        .collect();
    let loads = rows
        .iter()
        .filter(|r| r.targets == n)
        .map(|r| r.load_avg_1m);
    let ratio = mean(&j) / mean(&b);
    Some(Pair {
        targets: n,
        runs_each: j.len().min(b.len()),
        joinguard_cpu_ms_per_1000_probes: mean(&j),
        blackbox_cpu_ms_per_1000_probes: mean(&b),
        ratio,
        ratio_min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratio_max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        joinguard_at_most_half: ratio <= 0.5,
        load_avg_1m_min: loads.clone().fold(f64::INFINITY, f64::min),
        load_avg_1m_max: loads.fold(f64::NEG_INFINITY, f64::max),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(LOADGEN) {
        loadgen::run(&args[2..]);
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is taken.
    let quick = std::env::var_os("JOINGUARD_BENCH_QUICK").is_some();
    let measure = Duration::from_secs(if quick { 10 } else { 60 });
    let runs: usize = std::env::var("JOINGUARD_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 2 });
    let nofile = raise_nofile();
    eprintln!(
        "blackbox: RLIMIT_NOFILE {nofile}; {runs} run(s) of each prober per size, alternating, \
         {measure:?} each after {WARMUP:?} warm-up"
    );
    let rt = targets_runtime();
    let dir = tempfile::tempdir().unwrap();
    let fabric = Fabric::from_env();
    eprintln!("blackbox: targets on {}", fabric.name());
    let only: Option<usize> = std::env::var("JOINGUARD_BENCH_TARGETS")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut rows: Vec<Row> = Vec::new();
    // monitor_scale's scenarios 0 and 2: the healthy rows' ports.
    for (scenario, n) in [(0, 1000), (2, 10_000)]
        .into_iter()
        .filter(|(_, n)| only.is_none_or(|o| o == *n))
    {
        // The same listeners for every run of this size: both probers connect to the same
        // sockets.
        let _targets = start_targets(&rt, &fabric, scenario, n, 0);
        for run in 1..=runs {
            for prober in ["joinguard", "blackbox_exporter"] {
                eprintln!("blackbox: {n} targets, {prober}, run {run} ...");
                let trial = Trial {
                    fabric: &fabric,
                    dir: dir.path(),
                    scenario,
                    n,
                    run,
                    measure,
                };
                let r = if prober == "joinguard" {
                    joinguard_run(&trial)
                } else {
                    blackbox_run(&trial)
                };
                eprintln!(
                    "  {:.0} probes/s, {:.1} CPU ms per 1,000 probes ({:.1}% of a core), rss \
                     {:.1} MB, lag p99 {:.2} ms, {} failures, load {:.2}",
                    r.probes_per_s,
                    r.cpu_ms_per_1000_probes,
                    r.cpu_pct_one_core,
                    r.peak_rss_mb,
                    r.lag_p99_ms,
                    r.failures,
                    r.load_avg_1m
                );
                rows.push(r);
            }
        }
    }
    println!(
        "| targets | prober | run | probes/s | skipped/s | failures | CPU ms per 1,000 probes | CPU (% of one \
         core) | peak RSS (MB) | lag p50 (ms) | lag p99 (ms) | lag is | probe_duration p50 / p99 \
         (ms) | driver CPU (%) | load avg 1m |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} | {} | {} | {} \
             | {:.2} |",
            r.targets,
            r.prober,
            r.run,
            r.probes_per_s,
            r.skipped_per_s,
            r.failures,
            r.cpu_ms_per_1000_probes,
            r.cpu_pct_one_core,
            r.peak_rss_mb,
            r.lag_p50_ms,
            r.lag_p99_ms,
            r.lag_is,
            match (r.probe_duration_p50_ms, r.probe_duration_p99_ms) {
                (Some(a), Some(b)) => format!("{a:.2} / {b:.2}"),
                _ => String::new(),
            },
            r.loadgen_cpu_pct_one_core
                .map(|x| format!("{x:.1}"))
                .unwrap_or_default(),
            r.load_avg_1m
        );
    }
    let pairs: Vec<Pair> = [1000, 10_000]
        .into_iter()
        .filter_map(|n| pair(&rows, n))
        .collect();
    println!();
    println!("| targets | runs each | joinguard CPU ms / 1,000 probes | blackbox_exporter CPU ms / 1,000 probes | ratio (of means) | ratio per pair | joinguard at most half |");
    println!("|---:|---:|---:|---:|---:|---|---|");
    for p in &pairs {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.2} | {:.2}-{:.2} | {} |",
            p.targets,
            p.runs_each,
            p.joinguard_cpu_ms_per_1000_probes,
            p.blackbox_cpu_ms_per_1000_probes,
            p.ratio,
            p.ratio_min,
            p.ratio_max,
            if p.joinguard_at_most_half {
                "yes"
            } else {
                "no"
            }
        );
    }
    let json = json!({
        "schemaVersion": 1,
        "bench": "blackbox",
        "interval_s": INTERVAL.as_secs(),
        "probe_timeout_ms": PROBE_TIMEOUT_MS,
        "measure_s": measure.as_secs(),
        "runs_each": runs,
        "quick": quick,
        "fabric": fabric.name(),
        "blackbox_exporter": blackbox_version(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "date": utc_date(),
        "rows": rows,
        "pairs": pairs,
    });
    // A partial run never replaces the whole table docs/benchmarks.md is rendered from.
    let path = bench_out_dir().join(if only.is_some() {
        "blackbox-partial.json"
    } else {
        "blackbox.json"
    });
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    eprintln!("blackbox: wrote {}", path.display());
}

fn blackbox_version() -> String {
    let bin = std::env::var_os("JOINGUARD_BLACKBOX_BIN").unwrap_or_else(|| BLACKBOX.into());
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            // kingpin prints the version on stderr.
            let text = String::from_utf8_lossy(&o.stderr).into_owned()
                + &String::from_utf8_lossy(&o.stdout);
            text.split_whitespace()
                .skip_while(|w| *w != "version")
                .nth(1)
                .map(String::from)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The driver: Prometheus' part, one `/probe` request per target per interval. Runs as its own
/// process (`blackbox-loadgen EXPORTER TARGETS_FILE INTERVAL_MS CONNECTIONS`) on one thread.
/// Its stdin takes `mark` (start a window) and `report` (the window's figures, one JSON line);
/// at the end of stdin it exits.
mod loadgen {
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper::client::conn::http1::SendRequest;
    use hyper_util::rt::TokioIo;

    /// What came back since the last `mark`.
    #[derive(Default)]
    struct Window {
        ok: u64,
        failed: u64,
        errors: u64,
        /// Requests not sent because their connection was an interval behind.
        skipped: u64,
        first_error: Option<String>,
        late_us: Vec<u64>,
        duration_us: Vec<u64>,
    }

    fn quantile_ms(v: &mut [u64], q: f64) -> f64 {
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_unstable();
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    }

    fn control(window: Arc<Mutex<Window>>) {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            let mut w = window.lock().unwrap();
            match line.trim() {
                "mark" => {
                    *w = Window::default();
                    println!("marked");
                }
                "report" => {
                    let report = serde_json::json!({
                        "ok": w.ok,
                        "failed": w.failed,
                        "errors": w.errors,
                        "skipped": w.skipped,
                        "first_error": w.first_error,
                        "late_p50_ms": quantile_ms(&mut w.late_us, 0.5),
                        "late_p99_ms": quantile_ms(&mut w.late_us, 0.99),
                        "late_max_ms": quantile_ms(&mut w.late_us, 1.0),
                        "probe_duration_p50_ms": quantile_ms(&mut w.duration_us, 0.5),
                        "probe_duration_p99_ms": quantile_ms(&mut w.duration_us, 0.99),
                    });
                    println!("{report}");
                }
                other => println!("{{\"unknown\": {other:?}}}"),
            }
        }
        std::process::exit(0);
    }

    pub(crate) fn run(args: &[String]) {
        let [exporter, targets, interval_ms, connections] = args else {
            panic!(
                "usage: {} EXPORTER TARGETS_FILE INTERVAL_MS CONNECTIONS",
                super::LOADGEN
            );
        };
        let exporter: SocketAddr = exporter.parse().expect("exporter address");
        let targets: Arc<Vec<String>> = Arc::new(
            std::fs::read_to_string(targets)
                .expect("targets file")
                .lines()
                .map(String::from)
                .collect(),
        );
        let interval = Duration::from_millis(interval_ms.parse().expect("interval"));
        let connections: usize = connections.parse().expect("connections");
        let window = Arc::new(Mutex::new(Window::default()));
        {
            let window = window.clone();
            std::thread::spawn(move || control(window));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let start = tokio::time::Instant::now() + Duration::from_millis(100);
            let stride = connections.clamp(1, targets.len());
            let tasks: Vec<_> = (0..stride)
                .map(|first| {
                    tokio::spawn(connection(
                        first,
                        stride,
                        exporter,
                        targets.clone(),
                        interval,
                        start,
                        window.clone(),
                    ))
                })
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        });
    }

    /// One keep-alive connection's share: targets `first`, `first + stride`, ..., each at its
    /// place in the interval (target i at i/n of it, as Prometheus spreads its scrapes), one
    /// request at a time; a late answer delays the next, as it would Prometheus' scrape loop.
    async fn connection(
        first: usize,
        stride: usize,
        exporter: SocketAddr,
        targets: Arc<Vec<String>>,
        interval: Duration,
        start: tokio::time::Instant,
        window: Arc<Mutex<Window>>,
    ) {
        let n = targets.len();
        let mut sender: Option<SendRequest<Empty<Bytes>>> = None;
        for round in 0u32.. {
            for i in (first..n).step_by(stride) {
                let due = start + interval * round + interval.mul_f64(i as f64 / n as f64);
                tokio::time::sleep_until(due).await;
                // Prometheus' scrape loop drops the ticks it missed instead of catching up: a
                // request a whole interval late is skipped, not sent.
                if tokio::time::Instant::now() >= due + interval {
                    window.lock().unwrap().skipped += 1;
                    continue;
                }
                let answer = probe(&mut sender, exporter, &targets[i]).await;
                let late = Instant::now().saturating_duration_since(due.into_std());
                let mut w = window.lock().unwrap();
                match answer {
                    Ok(body) => {
                        let success = body.lines().any(|l| l.trim_end() == "probe_success 1");
                        if success {
                            w.ok += 1;
                        } else {
                            w.failed += 1;
                        }
                        w.late_us.push(late.as_micros() as u64);
                        if let Some(d) = body
                            .lines()
                            .find_map(|l| l.strip_prefix("probe_duration_seconds "))
                            .and_then(|v| v.trim().parse::<f64>().ok())
                        {
                            w.duration_us.push((d * 1e6) as u64);
                        }
                    }
                    Err(e) => {
                        w.errors += 1;
                        w.first_error.get_or_insert(e);
                        sender = None;
                    }
                }
            }
        }
    }

    async fn probe(
        sender: &mut Option<SendRequest<Empty<Bytes>>>,
        exporter: SocketAddr,
        target: &str,
    ) -> Result<String, String> {
        if sender.as_ref().is_none_or(|s| s.is_closed()) {
            let stream = tokio::net::TcpStream::connect(exporter)
                .await
                .map_err(|e| format!("connect {exporter}: {e}"))?;
            let _ = stream.set_nodelay(true);
            let (s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP handshake with {exporter}: {e}"))?;
            tokio::spawn(conn);
            *sender = Some(s);
        }
        let s = sender.as_mut().expect("connected above");
        s.ready().await.map_err(|e| format!("connection: {e}"))?;
        // Prometheus' own headers (2.42), but for Accept-Encoding: gzip.
        let req = hyper::Request::get(format!("/probe?module=tcp_connect&target={target}"))
            .header(hyper::header::HOST, exporter.to_string())
            .header(hyper::header::USER_AGENT, "Prometheus/2.42.0")
            .header(
                hyper::header::ACCEPT,
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                 version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            )
            .header("X-Prometheus-Scrape-Timeout-Seconds", "1")
            .body(Empty::<Bytes>::new())
            .expect("a valid request");
        let resp = s
            .send_request(req)
            .await
            .map_err(|e| format!("/probe {target}: {e}"))?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("/probe {target}: body: {e}"))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!("/probe {target}: HTTP {status}"));
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}
