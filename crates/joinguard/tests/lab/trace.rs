//! `joinguard trace` end to end, and the traces `joinguard preflight` attaches: the real binary in
//! the joiner host of a multi-hop netlab lab, joiner -> r1 -> r2 -> m1, where r1 and r2 are
//! kernel routers (real TTL decrements, real ICMP Time Exceeded).
//!
//! The impairment used throughout is 30 ms *each way* on the r1 <-> r2 link, so the RTT steps up
//! by 60 ms at hop 2 (r2) and stays there at hop 3 (m1).
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::process::Command;
use std::time::Duration;

use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::harness::{self, serial, Run, RUN_TIMEOUT};
use netlab::{Impairment, IpFamily, Lab};
use serde_json::Value;

use crate::JOINGUARD;

// The lab here is routed (joiner -> r1 -> r2 -> m1), which the harness's environment builder
// does not build; these tests build their own `Lab` and take the harness's lock. One lab at a
// time matters here: the RTT figures are asserted to a millisecond.

/// The injected delay, per direction, on r1 <-> r2.
const ONE_WAY_MS: u64 = 30;
const STEP_MS: f64 = 2.0 * ONE_WAY_MS as f64;

fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

/// joiner (.1) -> r1 (.2) -> r2 (.3) -> m1 (.4).
fn three_hops(seed: u64) -> Lab {
    Lab::builder()
        .hosts(["joiner", "r1", "r2", "m1"])
        .route(&["joiner", "r1", "r2", "m1"])
        .seed(seed)
        .build()
        .expect("routed lab")
}

fn slow_middle(lab: &Lab) {
    lab.net().set_link(
        lab.host("r1"),
        lab.host("r2"),
        Impairment::delay(ms(ONE_WAY_MS)),
    );
}

fn trace(lab: &Lab, args: &[&str]) -> Run {
    let mut cmd = lab.host("joiner").command(JOINGUARD);
    cmd.arg("trace").args(args);
    harness::run(&mut cmd, RUN_TIMEOUT)
}

fn addr(lab: &Lab, h: &str) -> String {
    lab.host(h).addr().to_string()
}

fn avg(hop: &Value) -> f64 {
    hop["avgMs"]
        .as_f64()
        .expect("an answering hop has an average")
}

fn best(hop: &Value) -> f64 {
    hop["minMs"]
        .as_f64()
        .expect("an answering hop has a best RTT")
}

/// The RTT step from hop 1 to hop 2 is the injected 60 ms within 1 ms on the best RTTs, and
/// within 3 ms on the averages. The fabric's error is one-sided (a packet is never early, but a
/// busy 2-core CI machine can hold one back by several ms), so the best RTT carries the strict
/// bound and the average, which one held-back probe in ten can move by a millisecond, a looser
/// one. Returns (best step, average step).
fn assert_step(hops: &[Value], run: &Run) -> (f64, f64) {
    let (b, a) = (
        best(&hops[1]) - best(&hops[0]),
        avg(&hops[1]) - avg(&hops[0]),
    );
    assert!(
        (b - STEP_MS).abs() < 1.0,
        "best-RTT step at hop 2 is the injected {STEP_MS} ms (30 ms each way) within 1 ms: \
         {b:.3}\n{run}"
    );
    assert!(
        (a - STEP_MS).abs() < 3.0,
        "average-RTT step at hop 2 within 3 ms of {STEP_MS}: {a:.3}\n{run}"
    );
    (b, a)
}

