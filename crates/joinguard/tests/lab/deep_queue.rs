//! Issue 49's last open item, as an experiment (docs/etcd-learner.md, "etcd 3.5.30 and a deep
//! queue"): a learner whose inbound path from the members crosses a kernel router with a slow,
//! deep queue, so that the leader's snapshot, the raft streams and every new peer connection
//! toward the learner wait in one FIFO. The earlier report saw `joinguard etcd promote` on etcd
//! 3.5.30 never see the learner past raft index 0 for 262-266 s behind a 1 MB/s link with a deep
//! queue, the learner's log showing its peer dial to the leader timing out.
//!
//! The lab: joiner, m1..m3 (etcd), m4 (the learner) and r1, a kernel router; m1..m3 reach m4
//! through r1 (the joiner reaches m4 directly). On r1's lab interface, htb sends the packets for
//! m4 through a class of `JOINGUARD_DQ_RATE` (default 8mbit) into a byte FIFO of
//! `JOINGUARD_DQ_LIMIT` (default 16mb): tbf's token bucket and tail-drop queue, on the
//! members -> learner direction only (a root tbf on r1 would also hold the learner's ACKs).
//! `JOINGUARD_DQ_QDISC=tbf` puts `tbf rate R burst 32kb limit L` at the root instead.
//!
//! Result (docs/etcd-learner.md, "A kernel queue on a router"): with `JOINGUARD_DQ_WMEM=67108864`
//! the 16 MB queue fills and drops, and the learner never leaves index 0 on 3.4.23 and 3.5.30
//! (its snapshot reads time out after 5 s, the leader restarts the snapshot); with the default
//! 4 MiB the queue peaks at 4 MB, the dials time out but the snapshot arrives in 50 s.
//!
//! Measured every second: the leader's and the learner's committed index (their metrics), the
//! learner's raft index (`etcdctl endpoint status` on it, every 5 s), the queue's backlog and
//! drops (`tc -s qdisc`); then the learner's log lines about peer dials and streams, the
//! time to 90%, `joinguard etcd promote`'s progress and outcome (run from m4, as on the joining
//! node: its calls to the members wait in the same queue) and the MemberPromote calls.
//! Other knobs: `JOINGUARD_DQ_DB_MIB` (30), `JOINGUARD_DQ_VALUE_KIB` (4),
//! `JOINGUARD_DQ_SNAPSHOT_COUNT` (1000; 0 for etcd's default), `JOINGUARD_DQ_BUDGET_S` (240, at
//! most 290), `JOINGUARD_DQ_FROM` (m4 or joiner), `JOINGUARD_DQ_WMEM` (the senders' tcp_wmem maximum), `JOINGUARD_DQ_CC` (the TCP congestion control
//! in every host, reno; the machine's bbr keeps the queue empty). The etcd build is
//! `JOINGUARD_ETCD_BIN`'s.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::harness::serial;
use netlab::process::output_within;
use netlab::{Host, Lab};

use crate::JOINGUARD;

fn env_str(k: &str, d: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| d.to_string())
}

