//! The fabric of the monitor scale benchmarks (monitor_scale.rs, blackbox.rs): where the targets
//! and the prober run (a netlab host each, or loopback), the TCP targets themselves (healthy
//! listeners that accept and close, blackholed ones whose full accept queue drops every SYN),
//! `joinguard monitor` started against them, and what is read from /proc and from the
//! monitor's /metrics. It measures nothing by itself; each benchmark decides its windows.

// Each benchmark includes this file with `#[path]` and uses part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

pub(crate) const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");
pub(crate) const PORTS_PER_ADDR: usize = 100;
pub(crate) const WARMUP: Duration = Duration::from_secs(5);

/// Where the targets and the monitor run.
pub(crate) enum Fabric {
    /// Listeners on loopback, in this process's namespace, as the monitor.
    Loopback,
    /// The monitor in host `mon`, the targets in host `tgt`, through netlab's forwarder.
    Lab(netlab::Lab),
}

impl Fabric {
    /// Target `i` of scenario `scenario`: each scenario has its own addresses or ports, so the
    /// previous one's listeners (closed asynchronously) cannot collide with the next one's.
    pub(crate) fn target_addr(&self, scenario: usize, i: usize) -> SocketAddr {
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
    pub(crate) fn at_targets<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            Fabric::Loopback => f(),
            Fabric::Lab(lab) => lab.host("tgt").run(f).expect("enter the targets' host"),
        }
    }

    /// Runs `f` where the monitor runs (its /metrics is on that namespace's loopback).
    pub(crate) fn at_monitor<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            Fabric::Loopback => f(),
            Fabric::Lab(lab) => lab.host("mon").run(f).expect("enter the monitor's host"),
        }
    }

    pub(crate) fn monitor_command(&self, bin: &std::ffi::OsStr) -> Command {
        match self {
            Fabric::Loopback => Command::new(bin),
            Fabric::Lab(lab) => lab.host("mon").command(bin),
        }
    }

    /// The lab (root) or, with `JOINGUARD_BENCH_LOOPBACK=1`, loopback.
    pub(crate) fn from_env() -> Fabric {
        if std::env::var_os("JOINGUARD_BENCH_LOOPBACK").is_some() {
            Fabric::Loopback
        } else {
            Fabric::Lab(
                netlab::Lab::builder()
                    .hosts(["mon", "tgt"])
                    .build()
                    .expect("a netlab lab for the prober and its targets (run as root, or set JOINGUARD_BENCH_LOOPBACK=1)"),
            )
        }
    }

    /// A free address on the prober's loopback, for its HTTP listener.
    pub(crate) fn free_monitor_addr(&self) -> SocketAddr {
        self.at_monitor(|| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
        })
    }

    /// Waits (30 s at most) until `what` serves /metrics at `addr`, on the prober's loopback.
    pub(crate) fn wait_for_metrics(&self, addr: SocketAddr, what: &str) {
        let t0 = Instant::now();
        while self.at_monitor(|| scrape(addr)).is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{what} did not serve /metrics"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Fabric::Loopback => "loopback",
            Fabric::Lab(_) => "netlab",
        }
    }
}

pub(crate) fn raise_nofile() -> u64 {
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

pub(crate) fn listener(addr: SocketAddr, backlog: i32) -> std::net::TcpListener {
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&addr.into())
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    s.listen(backlog).unwrap();
    s.into()
}

