//! Renders `docs/benchmarks.md` and its plots (`docs/img/bench-*.png`, plotters) from the JSON
//! the benchmarks wrote under `target/bench/` in this run: accuracy and verdict (benches/
//! compare.rs), recovery (benches/recovery.rs), monitor scale (benches/monitor_scale.rs),
//! learner promotion (benches/promote.rs), the monitor against blackbox_exporter
//! (benches/blackbox.rs) and packaging (scripts/package). A part that did not
//! run says so instead of showing old numbers.
//! `scripts/bench` runs it last; it does no measuring itself.

#![allow(clippy::print_stdout)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(name: &str) -> Option<Value> {
    let path = repo().join("target/bench").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn ms(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else if x < 10.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.1}")
    }
}

type Series = (String, RGBColor, Vec<(f64, f64)>);

/// A line plot with points, log-scaled x; y log-scaled when `log_y`.
fn plot(
    file: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_y: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let path = repo().join("docs/img").join(file);
    std::fs::create_dir_all(path.parent().unwrap())?;
    let pts = series
        .iter()
        .flat_map(|s| s.2.iter())
        .filter(|p| p.1.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Ok(());
    }
    let root = BitMapBackend::new(&path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let x_range = (x0 * 0.7)..(x1 * 1.4);
    let mut chart_builder = ChartBuilder::on(&root);
    chart_builder
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .label_style(("sans-serif", 14))
                .draw()?;
            for (name, color, data) in series {
                let data: Vec<(f64, f64)> =
                    data.iter().copied().filter(|p| p.1.is_finite()).collect();
                let c = *color;
                chart
                    .draw_series(LineSeries::new(data.clone(), c.stroke_width(2)))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
                chart.draw_series(data.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }};
    }
    if log_y {
        draw!(chart_builder
            .build_cartesian_2d(x_range.log_scale(), ((y0 * 0.7)..(y1 * 1.4)).log_scale())?);
    } else {
        let pad = (y1 - y0).max(0.1) * 0.15;
        draw!(chart_builder.build_cartesian_2d(x_range.log_scale(), (y0 - pad)..(y1 + pad))?);
    }
    root.present()?;
    Ok(())
}

