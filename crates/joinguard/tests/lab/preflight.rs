//! `joinguard preflight` end to end: the real binary, run inside the joiner host of a netlab lab,
//! against a real etcd cluster with mTLS. Each test asserts what an operator sees: the exit code,
//! the verdict, the check that failed and the target it names.
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::time::{Duration, Instant};

use netlab::etcd::EtcdCluster;
use netlab::harness::{self, EnvBuilder, LabEnv, Run, RUN_TIMEOUT};
use netlab::{labtest, Impairment};
use serde_json::Value;

use crate::JOINGUARD;

/// joiner + `members` etcd members (m1..), plus `spare` hosts without etcd; 1 ms each way
/// between the joiner and every member (2 ms RTT).
fn lab(members: usize, spare: usize) -> EnvBuilder {
    crate::lab()
        .members(members)
        .spare_hosts(spare)
        .joiner_delay(Duration::from_millis(1))
}

/// What these tests do with a lab: preflight against its etcd members from the joiner.
trait PreflightLab {
    /// Keys under joinguard's prefixes, as etcdctl sees them from the joiner. An etcdctl failure
    /// panics: it must never read as "zero keys".
    fn joinguard_keys(&self) -> u64;
    fn tls_args(&self) -> Vec<String>;
    fn preflight(&self, extra: &[&str]) -> Run;
    fn preflight_json(&self, extra: &[&str]) -> (Run, Value);
}

impl PreflightLab for LabEnv {
    fn joinguard_keys(&self) -> u64 {
        let out = self
            .etcd()
            .etcdctl(self.joiner())
            .args([
                "get",
                "--prefix",
                "/joinguard/",
                "--keys-only",
                "-w",
                "json",
            ])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "etcdctl json ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v["count"].as_u64().unwrap_or(0)
    }

    fn tls_args(&self) -> Vec<String> {
        self.etcd().joinguard_args()
    }

    fn preflight(&self, extra: &[&str]) -> Run {
        let mut args = vec!["preflight".to_string()];
        args.extend(self.tls_args());
        args.extend(extra.iter().map(|a| a.to_string()));
        self.run(args)
    }

    fn preflight_json(&self, extra: &[&str]) -> (Run, Value) {
        let mut args = vec!["-o", "json"];
        args.extend_from_slice(extra);
        let run = self.preflight(&args);
        let v = run.json();
        (run, v)
    }
}

fn checks<'a>(v: &'a Value, name: &str) -> Vec<&'a Value> {
    v["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .filter(|c| c["name"] == name)
        .collect()
}

fn measurement<'a>(v: &'a Value, target: &str, probe: &str) -> Option<&'a Value> {
    v["measurements"]
        .as_array()?
        .iter()
        .find(|m| m["target"] == target && m["probe"] == probe)
}

/// Committed proposals once the cluster has settled: a fresh cluster still commits its own
/// start-up entries (member attributes, cluster version) for a moment after it is healthy.
fn settled_proposals(etcd: &EtcdCluster) -> f64 {
    let mut last = proposals(etcd);
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(500));
        let now = proposals(etcd);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("etcd kept committing proposals while idle");
}

fn proposals(etcd: &EtcdCluster) -> f64 {
    (0..etcd.members().len())
        .map(|i| {
            etcd.metric_sum(i, "etcd_server_proposals_committed_total")
                .expect("metrics")
        })
        .sum()
}

labtest!(
    etcd_preflight_healthy_cluster_is_fit_accurate_and_writes_nothing,
    lab(3, 0),
    |fx| {
        // The truth is pinged once etcd has settled (its start-up no longer busy on these two
        // cores), right before the run it is compared with: once, pinged before, it read 2.64 ms
        // on the 2 ms path while the run's echoes read 2.10 ms.
        let before = settled_proposals(fx.etcd());
        let truth: Vec<f64> = fx.lab().hosts()[1..]
            .iter()
            .map(|m| {
                netlab::measure::ping(fx.joiner(), m, 20, Duration::from_millis(5))
                    .unwrap()
                    .median_ms
            })
            .collect();
        let (run, v) = fx.preflight_json(&[]);
        let after = proposals(fx.etcd());
        crate::schema::assert_valid("preflight", &run);
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(v["verdict"], "fit");
        assert_eq!(v["schemaVersion"], 2);
        for (m, truth) in fx.lab().hosts()[1..].iter().zip(truth) {
            let client = format!("{}:2379", m.addr());
            let icmp = measurement(&v, &client, "icmp-echo")
                .unwrap_or_else(|| panic!("no icmp for {client}: {run}"));
            let p50 = icmp["p50Ms"].as_f64().unwrap();
            assert!(
                (p50 - truth).abs() <= 0.5_f64.max(truth * 0.02),
                "{client}: reported p50 {p50:.3} ms, fabric truth {truth:.3} ms"
            );
            assert!(measurement(&v, &client, "etcd-status").is_some(), "{run}");
            let peer = format!("{}:2380", m.addr());
            let pc = checks(&v, "EtcdPeerLatency");
            assert!(
                pc.iter()
                    .any(|c| c["target"] == peer.as_str() && c["status"] == "ok"),
                "{peer}: {pc:?}"
            );
        }
        // The product's promise: by default nothing is written to etcd. Not one committed proposal.
        assert_eq!(
            before,
            after,
            "preflight committed {} proposals",
            after - before
        );
        // The text report, too, is kubeadm-shaped.
        let text = fx.preflight(&[]);
        assert_eq!(text.code, 0, "{text}");
        assert!(
            text.stdout.contains("[preflight] All checks passed"),
            "{text}"
        );
        // A short budget (`--wait`'s last check gets 500 ms) still measures each host's loss:
        // the ICMP train once waited for the 1 s late limit before its first echo and sent
        // none within 700 ms.
        let (short, v) = fx.preflight_json(&["--timeout", "700ms"]);
        for m in &fx.lab().hosts()[1..] {
            let client = format!("{}:2379", m.addr());
            let icmp = measurement(&v, &client, "icmp-echo")
                .unwrap_or_else(|| panic!("no icmp for {client} in 700 ms: {short}"));
            assert!(icmp["samples"].as_u64().unwrap_or(0) >= 30, "{icmp}");
        }
    }
);

