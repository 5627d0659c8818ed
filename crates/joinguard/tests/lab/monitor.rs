//! `joinguard monitor` end to end: the real binary, run inside a netlab host against a real
//! 3-member etcd cluster with mTLS, scraped over HTTP like Prometheus would. The tests assert what
//! an operator sees: series on /metrics, /readyz's status and body, exit codes and messages, and
//! that the deployment manifests pass kubectl and a schema validator.
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netlab::harness::{serial, LabEnv};
use netlab::{Host, Impairment};
use serde_json::Value;

use crate::JOINGUARD;

const PORT: u16 = 9810;
/// The probe interval of the lab tests.
const INTERVAL: Duration = Duration::from_secs(1);

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// An HTTP/1.0 GET from inside `host`: (status, body).
fn get(host: &Host, addr: SocketAddr, path: &str, accept: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n");
    host.run(move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status");
        (status, body.to_string())
    })
    .expect("run in host")
}

/// The value of the sample `name{labels...}` (every given label must match), if present.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            return None;
        }
        let (lab, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ")?,
            None => ("", rest.trim_start()),
        };
        labels
            .iter()
            .all(|(k, v)| lab.contains(&format!("{k}=\"{v}\"")))
            .then(|| value.trim().parse::<f64>().ok())?
    })
}

struct Fixture {
    monitor: Option<netlab::HostProcess>,
    env: LabEnv,
    dir: tempfile::TempDir,
}

impl Fixture {
    /// `mon` + m1..m3 (etcd) + m4 (spare, for a member added later); 1 ms each way between the
    /// monitor and every member.
    fn new() -> Fixture {
        Fixture::build(crate::lab())
    }

    /// As [`Fixture::new`], with the API server stand-in (token discovery, the etcd pods).
    fn with_api() -> Fixture {
        Fixture::build(crate::lab().layout(netlab::harness::Layout::EtcdPods))
    }

