//! Real etcd clusters in a lab: formation with mTLS, crash and restart, leadership and learners,
//! metrics. Needs root; CI runs these twice, once per etcd version (`JOINGUARD_ETCD_BIN`).
//!
//! The tests take the harness's process-wide lock so that only one lab runs at a time: several
//! 3-member clusters with 100 ms heartbeats on a 2-core machine would otherwise trigger elections
//! that have nothing to do with what a test checks.

use std::process::Output;
use std::time::{Duration, Instant};

use netlab::etcd::{etcd_bin, etcd_version, EtcdCluster, EtcdSpec};
use netlab::harness::serial;
use netlab::process::output_within;
use netlab::{Error, Host, Impairment, Lab};

const CTL_TIMEOUT: Duration = Duration::from_secs(20);

/// A lab with `hosts` and a one-way `delay` on every link.
fn lab(hosts: &[&str], delay: Duration) -> Lab {
    let lab = Lab::builder()
        .hosts(hosts.iter().copied())
        .build()
        .expect("lab");
    let hs = lab.hosts();
    for (i, a) in hs.iter().enumerate() {
        for b in &hs[i + 1..] {
            lab.net().set_link(a, b, Impairment::delay(delay));
        }
    }
    lab
}

fn start(lab: &Lab, names: &[&str]) -> EtcdCluster {
    let members: Vec<&Host> = names.iter().map(|n| lab.host(n)).collect();
    let cluster = EtcdCluster::start(lab, &members, &EtcdSpec::default()).expect("start etcd");
    cluster
        .wait_healthy(Duration::from_secs(20))
        .expect("cluster healthy");
    cluster
}

/// Runs etcdctl `args` (with all endpoints) from `from`.
fn ctl(cluster: &EtcdCluster, from: &Host, args: &[&str]) -> Output {
    output_within(cluster.etcdctl(from).args(args), CTL_TIMEOUT).expect("etcdctl ran")
}

/// Runs etcdctl `args` against `endpoints` only.
fn ctl_to(cluster: &EtcdCluster, from: &Host, endpoints: &[String], args: &[&str]) -> Output {
    output_within(cluster.etcdctl_to(from, endpoints).args(args), CTL_TIMEOUT).expect("etcdctl ran")
}

/// Asserts success and returns stdout + stderr.
fn ok(out: &Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Asserts that `etcdctl endpoint health` against `endpoints` reports each of them healthy.
fn assert_endpoints_healthy(cluster: &EtcdCluster, from: &Host, endpoints: &[String]) {
    let out = ctl_to(cluster, from, endpoints, &["endpoint", "health"]);
    let text = ok(&out, "etcdctl endpoint health");
    for ep in endpoints {
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("{ep} is healthy"))),
            "{ep} not reported healthy:\n{text}"
        );
    }
}

/// Asserts that member `i`'s etcd log has a "rejected connection" line containing `needle`: the
/// server, not the network, refused the client.
fn assert_member_log_mentions(cluster: &EtcdCluster, i: usize, needle: &str) {
    let log = std::fs::read_to_string(cluster.member(i).log_path()).expect("etcd log");
    assert!(
        log.lines()
            .any(|l| l.contains("rejected connection") && l.contains(needle)),
        "member {i} log has no rejected connection with {needle:?}:\n{}",
        cluster.log_tail(i, 10)
    );
}