labtest!(
    etcd_preflight_one_slow_member_is_named_and_can_be_ignored,
    lab(3, 0),
    |fx| {
        // 300 ms RTT: past 1/4 of the 1 s election timeout (docs/thresholds.md).
        let m2 = fx.lab().host("m2");
        fx.lab().net().set_link(
            fx.joiner(),
            m2,
            Impairment::delay(Duration::from_millis(150)),
        );
        let (run, v) = fx.preflight_json(&[]);
        assert_eq!(run.code, 1, "{run}");
        assert_eq!(v["verdict"], "unfit");
        crate::schema::assert_valid("preflight", &run);
        let slow_peer = format!("{}:2380", m2.addr());
        for c in checks(&v, "EtcdPeerLatency") {
            let want = if c["target"] == slow_peer.as_str() {
                "error"
            } else {
                "ok"
            };
            assert_eq!(c["status"], want, "{c}");
        }
        let text = fx.preflight(&[]);
        assert_eq!(text.code, 1);
        let line = text
            .stdout
            .lines()
            .find(|l| l.contains("[ERROR EtcdPeerLatency]"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.contains(&slow_peer) && line.contains("election timeout"),
            "{line}"
        );

        // The rest of a 300 ms path is warnings: the client round trips and the dial.
        let ignored = fx.preflight(&["--ignore-preflight-errors=EtcdPeerLatency"]);
        assert_eq!(ignored.code, 0, "{ignored}");
        assert!(
            ignored.stdout.contains("[WARNING EtcdPeerLatency]"),
            "an ignored error is shown as a warning: {ignored}"
        );
    }
);

labtest!(
    preflight_dark_member_fails_within_the_timeout_and_is_named,
    lab(3, 0),
    |fx| {
        let m3 = fx.lab().host("m3");
        fx.lab()
            .net()
            .set_link(fx.joiner(), m3, Impairment::blackout());
        let run = fx.preflight(&["--timeout", "8s"]);
        assert_eq!(run.code, 1, "{run}");
        eprintln!("margin: --timeout 8s took {:?}, against 9 s", run.took);
        assert!(run.took < Duration::from_secs(9), "took {:?}", run.took);
        let dark = m3.addr().to_string();
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains("[ERROR") && l.contains(&dark) && l.contains("unreachable")),
            "{run}"
        );
    }
);

labtest!(
    /// One way (joiner -> m1), so the round-trip loss is the figure given.
    preflight_loss_warns_at_3_percent_and_fails_at_25,
    lab(1, 0),
    |fx| {
        let m1 = fx.lab().host("m1");
        let lossy = |p: f64| Impairment::delay(Duration::from_millis(1)).with_loss(p);
        fx.lab().net().set(fx.joiner(), m1, lossy(0.03));
        let (run, v) = fx.preflight_json(&[]);
        let loss = checks(&v, "PacketLoss");
        assert!(loss.iter().any(|c| c["status"] == "warning"), "3%: {run}");
        assert!(loss.iter().all(|c| c["status"] != "error"), "3%: {run}");
        assert_eq!(run.code, 0, "3% loss is a warning, not an error: {run}");

        fx.lab().net().set(fx.joiner(), m1, lossy(0.25));
        let (run, v) = fx.preflight_json(&[]);
        assert_eq!(run.code, 1, "25%: {run}");
        assert!(
            checks(&v, "PacketLoss")
                .iter()
                .any(|c| c["status"] == "error"),
            "{run}"
        );
    }
);

