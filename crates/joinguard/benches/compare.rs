//! Side-by-side benchmarks against the tools operators use today (etcdctl, kubectl and ping: docs/benchmarks.md, rows 1 to 3),
//! on one fabric in one run:
//! - **accuracy**: one member at a one-way delay d of 0.5, 5, 25 and 100 ms, with and without
//!   jitter (normal, sigma d/10). joinguard's p50 RTT (ICMP echo and etcd Status) against the
//!   fabric's truth (2d plus the base measured with no delay), `ping`'s median and
//!   `etcdctl endpoint health`'s "took". Goal (issue #3): p50 within 0.5 ms or 2% of the truth.
//!   A tcpdump capture on the joiner's TUN gives the wire's own RTT per echo during joinguard's
//!   run and the real spacing of `ping -i 0.001`: with jitter the fabric's FIFO makes the true
//!   RTT depend on the probe rate, so those rows are judged against the wire (issue 30 item 4).
//! - **verdict**: 3 members and the API at RTT 2, 50 and 200 ms. Wall time of `joinguard
//!   preflight` against `etcdctl endpoint health --cluster` and `etcdctl check perf --load=s`.
//!   Goal (issue #3): under 1.5 s at 2 ms, under 3 s at 50 ms.
//! - **members**: time to verdict for 1, 3, 5 and 7 members x RTT 2, 50 and 200 ms (median of
//!   3 runs each), in round trips. Goal (issue 30): about 30 round trips at every RTT where the
//!   round trips dominate (50 and 200 ms), flat in members (7 members within 20% of 1).
//! - **load**: the change in etcd's own counters (proposals committed, puts, ranges, gRPC bytes)
//!   caused by one run of each tool, at 2 ms RTT.
//!
//! Run as root with the lab's prerequisites: `scripts/bench` (which also renders
//! docs/benchmarks.md), or `cargo bench -p joinguard --bench compare`. `JOINGUARD_BENCH_ONLY=
//! accuracy|accuracy-ipv6|verdict|members` runs one part (`accuracy-ipv6`: the accuracy rows
//! in an IPv6-only lab). Results go to
//! `target/bench/{accuracy,accuracy-ipv6,verdict,members}.json`.

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use netlab::apiserver::{ApiServer, ApiServerOptions};
use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::process::output_within;
use netlab::{Impairment, IpFamily, Lab};
use serde_json::{json, Value};

const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `ping -c N -i 0.02` from `cmd`'s host: the median of the per-echo `time=` values (ms).
fn ping_median(cmd: Command, addr: &str, count: u32) -> f64 {
    ping_median_at(cmd, addr, count, "0.02")
}

/// The same at another spacing (`-i` below 0.2 s needs root, which the lab has anyway).
fn ping_median_at(mut cmd: Command, addr: &str, count: u32, interval: &str) -> f64 {
    let count = count.to_string();
    cmd.args(["-n", "-c", &count, "-i", interval, "-W", "2", addr]);
    let out = output_within(&mut cmd, Duration::from_secs(60)).expect("ping ran");
    let text = String::from_utf8_lossy(&out.stdout);
    median(
        text.lines()
            .filter_map(|l| l.split("time=").nth(1))
            .filter_map(|t| t.split_whitespace().next()?.parse().ok())
            .collect(),
    )
}

/// `etcdctl endpoint health` "took = X" in ms (the median of `runs`), which includes the client's
/// connection set-up.
fn etcdctl_took(etcd: &EtcdCluster, lab: &Lab, endpoint: &str, runs: u32) -> f64 {
    let mut v = Vec::new();
    for _ in 0..runs {
        let mut cmd = etcd.etcdctl_to(lab.host("joiner"), &[endpoint.to_string()]);
        cmd.args(["endpoint", "health"]);
        let out = output_within(&mut cmd, Duration::from_secs(30)).expect("etcdctl ran");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(t) = text.split("took = ").nth(1) {
            if let Ok(d) = humantime::parse_duration(t.split_whitespace().next().unwrap_or("")) {
                v.push(d.as_secs_f64() * 1000.0);
            }
        }
    }
    median(v)
}