#[test]
fn three_hops_show_the_60ms_step_at_hop_2() {
    let _s = serial();
    let lab = three_hops(1);
    slow_middle(&lab);
    let m1 = addr(&lab, "m1");
    let run = trace(
        &lab,
        &[&m1, "--cycles", "10", "--interval", "100ms", "-o", "json"],
    );
    assert_eq!(run.code, 0, "{run}");
    let v = run.json();
    assert_eq!(v["schemaVersion"], 2);
    assert_eq!(v["reached"], true);
    assert_eq!(v["finalReply"], "echo-reply");
    crate::schema::assert_valid("trace", &run);
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops.len(), 3, "{run}");
    for (hop, host) in hops.iter().zip(["r1", "r2", "m1"]) {
        assert_eq!(hop["address"], addr(&lab, host), "{run}");
        assert_eq!(
            (hop["sent"].as_u64(), hop["received"].as_u64()),
            (Some(10), Some(10)),
            "{run}"
        );
    }
    assert_eq!(hops[2]["isTarget"], true);
    let (h1, h2, h3) = (avg(&hops[0]), avg(&hops[1]), avg(&hops[2]));
    let (b, a) = assert_step(hops, &run);
    eprintln!(
        "measured: avg hop1 {h1:.3} ms, hop2 {h2:.3} ms, hop3 {h3:.3} ms; step at hop 2: best \
         {b:.3} ms, avg {a:.3} ms (want {STEP_MS}); trace took {:?}",
        run.took
    );
    assert!(best(&hops[0]) < 1.0, "hop 1 is clean: {run}");
    assert!(
        (best(&hops[2]) - best(&hops[1])).abs() < 1.0,
        "nothing more is added after hop 2: {run}"
    );
    assert_eq!(v["attribution"]["latency"]["hop"], 2, "{run}");
    assert_eq!(v["attribution"]["latency"]["address"], addr(&lab, "r2"));

    // The text report: the mtr-like table and the sentence naming the hop.
    let run = trace(&lab, &[&m1, "--cycles", "3", "--interval", "100ms"]);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("[trace] Trace to {m1} with ICMP echo, 3 cycles:"),
        "{run}"
    );
    assert!(lines[1].starts_with("HOP  ADDRESS"), "{run}");
    assert!(
        lines[3].starts_with(&format!("  2  {}", addr(&lab, "r2"))),
        "{run}"
    );
    let head = format!(
        "[trace] latency first appears at hop 2 ({}): +",
        addr(&lab, "r2")
    );
    let added: f64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&head)?.strip_suffix(" ms")?.parse().ok())
        .unwrap_or_else(|| panic!("no `{head}... ms` line: {run}"));
    assert!((added - STEP_MS).abs() < 3.0, "{run}");
    assert!(run
        .stdout
        .contains(&format!("[trace] {m1} reached at hop 3 (echo reply)")));
}