fn env_u64(k: &str, d: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn tc(host: &Host, args: &str) -> String {
    let mut cmd = host.command("tc");
    cmd.args(args.split_whitespace());
    let out = output_within(&mut cmd, Duration::from_secs(5)).expect("tc");
    assert!(
        out.status.success(),
        "tc {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// (backlog bytes, dropped packets, sent bytes) of the shaping qdisc, from `tc -s qdisc show`.
fn queue_stats(r1: &Host, handle: &str) -> (u64, u64, u64) {
    let text = tc(r1, "-s qdisc show dev lab0");
    let mut block = false;
    let (mut backlog, mut dropped, mut sent) = (0, 0, 0);
    for line in text.lines() {
        if line.starts_with("qdisc ") {
            block = line.split_whitespace().nth(2) == Some(handle);
            continue;
        }
        if !block {
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"Sent") {
            sent = w.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            if let Some(i) = w.iter().position(|x| *x == "(dropped") {
                dropped = w
                    .get(i + 1)
                    .map(|v| v.trim_end_matches(','))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
            }
        }
        if w.first() == Some(&"backlog") {
            let b = w.get(1).copied().unwrap_or("0b");
            let (n, mult) = if let Some(n) = b.strip_suffix("Mb") {
                (n, 1_000_000.0)
            } else if let Some(n) = b.strip_suffix("Kb") {
                (n, 1000.0)
            } else {
                (b.trim_end_matches('b'), 1.0)
            };
            backlog = (n.parse::<f64>().unwrap_or(0.0) * mult) as u64;
        }
    }
    (backlog, dropped, sent)
}

fn preload(lab: &Lab, etcd: &EtcdCluster, mib: usize, kib: usize) {
    use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
    let id = etcd.client_identity();
    let tls = TlsOptions::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&id.ca).unwrap()))
        .identity(Identity::from_pem(
            std::fs::read(&id.cert).unwrap(),
            std::fs::read(&id.key).unwrap(),
        ));
    let endpoints: Vec<String> = etcd.client_endpoints();
    lab.host("joiner")
        .block_on(|| async move {
            let opts = ConnectOptions::new()
                .with_tls(tls)
                .with_timeout(Duration::from_secs(30));
            let client = Client::connect(endpoints, Some(opts))
                .await
                .expect("connect");
            let value = vec![b'x'; kib << 10];
            let puts = mib * 1024 / kib;
            let width = if kib < 64 { 16 } else { 4 };
            let mut next = 0;
            while next < puts {
                let mut batch = Vec::new();
                for k in next..(next + width).min(puts) {
                    let (mut c, v) = (client.clone(), value.clone());
                    batch.push(tokio::spawn(async move {
                        c.put(format!("/preload/{k:05}"), v, None).await
                    }));
                }
                next += batch.len();
                for b in batch {
                    b.await.unwrap().expect("put");
                }
            }
        })
        .unwrap();
}

/// MemberPromote calls the members' gRPC servers started.
fn calls(etcd: &EtcdCluster, method: &str) -> u64 {
    let needle = format!("grpc_method=\"{method}\"");
    etcd.running()
        .into_iter()
        .filter_map(|i| etcd.metrics(i).ok())
        .map(|text| {
            text.lines()
                .filter(|l| l.starts_with("grpc_server_started_total{") && l.contains(&needle))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        })
        .sum()
}