    fn build(lab: netlab::harness::EnvBuilder) -> Fixture {
        let env = lab
            .name("etcd_monitor_follows_impairment_members_and_readiness")
            .joiner("mon")
            .members(3)
            .spare_hosts(1)
            .joiner_delay(Duration::from_millis(1))
            .build()
            .expect("lab environment");
        // The spare m4 is delayed like the members: it becomes one (a learner) mid-test.
        let lab = env.lab();
        lab.net().set_link(
            lab.host("mon"),
            lab.host("m4"),
            Impairment::delay(Duration::from_millis(1)),
        );
        Fixture {
            monitor: None,
            env,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn mon(&self) -> &Host {
        self.env.lab().host("mon")
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.mon().ip(), PORT)
    }

    /// Starts the monitor with one seed member: the others must come from MemberList.
    fn start_monitor(&mut self) {
        let id = self.env.etcd().client_identity();
        let config = format!(
            "interval: 1s\njitter: 0.1\nprobeTimeout: 1s\nwindow: 5\nmemberListInterval: 1s\n\
             cluster:\n  etcdEndpoints: [{}]\n  etcdCacert: {}\n  etcdCert: {}\n  etcdKey: {}\n",
            self.env.etcd().member(0).client_url(),
            id.ca.display(),
            id.cert.display(),
            id.key.display()
        );
        self.start_monitor_with(&config);
    }

    /// Starts the monitor with `config` as its monitor.yaml.
    fn start_monitor_with(&mut self, config: &str) {
        self.start_monitor_env(config, &[]);
    }

    /// Starts the monitor with `config` as its monitor.yaml and `env` in its environment.
    fn start_monitor_env(&mut self, config: &str, env: &[(&str, &str)]) {
        let path = self.dir.path().join("monitor.yaml");
        std::fs::write(&path, config).unwrap();
        let log = std::fs::File::create(self.dir.path().join("monitor.log")).unwrap();
        let mut cmd = self.mon().command(JOINGUARD);
        cmd.envs(env.iter().copied());
        cmd.args(["-v", "monitor", "--config"])
            .arg(&path)
            .args(["--listen", &self.addr().to_string()])
            .stdout(Stdio::null())
            .stderr(log);
        self.monitor = Some(self.mon().spawn(cmd, "joinguard monitor").expect("spawn"));
        // Serving starts once the cluster section is resolved.
        let (addr, t0) = (self.addr(), Instant::now());
        while !self
            .mon()
            .run(move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())
            .unwrap()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "monitor not listening on {addr}\n--- monitor log\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("monitor.log")).unwrap_or_default()
    }

    fn metrics(&self) -> String {
        let (status, body) = get(self.mon(), self.addr(), "/metrics", "text/plain");
        assert_eq!(status, 200, "{body}");
        body
    }

    fn readyz(&self) -> (u16, String) {
        get(self.mon(), self.addr(), "/readyz", "*/*")
    }

    /// Polls /metrics every 100 ms until `cond` holds, up to `within`; returns the time it took.
    fn wait_metrics(&self, what: &str, within: Duration, cond: impl Fn(&str) -> bool) -> Duration {
        let t0 = Instant::now();
        loop {
            let m = self.metrics();
            if cond(&m) {
                return t0.elapsed();
            }
            if t0.elapsed() > within {
                let lines: Vec<&str> = m
                    .lines()
                    .filter(|l| {
                        l.starts_with("joinguard_probe_last_rtt")
                            || l.starts_with("joinguard_target_up")
                            || l.starts_with("joinguard_check_status")
                    })
                    .collect();
                panic!(
                    "{what}: not seen within {within:?}\n{}\n--- monitor log\n{}",
                    lines.join("\n"),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (20 s at most) until the client and peer targets of m1..m3 are all up.
    fn wait_all_etcd_targets_up(&self) {
        let names: Vec<String> = (0..3)
            .flat_map(|i| [self.name("etcd-client", i), self.name("etcd-peer", i)])
            .collect();
        self.wait_metrics("all 6 etcd targets up", Duration::from_secs(20), |m| {
            names
                .iter()
                .all(|n| sample(m, "joinguard_target_up", &[("target", n)]) == Some(1.0))
        });
    }

    fn wait_ready(&self, want: u16, contains: &str, within: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let (status, body) = self.readyz();
            if status == want && body.contains(contains) {
                return body;
            }
            assert!(
                t0.elapsed() < within,
                "/readyz: wanted {want} with {contains:?} within {within:?}, last {status}: \
                 {body}\n--- monitor log\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn name(&self, kind: &str, i: usize) -> String {
        let port = if kind == "etcd-peer" { 2380 } else { 2379 };
        format!(
            "{kind}/{}",
            SocketAddr::new(self.env.etcd().member(i).ip(), port)
        )
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // The monitor first, while its targets still exist.
        self.monitor.take();
    }
}

fn python_parse(format: &str, text: &str) -> Value {
    let script = manifest_dir().join("tests/support/parse_metrics.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/setup installs prometheus-client)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Python prometheus-client parser rejected /metrics ({format}): {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The labels of every sample of `family`, as the parser saw them.
fn parsed_labels(v: &Value, family: &str) -> Vec<serde_json::Map<String, Value>> {
    v["families"][family]["samples"]
        .as_array()
        .unwrap_or_else(|| panic!("family {family} missing: {}", v["families"]))
        .iter()
        .map(|s| s[1].as_object().unwrap().clone())
        .collect()
}

#[test]
fn etcd_monitor_follows_impairment_members_and_readiness() {
    let _s = serial();
    let mut fx = Fixture::new();
    fx.start_monitor();
    let peer2 = fx.name("etcd-peer", 1);
    let client2 = fx.name("etcd-client", 1);

    // Every member's client and peer port, from one seed and MemberList, is probed and up.
    fx.wait_all_etcd_targets_up();
    fx.wait_ready(200, "ok", Duration::from_secs(10));
    // PathMTU's first round runs at start: ICMP per host and, with the etcd identity, the TCP
    // side on every peer port; a clean path is ok on both.
    fx.wait_metrics("PathMTU on every member", Duration::from_secs(15), |m| {
        (0..3).all(|i| {
            let peer = fx.name("etcd-peer", i);
            sample(m, "joinguard_path_tcp_mss_bytes", &[("target", &peer)])
                .is_some_and(|v| v > 1000.0)
                && m.lines().any(|l| {
                    l.starts_with("joinguard_check_status{check=\"PathMTU\"")
                        && l.contains(&fx.env.etcd().member(i).addr().to_string())
                        && l.ends_with(" 0")
                })
        })
    });

    // The output parses with the reference parser, in both formats, with the families and
    // labels documented in docs/monitor.md.
    // The checks are judged once per interval: wait for a verdict on every member.
    fx.wait_metrics(
        "EtcdPeerLatency judged for all peers",
        Duration::from_secs(5),
        |m| {
            (0..3).all(|i| {
                let t = fx.name("etcd-peer", i);
                sample(
                    m,
                    "joinguard_check_status",
                    &[("check", "EtcdPeerLatency"), ("target", &t)],
                )
                .is_some()
            })
        },
    );
    let text = fx.metrics();
    // For docs/monitor.md's sample scrape: JOINGUARD_MONITOR_SCRAPE_OUT=/path keeps a copy.
    if let Some(out) = std::env::var_os("JOINGUARD_MONITOR_SCRAPE_OUT") {
        std::fs::write(&out, &text).unwrap();
    }
    let v = python_parse("prometheus", &text);
    for (family, typ) in [
        ("joinguard_probe_rtt_seconds", "histogram"),
        ("joinguard_probe_attempts", "counter"),
        ("joinguard_check_status", "gauge"),
        ("joinguard_target_up", "gauge"),
        ("joinguard_probe_schedule_lag_seconds", "histogram"),
        ("joinguard_retry_attempts", "counter"),
    ] {
        assert_eq!(
            v["families"][family]["type"], typ,
            "{family}: {}",
            v["families"][family]
        );
    }
    let rtt = parsed_labels(&v, "joinguard_probe_rtt_seconds");
    assert!(rtt.iter().any(|l| l["target"] == peer2.as_str()
        && l["probe"] == "etcd-peer-probe"
        && l.contains_key("le")));
    assert!(rtt.iter().all(|l| l
        .keys()
        .all(|k| ["target", "probe", "le"].contains(&k.as_str()))));
    let checks = parsed_labels(&v, "joinguard_check_status");
    assert!(checks
        .iter()
        .any(|l| l["check"] == "EtcdPeerLatency" && l["target"] == peer2.as_str()));
    assert!(checks.iter().any(|l| l["check"] == "EtcdHealth"));
    let retries = parsed_labels(&v, "joinguard_retry_attempts");
    assert!(
        retries
            .iter()
            .any(|l| l["op"] == "etcd MemberList" && l["class"] == "ok"),
        "{retries:?}"
    );
    let (status, om) = get(
        fx.mon(),
        fx.addr(),
        "/metrics",
        "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
    );
    assert_eq!(status, 200);
    assert!(om.ends_with("# EOF\n"));
    let v = python_parse("openmetrics", &om);
    assert_eq!(v["families"]["joinguard_probe_attempts"]["type"], "counter");

    // 150 ms each way to m2 (300 ms RTT, past 1/4 of the 1 s election timeout): its peer and
    // client RTT show it within two intervals.
    fx.env.lab().net().set_link(
        fx.mon(),
        fx.env.lab().host("m2"),
        Impairment::delay(Duration::from_millis(150)),
    );
    let took = fx.wait_metrics("m2's RTT above 80 ms", INTERVAL * 3, |m| {
        [(&peer2, "etcd-peer-probe"), (&client2, "etcd-status")]
            .iter()
            .all(|(t, p)| {
                sample(
                    m,
                    "joinguard_probe_last_rtt_seconds",
                    &[("target", t), ("probe", p)],
                )
                .is_some_and(|v| v >= 0.080)
            })
    });
    eprintln!("impairment seen on /metrics after {took:?}");
    assert!(
        took <= INTERVAL * 2 + Duration::from_millis(300),
        "took {took:?}"
    );
    // Once the window holds the slow samples, EtcdPeerLatency errs and /readyz says so.
    fx.wait_metrics(
        "EtcdPeerLatency error for m2",
        Duration::from_secs(10),
        |m| {
            sample(
                m,
                "joinguard_check_status",
                &[("check", "EtcdPeerLatency"), ("target", &peer2)],
            ) == Some(2.0)
        },
    );
    let body = fx.wait_ready(503, "EtcdPeerLatency", Duration::from_secs(5));
    assert!(body.contains(&peer2), "{body}");
    eprintln!("/readyz while m2 is impaired:\n{body}");

    // Lifted: the RTT recovers within two intervals, the check and /readyz after the window.
    fx.env.lab().net().set_link(
        fx.mon(),
        fx.env.lab().host("m2"),
        Impairment::delay(Duration::from_millis(1)),
    );
    let took = fx.wait_metrics("m2's RTT back below 20 ms", INTERVAL * 3, |m| {
        sample(
            m,
            "joinguard_probe_last_rtt_seconds",
            &[("target", &peer2), ("probe", "etcd-peer-probe")],
        )
        .is_some_and(|v| v < 0.020)
    });
    eprintln!("recovery seen on /metrics after {took:?}");
    assert!(
        took <= INTERVAL * 2 + Duration::from_millis(300),
        "took {took:?}"
    );
    fx.wait_metrics("EtcdPeerLatency ok for m2", Duration::from_secs(12), |m| {
        sample(
            m,
            "joinguard_check_status",
            &[("check", "EtcdPeerLatency"), ("target", &peer2)],
        ) == Some(0.0)
    });
    fx.wait_ready(200, "ok", Duration::from_secs(5));

    // A member added to the cluster (etcdctl member add --learner, then started) is probed
    // without a restart; etcd allows one learner, so EtcdHealth says a join would fail now.
    let m4_host = fx.env.lab().host("m4").clone();
    let m4 = fx
        .env
        .etcd_mut()
        .add_learner(&m4_host)
        .expect("add learner");
    let peer4 = fx.name("etcd-peer", m4);
    let took = fx.wait_metrics(
        "the new member's peer port probed and up",
        Duration::from_secs(15),
        |m| sample(m, "joinguard_target_up", &[("target", &peer4)]) == Some(1.0),
    );
    eprintln!("new member probed after {took:?}");
    let body = fx.wait_ready(503, "learner", Duration::from_secs(10));
    assert!(body.contains("EtcdHealth"), "{body}");

    // A killed member shows as down, on both its ports.
    fx.env.etcd_mut().kill_member(2).expect("kill m3");
    let client3 = fx.name("etcd-client", 2);
    let peer3 = fx.name("etcd-peer", 2);
    fx.wait_metrics("m3 down", INTERVAL * 4, |m| {
        [&client3, &peer3]
            .iter()
            .all(|t| sample(m, "joinguard_target_up", &[("target", t)]) == Some(0.0))
    });
    let m = fx.metrics();
    assert!(
        sample(
            m.as_str(),
            "joinguard_probe_failures_total",
            &[("target", &client3), ("probe", "etcd-status")]
        )
        .is_some_and(|v| v >= 1.0),
        "{m}"
    );
    let body = fx.wait_ready(503, "unreachable", Duration::from_secs(5));
    assert!(body.contains(&client3), "{body}");
    // The others are unaffected.
    assert_eq!(
        sample(&m, "joinguard_target_up", &[("target", &peer2)]),
        Some(1.0)
    );
}

/// PathMTU in the monitor: one host whose link drops packets above 1,400 bytes silently, one
/// whose link answers "fragmentation needed", one clean. Static TCP targets on the members'
/// peer ports (a TLS handshake would stall on the blackholed link: that is the point, but not
/// what this test reads). The first round runs at start.
#[test]
fn etcd_monitor_path_mtu_per_host() {
    path_mtu_per_host(Fixture::new);
}

/// [`etcd_monitor_path_mtu_per_host`] in an IPv6-only lab: ICMPv6 echo sized with
/// IPV6_DONTFRAG, Packet Too Big read as "fragmentation needed", the peer targets bracketed.
#[test]
fn etcd_monitor_path_mtu_per_host_over_ipv6() {
    path_mtu_per_host(|| Fixture::build(crate::lab().ip_family(netlab::IpFamily::V6)));
}

fn path_mtu_per_host(fixture: impl FnOnce() -> Fixture) {
    let _s = serial();
    let mut fx = fixture();
    {
        let lab = fx.env.lab();
        let (mon, m2, m3) = (lab.host("mon"), lab.host("m2"), lab.host("m3"));
        let ms1 = Impairment::delay(Duration::from_millis(1));
        lab.net()
            .set_link(mon, m2, ms1.clone().with_mtu(1400, true));
        lab.net().set_link(mon, m3, ms1.with_mtu(1400, false));
    }
    let peers: Vec<String> = (0..3)
        .map(|i| SocketAddr::new(fx.env.etcd().member(i).ip(), 2380).to_string())
        .collect();
    let config = format!(
        "interval: 1s\nwindow: 5\npathMtuInterval: 10s\ntargets:\n{}",
        peers
            .iter()
            .map(|p| format!("  - {{kind: etcd-peer, endpoint: \"{p}\"}}\n"))
            .collect::<String>()
    );
    fx.start_monitor_with(&config);
    let name = |i: usize| fx.name("etcd-peer", i);
    fx.wait_metrics("a path MTU for all 3 hosts", Duration::from_secs(20), |m| {
        (0..3).all(|i| sample(m, "joinguard_path_mtu_bytes", &[("target", &name(i))]).is_some())
            && (0..3).all(|i| {
                sample(
                    m,
                    "joinguard_check_status",
                    &[("check", "PathMTU"), ("target", &name(i))],
                )
                .is_some()
            })
    });
    let m = fx.metrics();
    let mtu = |i: usize| sample(&m, "joinguard_path_mtu_bytes", &[("target", &name(i))]);
    let status = |i: usize| {
        sample(
            &m,
            "joinguard_check_status",
            &[("check", "PathMTU"), ("target", &name(i))],
        )
    };
    assert_eq!(
        mtu(0),
        Some(1500.0),
        "the clean host carries its interface MTU\n{m}"
    );
    assert_eq!(mtu(1), Some(1400.0), "{m}");
    assert_eq!(mtu(2), Some(1400.0), "{m}");
    assert_eq!(
        (status(0), status(1), status(2)),
        (Some(0.0), Some(1.0), Some(2.0)),
        "ok, warning (fragmentation needed), error (blackhole)\n{m}"
    );
    let body = fx.wait_ready(503, "PathMTU", Duration::from_secs(5));
    assert!(
        body.contains(&name(2)) && body.contains("dropped without") && !body.contains(&name(1)),
        "{body}"
    );
    assert!(
        m.contains("# HELP joinguard_path_mtu_bytes The largest packet"),
        "{m}"
    );
}

#[test]
fn monitor_bad_config_exits_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let out = Command::new(JOINGUARD)
            .args(["monitor", "--config"])
            .arg(&p)
            .args(["--listen", "127.0.0.1:0"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let t = "targets:\n  - kind: api-server\n    endpoint: 127.0.0.1:6443\n";
    let (code, err) = run("typo.yaml", &format!("intervall: 1s\n{t}"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("unknown field `intervall`"), "{err}");
    let (code, err) = run(
        "nested.yaml",
        "cluster:\n  etcdEndpoint: [https://127.0.0.1:2379]\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("etcdEndpoint"), "{err}");
    let (code, err) = run("interval.yaml", &format!("interval: often\n{t}"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("interval") && err.contains("often"), "{err}");
    let (code, err) = run("shard.yaml", &format!("shard: {{replicas: 3}}\n{t}"));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("shard.index") && err.contains("POD_NAME"),
        "{err}"
    );
    let (code, err) = run(
        "etcd.yaml",
        "cluster:\n  etcdEndpoints: [https://127.0.0.1:2379]\n  etcdCert: /nonexistent.crt\n  etcdKey: /nonexistent.key\n  etcdCacert: /nonexistent-ca.crt\n",
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("nonexistent"), "{err}");
    let out = Command::new(JOINGUARD)
        .args(["monitor", "--config", "/nonexistent/monitor.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/monitor.yaml"));
}

/// A static target on loopback: /healthz is 200 at once, and a target that refuses shows as
/// down with `reason="refused"`, while a listening one is up, over the real binary.
#[test]
fn monitor_static_targets_on_loopback() {
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_port = up.local_addr().unwrap().port();
    let down_port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    std::thread::spawn(move || {
        for s in up.incoming().flatten() {
            drop(s);
        }
    });
    // An IPv6 target, written as kubeadm writes it (bracketed).
    let up6 = TcpListener::bind("[::1]:0").unwrap();
    let up6_port = up6.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in up6.incoming().flatten() {
            drop(s);
        }
    });
    let listen = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("monitor.yaml");
    std::fs::write(
        &cfg,
        format!(
            "interval: 200ms\ntargets:\n  - {{name: up, kind: api-server, endpoint: 127.0.0.1:{up_port}}}\n  - {{name: down, kind: api-server, endpoint: 127.0.0.1:{down_port}}}\n  - {{name: up6, kind: api-server, endpoint: '[::1]:{up6_port}'}}\n"
        ),
    )
    .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Kill(
        Command::new(JOINGUARD)
            .args(["monitor", "--config"])
            .arg(&cfg)
            .args(["--listen", &listen.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let fetch = |path: &str| -> Option<(u16, String)> {
        let mut s = TcpStream::connect_timeout(&listen, Duration::from_secs(1)).ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        Some((
            head.split_whitespace().nth(1)?.parse().ok()?,
            body.to_string(),
        ))
    };
    let t0 = Instant::now();
    let metrics = loop {
        if let Some((200, m)) = fetch("/metrics") {
            if sample(&m, "joinguard_target_up", &[("target", "down")]).is_some()
                && sample(&m, "joinguard_target_up", &[("target", "up")]).is_some()
                && sample(&m, "joinguard_target_up", &[("target", "up6")]).is_some()
            {
                break m;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no target_up series"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(fetch("/healthz").map(|r| r.0), Some(200));
    assert_eq!(
        sample(&metrics, "joinguard_target_up", &[("target", "up")]),
        Some(1.0)
    );
    assert_eq!(
        sample(&metrics, "joinguard_target_up", &[("target", "down")]),
        Some(0.0)
    );
    assert_eq!(
        sample(&metrics, "joinguard_target_up", &[("target", "up6")]),
        Some(1.0),
        "{metrics}"
    );
    assert!(sample(
        &metrics,
        "joinguard_probe_failures_total",
        &[
            ("target", "down"),
            ("probe", "tcp-connect"),
            ("reason", "refused")
        ]
    )
    .is_some_and(|v| v >= 1.0));
    assert_eq!(fetch("/nope").map(|r| r.0), Some(404));
}

// The deployment manifests are checked in tests/manifests.rs.

/// A monitor given `certDir` (the CAs and their keys, as a control-plane node has them) mints
/// its etcd client certificate, and renews it before two thirds of its life are over (issue 32).
/// With a 20 s lifetime (the test-only `JOINGUARD_TEST_MINTED_LIFETIME`; renewed 3.3 s after
/// each mint, two thirds into a life that starts 30 s back for clock skew), two renewals come
/// within seconds; past the first certificate's expiry, a restarted member (every connection
/// to it broken) is probed again, which needs a TLS handshake with a valid certificate. Without
/// renewal that handshake fails and m2's probes stay failed.
#[test]
fn monitor_renews_a_minted_identity_and_reconnects_with_it() {
    let _s = serial();
    let mut fx = Fixture::with_api();
    let pki = fx.env.etcd().pki_dir();
    let cert_dir = fx.dir.path().join("pki");
    std::fs::create_dir_all(cert_dir.join("etcd")).unwrap();
    // The CAs and their keys, as a control-plane node has them; no etcd client pair.
    for f in ["ca.crt", "ca.key", "etcd/ca.crt", "etcd/ca.key"] {
        std::fs::copy(pki.join(f), cert_dir.join(f)).unwrap();
    }
    // Token discovery, as a control-plane node's monitor finds the members (the etcd pods) and
    // the cluster CA; the etcd client certificate is minted from certDir's etcd CA.
    let config = format!(
        "interval: 1s\njitter: 0.1\nprobeTimeout: 1s\nwindow: 5\nmemberListInterval: 1s\n\
         cluster:\n  apiServerEndpoint: {}\n  token: {}\n  discoveryTokenCaCertHash: [{}]\n  \
         certDir: {}\n",
        fx.env.api().addr(),
        netlab::harness::TOKEN,
        fx.env.fixture().ca_pin,
        cert_dir.display()
    );
    let started = Instant::now();
    fx.start_monitor_env(&config, &[("JOINGUARD_TEST_MINTED_LIFETIME", "20")]);
    let client2 = fx.name("etcd-client", 1);
    fx.wait_all_etcd_targets_up();
    let expiry = |m: &str| {
        sample(
            m,
            "joinguard_etcd_client_certificate_expiry_timestamp_seconds",
            &[],
        )
        .unwrap_or(0.0)
    };
    let first_expiry = expiry(&fx.metrics());
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (first_expiry - now_unix) > 0.0 && (first_expiry - now_unix) <= 21.0,
        "a 20 s certificate: expires at {first_expiry}, now {now_unix}"
    );
    fx.wait_metrics("two renewals", Duration::from_secs(40), |m| {
        sample(m, "joinguard_etcd_client_certificate_renewals_total", &[]).unwrap_or(0.0) >= 2.0
    });
    assert!(expiry(&fx.metrics()) > first_expiry, "the expiry moved on");
    // Past the first certificate's expiry, break every connection to m2.
    let past = Duration::from_secs(23).saturating_sub(started.elapsed());
    std::thread::sleep(past);
    fx.env.etcd_mut().kill_member(1).expect("kill m2");
    fx.wait_metrics("m2's client probe failed", Duration::from_secs(10), |m| {
        sample(
            m,
            "joinguard_probe_last_rtt_seconds",
            &[("target", &client2), ("probe", "etcd-status")],
        )
        .is_none_or(f64::is_nan)
    });
    fx.env.etcd_mut().restart_member(1).expect("restart m2");
    fx.wait_metrics(
        "m2's client probe answers again",
        Duration::from_secs(20),
        |m| {
            sample(
                m,
                "joinguard_probe_last_rtt_seconds",
                &[("target", &client2), ("probe", "etcd-status")],
            )
            .is_some_and(f64::is_finite)
        },
    );
    let log = fx.log();
    assert!(
        log.matches("renewed the etcd client identity").count() >= 2,
        "{log}"
    );
    assert!(!log.contains("could not renew"), "{log}");
}