/// ICMP echoes as the joiner's TUN (`lab0`) saw them, from a tcpdump capture: the wire's own
/// round trip per echo (request out to reply in, the kernel's timestamps at the device, with no
/// prober in between) and how far apart the requests went. Under jitter this is the truth a
/// probe can be held to: the fabric never reorders, so an echo that follows the previous one
/// closer than the jitter's spread waits for it, and the delay depends on the probe rate.
#[derive(Debug, Default)]
struct Echoes {
    /// The echo id with the most requests (the prober's train; a path MTU probe has its own id).
    id: u32,
    requests: usize,
    rtts_ms: Vec<f64>,
    /// Median gap between consecutive requests of that id.
    spacing_ms: f64,
}

impl Echoes {
    fn quantile(&self, q: f64) -> f64 {
        let mut v = self.rtts_ms.clone();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        // Nearest rank, as joinguard's own quantiles.
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    /// Parses `tcpdump -n -tt` lines: `<epoch.us> IP a > b: ICMP echo request, id N, seq M, ...`,
    /// or over IPv6 `<epoch.us> IP6 a > b: ICMP6, echo request, id N, seq M, ...`.
    fn parse(text: &str) -> Echoes {
        use std::collections::HashMap;
        let mut req: HashMap<(u32, u32), f64> = HashMap::new();
        let mut rep: HashMap<(u32, u32), f64> = HashMap::new();
        let mut per_id: HashMap<u32, Vec<f64>> = HashMap::new();
        for line in text.lines() {
            let Some((ts, rest)) = line.split_once(' ') else {
                continue;
            };
            let Ok(ts) = ts.parse::<f64>() else { continue };
            let rest = rest.replace("ICMP6, echo", "ICMP echo");
            let (is_req, tail) = if let Some(t) = rest.split_once("ICMP echo request, id ") {
                (true, t.1)
            } else if let Some(t) = rest.split_once("ICMP echo reply, id ") {
                (false, t.1)
            } else {
                continue;
            };
            let mut parts = tail.split(", ");
            let id = parts.next().and_then(|x| x.parse::<u32>().ok());
            let seq = parts
                .next()
                .and_then(|x| x.strip_prefix("seq "))
                .and_then(|x| x.parse::<u32>().ok());
            let (Some(id), Some(seq)) = (id, seq) else {
                continue;
            };
            if is_req {
                req.entry((id, seq)).or_insert(ts);
                per_id.entry(id).or_default().push(ts);
            } else {
                rep.entry((id, seq)).or_insert(ts);
            }
        }
        let Some((&id, times)) = per_id.iter().max_by_key(|(_, t)| t.len()) else {
            return Echoes::default();
        };
        let mut times = times.clone();
        times.sort_by(f64::total_cmp);
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) * 1000.0).collect();
        let rtts_ms = req
            .iter()
            .filter(|((i, _), _)| *i == id)
            .filter_map(|(k, t)| rep.get(k).map(|r| (r - t) * 1000.0))
            .collect();
        Echoes {
            id,
            requests: times.len(),
            rtts_ms,
            spacing_ms: median(gaps),
        }
    }
}

/// Runs `run` while tcpdump captures the ICMP (or, in an IPv6 lab, ICMPv6) echoes on `host`'s
/// lab interface.
fn captured<T>(
    host: &netlab::Host,
    family: IpFamily,
    dir: &Path,
    name: &str,
    run: impl FnOnce() -> T,
) -> (T, Echoes) {
    let out = dir.join(format!("capture-{name}.txt"));
    let err = dir.join(format!("capture-{name}.err"));
    let mut cmd = host.command("tcpdump");
    cmd.args([
        "-i",
        netlab::lab::LAB_IFACE,
        "-n",
        "-tt",
        "-l",
        "-U",
        if family == IpFamily::V6 {
            "icmp6"
        } else {
            "icmp"
        },
    ])
    .stdout(std::fs::File::create(&out).expect("capture file"))
    .stderr(std::fs::File::create(&err).expect("capture file"));
    let mut tcpdump = host
        .spawn(cmd, "tcpdump")
        .expect("tcpdump (apt-get install tcpdump)");
    // tcpdump says `listening on` once its socket is bound: nothing before that is seen.
    let t = Instant::now();
    while !std::fs::read_to_string(&err)
        .unwrap_or_default()
        .contains("listening on")
    {
        assert!(
            t.elapsed() < Duration::from_secs(10) && tcpdump.is_running(),
            "tcpdump did not start (scripts/bench installs it; a part run alone needs \
             `apt-get install tcpdump`): {}",
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = run();
    // Replies still on the way back when the prober stopped.
    std::thread::sleep(Duration::from_millis(300));
    tcpdump.stop(Duration::from_secs(5));
    let echoes = Echoes::parse(&std::fs::read_to_string(&out).unwrap_or_default());
    (r, echoes)
}

fn tls_args(etcd: &EtcdCluster) -> Vec<String> {
    etcd.joinguard_args()
}

/// One `joinguard preflight -o json` run: (exit code, wall seconds, report).
fn preflight(lab: &Lab, args: &[String]) -> (i32, f64, Value) {
    let mut cmd = lab.host("joiner").command(JOINGUARD);
    cmd.arg("preflight").args(args).args(["-o", "json"]);
    let t = Instant::now();
    let out = output_within(&mut cmd, Duration::from_secs(120)).expect("joinguard ran");
    let wall = t.elapsed().as_secs_f64();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), wall, v)
}