/// The same path over IPv6 (hop limit, ICMPv6 Time Exceeded from each router's IPv6 address):
/// every mode names hop 2 as where the 60 ms appear, each hop by its IPv6 address; a 1,500-byte
/// trace across a 1,400-byte link answered with Packet Too Big shows the MTU at hop 2.
#[test]
fn ipv6_trace_in_every_mode_names_the_hop_and_a_packet_too_big() {
    let _s = serial();
    let lab = Lab::builder()
        .hosts(["joiner", "r1", "r2", "m1"])
        .route(&["joiner", "r1", "r2", "m1"])
        .ip_family(IpFamily::V6)
        .seed(6)
        .build()
        .expect("routed IPv6 lab");
    slow_middle(&lab);
    let a6 = |h: &str| lab.host(h).addr6().expect("IPv6 lab").to_string();
    let m1 = a6("m1");
    let bracketed = format!("[{m1}]:2380");
    for (target, protocol, reply) in [
        (m1.as_str(), "icmp", "echo-reply"),
        (m1.as_str(), "udp", "port-unreachable"),
        (bracketed.as_str(), "tcp", "rst"),
    ] {
        let run = trace(
            &lab,
            &[
                target,
                "--protocol",
                protocol,
                "--cycles",
                "5",
                "--interval",
                "100ms",
                "-o",
                "json",
            ],
        );
        assert_eq!(run.code, 0, "{protocol}: {run}");
        crate::schema::assert_valid("trace", &run);
        let v = run.json();
        assert_eq!(v["address"], m1, "{run}");
        assert_eq!(v["reached"], true, "{protocol}: {run}");
        assert_eq!(v["finalReply"], reply, "{protocol}: {run}");
        let hops = v["hops"].as_array().expect("hops");
        assert_eq!(hops.len(), 3, "{protocol}: {run}");
        for (hop, host) in hops.iter().zip(["r1", "r2", "m1"]) {
            assert_eq!(hop["address"], a6(host), "{protocol}: {run}");
        }
        let (b, a) = assert_step(hops, &run);
        eprintln!("IPv6 {protocol}: step at hop 2: best {b:.3} ms, avg {a:.3} ms");
        assert_eq!(v["attribution"]["latency"]["hop"], 2, "{run}");
    }

    lab.net().set_link(
        lab.host("r1"),
        lab.host("r2"),
        Impairment::delay(ms(ONE_WAY_MS)).with_mtu(1400, true),
    );
    let run = trace(
        &lab,
        &[
            &m1,
            "--size",
            "1500",
            "--cycles",
            "3",
            "--interval",
            "100ms",
        ],
    );
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stdout.contains(&format!(
            "the path MTU drops to 1400 bytes at hop 2 ({r2}): {r2} answered larger probes with \
             ICMPv6 \"Packet Too Big\"",
            r2 = a6("r2")
        )),
        "{run}"
    );
}

#[test]
fn loss_on_one_hop_is_attributed_to_that_hop() {
    let _s = serial();
    let lab = three_hops(7);
    // 40% of what r1 forwards toward r2 is lost: probes for hop 2 and beyond, not hop 1's.
    lab.net().set(
        lab.host("r1"),
        lab.host("r2"),
        Impairment::none().with_loss(0.4),
    );
    let m1 = addr(&lab, "m1");
    let run = trace(
        &lab,
        &[&m1, "--cycles", "20", "--interval", "50ms", "-o", "json"],
    );
    assert_eq!(run.code, 1, "loss to the target exits 1: {run}");
    let v = run.json();
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops.len(), 3, "{run}");
    assert_eq!(
        hops[0]["lossPct"], 0.0,
        "hop 1 does not cross the lossy link: {run}"
    );
    let (l2, l3) = (
        hops[1]["lossPct"].as_f64().unwrap(),
        hops[2]["lossPct"].as_f64().unwrap(),
    );
    eprintln!("measured: loss hop2 {l2}%, hop3 {l3}% (40% injected on r1 -> r2)");
    assert!(l2 > 10.0 && l3 > 10.0, "{run}");
    assert_eq!(v["attribution"]["loss"]["hop"], 2, "{run}");
    let f = v["findings"].as_array().unwrap();
    assert!(
        f.iter().any(|f| f.as_str().unwrap().starts_with(&format!(
            "loss first appears at hop 2 ({})",
            addr(&lab, "r2")
        ))),
        "{run}"
    );
}

#[test]
fn an_unreachable_target_ends_within_timeout_with_the_hops_it_saw() {
    let _s = serial();
    let lab = three_hops(3);
    lab.net()
        .set_link(lab.host("r2"), lab.host("m1"), Impairment::blackout());
    let m1 = addr(&lab, "m1");
    // 30 cycles 200 ms apart would take 6 s; --timeout 3s ends it first.
    let run = trace(
        &lab,
        &[
            &m1,
            "--cycles",
            "30",
            "--interval",
            "200ms",
            "--timeout",
            "3s",
            "-o",
            "json",
        ],
    );
    eprintln!(
        "margin: unreachable trace took {:?} with --timeout 3s, against 5 s",
        run.took
    );
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.took < Duration::from_secs(5),
        "ends within --timeout (+2 s): {run}"
    );
    let v = run.json();
    assert_eq!(v["reached"], false);
    assert_eq!(v["timedOut"], true);
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops.len(), 3, "r1, r2 and one dark row: {run}");
    assert_eq!(hops[0]["address"], addr(&lab, "r1"));
    assert_eq!(hops[1]["address"], addr(&lab, "r2"));
    assert!(hops[1]["received"].as_u64().unwrap() > 0);
    assert!(hops[2]["address"].is_null());
    assert_eq!(hops[2]["received"], 0);
    let f = v["findings"][0].as_str().unwrap();
    assert!(
        f.contains(&format!(
            "not reached: the last hop that answered is hop 2 ({})",
            addr(&lab, "r2")
        )),
        "{run}"
    );
}

