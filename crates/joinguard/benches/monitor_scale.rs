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

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");
const PORTS_PER_ADDR: usize = 100;
const WARMUP: Duration = Duration::from_secs(5);

/// Where the targets and the monitor run.
enum Fabric {
    /// Listeners on loopback, in this process's namespace, as the monitor.
    Loopback,
    /// The monitor in host `mon`, the targets in host `tgt`, through netlab's forwarder.
    Lab(netlab::Lab),
}

impl Fabric {
    /// Target `i` of scenario `scenario`: each scenario has its own addresses or ports, so the
    /// previous one's listeners (closed asynchronously) cannot collide with the next one's.
    fn target_addr(&self, scenario: usize, i: usize) -> SocketAddr {
        match self {
            Fabric::Loopback => {
                let a = scenario * 110 + i / PORTS_PER_ADDR;
                let ip = Ipv4Addr::new(
                    127,
                    77,
                    u8::try_from(a / 250).unwrap(),
                    u8::try_from(a % 250 + 1).unwrap(),
                );
                SocketAddr::new(
                    ip.into(),
                    20000 + u16::try_from(i % PORTS_PER_ADDR).unwrap(),
                )
            }
            // One address: with connects that end in a reset nothing lingers in TIME_WAIT, so
            // the ports alone keep the connections apart. All below the ephemeral range.
            Fabric::Lab(lab) => {
                let base = [10_000, 11_000, 12_000, 22_000][scenario];
                SocketAddr::new(
                    lab.host("tgt").addr().into(),
                    u16::try_from(base + i).unwrap(),
                )
            }
        }
    }

    /// Runs `f` where the targets live (their sockets belong to that namespace).
    fn at_targets<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            Fabric::Loopback => f(),
            Fabric::Lab(lab) => lab.host("tgt").run(f).expect("enter the targets' host"),
        }
    }

    /// Runs `f` where the monitor runs (its /metrics is on that namespace's loopback).
    fn at_monitor<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            Fabric::Loopback => f(),
            Fabric::Lab(lab) => lab.host("mon").run(f).expect("enter the monitor's host"),
        }
    }

    fn monitor_command(&self, bin: &std::ffi::OsStr) -> Command {
        match self {
            Fabric::Loopback => Command::new(bin),
            Fabric::Lab(lab) => lab.host("mon").command(bin),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Fabric::Loopback => "loopback",
            Fabric::Lab(_) => "netlab",
        }
    }
}

fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let want = 262_144;
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    let hard = hard.max(want);
    // Root may raise the hard limit; otherwise take what the hard limit allows.
    if setrlimit(Resource::RLIMIT_NOFILE, want, hard).is_err() {
        let (_, h) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        setrlimit(Resource::RLIMIT_NOFILE, h, h).expect("setrlimit");
    }
    getrlimit(Resource::RLIMIT_NOFILE).unwrap().0
}

fn listener(addr: SocketAddr, backlog: i32) -> std::net::TcpListener {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&addr.into())
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    s.listen(backlog).unwrap();
    s.into()
}

/// The targets: healthy ones accepted and closed by `rt`'s tasks; blackholed ones full.
struct Targets {
    _blackholes: Vec<(std::net::TcpListener, Vec<TcpStream>)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Targets {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn start_targets(
    rt: &tokio::runtime::Runtime,
    fabric: &Fabric,
    scenario: usize,
    n: usize,
    blackholed: usize,
) -> Targets {
    // Every 10th target is blackholed, so the slow ones are spread over the whole set.
    let is_hole = |i: usize| {
        blackholed > 0 && i.is_multiple_of(n / blackholed) && i / (n / blackholed) < blackholed
    };
    let addrs: Vec<SocketAddr> = (0..n).map(|i| fabric.target_addr(scenario, i)).collect();
    let (healthy, holes) = fabric.at_targets(|| {
        let mut healthy = Vec::new();
        let mut holes = Vec::new();
        for (i, &addr) in addrs.iter().enumerate() {
            if is_hole(i) {
                let l = listener(addr, 0);
                // Backlog 0 holds one connection: this one, never accepted, fills the queue.
                let held: Vec<TcpStream> =
                    TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                        .into_iter()
                        .collect();
                // Prove on a sample that a further connect stalls (200 ms each, so not on all).
                if holes.len() % 50 == 0 {
                    let stalls =
                        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err();
                    assert!(
                        stalls,
                        "{addr}: a connect to the full listener did not stall"
                    );
                }
                holes.push((l, held));
            } else {
                let l = listener(addr, 1024);
                l.set_nonblocking(true).unwrap();
                healthy.push(l);
            }
        }
        (healthy, holes)
    });
    let tasks = healthy
        .into_iter()
        .map(|l| {
            rt.spawn(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                loop {
                    if let Ok((s, _)) = l.accept().await {
                        drop(s);
                    }
                }
            })
        })
        .collect();
    Targets {
        _blackholes: holes,
        tasks,
    }
}

struct Monitor {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_monitor(fabric: &Fabric, dir: &std::path::Path, scenario: usize, n: usize) -> Monitor {
    let mut cfg = String::from(
        "interval: 1s\njitter: 0.1\nprobeTimeout: 900ms\nwindow: 30\nmaxTargets: 20000\ntargets:\n",
    );
    for i in 0..n {
        cfg.push_str(&format!(
            "  - {{name: t{i}, kind: api-server, endpoint: {}}}\n",
            fabric.target_addr(scenario, i)
        ));
    }
    let path = dir.join(format!("monitor-{scenario}.yaml"));
    std::fs::write(&path, cfg).unwrap();
    let addr: SocketAddr = fabric.at_monitor(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    });
    let log = std::fs::File::create(dir.join(format!("monitor-{scenario}.log"))).unwrap();
    // JOINGUARD_BENCH_BIN measures another build (a copy of the one before a change, to pair
    // runs on one machine).
    let bin = std::env::var_os("JOINGUARD_BENCH_BIN").unwrap_or_else(|| JOINGUARD.into());
    let child = fabric
        .monitor_command(&bin)
        .args(["monitor", "--config"])
        .arg(&path)
        .args(["--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start joinguard monitor");
    let m = Monitor { child, addr };
    let t0 = Instant::now();
    while fabric.at_monitor(|| scrape(m.addr)).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "monitor did not serve /metrics"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    m
}

fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf.split_once("\r\n\r\n")?.1.to_string())
}