labtest!(
    /// A member that drops pings but serves its ports (a firewall between sites, a hardened
    /// host): not 100% loss but a warning that says ICMP is filtered, with loss judged from the
    /// TCP-based probes; the same member with 15% loss of every packet on top is unfit, by
    /// PacketLoss measured from TCP (each sample that waited for a retransmission counted).
    etcd_preflight_a_member_that_filters_icmp_is_fit_and_its_tcp_loss_is_judged,
    lab(3, 0),
    |fx| {
        let m2 = fx.lab().host("m2");
        let base = Impairment::delay(Duration::from_millis(1)).with_drop_ping();
        fx.lab().net().set_link(fx.joiner(), m2, base.clone());
        let (run, v) = fx.preflight_json(&[]);
        assert_eq!(run.code, 0, "a filtered ICMP path is fit: {run}");
        let host = m2.addr().to_string();
        let loss: Vec<&Value> = checks(&v, "PacketLoss")
            .into_iter()
            .filter(|c| c["target"].as_str().is_some_and(|t| t.starts_with(&host)))
            .collect();
        assert!(
            loss.iter().any(|c| c["status"] == "warning"
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("{host} filters ICMP: none of")))),
            "{loss:?}"
        );
        assert!(loss.iter().all(|c| c["status"] != "error"), "{run}");
        assert!(
            fx.lab().net().stats(fx.joiner(), m2).dropped_ping > 0,
            "the fabric dropped the pings"
        );

        // 15% of every packet lost each way on top: unfit, and the loss measured from TCP is
        // named (TCP's tail loss probes recover part of the losses in a few ms, which a
        // retransmission timeout rule does not see, so it reads low: a warning here).
        let filtered_loss = |v: &Value| -> Value {
            checks(v, "PacketLoss")
                .into_iter()
                .find(|c| {
                    c["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with(&format!("{host} filters ICMP")))
                })
                .cloned()
                .unwrap_or_else(|| panic!("no PacketLoss for {host} naming the filter: {v}"))
        };
        fx.lab()
            .net()
            .set_link(fx.joiner(), m2, base.clone().with_loss(0.15));
        let (run, v) = fx.preflight_json(&[]);
        assert_eq!(run.code, 1, "{run}");
        let c = filtered_loss(&v);
        assert_ne!(c["status"], "ok", "{c}");
        assert!(c["measured"].as_f64().unwrap_or(0.0) > 5.0, "{c}");
        eprintln!("15%: {}", c["message"]);
        // 25% each way: PacketLoss itself, measured from TCP, is the error.
        fx.lab()
            .net()
            .set_link(fx.joiner(), m2, base.with_loss(0.25));
        let (run, v) = fx.preflight_json(&[]);
        assert_eq!(run.code, 1, "{run}");
        let c = filtered_loss(&v);
        eprintln!("25%: {}", c["message"]);
        assert_eq!(c["status"], "error", "{c}");
    }
);

labtest!(
    etcd_preflight_names_an_existing_learner,
    lab(3, 1),
    |mut fx| {
        let m4 = fx.lab().host("m4").clone();
        fx.etcd_mut().add_learner(&m4).expect("learner");
        fx.etcd()
            .wait_healthy(Duration::from_secs(30))
            .expect("healthy with learner");
        let run = fx.preflight(&[]);
        assert_eq!(run.code, 1, "{run}");
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains("[ERROR EtcdHealth]") && l.contains("learner"))
            .unwrap_or_else(|| panic!("{run}"));
        assert!(
            line.contains("m4") && line.contains("too many learner members"),
            "{line}"
        );
    }
);

labtest!(etcd_preflight_write_probe_leaves_no_keys, lab(3, 0), |fx| {
    let before = proposals(fx.etcd());
    let run = fx.preflight(&["--write-probe", "--node-name", "cp-new"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(proposals(fx.etcd()) > before, "the write probe did write");
    let left = fx.joinguard_keys();
    assert_eq!(left, 0, "keys left: {left}");
});

labtest!(
    preflight_wait_succeeds_once_the_path_recovers,
    lab(1, 0),
    |fx| {
        let m1 = fx.lab().host("m1");
        fx.lab().net().set_link(
            fx.joiner(),
            m1,
            Impairment::delay(Duration::from_millis(150)),
        );
        let run = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_secs(4));
                fx.lab().net().set_link(
                    fx.joiner(),
                    m1,
                    Impairment::delay(Duration::from_millis(1)),
                );
            });
            fx.preflight(&["--wait", "30s", "--timeout", "5s"])
        });
        assert_eq!(run.code, 0, "{run}");
        eprintln!(
            "margin: the first unfit check, against the path's recovery at 4 s: {:?}",
            run.stderr.lines().find(|l| l.contains("not fit"))
        );
        assert!(
            run.stderr.contains("not fit"),
            "progress is shown while waiting: {run}"
        );

        fx.lab().net().set_link(
            fx.joiner(),
            m1,
            Impairment::delay(Duration::from_millis(150)),
        );
        let run = fx.preflight(&["--wait", "5s", "--timeout", "3s"]);
        eprintln!(
            "margin: --wait 5s --timeout 3s took {:?}, against 9 s",
            run.took
        );
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.took < Duration::from_secs(9),
            "the wait ends at its deadline: {run}"
        );
        assert!(run.stdout.contains("[ERROR "), "{run}");
    }
);