#[test]
fn etcd_cluster_forms_with_mtls() {
    let _serial = serial();
    let t = Instant::now();
    let lab = lab(&["joiner", "m1", "m2", "m3"], Duration::from_millis(5));
    let cluster = start(&lab, &["m1", "m2", "m3"]);
    let joiner = lab.host("joiner");
    let formed = t.elapsed();

    // Three members, each a distinct lab address, over TLS.
    let eps = cluster.client_endpoints();
    assert_eq!(
        eps,
        [
            "https://198.18.0.2:2379",
            "https://198.18.0.3:2379",
            "https://198.18.0.4:2379"
        ]
    );
    assert_endpoints_healthy(&cluster, joiner, &eps);

    // A write and a read through the joiner's client identity.
    let out = ctl(&cluster, joiner, &["put", "/joinguard/probe", "v1"]);
    assert_eq!(stdout(&out), "OK", "{}", ok(&out, "put"));
    let out = ctl(
        &cluster,
        joiner,
        &["get", "/joinguard/probe", "--print-value-only"],
    );
    ok(&out, "get");
    assert_eq!(stdout(&out), "v1");

    // The servers run the binary we selected.
    let expected = etcd_version(&etcd_bin()).expect("etcd --version");
    assert_eq!(cluster.version(), expected);
    let out = ctl(&cluster, joiner, &["endpoint", "status", "-w", "json"]);
    ok(&out, "endpoint status");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let versions: Vec<&str> = status
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["Status"]["version"].as_str().expect("version"))
        .collect();
    assert_eq!(versions, [expected.as_str(); 3], "{status}");
    if std::env::var_os("JOINGUARD_ETCD_BIN").is_none() {
        assert!(
            expected.starts_with("3.4."),
            "Debian default is 3.4, got {expected}"
        );
    }

    // Client certificates are enforced: no certificate, no service.
    let mut anon = joiner.command(cluster.etcdctl_path());
    anon.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", eps[0]))
        .arg(format!(
            "--cacert={}",
            cluster.client_identity().ca.display()
        ))
        .args([
            "--dial-timeout=1s",
            "--command-timeout=2s",
            "get",
            "/joinguard/probe",
        ]);
    let out = output_within(&mut anon, CTL_TIMEOUT).expect("etcdctl ran");
    assert!(
        !out.status.success(),
        "etcd served a client without a certificate: {}",
        stdout(&out)
    );
    assert_member_log_mentions(&cluster, 0, "client didn't provide a certificate");
    // And a certificate from another CA is refused as well.
    let other = netlab::pki::TestCa::new("not the etcd CA").unwrap();
    let stranger = other
        .issue(&netlab::pki::CertSpec::client("stranger", None))
        .unwrap();
    let (cert, key) = stranger
        .write(&lab.dir().join("stranger"), "client")
        .unwrap();
    let mut foreign = joiner.command(cluster.etcdctl_path());
    foreign
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", eps[0]))
        .arg(format!(
            "--cacert={}",
            cluster.client_identity().ca.display()
        ))
        .arg(format!("--cert={}", cert.display()))
        .arg(format!("--key={}", key.display()))
        .args([
            "--dial-timeout=1s",
            "--command-timeout=2s",
            "get",
            "/joinguard/probe",
        ]);
    let out = output_within(&mut foreign, CTL_TIMEOUT).expect("etcdctl ran");
    assert!(
        !out.status.success(),
        "etcd served a client with a foreign certificate"
    );
    assert_member_log_mentions(&cluster, 0, "unknown authority");

    // The clients' traffic went through the impairing forwarder, not around it.
    let stats = lab.net().stats(joiner, lab.host("m1"));
    assert!(
        stats.forwarded > 0,
        "no joiner->m1 packets forwarded: {stats:?}"
    );
    eprintln!(
        "etcd {expected}: formed and healthy in {formed:?}, test took {:?}",
        t.elapsed()
    );
}