/// A markdown table of an array of flat objects (the monitor-scale rows, whatever their keys).
fn generic_table(rows: &[Value]) -> String {
    let Some(first) = rows.first().and_then(Value::as_object) else {
        return String::new();
    };
    // The identifying columns first, then the measured ones, then the rest.
    const FIRST: &[&str] = &[
        "targets",
        "blackholed",
        "cpu_pct_one_core",
        "peak_rss_mb",
        "lag_p50_ms",
        "lag_p99_ms",
    ];
    let mut keys: Vec<&String> = FIRST
        .iter()
        .filter_map(|k| first.get_key_value(*k).map(|(k, _)| k))
        .collect();
    keys.extend(first.keys().filter(|k| !FIRST.contains(&k.as_str())));
    let mut s = format!(
        "| {} |\n|{}|\n",
        keys.iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
        keys.iter().map(|_| "---").collect::<Vec<_>>().join("|")
    );
    for r in rows {
        let cells: Vec<String> = keys
            .iter()
            .map(|k| match &r[k.as_str()] {
                Value::Number(n) => n
                    .as_f64()
                    .map(|x| {
                        if x.fract() == 0.0 {
                            format!("{x:.0}")
                        } else {
                            format!("{x:.3}")
                        }
                    })
                    .unwrap_or_default(),
                Value::String(t) => t.clone(),
                Value::Null => "".into(),
                other => other.to_string(),
            })
            .collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

/// The accuracy table of one run of the accuracy part (`accuracy.json` or `accuracy-ipv6.json`).
fn accuracy_table(md: &mut String, a: &Value) {
    md.push_str(
        "| d (ms) | jitter | truth (ms) | wire p50 | wire p99 | joinguard ICMP p50 | ICMP \
         p99 | joinguard etcd Status p50 | ping p50 | ping -i 0.001 p50 (spacing) | etcdctl \
         took | took / truth | goal met vs truth (ICMP p50, p99, Status p50) | goal met vs \
         wire (ICMP p50, p99) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let rows = a["rows"].as_array().cloned().unwrap_or_default();
    let goal = |r: &Value, key: &str| match (r["jitter"] == true, r[key] == true) {
        (true, _) => "(jitter)",
        (false, true) => "yes",
        (false, false) => "NO",
    };
    let met = |r: &Value, key: &str| match &r[key] {
        Value::Bool(true) => "yes",
        Value::Bool(false) => "NO",
        _ => "(no capture)",
    };
    for r in &rows {
        let truth = f(&r["truthMs"]);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {:.2}x | {}, {}, {} \
             | {}, {} |",
            r["oneWayDelayMs"],
            if r["jitter"] == true { "yes" } else { "no" },
            ms(truth),
            ms(f(&r["wireIcmpP50Ms"])),
            ms(f(&r["wireIcmpP99Ms"])),
            ms(f(&r["joinguardIcmpP50Ms"])),
            ms(f(&r["joinguardIcmpP99Ms"])),
            ms(f(&r["joinguardEtcdStatusP50Ms"])),
            ms(f(&r["pingP50Ms"])),
            ms(f(&r["ping2msP50Ms"])),
            match r["ping2msEchoSpacingMs"].as_f64() {
                Some(x) => format!("{x:.1} ms apart"),
                None => "spacing not captured".into(),
            },
            ms(f(&r["etcdctlHealthTookMs"])),
            f(&r["etcdctlHealthTookMs"]) / truth,
            goal(r, "joinguardIcmpWithinGoal"),
            goal(r, "joinguardIcmpP99WithinGoal"),
            goal(r, "joinguardStatusWithinGoal"),
            met(r, "joinguardIcmpNearWire"),
            met(r, "joinguardIcmpP99NearWire"),
        );
    }
}

/// benches/blackbox.rs: both probers' runs, then CPU per 1,000 probes side by side per size.
fn blackbox_section(md: &mut String, b: &Value) {
    let _ = writeln!(
        md,
        "`joinguard monitor` and Prometheus' blackbox_exporter {} (Debian) probing the same TCP \
         targets by connect, every {} s with a {} ms timeout, in monitor_scale's netlab layout; \
         {} runs of each per size, alternating, {} s each ({}, {} CPUs). The exporter is driven \
         as Prometheus drives it, one `/probe` request per target per interval, by a load \
         generator in its own process (its CPU is the driver column, charged to neither). CPU \
         is the prober process' utime + stime from /proc over the window, per 1,000 probes done \
         in it. joinguard's lag is its own start-lag histogram; blackbox_exporter's is how late \
         each answer came back after its schedule (the probe included), so the two lag columns \
         are not the same measure (docs/monitor.md). Goal (issue #52): joinguard's CPU per \
         1,000 probes at most half of blackbox_exporter's at 10,000 targets.\n",
        b["blackbox_exporter"].as_str().unwrap_or("?"),
        b["interval_s"],
        b["probe_timeout_ms"],
        b["runs_each"],
        b["measure_s"],
        b["date"].as_str().unwrap_or("date not recorded"),
        b["cpus"],
    );
    md.push_str(
        "| targets | prober | run | probes/s | skipped/s | failures | CPU ms / 1,000 probes | CPU \
         (% of one core) | peak RSS (MB) | lag p50 (ms) | lag p99 (ms) | driver CPU (%) | load \
         avg 1m |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in b["rows"].as_array().into_iter().flatten() {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {:.2} |",
            r["targets"],
            r["prober"].as_str().unwrap_or("?"),
            r["run"],
            f(&r["probes_per_s"]),
            f(&r["skipped_per_s"]),
            f(&r["failures"]),
            f(&r["cpu_ms_per_1000_probes"]),
            f(&r["cpu_pct_one_core"]),
            f(&r["peak_rss_mb"]),
            ms(f(&r["lag_p50_ms"])),
            ms(f(&r["lag_p99_ms"])),
            r["loadgen_cpu_pct_one_core"]
                .as_f64()
                .map(|x| format!("{x:.1}"))
                .unwrap_or_default(),
            f(&r["load_avg_1m"]),
        );
    }
    md.push('\n');
    for p in b["pairs"].as_array().into_iter().flatten() {
        let _ = writeln!(
            md,
            "- {} targets: joinguard {:.1} CPU ms per 1,000 probes, blackbox_exporter {:.1}: \
             ratio {:.2} (per pair {:.2}-{:.2}), {}.",
            p["targets"],
            f(&p["joinguard_cpu_ms_per_1000_probes"]),
            f(&p["blackbox_cpu_ms_per_1000_probes"]),
            f(&p["ratio"]),
            f(&p["ratio_min"]),
            f(&p["ratio_max"]),
            if p["joinguard_at_most_half"] == true {
                "at most half"
            } else {
                "NOT at most half"
            },
        );
    }
    md.push('\n');
}

fn main() {
    let font: &'static [u8] = Box::leak(
        std::fs::read(FONT)
            .unwrap_or_else(|e| panic!("{FONT}: {e} (apt-get install fonts-dejavu-core)"))
            .into_boxed_slice(),
    );
    plotters::style::register_font("sans-serif", FontStyle::Normal, font)
        .map_err(|_| "font")
        .unwrap();

    let mut md = String::from(
        "# Benchmarks\n\nWritten by `./scripts/bench` (benches/compare.rs, recovery.rs, \
         monitor_scale.rs, blackbox.rs, promote.rs, report.rs and scripts/package); every figure below is from one run of \
         it, side by side on one fabric. Do not edit by hand.\n\n",
    );
    let machine = load("accuracy.json")
        .or_else(|| load("verdict.json"))
        .map(|v| v["machine"].clone())
        .unwrap_or(Value::Null);
    let _ = writeln!(
        md,
        "Machine: {} CPUs, kernel {}; {}. The fabric is netlab (docs/netlab.md): network \
         namespaces joined by a userspace TUN forwarder that adds the delays.\n",
        machine["cpus"],
        machine["kernel"].as_str().unwrap_or("?"),
        load("run.json")
            .and_then(|v| v["date"].as_str().map(|d| format!("run {d}")))
            .unwrap_or_else(|| "date not recorded".into())
    );

    // 1. Accuracy
    md.push_str("## 1. Accuracy\n\n");
    if let Some(a) = load("accuracy.json") {
        let base = f(&a["baseMs"]);
        let _ = writeln!(
            md,
            "One etcd member ({}), one-way delay d each way, so the truth is 2d plus the base RTT \
             with no delay ({base:.3} ms, ping). Jitter is normal with sigma d/10. Goal (issues \
             #3 and 30): joinguard's p50 and p99 within 0.5 ms or 2% of the truth. The **wire** \
             columns are a packet capture on the joiner's TUN during joinguard's run (tcpdump, \
             the kernel's timestamps at the device: each echo request out to its reply in, no \
             prober in between): with jitter the fabric never reorders packets (a FIFO link does \
             not either), so an echo sent closer behind the previous one than the jitter's \
             spread waits for it, and the true RTT depends on the probe rate. joinguard's echoes \
             go about 1 ms apart, so with jitter the truth a probe can be held to is the wire's \
             at that spacing, and the last column judges every row against it. `ping -i 0.001` \
             is not the same spacing: the capture shows how far apart its requests really went \
             (here 7 to 10 ms apart whenever the RTT was 10 ms or more). The etcd Status \
             p50 also carries etcd's own handling of the RPC (about 1 ms here), so it is \
             expected above the network truth; the network goal is the ICMP column. `etcdctl \
             endpoint health` \"took\" includes its connection set-up.{}\n",
            a["etcd"].as_str().unwrap_or("?"),
            match a["date"].as_str() {
                Some(d) => format!(" This section: run {d}."),
                None => String::new(),
            }
        );
        accuracy_table(&mut md, &a);
        let rows = a["rows"].as_array().cloned().unwrap_or_default();
        let ratio = |key: &str, jitter: bool| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r["jitter"] == jitter)
                .map(|r| (f(&r["truthMs"]), f(&r[key]) / f(&r["truthMs"])))
                .collect()
        };
        let series = vec![
            (
                "joinguard ICMP p50".to_string(),
                BLUE,
                ratio("joinguardIcmpP50Ms", false),
            ),
            (
                "joinguard etcd Status p50".into(),
                GREEN,
                ratio("joinguardEtcdStatusP50Ms", false),
            ),
            ("ping p50".into(), BLACK, ratio("pingP50Ms", false)),
            (
                "etcdctl endpoint health took".into(),
                RED,
                ratio("etcdctlHealthTookMs", false),
            ),
        ];
        let _ = plot(
            "bench-accuracy.png",
            "Measured RTT / true RTT (no jitter)",
            "true RTT (ms, log)",
            "measured / truth (log)",
            &series,
            true,
        )
        .map_err(|e| println!("plot accuracy: {e}"));
        md.push_str("\n![accuracy](img/bench-accuracy.png)\n\n");
    } else {
        md.push_str("Not run in this run.\n\n");
    }
    md.push_str("### Accuracy over IPv6\n\n");
    if let Some(a) = load("accuracy-ipv6.json") {
        let _ = writeln!(
            md,
            "The same rows in an IPv6-only lab (`JOINGUARD_BENCH_ONLY=accuracy-ipv6`): ICMPv6 \
             echo, etcd listening and advertising on IPv6, the capture filtered on `icmp6`. \
             Base RTT {:.3} ms (ping), etcd {}.{}\n",
            f(&a["baseMs"]),
            a["etcd"].as_str().unwrap_or("?"),
            match a["date"].as_str() {
                Some(d) => format!(" This section: run {d}."),
                None => String::new(),
            }
        );
        accuracy_table(&mut md, &a);
        md.push('\n');
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 2 and 3. Time to verdict, load
    md.push_str("## 2. Time to verdict\n\n");
    if let Some(v) = load("verdict.json") {
        let rows = v["rows"].as_array().cloned().unwrap_or_default();
        let _ = writeln!(
            md,
            "3 etcd members ({}) and the API stand-in, the joiner's RTT to each set to the value \
             below. Wall time of each tool from start to its answer. Goal (issue #3): joinguard \
             under 1.5 s at 2 ms and under 3 s at 50 ms.\n",
            v["etcd"].as_str().unwrap_or("?")
        );
        md.push_str(
            "| RTT (ms) | joinguard preflight | exit | goal | met | endpoint health --cluster | \
             check perf --load=s | check perf / joinguard |\n|---|---|---|---|---|---|---|---|\n",
        );
        for r in &rows {
            let j = &r["joinguard"];
            let p = &r["checkPerf"];
            let _ = writeln!(
                md,
                "| {} | {:.2} s | {} | {} | {} | {:.2} s (exit {}) | {:.1} s ({}) | {:.0}x |",
                r["rttMs"],
                f(&j["wallS"]),
                j["exit"],
                j["goalS"]
                    .as_f64()
                    .map_or("none".into(), |g| format!("< {g} s")),
                match j["goalMet"].as_bool() {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "",
                },
                f(&r["endpointHealthCluster"]["wallS"]),
                r["endpointHealthCluster"]["exit"],
                f(&p["wallS"]),
                if p["pass"] == true { "PASS" } else { "FAIL" },
                f(&p["wallS"]) / f(&j["wallS"]),
            );
        }
        let line = |pick: &dyn Fn(&Value) -> f64| -> Vec<(f64, f64)> {
            rows.iter().map(|r| (f(&r["rttMs"]), pick(r))).collect()
        };
        let series = vec![
            (
                "joinguard preflight".to_string(),
                BLUE,
                line(&|r| f(&r["joinguard"]["wallS"])),
            ),
            (
                "etcdctl endpoint health --cluster".into(),
                BLACK,
                line(&|r| f(&r["endpointHealthCluster"]["wallS"])),
            ),
            (
                "etcdctl check perf --load=s".into(),
                RED,
                line(&|r| f(&r["checkPerf"]["wallS"])),
            ),
        ];
        let _ = plot(
            "bench-verdict.png",
            "Time to an answer",
            "RTT joiner -> members and API (ms, log)",
            "seconds (log)",
            &series,
            true,
        )
        .map_err(|e| println!("plot verdict: {e}"));
        md.push_str("\n![time to verdict](img/bench-verdict.png)\n\n");
        md.push_str(
            "Note what each answers: `endpoint health` says a member committed one proposal; \
             `check perf` says the cluster sustained a write load for 60 s; joinguard says \
             whether this node's paths fit etcd's timing model, without writing.\n\n",
        );

        md.push_str("## 3. Load on etcd\n\n");
        md.push_str(
            "The change in etcd's own counters, summed over the 3 members, caused by one run of \
             each tool (at each RTT). Proposals and puts are what a check costs the cluster it \
             protects.\n\n| RTT (ms) | tool | proposals committed | puts | ranges | gRPC bytes in \
             | gRPC bytes out |\n|---|---|---|---|---|---|---|\n",
        );
        for r in &rows {
            for (name, l) in [
                ("joinguard preflight", &r["joinguard"]["load"]),
                ("etcdctl check perf --load=s", &r["checkPerf"]["load"]),
            ] {
                let _ = writeln!(
                    md,
                    "| {} | {name} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                    r["rttMs"],
                    f(&l["proposalsCommitted"]),
                    f(&l["puts"]),
                    f(&l["ranges"]),
                    f(&l["grpcBytesReceived"]),
                    f(&l["grpcBytesSent"]),
                );
            }
        }
        md.push('\n');
    } else {
        md.push_str("Not run in this run.\n\n## 3. Load on etcd\n\nNot run in this run.\n\n");
    }

    // 4. Recovery
    md.push_str("## 4. Recovery\n\n");
    if let Some(r) = load("recovery.json") {
        md.push_str(
            "update-status's kubeadm-config write through an API blackout, joinguard's write \
             policy against kubeadm's (500 ms poll until 40 s, no request timeout), same fabric, \
             same run (benches/recovery.rs; docs/retries.md explains the trial).\n\n\
             | policy | blackout | result | restore -> done | attempts in the dark | attempts | \
             packets into the dark |\n|---|---|---|---|---|---|---|\n",
        );
        let rows = r["rows"].as_array().cloned().unwrap_or_default();
        for x in &rows {
            let _ = writeln!(
                md,
                "| {} | {} s | {} | {} | {} | {} | {} |",
                x["policy"].as_str().unwrap_or("?"),
                x["blackoutS"],
                if x["ok"] == true { "done" } else { "FAILED" },
                if x["ok"] == true {
                    format!("{:.2} s", f(&x["restoreToDoneS"]))
                } else {
                    "never".to_string()
                },
                x["attemptsInBlackout"],
                x["attempts"],
                x["packetsIntoBlackout"],
            );
        }
        let line = |policy: &str| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|x| x["policy"] == policy && x["ok"] == true)
                .map(|x| (f(&x["blackoutS"]), f(&x["restoreToDoneS"])))
                .collect()
        };
        let series = vec![
            (
                "joinguard (write policy + wake-on-connect)".to_string(),
                BLUE,
                line("joinguard"),
            ),
            ("kubeadm's policy".into(), RED, line("kubeadm")),
        ];
        let _ = plot(
            "bench-recovery.png",
            "Link restore to completed write (failed runs not drawn)",
            "blackout (s, log)",
            "seconds after the restore (log)",
            &series,
            true,
        )
        .map_err(|e| println!("plot recovery: {e}"));
        md.push_str("\n![recovery](img/bench-recovery.png)\n\n");
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 5. Monitor scale
    md.push_str("## 5. Monitor scale\n\n");
    if let Some(m) = load("monitor-scale.json") {
        if let Some(note) = m["description"].as_str() {
            let _ = writeln!(md, "{note}\n");
        }
        md.push_str(
            "Goal (issue #7): 10,000 targets under 25% of one core and 150 MB RSS, p99 \
             scheduling lag under 50 ms.",
        );
        if let Some(d) = m["date"].as_str() {
            let _ = write!(md, " This section: run {d}.");
        }
        md.push_str("\n\n");
        let rows = m["rows"].as_array().cloned().unwrap_or_default();
        md.push_str(&generic_table(&rows));
        md.push('\n');
        for r in rows.iter().filter(|r| r["targets"] == 10000) {
            let yes = |ok: bool| if ok { "met" } else { "NOT met" };
            let _ = writeln!(
                md,
                "- 10,000 targets, {} blackholed: CPU {:.1}% ({}), RSS {:.1} MB ({}), p99 lag \
                 {:.2} ms ({}).",
                r["blackholed"],
                f(&r["cpu_pct_one_core"]),
                yes(f(&r["cpu_pct_one_core"]) < 25.0),
                f(&r["peak_rss_mb"]),
                yes(f(&r["peak_rss_mb"]) < 150.0),
                f(&r["lag_p99_ms"]),
                yes(f(&r["lag_p99_ms"]) < 50.0),
            );
        }
        if m["fabric"] == "netlab" {
            md.push_str(
                "\nThe CPU and RSS are the monitor process' alone. The monitor runs in one netlab \
                 host and its targets (listeners in the benchmark's process) in another, joined \
                 by netlab's forwarder with no impairment, so the targets' half of each \
                 handshake runs in the forwarder's writes, as on the remote hosts a real monitor \
                 probes. This machine's speed drifts with its host's load: quick runs of the \
                 same build read from 17% to 34% of a core at 10,000 targets within one hour \
                 (docs/monitor.md).\n\n",
            );
        } else {
            md.push_str(
                "\nThe CPU and RSS are the monitor process' alone; its targets are loopback \
                 listeners in the benchmark's process, but on loopback the kernel runs the \
                 listeners' half of each handshake in the monitor's own connect and close \
                 calls, so the CPU figure carries it (docs/monitor.md has the profile).\n\n",
            );
        }
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 6. Packaging
    md.push_str("## 6. Static binary\n\n");
    if let Some(p) = load("package.json") {
        let _ = writeln!(
            md,
            "`scripts/package` (target {}): {:.1} MiB stripped, `{}`; start-up (`joinguard \
             version`, median of {} runs) {:.2} ms; ran `joinguard preflight` inside a netlab host \
             with `PATH=/nonexistent` and no toolchain: exit {} ({}).\n",
            p["target"].as_str().unwrap_or("?"),
            f(&p["sizeBytes"]) / 1048576.0,
            p["linkage"].as_str().unwrap_or("?"),
            p["startupRuns"],
            f(&p["startupMedianMs"]),
            p["labPreflightExit"],
            p["labPreflightSummary"].as_str().unwrap_or(""),
        );
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 7. Learner promotion
    md.push_str("## 7. Learner promotion\n\n");
    if let Some(p) = load("promote.json") {
        let _ = writeln!(
            md,
            "`joinguard etcd promote` against kubeadm's own promotion (MemberPromote every 500 ms, \
             2 s per call), etcd {}, a learner catching up {} MiB behind a rate-limited link; \
             then a blackout of the path to the leader at the first MemberPromote \
             (benches/promote.rs; docs/etcd-learner.md explains both trials). \"after ready\" is \
             the promotion's time from the moment a watcher saw the learner at 90% of the \
             leader's index, which etcd requires.\n",
            p["etcd"].as_str().unwrap_or("?"),
            p["mib"],
        );
        let rows = p["rows"].as_array().cloned().unwrap_or_default();
        md.push_str(
            "| promoter | catch-up (median) | promoted after ready (median) | MemberPromote \
             calls (median) | promoted |\n|---|---|---|---|---|\n",
        );
        for x in rows.iter().filter(|x| x.get("catch_up_s").is_some()) {
            let _ = writeln!(
                md,
                "| {} | {:.1} s | {:+.2} s | {} | {}/{} |",
                x["promoter"].as_str().unwrap_or("?"),
                f(&x["catch_up_s"]),
                f(&x["promoted_after_ready_s"]),
                x["member_promote_calls"],
                x["ok"],
                x["runs"],
            );
        }
        md.push_str(
            "\n| promoter | blackouts | after the path returned (median) | worst |\n\
             |---|---|---|---|\n",
        );
        let secs_ms = |v: &Value| {
            v.as_f64()
                .map_or("never".to_string(), |x| format!("{:.0} ms", x * 1000.0))
        };
        for x in rows.iter().filter(|x| x.get("blackouts_s").is_some()) {
            let _ = writeln!(
                md,
                "| {} | {} s | {} | {} |",
                x["promoter"].as_str().unwrap_or("?"),
                x["blackouts_s"]
                    .as_array()
                    .map(|b| b
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", "))
                    .unwrap_or_default(),
                secs_ms(&x["promoted_after_return_s"]),
                secs_ms(&x["worst_after_return_s"]),
            );
        }
        let joinguard = |key: &str, blackout: bool| {
            rows.iter()
                .find(|x| {
                    x["promoter"] == "joinguard etcd promote"
                        && x.get("blackouts_s").is_some() == blackout
                })
                .map(|x| f(&x[key]))
                .unwrap_or(f64::NAN)
        };
        let yes = |ok: bool| if ok { "met" } else { "NOT met" };
        let after = joinguard("promoted_after_ready_s", false);
        let catch_up = joinguard("catch_up_s", false);
        let worst = joinguard("worst_after_return_s", true);
        let median = joinguard("promoted_after_return_s", true);
        let _ = writeln!(
            md,
            "\nGoals (issue 29): promoted within 1 s of etcd accepting it: {:+.2} s, {}; a \
             catch-up of at least 20 s: {:.1} s, {}; promoted within 250 ms after a blackout: \
             median {:.0} ms, {}; worst {:.0} ms, {}.\n",
            after,
            yes(after < 1.0),
            catch_up,
            yes(catch_up >= 20.0),
            median * 1000.0,
            yes(median < 0.25),
            worst * 1000.0,
            yes(worst < 0.25),
        );
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 8. Time to verdict by members
    md.push_str("## 8. Time to verdict by members\n\n");
    if let Some(v) = load("members.json") {
        let rows = v["rows"].as_array().cloned().unwrap_or_default();
        let _ = writeln!(
            md,
            "1, 3, 5 and 7 etcd members ({}) and the API stand-in, the joiner's RTT to each set \
             to the value below; `joinguard preflight -o json` with the members' client URLs \
             (the peers come from the member list), median of 3 runs. Goal (issue 30): about \
             {} round trips where round trips dominate (50 and 200 ms), flat in members (7 \
             members within {}x of 1).\n",
            v["etcd"].as_str().unwrap_or("?"),
            rows.first().map_or(f64::NAN, |r| f(&r["goalRoundTrips"])),
            v["flat"][0]["goal"].as_f64().unwrap_or(f64::NAN),
        );
        md.push_str(
            "| members | RTT (ms) | joinguard preflight | round trips | exits | goal met |\n\
             |---|---|---|---|---|---|\n",
        );
        for r in &rows {
            let exits: Vec<String> = r["runs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|x| x["exit"].to_string())
                .collect();
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} s | {:.0} | {} | {} |",
                r["members"],
                r["rttMs"],
                f(&r["wallS"]),
                f(&r["roundTrips"]),
                exits.join(", "),
                match r["goalMet"].as_bool() {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "(fixed costs)",
                },
            );
        }
        md.push('\n');
        for x in v["flat"].as_array().into_iter().flatten() {
            let _ = writeln!(
                md,
                "- {} ms RTT: 7 members take {:.2}x the time of 1 ({}).",
                x["rttMs"],
                f(&x["ratio7to1"]),
                if x["goalMet"] == true {
                    "met"
                } else {
                    "NOT met"
                },
            );
        }
        let short_rtt_not_flat = v["flat"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| f(&x["rttMs"]) < 50.0 && x["goalMet"] != true);
        if short_rtt_not_flat {
            md.push_str(
                "\nAt a short RTT the run is bound by this machine's two cores, not by round \
                 trips: seven etcd members, the API stand-in, netlab's forwarder and joinguard \
                 share them. docs/preflight.md (\"Where the two cores go in that row\") reads the \
                 CPU of each around 7-member runs at 2 ms.\n",
            );
        }
        let colours = [BLUE, GREEN, RED, BLACK];
        let series: Vec<Series> = [50.0, 200.0, 2.0]
            .iter()
            .zip(colours)
            .map(|(rtt, c)| {
                (
                    format!("RTT {rtt} ms"),
                    c,
                    rows.iter()
                        .filter(|r| f(&r["rttMs"]) == *rtt)
                        .map(|r| (f(&r["members"]), f(&r["roundTrips"])))
                        .collect(),
                )
            })
            .collect();
        let _ = plot(
            "bench-members.png",
            "Time to verdict in round trips",
            "etcd members",
            "round trips (wall time / RTT, log)",
            &series,
            true,
        )
        .map_err(|e| println!("plot members: {e}"));
        md.push_str("\n![time to verdict by members](img/bench-members.png)\n\n");
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    // 9. Against blackbox_exporter
    md.push_str("## 9. Monitor against blackbox_exporter\n\n");
    if let Some(b) = load("blackbox.json") {
        blackbox_section(&mut md, &b);
    } else {
        md.push_str("Not run in this run.\n\n");
    }

    let out = repo().join("docs/benchmarks.md");
    std::fs::write(&out, md).unwrap();
    println!("wrote {}", out.display());
}