labtest!(preflight_no_false_verdicts, lab(1, 0), |fx| {
    let m1 = fx.lab().host("m1");
    let net = fx.lab().net();
    // A healthy link with 1% loss and +-20% jitter: never an error.
    let noisy = Impairment::delay(Duration::from_millis(1))
        .with_uniform_jitter(Duration::from_micros(200))
        .with_loss(0.01);
    net.set_link(fx.joiner(), m1, noisy.clone());
    let mut false_errors = Vec::new();
    for i in 0..30 {
        let run = fx.preflight(&[]);
        if run.code != 0 {
            false_errors.push(format!("run {i}: {run}"));
        }
    }
    assert!(
        false_errors.is_empty(),
        "{} false errors:\n{}",
        false_errors.len(),
        false_errors.join("\n")
    );

    // One 500 ms spike during a run: no error, wherever in the run it falls. Everything behind
    // the delayed packet queues for 500 ms, so a whole ICMP batch comes back late: that is a
    // stall, not loss.
    for at in [250, 700, 1200, 1800] {
        let spike = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(at));
                net.set(
                    m1,
                    fx.joiner(),
                    Impairment::delay(Duration::from_millis(500)),
                );
                std::thread::sleep(Duration::from_millis(3));
                net.set(m1, fx.joiner(), noisy.clone());
            });
            fx.preflight(&[])
        });
        assert_eq!(
            spike.code, 0,
            "a spike {at} ms into the run failed it: {spike}"
        );
    }
});

// Twice the error threshold (effective RTT 133 ms against 1/4 of a 267 ms election timeout,
// 66.7 ms; etcd wants at least 5 heartbeats in it): an error every time. This half of the
// no-false-verdicts check shares the machine with other labs (`.config/nextest.toml`): load can
// only lengthen what the runs measure, which moves them further past the threshold; each run's
// duration and the first run's error line are printed, against `RUN_TIMEOUT`.
labtest!(
    preflight_twice_the_error_threshold_is_an_error_every_time,
    lab(1, 0),
    |fx| {
        let m1 = fx.lab().host("m1");
        let net = fx.lab().net();
        net.set_link(
            fx.joiner(),
            m1,
            Impairment::delay(Duration::from_micros(66_700)),
        );
        let mut misses = Vec::new();
        let mut took = Vec::new();
        for i in 0..30 {
            let start = Instant::now();
            let run = fx.preflight(&[
                "--etcd-heartbeat-interval",
                "50ms",
                "--etcd-election-timeout",
                "267ms",
            ]);
            took.push(start.elapsed());
            if i == 0 {
                if let Some(line) = run
                    .stdout
                    .lines()
                    .find(|l| l.contains("[ERROR EtcdPeerLatency]"))
                {
                    eprintln!("first run: {line}");
                }
            }
            if run.code != 1 || !run.stdout.contains("[ERROR EtcdPeerLatency]") {
                misses.push(format!("run {i}: {run}"));
            }
        }
        took.sort();
        eprintln!(
            "30 runs took {:.2}-{:.2} s (median {:.2} s), against RUN_TIMEOUT {} s",
            took[0].as_secs_f64(),
            took[29].as_secs_f64(),
            took[15].as_secs_f64(),
            RUN_TIMEOUT.as_secs()
        );
        assert!(
            misses.is_empty(),
            "{} misses:\n{}",
            misses.len(),
            misses.join("\n")
        );
    }
);

labtest!(
    etcd_preflight_untrusted_ca_is_a_trust_failure,
    lab(1, 0),
    |fx| {
        let other = netlab::pki::TestCa::new("some other cluster").unwrap();
        let ca = other.write_ca(fx.lab().dir(), "other-ca").unwrap();
        let id = fx.etcd().client_identity();
        let mut cmd = fx.joiner().command(JOINGUARD);
        cmd.args(["preflight", "--etcd-endpoints"])
            .arg(fx.etcd().client_endpoints().join(","))
            .arg("--etcd-cacert")
            .arg(&ca)
            .arg("--etcd-cert")
            .arg(&id.cert)
            .arg("--etcd-key")
            .arg(&id.key);
        let run = harness::run(&mut cmd, RUN_TIMEOUT);
        assert_eq!(run.code, 3, "{run}");
        assert!(
            run.stderr.contains("trust failure")
                && run.stderr.contains("not signed by the given CA"),
            "{run}"
        );
    }
);