#[test]
fn etcd_member_killed_and_restarted_rejoins() {
    let _serial = serial();
    let t = Instant::now();
    let lab = lab(&["joiner", "m1", "m2", "m3"], Duration::from_millis(2));
    let mut cluster = start(&lab, &["m1", "m2", "m3"]);
    let joiner = lab.host("joiner").clone();

    let leader = cluster.leader().expect("leader");
    let victim = (0..3).find(|&i| i != leader).unwrap();
    cluster.kill_member(victim).unwrap();
    assert!(!cluster.is_running(victim));
    assert_eq!(cluster.running().len(), 2);

    // The two survivors still have quorum.
    let survivors: Vec<String> = cluster
        .running()
        .iter()
        .map(|&i| cluster.member(i).client_url.clone())
        .collect();
    assert_endpoints_healthy(&cluster, &joiner, &survivors);
    cluster
        .wait_healthy(Duration::from_secs(10))
        .expect("survivors healthy");
    let victim_ep = vec![cluster.member(victim).client_url.clone()];
    let out = ctl_to(&cluster, &joiner, &victim_ep, &["endpoint", "health"]);
    assert!(
        !out.status.success(),
        "a killed member answered endpoint health"
    );

    // A write the victim misses.
    let out = ctl_to(
        &cluster,
        &joiner,
        &survivors,
        &["put", "/joinguard/while-down", "v2"],
    );
    ok(&out, "put while a member is down");

    cluster.restart_member(victim).unwrap();
    assert!(cluster.is_running(victim));
    cluster
        .wait_healthy(Duration::from_secs(20))
        .expect("healthy after restart");
    assert_endpoints_healthy(&cluster, &joiner, &cluster.client_endpoints());

    // It catches up: a serializable read answered by the victim alone, from its own state.
    let deadline = Instant::now() + Duration::from_secs(10);
    let value = loop {
        let out = ctl_to(
            &cluster,
            &joiner,
            &victim_ep,
            &[
                "get",
                "/joinguard/while-down",
                "--print-value-only",
                "--consistency=s",
            ],
        );
        let v = stdout(&out);
        if (out.status.success() && v == "v2") || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(value, "v2", "restarted member did not catch up");
    eprintln!("kill/restart test took {:?}", t.elapsed());
}

#[test]
fn etcd_leader_and_learner() {
    let _serial = serial();
    let t = Instant::now();
    let lab = lab(
        &["joiner", "m1", "m2", "m3", "m4"],
        Duration::from_millis(2),
    );
    let mut cluster = start(&lab, &["m1", "m2", "m3"]);
    let joiner = lab.host("joiner").clone();

    let leader = cluster.leader().expect("leader");
    for i in 0..3 {
        let want = if i == leader { 1.0 } else { 0.0 };
        assert_eq!(
            cluster.metric_sum(i, "etcd_server_is_leader").unwrap(),
            want,
            "member {i}, leader {leader}"
        );
    }
    // etcd's own view agrees: the leader ID reported by status is the member at that endpoint.
    let out = ctl(&cluster, &joiner, &["endpoint", "status", "-w", "json"]);
    ok(&out, "endpoint status");
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leader_ep = status
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["Status"]["header"]["member_id"] == s["Status"]["leader"])
        .map(|s| s["Endpoint"].as_str().unwrap().to_string());
    assert_eq!(
        leader_ep.as_deref(),
        Some(cluster.member(leader).client_url()),
        "{status}"
    );

    let m4 = lab.host("m4").clone();
    let li = cluster.add_learner(&m4).expect("add learner");
    assert_eq!(li, 3);
    assert!(cluster.member(li).is_learner());
    assert_eq!(cluster.client_endpoints().len(), 4);

    // The learner starts, receives the log, and serves serializable reads (the one read a
    // learner allows).
    let out = ctl_to(
        &cluster,
        &joiner,
        &cluster.client_endpoints()[..3],
        &["put", "/joinguard/for-learner", "v3"],
    );
    ok(&out, "put");
    let learner_ep = vec![cluster.member(li).client_url.clone()];
    let deadline = Instant::now() + Duration::from_secs(15);
    let value = loop {
        let out = ctl_to(
            &cluster,
            &joiner,
            &learner_ep,
            &[
                "get",
                "/joinguard/for-learner",
                "--print-value-only",
                "--consistency=s",
            ],
        );
        let v = stdout(&out);
        if (out.status.success() && v == "v3") || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        value,
        "v3",
        "learner did not replicate:\n{}",
        cluster.log_tail(li, 10)
    );
    assert!(cluster.is_running(li));
    cluster
        .wait_healthy(Duration::from_secs(10))
        .expect("healthy with a learner");

    // Membership says learner, and only for m4.
    let out = ctl(&cluster, &joiner, &["member", "list", "-w", "json"]);
    ok(&out, "member list");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members = list["members"].as_array().expect("members");
    assert_eq!(members.len(), 4, "{list}");
    for m in members {
        let peer = m["peerURLs"][0].as_str().unwrap();
        let learner = m["isLearner"].as_bool().unwrap_or(false);
        assert_eq!(
            learner,
            peer == cluster.member(li).peer_url(),
            "member {peer}: isLearner {learner}\n{list}"
        );
    }
    // The leader did not change because of the learner.
    assert_eq!(cluster.leader().unwrap(), leader);
    eprintln!("leader/learner test took {:?}", t.elapsed());
}