#[test]
#[ignore = "an experiment of several minutes (issue 49, docs/etcd-learner.md): run by hand"]
fn etcd_learner_behind_a_deep_kernel_queue_on_a_router() {
    let _g = serial();
    let rate = env_str("JOINGUARD_DQ_RATE", "8mbit");
    let limit = env_str("JOINGUARD_DQ_LIMIT", "16mb");
    let qdisc = env_str("JOINGUARD_DQ_QDISC", "htb");
    let mib = env_u64("JOINGUARD_DQ_DB_MIB", 30) as usize;
    let kib = env_u64("JOINGUARD_DQ_VALUE_KIB", 4) as usize;
    let snapshot_count = env_u64("JOINGUARD_DQ_SNAPSHOT_COUNT", 1000);
    let budget = env_u64("JOINGUARD_DQ_BUDGET_S", 240).min(290);
    let from = env_str("JOINGUARD_DQ_FROM", "m4");

    let lab = Lab::builder()
        .hosts(["joiner", "m1", "m2", "m3", "m4", "r1"])
        .route(&["m1", "r1", "m4"])
        .route(&["m2", "r1", "m4"])
        .route(&["m3", "r1", "m4"])
        .build()
        .expect("routed lab");
    // The lab's namespaces take the machine's default congestion control (bbr here), which
    // paces at the bottleneck's rate and keeps a FIFO nearly empty (25 KiB at most in a first
    // run); a node's distribution default, cubic, is loss-based and fills it. A namespace may
    // only pick one of net.ipv4.tcp_allowed_congestion_control (reno bbr here, EPERM for
    // cubic), so reno, loss-based as cubic is, by default. Before any connection.
    let cc = env_str("JOINGUARD_DQ_CC", "reno");
    for h in lab.hosts() {
        let mut cmd = h.command("sysctl");
        cmd.args(["-q", "-w", &format!("net.ipv4.tcp_congestion_control={cc}")]);
        let out = output_within(&mut cmd, Duration::from_secs(5)).expect("sysctl");
        assert!(out.status.success(), "sysctl {cc}: {out:?}");
        // A sender keeps at most tcp_wmem's maximum (4 MiB here) unacknowledged, which caps what
        // one connection can queue; JOINGUARD_DQ_WMEM raises it so the queue can fill.
        if let Ok(w) = std::env::var("JOINGUARD_DQ_WMEM") {
            let mut cmd = h.command("sysctl");
            cmd.args(["-q", "-w", &format!("net.ipv4.tcp_wmem=4096 16384 {w}")]);
            let out = output_within(&mut cmd, Duration::from_secs(5)).expect("sysctl");
            assert!(out.status.success(), "sysctl tcp_wmem {w}: {out:?}");
        }
    }
    let mut spec = EtcdSpec::default();
    if snapshot_count > 0 {
        spec.extra_args
            .push(format!("--snapshot-count={snapshot_count}"));
    }
    let members: Vec<&Host> = ["m1", "m2", "m3"].iter().map(|h| lab.host(h)).collect();
    let mut etcd = EtcdCluster::start(&lab, &members, &spec).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30))
        .expect("etcd healthy");
    let t = Instant::now();
    preload(&lab, &etcd, mib, kib);
    let leader0 = etcd.leader().expect("leader");
    let db = etcd
        .metric_sum(leader0, "etcd_mvcc_db_total_size_in_bytes")
        .unwrap_or(0.0) as u64;
    eprintln!(
        "etcd {}: preloaded {mib} MiB ({kib} KiB values) in {:.1}s; leader db {db} bytes",
        etcd.version(),
        t.elapsed().as_secs_f64()
    );

    let (r1, m4) = (lab.host("r1"), lab.host("m4"));
    let handle = if qdisc == "tbf" {
        tc(
            r1,
            &format!("qdisc add dev lab0 root handle 1: tbf rate {rate} burst 32kb limit {limit}"),
        );
        "1:"
    } else {
        for a in [
            "qdisc add dev lab0 root handle 1: htb default 20".to_string(),
            format!("class add dev lab0 parent 1: classid 1:10 htb rate {rate} ceil {rate} burst 32kb"),
            "class add dev lab0 parent 1: classid 1:20 htb rate 10gbit".to_string(),
            format!("qdisc add dev lab0 parent 1:10 handle 10: bfifo limit {limit}"),
            format!(
                "filter add dev lab0 parent 1: protocol ip prio 1 u32 match ip dst {}/32 flowid 1:10",
                m4.addr()
            ),
        ] {
            tc(r1, &a);
        }
        "10:"
    };
    eprintln!("r1 lab0:\n{}", tc(r1, "qdisc show dev lab0"));

    let added = Instant::now();
    let li = etcd.add_learner(m4).expect("learner");
    eprintln!("learner added in {:.2}s", added.elapsed().as_secs_f64());
    let pki = etcd.pki_dir();
    let endpoints = etcd.client_endpoints()[..3].join(",");
    let mut cmd = lab.host(&from).command(JOINGUARD);
    cmd.args(["etcd", "promote", "--cert-dir"])
        .arg(&pki)
        .args(["--etcd-endpoints", &endpoints, "--node-name", "m4"])
        .args(["--apiserver-advertise-address", &m4.addr().to_string()])
        .args(["--timeout", &format!("{budget}s")])
        .args(["--learner-metrics-url", etcd.member(li).metrics_url()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("joinguard etcd promote");
    let lines = Mutex::new(Vec::<(f64, String)>::new());
    let stderr = child.stderr.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();

    let deadline = added + Duration::from_secs(budget + 20);
    let mut at90 = None;
    let mut max_backlog = 0;
    let mut last_print = -10.0;
    let mut raft = Vec::<(f64, Option<u64>)>::new();
    let status = std::thread::scope(|s| {
        s.spawn(|| {
            for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines
                    .lock()
                    .unwrap()
                    .push((added.elapsed().as_secs_f64(), l));
            }
        });
        let out = s.spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            text
        });
        let mut n = 0u64;
        let status = loop {
            let exited = child.try_wait().unwrap();
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            let el = added.elapsed().as_secs_f64();
            let committed = |i: usize| {
                etcd.metric_sum(i, "etcd_server_proposals_committed_total")
                    .unwrap_or(0.0) as u64
            };
            let lead = (0..3).map(committed).max().unwrap_or(0);
            let lrn = committed(li);
            if at90.is_none() && lead > 0 && lrn * 10 >= lead * 9 {
                at90 = Some(el);
            }
            let (backlog, dropped, sent) = queue_stats(r1, handle);
            max_backlog = max_backlog.max(backlog);
            if n.is_multiple_of(5) {
                let mut st = etcd.etcdctl_to(m4, &[etcd.member(li).client_url().to_string()]);
                st.args(["endpoint", "status", "-w", "json"]);
                let idx = output_within(&mut st, Duration::from_secs(4))
                    .ok()
                    .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                    .and_then(|v| v[0]["Status"]["raftIndex"].as_u64());
                raft.push((el, idx));
            }
            if el - last_print >= 5.0 {
                last_print = el;
                eprintln!(
                    "{el:6.1}s committed leader {lead} learner {lrn}; learner raftIndex {:?}; \
                     queue backlog {backlog} B, dropped {dropped}, sent {sent} B",
                    raft.last().and_then(|r| r.1)
                );
            }
            if let Some(st) = exited {
                eprintln!(
                    "{el:6.1}s (promote exited) committed leader {lead} learner {lrn}; \
                     queue backlog {backlog} B, dropped {dropped}, sent {sent} B"
                );
                break Some(st);
            }
            n += 1;
            std::thread::sleep(Duration::from_secs(1));
        };
        (status, out.join().unwrap())
    });
    let returned = added.elapsed().as_secs_f64();
    let (status, stdout) = status;
    for (t, l) in lines.lock().unwrap().iter() {
        eprintln!("promote {t:7.2}s  {l}");
    }
    eprintln!("promote stdout: {}", stdout.trim());
    let log = std::fs::read_to_string(etcd.member(li).log_path()).unwrap_or_default();
    for pat in [
        "i/o timeout",
        "failed to dial",
        "dial tcp",
        "lost TCP streaming connection",
        "failed to read",
        "snapshot",
    ] {
        let hits: Vec<&str> = log.lines().filter(|l| l.contains(pat)).collect();
        eprintln!("learner log {pat:?}: {} lines", hits.len());
        for h in hits.iter().take(4) {
            eprintln!("    {}", &h[..h.len().min(400)]);
        }
    }
    let leader = etcd.leader().unwrap_or(leader0);
    let llog = std::fs::read_to_string(etcd.member(leader).log_path()).unwrap_or_default();
    for pat in ["snapshot", "lost TCP streaming connection", "failed to"] {
        let hits: Vec<&str> = llog.lines().filter(|l| l.contains(pat)).collect();
        eprintln!("leader log {pat:?}: {} lines", hits.len());
        for h in hits.iter().rev().take(4) {
            eprintln!("    {}", &h[..h.len().min(400)]);
        }
    }
    for (what, pat) in [
        ("snapshots started", "\"sending database snapshot\""),
        ("snapshots failed", "\"failed to send database snapshot\""),
        ("snapshots sent", "\"sent database snapshot\""),
    ] {
        eprintln!(
            "leader log: {what}: {}",
            llog.lines().filter(|l| l.contains(pat)).count()
        );
    }
    // JOINGUARD_DQ_KEEP_LOGS=DIR keeps the learner's and the leader's logs (the lab's are removed).
    if let Ok(dir) = std::env::var("JOINGUARD_DQ_KEEP_LOGS") {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(format!("{dir}/learner.log"), &log);
        let _ = std::fs::write(format!("{dir}/leader.log"), &llog);
    }
    let (_, dropped, sent) = queue_stats(r1, handle);
    eprintln!("learner raftIndex samples: {raft:?}");
    eprintln!(
        "etcd {} via r1 {qdisc} rate {rate} limit {limit}, {cc}: db {db} B; learner at 90% after {at90:?} s; \
         promote exit {:?} after {returned:.2}s; {} MemberPromote calls; max backlog seen {max_backlog} B; \
         {dropped} dropped, {sent} B sent",
        etcd.version(),
        status.and_then(|s| s.code()),
        calls(&etcd, "MemberPromote")
    );
    assert!(sent > 1_000_000, "the learner's traffic crossed r1's queue");
}