/// The token and certificate key come from the environment too (JOINGUARD_TOKEN,
/// JOINGUARD_CERTIFICATE_KEY), with no warning: the value is used (here it reaches the check that
/// token discovery needs an endpoint) and never printed.
#[test]
fn preflight_takes_secrets_from_the_environment_without_a_warning() {
    let run = harness::run(
        std::process::Command::new(JOINGUARD)
            .args(["preflight", "--discovery-token-ca-cert-hash"])
            .arg(format!("sha256:{}", "ab".repeat(32)))
            .env("JOINGUARD_TOKEN", "abcdef.0123456789abcdef")
            .env("JOINGUARD_CERTIFICATE_KEY", "ee".repeat(32)),
        RUN_TIMEOUT,
    );
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr.contains("--token needs the API endpoint"),
        "{run}"
    );
    assert!(!run.stderr.contains("WARNING"), "{run}");
    assert!(!run.stderr.contains("0123456789abcdef"), "{run}");
    assert!(!run.stderr.contains(&"ee".repeat(32)), "{run}");
    // The same token as a flag draws the warning, once, without the secret.
    let run = harness::run(
        std::process::Command::new(JOINGUARD)
            .args(["preflight", "--token", "abcdef.0123456789abcdef"])
            .arg("--discovery-token-ca-cert-hash")
            .arg(format!("sha256:{}", "ab".repeat(32))),
        RUN_TIMEOUT,
    );
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(
        run.stderr.matches("--token on the command line").count(),
        1,
        "{run}"
    );
    assert!(!run.stderr.contains("0123456789abcdef"), "{run}");
}

#[test]
fn preflight_bad_input_gets_exit_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let ca = netlab::pki::TestCa::new("ca").unwrap();
    let ca_path = ca.write_ca(dir.path(), "ca").unwrap();
    let a = ca.issue(&netlab::pki::CertSpec::client("a", None)).unwrap();
    let b = ca.issue(&netlab::pki::CertSpec::client("b", None)).unwrap();
    let (a_crt, _a_key) = a.write(dir.path(), "a").unwrap();
    let (_b_crt, b_key) = b.write(dir.path(), "b").unwrap();
    let (ca_s, a_s, bk_s) = (
        ca_path.display().to_string(),
        a_crt.display().to_string(),
        b_key.display().to_string(),
    );
    let missing = dir.path().join("nope.crt").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--etcd-endpoints", "https://10.0.0.1:notaport"],
            "--etcd-endpoints",
        ),
        (
            vec!["--etcd-endpoints", "ftp://10.0.0.1:2379"],
            "--etcd-endpoints",
        ),
        (
            vec![
                "--etcd-endpoints",
                "https://198.18.0.2:2379",
                "--etcd-cacert",
                &missing,
            ],
            "--etcd-cacert",
        ),
        (
            vec![
                "--etcd-endpoints",
                "https://198.18.0.2:2379",
                "--etcd-cacert",
                &ca_s,
                "--etcd-cert",
                &a_s,
                "--etcd-key",
                &bk_s,
            ],
            "does not match",
        ),
        (
            vec![
                "--etcd-endpoints",
                "http://198.18.0.2:2379",
                "--etcd-cacert",
                &ca_s,
            ],
            "http URL",
        ),
        // `--ignore-preflight-errors` takes any name, as kubeadm does (a misspelling is noted,
        // not refused: kubeadm_join::kubeadm_check_names_pass_and_a_slow_etcd_member_is_ignored);
        // `all` beside a name is refused.
        (
            vec![
                "--etcd-endpoints",
                "https://198.18.0.2:2379",
                "--ignore-preflight-errors",
                "all,EtcdPeerLatency",
            ],
            "ignore-preflight-errors",
        ),
        (
            vec![
                "--etcd-endpoints",
                "https://198.18.0.2:2379",
                "--timeout",
                "soon",
            ],
            "--timeout",
        ),
        (
            vec![
                "--etcd-endpoints",
                "https://198.18.0.2:2379",
                "--timeout",
                "500000000y",
            ],
            "longer than 24h",
        ),
        (vec![], "nothing to check"),
        // IPv6 forms etcd cannot use, each with what to do (docs/ipv6.md).
        (
            vec!["--etcd-endpoints", "https://[fe80::1%25eth0]:2379"],
            "fe80::1%eth0 is a link-local address, which etcd cannot use: an etcd URL cannot \
             carry the zone",
        ),
        (
            vec!["--etcd-endpoints", "https://[fe80::1]:2379"],
            "connects fail with 'invalid argument' (etcd-io/etcd #10287); advertise a global or \
             unique-local",
        ),
        (
            vec!["--etcd-endpoints", "https://fd00::2:2379"],
            "needs brackets; write https://[fd00::2]:2379",
        ),
        (vec!["::1:6443"], "needs brackets; write [::1]:6443"),
    ];
    for (args, want) in cases {
        let run = harness::run(
            std::process::Command::new(JOINGUARD)
                .arg("preflight")
                .args(&args),
            RUN_TIMEOUT,
        );
        assert_eq!(run.code, 2, "{args:?}: {run}");
        assert!(
            run.stderr.contains(want),
            "{args:?}: stderr must mention {want:?}: {run}"
        );
        assert!(!run.stderr.contains("panicked"), "{args:?}: {run}");
        assert!(
            run.took < Duration::from_secs(2),
            "{args:?} took {:?}",
            run.took
        );
    }
}