#[test]
fn etcd_metrics_readable() {
    let _serial = serial();
    let t = Instant::now();
    let lab = lab(&["joiner", "m1", "m2", "m3"], Duration::from_millis(2));
    let cluster = start(&lab, &["m1", "m2", "m3"]);
    let joiner = lab.host("joiner");
    let name = "etcd_server_proposals_committed_total";

    let text = cluster.metrics(0).unwrap();
    assert!(
        text.contains(&format!("# TYPE {name} ")),
        "no {name} in /metrics"
    );
    let before: Vec<f64> = (0..3)
        .map(|i| cluster.metric_sum(i, name).unwrap())
        .collect();
    assert!(
        before.iter().all(|&v| v > 0.0),
        "formation commits entries: {before:?}"
    );

    let out = ctl(&cluster, joiner, &["put", "/joinguard/metrics", "x"]);
    ok(&out, "put");

    // Every member learns of the commit (followers with the next heartbeat).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let after: Vec<f64> = (0..3)
            .map(|i| cluster.metric_sum(i, name).unwrap())
            .collect();
        if after.iter().zip(&before).all(|(a, b)| a > b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name} did not increase after a put: before {before:?}, after {after:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(matches!(
        cluster.metric_sum(0, "etcd_no_such_metric"),
        Err(Error::Etcd(_))
    ));
    eprintln!("metrics test took {:?}", t.elapsed());
}

#[test]
fn etcd_start_rejects_invalid_input() {
    let _serial = serial();
    let lab = Lab::builder()
        .hosts(["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"])
        .build()
        .expect("lab");
    let all: Vec<&Host> = lab.hosts().iter().collect();
    for members in [&all[..0], &all[..]] {
        match EtcdCluster::start(&lab, members, &EtcdSpec::default()) {
            Err(Error::Invalid(msg)) => assert!(msg.contains("1 to 7 members"), "{msg}"),
            other => panic!("{} members: expected Invalid, got {other:?}", members.len()),
        }
    }
    match EtcdCluster::start(&lab, &[all[0], all[0]], &EtcdSpec::default()) {
        Err(Error::Invalid(msg)) => assert!(msg.contains("twice"), "{msg}"),
        other => panic!("duplicate host: expected Invalid, got {other:?}"),
    }
    let spec = EtcdSpec {
        bin: "/nonexistent/etcd".into(),
        ..EtcdSpec::default()
    };
    match EtcdCluster::start(&lab, &all[..1], &spec) {
        Err(Error::Prerequisite(msg)) => assert!(msg.contains("apt-get install"), "{msg}"),
        other => panic!("missing binary: expected Prerequisite, got {other:?}"),
    }
}

#[test]
fn etcd_member_that_cannot_start_fails_fast_with_its_log() {
    let _serial = serial();
    let lab = Lab::builder().hosts(["m1"]).build().expect("lab");
    let spec = EtcdSpec {
        extra_args: vec!["--no-such-flag-for-netlab".into()],
        ..EtcdSpec::default()
    };
    let cluster = EtcdCluster::start(&lab, &[lab.host("m1")], &spec).expect("spawned");
    let t = Instant::now();
    let err = cluster
        .wait_healthy(Duration::from_secs(20))
        .expect_err("etcd with an unknown flag is not healthy");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    let msg = err.to_string();
    assert!(msg.contains("m1 exited"), "{msg}");
    assert!(
        msg.contains("no-such-flag-for-netlab"),
        "log tail missing: {msg}"
    );
    assert!(!cluster.is_running(0));
}