/// (le, cumulative count) of the lag histogram, and a counter's value.
fn lag_buckets(text: &str) -> Vec<(f64, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("joinguard_probe_schedule_lag_seconds_bucket{le=\""))
        .filter_map(|r| {
            let (le, v) = r.split_once("\"} ")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, v.trim().parse().ok()?))
        })
        .collect()
}

fn counter_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// histogram_quantile over the increase between two scrapes: (interpolated, bucket upper bound).
fn quantile(q: f64, before: &[(f64, f64)], after: &[(f64, f64)]) -> (f64, f64) {
    let inc: Vec<(f64, f64)> = after
        .iter()
        .zip(before)
        .map(|((le, a), (_, b))| (*le, a - b))
        .collect();
    let total = inc.last().map(|x| x.1).unwrap_or(0.0);
    let rank = q * total;
    let mut prev = (0.0, 0.0);
    for &(le, c) in &inc {
        if c >= rank {
            let upper = if le.is_infinite() { prev.0 } else { le };
            let frac = if c > prev.1 {
                (rank - prev.1) / (c - prev.1)
            } else {
                1.0
            };
            return (prev.0 + (upper - prev.0) * frac, le);
        }
        prev = (le, c);
    }
    (f64::NAN, f64::NAN)
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(") ").unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb / 1024.0
}

fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

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
    let pid = m.child.id();
    std::thread::sleep(WARMUP);
    let before = fabric.at_monitor(|| scrape(m.addr)).expect("scrape");
    let t0 = Instant::now();
    let c0 = cpu_ticks(pid);
    std::thread::sleep(measure);
    let c1 = cpu_ticks(pid);
    let secs = t0.elapsed().as_secs_f64();
    let after = fabric.at_monitor(|| scrape(m.addr)).expect("scrape");
    let rss = peak_rss_mb(pid);
    let (b, a) = (lag_buckets(&before), lag_buckets(&after));
    let (p50, _) = quantile(0.5, &b, &a);
    let (p99, p99_le) = quantile(0.99, &b, &a);
    // The highest bucket whose count grew bounds the worst lag seen.
    let mut max_bucket = f64::NAN;
    let inc: Vec<(f64, f64)> = a
        .iter()
        .zip(&b)
        .map(|((le, x), (_, y))| (*le, x - y))
        .collect();
    for w in inc.windows(2) {
        if w[1].1 > w[0].1 {
            max_bucket = w[1].0;
        }
    }
    let delta = |name: &str| (counter_sum(&after, name) - counter_sum(&before, name)) / secs;
    Row {
        targets: n,
        blackholed,
        seconds: secs,
        cpu_pct_one_core: (c1 - c0) as f64 / clk_tck() / secs * 100.0,
        peak_rss_mb: rss,
        lag_p50_ms: p50 * 1000.0,
        lag_p99_ms: p99 * 1000.0,
        lag_p99_bucket_le_ms: p99_le * 1000.0,
        lag_max_bucket_le_ms: max_bucket * 1000.0,
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fabric = if std::env::var_os("JOINGUARD_BENCH_LOOPBACK").is_some() {
        Fabric::Loopback
    } else {
        Fabric::Lab(
            netlab::Lab::builder()
                .hosts(["mon", "tgt"])
                .build()
                .expect("a netlab lab for the monitor and its targets (run as root, or set JOINGUARD_BENCH_LOOPBACK=1)"),
        )
    };
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
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
        });
    let out = target_dir.join("bench");
    std::fs::create_dir_all(&out).unwrap();
    let json = serde_json::json!({
        "schemaVersion": 1,
        "bench": "monitor_scale",
        "interval_s": 1,
        "probe_timeout_ms": 900,
        "measure_s": measure.as_secs(),
        "quick": quick,
        "fabric": fabric.name(),
        "date": Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%MZ"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default(),
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