labtest!(
    etcd_preflight_write_probe_killed_mid_run_leaves_nothing_after_the_ttl,
    lab(1, 0),
    |fx| {
        // The write probe runs after the measurements (about 0.3 to 1 s in); kill -9 at staggered
        // points across that window so some kills land between the put and the revoke.
        for delay_ms in [300u64, 500, 700, 900] {
            let mut cmd = fx.joiner().command(JOINGUARD);
            cmd.arg("preflight")
                .args(fx.tls_args())
                .args(["--write-probe", "--node-name", "killed"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().unwrap();
            std::thread::sleep(Duration::from_millis(delay_ms));
            let _ = child.kill();
            let _ = child.wait();
        }
        let count = || fx.joinguard_keys();
        // The lease TTL is 10 s; etcd may add an election timeout (1 s) after a leader change.
        let deadline = Instant::now() + Duration::from_secs(14);
        while count() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
        }
        assert_eq!(count(), 0, "write-probe keys outlived their lease");
    }
);

labtest!(
    /// A voter of a 3-member cluster down (its etcd killed): the members that answer are no
    /// longer connected to it (their own /metrics say so), and etcd refuses a new member on a
    /// member not connected to every voter (3.4, 3.5 before 3.5.30), or to a quorum of the grown
    /// cluster, 3 of 3 here (3.5.30 and later): preflight exits 1 naming the voter and the
    /// refusal, and the real `etcdctl member add --learner` from the joiner meets it.
    etcd_preflight_a_voter_down_predicts_the_unhealthy_cluster_refusal,
    lab(3, 0),
    |mut env| {
        let leader = env.etcd().leader().expect("a leader");
        let down = (0..3).find(|&i| i != leader).unwrap();
        let up: Vec<usize> = (0..3).filter(|&i| i != down).collect();
        let name = env.etcd().member(down).name().to_string();
        env.etcd_mut().kill_member(down).expect("kill");
        // Until both survivors' transports have dropped it (10 s at most).
        let t0 = Instant::now();
        while !up.iter().all(|&i| {
            env.etcd().metrics(i).is_ok_and(|m| {
                m.lines().any(|l| {
                    l.starts_with("etcd_network_active_peers{") && l.ends_with(" 0")
                })
            })
        }) {
            assert!(t0.elapsed() < Duration::from_secs(10), "the survivors still see {name}");
            std::thread::sleep(Duration::from_millis(200));
        }
        let (run, v) = env.preflight_json(&[]);
        assert_eq!(run.code, 1, "{run}");
        let c = checks(&v, "EtcdPeerConnectivity");
        assert_eq!(c.len(), 1, "{run}");
        let m = c[0]["message"].as_str().unwrap();
        assert_eq!(c[0]["status"], "error", "{m}");
        assert!(
            m.contains("\"etcdserver: unhealthy cluster\" by every member asked")
                && m.contains(&format!("voter {name} ("))
                && m.contains("2 of 3 connected"),
            "{m}"
        );
        eprintln!("EtcdPeerConnectivity: {m}");
        // The real etcdctl, from the joiner, to the members that answer: the same refusal.
        let survivors: Vec<String> =
            up.iter().map(|&i| env.etcd().member(i).client_url().to_string()).collect();
        let out = env
            .etcd()
            .etcdctl_to(env.joiner(), &survivors)
            .args(["member", "add", "jg-probe", "--learner"])
            .arg("--peer-urls=https://198.18.0.250:2380")
            .output()
            .expect("etcdctl");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "etcd took the member: {stderr}");
        assert!(stderr.contains("etcdserver: unhealthy cluster"), "{stderr}");
        // The join oracle (a real learner join on kubeadm's schedule, its etcd API budget cut
        // from 2 min to 10 s) meets it at member add.
        let joiner = env.joiner().clone();
        let timing = netlab::join::KubeadmEtcdTiming {
            etcd_api_call: Duration::from_secs(10),
            ..Default::default()
        };
        let out = env.etcd_mut().kubeadm_join(&joiner, &timing).expect("lab");
        eprintln!("oracle: {}", out.summary());
        let (step, why) = out.failed.clone().expect("the join must fail");
        assert_eq!(step, netlab::join::JoinStep::MemberAdd, "{}", out.summary());
        assert!(why.contains("unhealthy cluster"), "{why}");
    }
);

/// `etcdctl endpoint status` of member `i` from the joiner: its backend size in bytes.
fn db_size(env: &LabEnv, i: usize) -> u64 {
    let url = env.etcd().member(i).client_url().to_string();
    let out = env
        .etcd()
        .etcdctl_to(env.joiner(), &[url])
        .args(["endpoint", "status", "-w", "json"])
        .output()
        .expect("etcdctl");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v[0]["Status"]["dbSize"].as_u64().expect("dbSize")
}

/// Puts one value of `bytes` under a fresh key from the joiner; etcd's answer.
fn put_filler(env: &LabEnv, n: usize, bytes: usize) -> std::process::Output {
    let dir = env.dir().join("filler");
    std::fs::create_dir_all(&dir).unwrap();
    let value = "x".repeat(bytes);
    let path = dir.join("value");
    std::fs::write(&path, &value).unwrap();
    // Always through m1, whose size the test reads: etcd checks the quota on the member that
    // takes the put.
    let m1 = env.etcd().member(0).client_url().to_string();
    let mut cmd = env.etcd().etcdctl_to(env.joiner(), &[m1]);
    cmd.args(["put", &format!("/filler/{n}")])
        .stdin(std::fs::File::open(&path).unwrap());
    cmd.output().expect("etcdctl put")
}