/// `--size` with a 1,400-byte link between r1 and r2 that answers "fragmentation needed", as a
/// router does: the MTU column shows 1400 at hop 2, later probes shrink to it, and nothing of
/// the resizing counts as loss.
#[test]
fn sized_trace_shows_where_the_path_mtu_drops() {
    let _s = serial();
    let lab = three_hops(11);
    lab.net().set_link(
        lab.host("r1"),
        lab.host("r2"),
        Impairment::none().with_mtu(1400, true),
    );
    let m1 = addr(&lab, "m1");
    let args = [&m1, "--size", "1500", "-c", "3", "--interval", "200ms"];
    let run = trace(&lab, &[&args[..], &["-o", "json"]].concat());
    assert_eq!(run.code, 0, "reached, every probe answered: {run}");
    crate::schema::assert_valid("trace", &run);
    let v = run.json();
    assert_eq!(
        (v["reached"].as_bool(), v["size"].as_u64()),
        (Some(true), Some(1500))
    );
    assert_eq!(v["pathMtu"], 1400, "{run}");
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops.len(), 3, "{run}");
    assert!(
        hops[0].get("mtu").is_none(),
        "hop 1's link carries 1500: {run}"
    );
    assert_eq!(hops[1]["mtu"], 1400, "{run}");
    assert_eq!(hops[1]["mtuFrom"], addr(&lab, "r2"), "{run}");
    for h in hops {
        assert_eq!(
            (h["sent"].as_u64(), h["received"].as_u64()),
            (Some(3), Some(3)),
            "{run}"
        );
    }
    let run = trace(&lab, &args);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("[trace] Trace to {m1} with ICMP echo of 1500 bytes (DF set), 3 cycles:"),
        "{run}"
    );
    assert!(lines[1].ends_with("JTTR    MTU"), "{run}");
    assert!(lines[3].ends_with(" 1400"), "{run}");
    assert!(
        run.stdout.contains(&format!(
            "[trace] the path MTU drops to 1400 bytes at hop 2 ({})",
            addr(&lab, "r2")
        )),
        "{run}"
    );
}

/// The same link dropping larger packets silently (a firewall eats the ICMP): small probes
/// reach m1; 1,500-byte ones go dark after r1, and the report says what that can mean. A
/// `--size` the interface cannot send is refused with exit 2.
#[test]
fn sized_trace_goes_dark_past_a_silent_mtu_drop() {
    let _s = serial();
    let lab = three_hops(12);
    lab.net().set_link(
        lab.host("r1"),
        lab.host("r2"),
        Impairment::none().with_mtu(1400, false),
    );
    let m1 = addr(&lab, "m1");
    let small = trace(&lab, &[&m1, "-c", "2", "--interval", "200ms"]);
    assert_eq!(small.code, 0, "small probes cross: {small}");
    let run = trace(
        &lab,
        &[
            &m1,
            "--size",
            "1500",
            "-c",
            "2",
            "--interval",
            "200ms",
            "--probe-timeout",
            "500ms",
            "-o",
            "json",
        ],
    );
    assert_eq!(run.code, 1, "{run}");
    let v = run.json();
    assert_eq!(v["reached"], false, "{run}");
    assert!(v.get("pathMtu").is_none(), "no router said so: {run}");
    let hops = v["hops"].as_array().expect("hops");
    assert_eq!(hops[0]["address"], addr(&lab, "r1"), "{run}");
    assert_eq!(hops[0]["received"], 2, "{run}");
    assert!(hops[1]["address"].is_null(), "dark past r1: {run}");
    let findings = v["findings"].to_string();
    assert!(
        findings.contains("probes were 1500 bytes with DF set")
            && findings.contains("a path MTU blackhole"),
        "{run}"
    );

    let too_big = trace(&lab, &[&m1, "--size", "9000"]);
    assert_eq!(too_big.code, 2, "{too_big}");
    assert!(
        too_big.stderr.contains("--size 9000") && too_big.stderr.contains("give at most"),
        "{too_big}"
    );
}