fn p50(report: &Value, target: &str, probe: &str) -> f64 {
    figure(report, target, probe, "p50Ms")
}

fn figure(report: &Value, target: &str, probe: &str, key: &str) -> f64 {
    report["measurements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["target"] == target && m["probe"] == probe)
        .and_then(|m| m[key].as_f64())
        .unwrap_or(f64::NAN)
}

/// The accuracy rows on a lab of `family` (IPv4, or IPv6 only: ICMPv6 echo, etcd on IPv6).
fn accuracy(family: IpFamily) -> Value {
    let lab = Lab::builder()
        .ip_family(family)
        .hosts(["m1", "joiner"])
        .build()
        .expect("lab (run as root)");
    let etcd = EtcdCluster::start(&lab, &[lab.host("m1")], &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("etcd");
    let m1 = lab.host("m1");
    let joiner = lab.host("joiner");
    let addr = m1.ip().to_string();
    let ep = etcd.client_endpoints()[0].clone();
    let target = ep.trim_start_matches("https://").to_string();
    let mut args = tls_args(&etcd);
    // The API is not part of this benchmark: a placeholder endpoint would fail the run, so the
    // measurements (not the verdict) are what is read. Thresholds are irrelevant here.
    args.extend(["--ignore-preflight-errors".into(), "all".into()]);

    // The base: the fabric with no delay, by ping (the kernel's own timestamps).
    let base = ping_median(joiner.command("ping"), &addr, 100);
    let fam = if family == IpFamily::V6 {
        " (IPv6)"
    } else {
        ""
    };
    println!("accuracy{fam}: base RTT (ping, no delay) {base:.3} ms");
    let mut rows = Vec::new();
    for jitter in [false, true] {
        for d_ms in [0.5, 5.0, 25.0, 100.0] {
            let d = Duration::from_secs_f64(d_ms / 1000.0);
            let mut imp = Impairment::delay(d);
            if jitter {
                imp = imp.with_jitter(d / 10);
            }
            lab.net().set_link(joiner, m1, imp);
            std::thread::sleep(Duration::from_millis(200));
            let truth = 2.0 * d_ms + base;
            let tag = format!("d{d_ms}{}", if jitter { "-jitter" } else { "" });
            let ((code, wall, report), wire) = captured(
                joiner,
                family,
                lab.dir(),
                &format!("joinguard-{tag}"),
                || preflight(&lab, &args),
            );
            let jg_icmp = p50(&report, &target, "icmp-echo");
            let jg_status = p50(&report, &target, "etcd-status");
            // The p99 (issue 30: p50 and p99 within the goal): on a path without jitter every
            // sample's truth is the same, so the p99 has the p50's truth.
            let jg_icmp_p99 = figure(&report, &target, "icmp-echo", "p99Ms");
            let jg_status_p99 = figure(&report, &target, "etcd-status", "p99Ms");
            let ping = ping_median(joiner.command("ping"), &addr, 50);
            // ping at joinguard's echo spacing (1 ms): the control for the jitter rows, where
            // the fabric's no-reordering rule makes the true RTT depend on the probe rate.
            let (ping_fast, ping_wire) = captured(
                joiner,
                family,
                lab.dir(),
                &format!("ping-fast-{tag}"),
                || ping_median_at(joiner.command("ping"), &addr, 100, "0.001"),
            );
            let took = etcdctl_took(&etcd, &lab, &ep, 5);
            let err = |x: f64| x - truth;
            let within = |x: f64| err(x).abs() <= (0.5f64).max(0.02 * truth);
            // Against the wire's own figure at joinguard's spacing (the capture): the goal
            // that holds with jitter too.
            let near = |x: f64, wire: f64| (x - wire).abs() <= (0.5f64).max(0.02 * wire);
            let (wire_p50, wire_p99) = (wire.quantile(0.5), wire.quantile(0.99));
            println!(
                "accuracy{fam}: d={d_ms:>5} ms jitter={jitter:<5} wire (capture on the TUN) echo id \
                 {} {} requests {:.3} ms apart, {} answered: p50 {wire_p50:8.3} p99 \
                 {wire_p99:8.3} | ping -i 0.001 {} requests {:.3} ms apart, wire p50 {:8.3}",
                wire.id,
                wire.requests,
                wire.spacing_ms,
                wire.rtts_ms.len(),
                ping_wire.requests,
                ping_wire.spacing_ms,
                ping_wire.quantile(0.5),
            );
            println!(
                "accuracy{fam}: d={d_ms:>5} ms jitter={jitter:<5} truth {truth:8.3} | joinguard icmp \
                 {jg_icmp:8.3} ({:+.3}) p99 {jg_icmp_p99:8.3} status {jg_status:8.3} ({:+.3}) \
                 p99 {jg_status_p99:8.3} | ping {ping:8.3} ({:+.3}) \
                 | ping -i 0.001 {ping_fast:8.3} | etcdctl took {took:8.3} ({:+.3}) | preflight \
                 exit {code} in {wall:.1}s",
                err(jg_icmp),
                err(jg_status),
                err(ping),
                err(took)
            );
            rows.push(json!({
                "oneWayDelayMs": d_ms, "jitter": jitter, "jitterSigmaMs": if jitter { d_ms / 10.0 } else { 0.0 },
                "truthMs": truth, "joinguardIcmpP50Ms": jg_icmp, "joinguardEtcdStatusP50Ms": jg_status,
                "pingP50Ms": ping, "ping2msP50Ms": ping_fast, "etcdctlHealthTookMs": took,
                "joinguardIcmpP99Ms": jg_icmp_p99, "joinguardEtcdStatusP99Ms": jg_status_p99,
                "joinguardIcmpWithinGoal": within(jg_icmp),
                "joinguardIcmpP99WithinGoal": within(jg_icmp_p99),
                "joinguardStatusP99WithinGoal": within(jg_status_p99),
                "joinguardStatusWithinGoal": within(jg_status),
                "wireIcmpP50Ms": wire_p50, "wireIcmpP99Ms": wire_p99,
                "wireIcmpEchoes": wire.rtts_ms.len(), "joinguardEchoSpacingMs": wire.spacing_ms,
                "ping2msEchoSpacingMs": ping_wire.spacing_ms,
                "ping2msWireP50Ms": ping_wire.quantile(0.5),
                "joinguardIcmpNearWire": near(jg_icmp, wire_p50),
                "joinguardIcmpP99NearWire": near(jg_icmp_p99, wire_p99),
                "preflightWallS": wall,
            }));
        }
    }
    lab.net().set_link(joiner, m1, Impairment::none());
    json!({"baseMs": base, "etcd": etcd.version(), "rows": rows,
           "ipFamily": if family == IpFamily::V6 { "ipv6" } else { "ipv4" },
           "date": utc_now()})
}

/// The time now, `YYYY-MM-DDTHH:MMZ` (UTC), as scripts/bench writes run.json.
fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%MZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The etcd counters the load comparison reads, summed over every member.
const LOAD_METRICS: &[(&str, &str)] = &[
    (
        "proposalsCommitted",
        "etcd_server_proposals_committed_total",
    ),
    ("puts", "etcd_mvcc_put_total"),
    ("ranges", "etcd_mvcc_range_total"),
    (
        "grpcBytesReceived",
        "etcd_network_client_grpc_received_bytes_total",
    ),
    ("grpcBytesSent", "etcd_network_client_grpc_sent_bytes_total"),
];

fn counters(etcd: &EtcdCluster) -> Vec<f64> {
    LOAD_METRICS
        .iter()
        .map(|(_, name)| {
            (0..etcd.members().len())
                .map(|i| etcd.metric_sum(i, name).unwrap_or(0.0))
                .sum()
        })
        .collect()
}

fn load_of(etcd: &EtcdCluster, run: impl FnOnce()) -> Value {
    let before = counters(etcd);
    run();
    // etcd updates its counters as it applies; give the followers a moment.
    std::thread::sleep(Duration::from_millis(500));
    let after = counters(etcd);
    let mut m = serde_json::Map::new();
    for (i, (key, _)) in LOAD_METRICS.iter().enumerate() {
        m.insert((*key).into(), json!(after[i] - before[i]));
    }
    Value::Object(m)
}

fn verdict() -> Value {
    let lab = Lab::builder()
        .hosts(["api", "m1", "m2", "m3", "joiner"])
        .build()
        .expect("lab (run as root)");
    let members = [lab.host("m1"), lab.host("m2"), lab.host("m3")];
    let etcd = EtcdCluster::start(&lab, &members, &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("etcd");
    let api = ApiServer::start(lab.host("api"), &etcd, ApiServerOptions::default()).expect("api");
    let api_ca = api.ca().write_ca(lab.dir(), "api-ca").unwrap();
    let mut args = vec![
        api.addr().to_string(),
        "--apiserver-cacert".into(),
        api_ca.display().to_string(),
    ];
    args.extend(tls_args(&etcd));
    let joiner = lab.host("joiner");
    let mut rows = Vec::new();
    for rtt_ms in [2.0, 50.0, 200.0] {
        let d = Duration::from_secs_f64(rtt_ms / 2000.0);
        for h in ["api", "m1", "m2", "m3"] {
            lab.net()
                .set_link(joiner, lab.host(h), Impairment::delay(d));
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut jg = (0, 0.0, Value::Null);
        let jg_load = load_of(&etcd, || jg = preflight(&lab, &args));
        let t = Instant::now();
        let mut cmd = etcd.etcdctl(joiner);
        cmd.args(["endpoint", "health", "--cluster"]);
        let health = output_within(&mut cmd, Duration::from_secs(60)).expect("etcdctl ran");
        let health_wall = t.elapsed().as_secs_f64();
        let mut perf_out = None;
        let mut perf_wall = 0.0;
        let perf_load = load_of(&etcd, || {
            let t = Instant::now();
            let mut cmd = etcd.etcdctl(joiner);
            cmd.args(["check", "perf", "--load=s"]);
            perf_out = Some(output_within(&mut cmd, Duration::from_secs(150)).expect("etcdctl"));
            perf_wall = t.elapsed().as_secs_f64();
        });
        let perf = perf_out.unwrap();
        let perf_text = String::from_utf8_lossy(&perf.stdout).to_string();
        let perf_pass = perf.status.success() && perf_text.contains("PASS");
        let goal = match rtt_ms as u32 {
            2 => Some(1.5),
            50 => Some(3.0),
            _ => None,
        };
        println!(
            "verdict: RTT {rtt_ms:>5} ms | joinguard exit {} in {:.2}s (goal {}) | endpoint health \
             --cluster exit {} in {health_wall:.2}s | check perf {} in {perf_wall:.1}s",
            jg.0,
            jg.1,
            goal.map_or("none".into(), |g| format!("< {g} s")),
            health.status.code().unwrap_or(-1),
            if perf_pass { "PASS" } else { "FAIL" },
        );
        println!("verdict: load joinguard {jg_load} | check perf {perf_load}");
        rows.push(json!({
            "rttMs": rtt_ms,
            "joinguard": {"exit": jg.0, "wallS": jg.1, "durationMs": jg.2["durationMs"],
                           "goalS": goal, "goalMet": goal.map(|g| jg.1 < g), "load": jg_load},
            "endpointHealthCluster": {"exit": health.status.code(), "wallS": health_wall},
            "checkPerf": {"pass": perf_pass, "exit": perf.status.code(), "wallS": perf_wall,
                          "load": perf_load,
                          "summary": perf_text.lines().rfind(|l| !l.trim().is_empty())},
        }));
    }
    json!({"etcd": etcd.version(), "rows": rows})
}

/// Round trips a verdict may take where round trips dominate the run (issue 30).
const GOAL_ROUND_TRIPS: f64 = 30.0;
/// The most a 7-member verdict may take over a 1-member one at the same RTT ("flat").
const GOAL_FLAT: f64 = 1.2;

fn by_members() -> Value {
    let names = ["api", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "joiner"];
    let lab = Lab::builder()
        .hosts(names)
        .build()
        .expect("lab (run as root)");
    let joiner = lab.host("joiner");
    let mut rows = Vec::new();
    let mut version = String::new();
    // JOINGUARD_BENCH_MEMBERS=1,7 measures only those sizes (for a quick look).
    let sizes: Vec<usize> = std::env::var("JOINGUARD_BENCH_MEMBERS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 3, 5, 7]);
    for n in sizes {
        let members: Vec<_> = (1..=n).map(|i| lab.host(&format!("m{i}"))).collect();
        let etcd = EtcdCluster::start(&lab, &members, &EtcdSpec::default()).expect("etcd");
        etcd.wait_healthy(Duration::from_secs(60)).expect("etcd");
        version = etcd.version().to_string();
        let api =
            ApiServer::start(lab.host("api"), &etcd, ApiServerOptions::default()).expect("api");
        let api_ca = api
            .ca()
            .write_ca(lab.dir(), &format!("api-ca-{n}"))
            .unwrap();
        let mut args = vec![
            api.addr().to_string(),
            "--apiserver-cacert".into(),
            api_ca.display().to_string(),
        ];
        args.extend(tls_args(&etcd));
        for rtt_ms in [2.0, 50.0, 200.0] {
            let d = Duration::from_secs_f64(rtt_ms / 2000.0);
            for h in &names[..names.len() - 1] {
                lab.net()
                    .set_link(joiner, lab.host(h), Impairment::delay(d));
            }
            std::thread::sleep(Duration::from_millis(200));
            let runs: Vec<(i32, f64)> = (0..3)
                .map(|_| {
                    let (code, wall, _) = preflight(&lab, &args);
                    (code, wall)
                })
                .collect();
            let wall = median(runs.iter().map(|r| r.1).collect());
            let round_trips = wall * 1000.0 / rtt_ms;
            let goal_met = (rtt_ms >= 50.0).then_some(round_trips <= GOAL_ROUND_TRIPS);
            println!(
                "members: {n} members, RTT {rtt_ms:>5} ms | joinguard exit {:?} in {wall:.2}s \
                 (median of 3) = {round_trips:.0} round trips",
                runs.iter().map(|r| r.0).collect::<Vec<_>>()
            );
            rows.push(json!({
                "members": n, "rttMs": rtt_ms, "wallS": wall, "roundTrips": round_trips,
                "runs": runs.iter().map(|r| json!({"exit": r.0, "wallS": r.1})).collect::<Vec<_>>(),
                "goalRoundTrips": GOAL_ROUND_TRIPS, "goalMet": goal_met,
            }));
        }
        drop(api);
        drop(etcd);
    }
    // Flat in members: 7 against 1 at each RTT.
    let mut flat = Vec::new();
    for rtt_ms in [2.0, 50.0, 200.0] {
        let at = |n: u64| {
            rows.iter()
                .find(|r| r["members"] == n && r["rttMs"] == rtt_ms)
                .and_then(|r| r["wallS"].as_f64())
                .unwrap_or(f64::NAN)
        };
        let ratio = at(7) / at(1);
        flat.push(
            json!({"rttMs": rtt_ms, "ratio7to1": ratio, "goal": GOAL_FLAT,
                         "goalMet": ratio <= GOAL_FLAT}),
        );
    }
    json!({"etcd": version, "rows": rows, "flat": flat})
}

fn main() {
    let only = std::env::var("JOINGUARD_BENCH_ONLY").unwrap_or_default();
    let machine = json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
    });
    for (part, family, file) in [
        ("accuracy", IpFamily::V4, "accuracy.json"),
        ("accuracy-ipv6", IpFamily::V6, "accuracy-ipv6.json"),
    ] {
        if only.is_empty() || only == part {
            let mut v = accuracy(family);
            v["machine"] = machine.clone();
            std::fs::write(
                out_dir().join(file),
                serde_json::to_string_pretty(&v).unwrap(),
            )
            .unwrap();
        }
    }
    if only.is_empty() || only == "members" {
        let mut v = by_members();
        v["machine"] = machine.clone();
        std::fs::write(
            out_dir().join("members.json"),
            serde_json::to_string_pretty(&v).unwrap(),
        )
        .unwrap();
    }
    if only.is_empty() || only == "verdict" {
        let mut v = verdict();
        v["machine"] = machine;
        std::fs::write(
            out_dir().join("verdict.json"),
            serde_json::to_string_pretty(&v).unwrap(),
        )
        .unwrap();
    }
}