const QUOTA: u64 = 16 * 1024 * 1024;

labtest!(
    /// etcd with a 16 MiB quota (`--quota-backend-bytes`), filled from the joiner with 512 KiB
    /// values: past 95% of it (etcd's own etcdDatabaseQuotaLowSpace line), a warning with the
    /// figures and exit 0; filled until etcd raises NOSPACE, exit 1 naming the alarm and what it
    /// refuses.
    etcd_preflight_a_database_near_its_quota_warns_and_nospace_is_unfit,
    lab(3, 0).etcd_spec(netlab::etcd::EtcdSpec {
        extra_args: vec![format!("--quota-backend-bytes={QUOTA}")],
        ..Default::default()
    }),
    |env| {
        // 512 KiB values while far from the line, then smaller ones: a put whose cost would
        // pass the quota raises NOSPACE before the size reaches it.
        let mut n = 0;
        loop {
            let size = db_size(&env, 0);
            if size as f64 >= 0.955 * QUOTA as f64 {
                break;
            }
            assert!(n < 200, "the database did not grow: {size}");
            let left = (0.99 * QUOTA as f64) as u64 - size;
            let bytes = (left / 8).clamp(4 * 1024, 512 * 1024) as usize;
            let out = put_filler(&env, n, bytes);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            n += 1;
        }
        let (run, v) = env.preflight_json(&["--no-bandwidth"]);
        assert_eq!(run.code, 0, "{run}");
        let c = checks(&v, "EtcdDatabaseSize");
        assert_eq!(c.len(), 3, "{run}");
        assert!(c.iter().any(|c| c["status"] == "warning"), "{run}");
        let w = c.iter().find(|c| c["status"] == "warning").unwrap();
        let m = w["message"].as_str().unwrap();
        assert!(
            m.contains("of its 16.0 MiB quota (") && m.contains("etcdDatabaseQuotaLowSpace"),
            "{m}"
        );
        eprintln!("EtcdDatabaseSize at {n} puts: {m}");

        // On until etcd refuses a put: NOSPACE is raised.
        let mut refused = None;
        for k in n..n + 20 {
            let out = put_filler(&env, k, 512 * 1024);
            if !out.status.success() {
                refused = Some(String::from_utf8_lossy(&out.stderr).to_string());
                break;
            }
        }
        let refused = refused.expect("etcd took 20 more puts past its quota");
        assert!(refused.contains("database space exceeded"), "{refused}");
        let (run, v) = env.preflight_json(&["--no-bandwidth"]);
        assert_eq!(run.code, 1, "{run}");
        let health = checks(&v, "EtcdHealth");
        assert!(
            health.iter().any(|c| c["status"] == "error"
                && c["message"].as_str().is_some_and(|m| m.contains("NOSPACE")
                    && m.contains("refuses the API server's writes"))),
            "{run}"
        );
    }
);

/// `n` puts of `bytes` each from the joiner to `endpoint`, 32 in flight: `n` raft entries.
fn write_entries(env: &LabEnv, endpoint: String, n: usize, bytes: usize) {
    let id = env.etcd().client_identity();
    let read = |p: &std::path::Path| std::fs::read(p).unwrap();
    let (ca, cert, key) = (read(&id.ca), read(&id.cert), read(&id.key));
    env.joiner()
        .block_on(move || async move {
            let tls = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(ca))
                .identity(etcd_client::Identity::from_pem(cert, key));
            let opts = etcd_client::ConnectOptions::new().with_tls(tls);
            let client = etcd_client::Client::connect([endpoint], Some(opts))
                .await
                .expect("etcd client");
            let mut tasks = tokio::task::JoinSet::new();
            for t in 0..32 {
                let mut kv = client.kv_client();
                let value = vec![b'x'; bytes];
                tasks.spawn(async move {
                    for i in (t..n).step_by(32) {
                        kv.put(format!("/lag/{i}"), value.clone(), None)
                            .await
                            .expect("put");
                    }
                });
            }
            while let Some(r) = tasks.join_next().await {
                r.expect("writer");
            }
        })
        .expect("run in the joiner");
}

/// SIGCONT to a stopped etcd when the test ends, however it ends.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