#[test]
fn etcd_tcp_trace_reaches_the_peer_port_of_a_real_member() {
    let _s = serial();
    let lab = three_hops(5);
    let etcd = EtcdCluster::start(&lab, &[lab.host("m1")], &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("healthy");
    slow_middle(&lab);
    let m1 = addr(&lab, "m1");
    let run = trace(
        &lab,
        &[
            &m1,
            "--protocol",
            "tcp",
            "--port",
            "2380",
            "--cycles",
            "10",
            "--interval",
            "100ms",
            "-o",
            "json",
        ],
    );
    assert_eq!(run.code, 0, "{run}");
    let v = run.json();
    assert_eq!(v["protocol"], "tcp");
    assert_eq!(v["port"], 2380);
    assert_eq!(v["finalReply"], "syn-ack", "the peer port is open: {run}");
    crate::schema::assert_valid("trace", &run);
    let hops = v["hops"].as_array().unwrap();
    assert_eq!(hops.len(), 3, "{run}");
    assert_eq!(hops[2]["address"], m1);
    assert_eq!(hops[2]["isTarget"], true);
    let (b, a) = assert_step(hops, &run);
    eprintln!(
        "measured: tcp step at hop 2: best {b:.3} ms, avg {a:.3} ms; trace took {:?}",
        run.took
    );
    assert_eq!(v["attribution"]["latency"]["hop"], 2);

    // A port nothing listens on: the host answers RST, which still reaches it.
    let run = trace(
        &lab,
        &[
            &format!("{m1}:2390"),
            "--protocol",
            "tcp",
            "--cycles",
            "2",
            "--interval",
            "100ms",
        ],
    );
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stdout.contains(&format!(
            "{m1} reached at hop 3 (RST: the host is up, port 2390 is closed)"
        )),
        "{run}"
    );
}