/// The targets: healthy ones accepted and closed by `rt`'s tasks; blackholed ones full.
pub(crate) struct Targets {
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

pub(crate) fn start_targets(
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

pub(crate) struct Monitor {
    pub(crate) child: Child,
    pub(crate) addr: SocketAddr,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn start_monitor(
    fabric: &Fabric,
    dir: &std::path::Path,
    scenario: usize,
    n: usize,
) -> Monitor {
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
    let addr = fabric.free_monitor_addr();
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
    fabric.wait_for_metrics(m.addr, "joinguard monitor");
    m
}

pub(crate) fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf.split_once("\r\n\r\n")?.1.to_string())
}

/// (le, cumulative count) of the lag histogram, and a counter's value.
pub(crate) fn lag_buckets(text: &str) -> Vec<(f64, f64)> {
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

pub(crate) fn counter_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// histogram_quantile over the increase between two scrapes: (interpolated, bucket upper bound).
pub(crate) fn quantile(q: f64, before: &[(f64, f64)], after: &[(f64, f64)]) -> (f64, f64) {
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

/// What a measured window of the monitor saw: its CPU, its peak RSS and two scrapes.
pub(crate) struct MonitorWindow {
    pub(crate) seconds: f64,
    pub(crate) cpu_seconds: f64,
    pub(crate) peak_rss_mb: f64,
    pub(crate) before: String,
    pub(crate) after: String,
}

impl MonitorWindow {
    /// A counter's (summed over its series) increase over the window.
    pub(crate) fn increase(&self, name: &str) -> f64 {
        counter_sum(&self.after, name) - counter_sum(&self.before, name)
    }

    pub(crate) fn lag(&self) -> LagIncrease {
        lag_increase(&self.before, &self.after)
    }
}

/// Lets the monitor warm up, then measures it for `measure`.
pub(crate) fn measure_monitor(fabric: &Fabric, m: &Monitor, measure: Duration) -> MonitorWindow {
    let pid = m.child.id();
    std::thread::sleep(WARMUP);
    let before = fabric.at_monitor(|| scrape(m.addr)).expect("scrape");
    let t0 = Instant::now();
    let c0 = cpu_ticks(pid);
    std::thread::sleep(measure);
    let c1 = cpu_ticks(pid);
    let seconds = t0.elapsed().as_secs_f64();
    let after = fabric.at_monitor(|| scrape(m.addr)).expect("scrape");
    MonitorWindow {
        seconds,
        cpu_seconds: (c1 - c0) as f64 / clk_tck(),
        peak_rss_mb: peak_rss_mb(pid),
        before,
        after,
    }
}

/// The monitor's schedule lag over a window, from two scrapes of its histogram (seconds).
pub(crate) struct LagIncrease {
    /// Interpolated within the bucket, as PromQL's histogram_quantile does.
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    /// The upper bound of the bucket holding the p99.
    pub(crate) p99_le: f64,
    /// The highest bucket whose count grew: it bounds the worst lag seen.
    pub(crate) max_le: f64,
}

pub(crate) fn lag_increase(before: &str, after: &str) -> LagIncrease {
    let (b, a) = (lag_buckets(before), lag_buckets(after));
    let (p50, _) = quantile(0.5, &b, &a);
    let (p99, p99_le) = quantile(0.99, &b, &a);
    let mut max_le = f64::NAN;
    let inc: Vec<(f64, f64)> = a
        .iter()
        .zip(&b)
        .map(|((le, x), (_, y))| (*le, x - y))
        .collect();
    for w in inc.windows(2) {
        if w[1].1 > w[0].1 {
            max_le = w[1].0;
        }
    }
    LagIncrease {
        p50,
        p99,
        p99_le,
        max_le,
    }
}

pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may contain spaces): utime is 14th, stime 15th.
    let rest = stat.rsplit_once(") ").unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

pub(crate) fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb / 1024.0
}

pub(crate) fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The runtime of the targets' listeners: one worker, so the targets' user-space work stays small.
pub(crate) fn targets_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// `target/bench`, created: where the benchmarks write their JSON for benches/report.rs.
pub(crate) fn bench_out_dir() -> std::path::PathBuf {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
        });
    let out = target_dir.join("bench");
    std::fs::create_dir_all(&out).unwrap();
    out
}

/// The time of the run, UTC, to the minute.
pub(crate) fn utc_date() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%MZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