labtest!(
    /// A follower SIGSTOPped while 8000 entries are committed, then resumed behind a 1 Mbit/s
    /// path to the others, so that it catches up over a minute: while it lasts, EtcdMemberLag
    /// warns with how far it is behind the leader's log (past etcd's 5000 catch-up entries);
    /// once the path is lifted and it has caught up, the same check is ok.
    etcd_preflight_a_member_behind_the_leader_is_reported_while_it_lasts,
    lab(3, 0),
    |env| {
        let leader = env.etcd().leader().expect("a leader");
        let slow = (0..3).find(|&i| i != leader).unwrap();
        let name = env.etcd().member(slow).name().to_string();
        let pid = env.etcd().pid(slow).expect("pid");
        let stop = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .unwrap();
        assert!(stop.success());
        let resume = Resume(pid);
        let url = env.etcd().member(leader).client_url().to_string();
        write_entries(&env, url, 8000, 1024);
        // Its way back: 1 Mbit/s to and from each other member.
        let lab = env.lab();
        let slow_host = lab.host(&name);
        for i in (0..3).filter(|&i| i != slow) {
            let other = lab.host(env.etcd().member(i).name());
            lab.net().set_link(
                slow_host,
                other,
                Impairment::delay(Duration::from_millis(1)).with_rate(1_000_000),
            );
        }
        drop(resume);
        std::thread::sleep(Duration::from_secs(2));
        let (run, v) = env.preflight_json(&["--no-bandwidth"]);
        let lag = checks(&v, "EtcdMemberLag");
        let w = lag
            .iter()
            .find(|c| c["status"] == "warning")
            .unwrap_or_else(|| panic!("no lag warning: {run}"));
        let m = w["message"].as_str().unwrap();
        assert!(
            m.starts_with(&format!("etcd member {name} (")) && m.contains("entries behind the leader's log"),
            "{m}"
        );
        assert!(w["measured"].as_f64().unwrap() > 5000.0, "{w}");
        eprintln!("while it lasts: {m}");

        // Lifted: it catches up; then no lag warning.
        for i in (0..3).filter(|&i| i != slow) {
            let other = lab.host(env.etcd().member(i).name());
            lab.net().set_link(slow_host, other, Impairment::delay(Duration::from_millis(1)));
        }
        let t0 = Instant::now();
        loop {
            let (run, v) = env.preflight_json(&["--no-bandwidth"]);
            let lag = checks(&v, "EtcdMemberLag");
            if lag.len() == 3 && lag.iter().all(|c| c["status"] == "ok") {
                eprintln!("caught up after {:?}: {}", t0.elapsed(), lag[0]["message"]);
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "still behind: {run}");
            std::thread::sleep(Duration::from_secs(1));
        }
    }
);

labtest!(
    /// An etcd endpoint that belongs to another cluster (a second etcd cluster, one member, on a
    /// spare host, with the same CA: an address reused, or a member re-created by a failed
    /// rollback): preflight exits 1 naming the member and the two cluster IDs. Without it, the
    /// members agree.
    etcd_preflight_an_endpoint_of_another_cluster_is_unfit,
    lab(3, 1),
    |env| {
        let (run, v) = env.preflight_json(&["--no-bandwidth"]);
        assert_eq!(run.code, 0, "{run}");
        let ok = checks(&v, "EtcdMemberAgreement");
        assert_eq!(ok.len(), 1, "{run}");
        assert_eq!(ok[0]["status"], "ok", "{}", ok[0]);

        let spare = env.lab().hosts().last().unwrap().clone();
        let other = EtcdCluster::start(
            env.lab(),
            &[&spare],
            &netlab::etcd::EtcdSpec {
                pki: Some(env.etcd().pki().clone()),
                ..Default::default()
            },
        )
        .expect("a second cluster");
        other.wait_healthy(Duration::from_secs(30)).expect("healthy");
        let mut eps = env.etcd().client_endpoints();
        eps.push(other.client_endpoints()[0].clone());
        let mut args = env.tls_args();
        args[1] = eps.join(",");
        let mut full = vec!["preflight".to_string()];
        full.extend(args);
        full.extend(["-o", "json", "--no-bandwidth"].map(String::from));
        let run = env.run(full);
        assert_eq!(run.code, 1, "{run}");
        let v = run.json();
        let c = checks(&v, "EtcdMemberAgreement");
        assert_eq!(c.len(), 1, "{run}");
        assert_eq!(c[0]["status"], "error", "{}", c[0]);
        let m = c[0]["message"].as_str().unwrap();
        let stray = other.client_endpoints()[0].trim_start_matches("https://").to_string();
        // The stray member is in the second group (the smaller one), by its endpoint (named or
        // not: the names come from whichever member list answered first).
        let minority = m.split("; ").nth(1).unwrap_or("");
        assert!(
            m.starts_with("the etcd endpoints answer for more than one cluster:")
                && minority.contains(&stray),
            "{m}"
        );
        eprintln!("EtcdMemberAgreement: {m}");
        // What a join's client does with the same list: the real etcdctl (a new process each
        // time, as kubeadm's client is new each join) over every endpoint given. Which cluster
        // answers depends on which connection its balancer has ready first: measured, 7 and 1
        // of 8 calls in one run, 40 of 40 from one cluster in another. Printed, not asserted:
        // the finding does not rest on it, and neither can the operator.
        let mut ids = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..16 {
            let out = env
                .etcd()
                .etcdctl_to(env.joiner(), &eps)
                .args(["member", "list", "-w", "json"])
                .output()
                .expect("etcdctl");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
            *ids.entry(v["header"]["cluster_id"].to_string()).or_default() += 1;
        }
        eprintln!("etcdctl member list over the same endpoints, answers per cluster ID: {ids:?}");
    }
);