#[test]
fn etcd_preflight_traces_a_failing_peer_and_names_the_hop() {
    let _s = serial();
    let lab = three_hops(11);
    let m1 = lab.host("m1");
    let etcd = EtcdCluster::start(&lab, &[m1], &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("healthy");
    slow_middle(&lab);
    let id = etcd.client_identity();
    let r2 = addr(&lab, "r2");
    // 60 ms RTT is within the default limits (250 ms, 1/4 of the 1 s election timeout). A
    // cluster tuned with a 200 ms election timeout (and a 40 ms heartbeat: etcd wants at least 5
    // heartbeats in it) needs an RTT below 50 ms (1/4 of it), so it fails.
    let preflight = |extra: &[&str]| {
        let mut cmd = lab.host("joiner").command(JOINGUARD);
        cmd.arg("preflight")
            .args(["--etcd-endpoints", &etcd.client_endpoints().join(",")])
            .args(["--etcd-cacert", &id.ca.display().to_string()])
            .args(["--etcd-cert", &id.cert.display().to_string()])
            .args(["--etcd-key", &id.key.display().to_string()])
            .args(["--etcd-heartbeat-interval", "40ms"])
            .args(["--etcd-election-timeout", "200ms"])
            .args(extra);
        harness::run(&mut cmd, RUN_TIMEOUT)
    };

    let run = preflight(&["-o", "json"]);
    crate::schema::assert_valid("preflight", &run);
    assert_eq!(run.code, 1, "{run}");
    let v = run.json();
    let peer = format!("{}:2380", m1.addr());
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "EtcdPeerLatency"
                && c["target"] == peer
                && c["status"] == "error"),
        "{run}"
    );
    let traces = v["traces"]
        .as_array()
        .unwrap_or_else(|| panic!("no traces: {run}"));
    assert_eq!(traces.len(), 1, "one trace per failing host: {run}");
    let t = &traces[0];
    assert_eq!(t["checkTarget"], peer);
    assert!(t["checks"]
        .as_array()
        .unwrap()
        .contains(&Value::from("EtcdPeerLatency")));
    assert_eq!(t["protocol"], "tcp");
    assert_eq!(t["port"], 2380);
    assert_eq!(t["reached"], true);
    assert_eq!(t["hops"].as_array().unwrap().len(), 3, "{run}");
    assert_eq!(t["attribution"]["latency"]["hop"], 2, "{run}");
    assert_eq!(t["attribution"]["latency"]["address"], r2);
    let added = t["attribution"]["latency"]["addedMs"].as_f64().unwrap();
    // From averages (see assert_step for why 3 ms).
    assert!((added - STEP_MS).abs() < 3.0, "{run}");
    eprintln!(
        "measured: preflight took {:?} (checks {} ms, trace {} ms)",
        run.took, v["durationMs"], t["durationMs"]
    );

    let run = preflight(&[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stdout
            .contains(&format!("[preflight] {peer} failed EtcdPeerLatency")),
        "{run}"
    );
    assert!(
        run.stdout.contains(&format!(
            "[preflight] latency first appears at hop 2 ({r2}): +"
        )),
        "{run}"
    );
    assert!(run.stdout.contains("[ERROR EtcdPeerLatency]"), "{run}");
}

#[test]
fn without_cap_net_raw_trace_exits_2_and_says_how_to_fix_it() {
    // No lab needed: the raw socket is refused before anything is sent.
    let run = harness::run(
        Command::new("setpriv")
            .args(["--inh-caps=-net_raw", "--bounding-set=-net_raw", "--"])
            .args([JOINGUARD, "trace", "127.0.0.1"]),
        RUN_TIMEOUT,
    );
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.stderr.contains("root or CAP_NET_RAW"), "{run}");
    assert!(run.stderr.contains("setcap cap_net_raw+ep"), "{run}");
}

#[test]
fn bad_input_exits_2_naming_the_flag() {
    for (args, flag) in [
        (
            &["198.18.0.4", "--protocol", "tcp", "--port", "0"][..],
            "--port",
        ),
        (
            &["198.18.0.4", "--protocol", "udp", "--port", "http"][..],
            "--port",
        ),
        (&["198.18.0.4", "--cycles", "0"][..], "--cycles"),
        (&["198.18.0.4", "--protocol", "sctp"][..], "--protocol"),
        (&["198.18.0.4", "--protocol", "tcp"][..], "--port"),
        (&["198.18.0.4", "--port", "2380"][..], "--port"),
        (&["198.18.0.4", "--interval", "0s"][..], "--interval"),
        (&["198.18.0.4", "--timeout", "soon"][..], "--timeout"),
        (&["fe80::1"][..], "TARGET"),
        (&["198.18.0.4:99999"][..], "TARGET"),
    ] {
        let run = harness::run(Command::new(JOINGUARD).arg("trace").args(args), RUN_TIMEOUT);
        assert_eq!(run.code, 2, "{args:?}: {run}");
        assert!(run.stderr.contains(flag), "{args:?} names {flag}: {run}");
        assert!(run.stdout.is_empty(), "{run}");
    }
}
