//! The monitor's `/probe` driven by a real Prometheus (Debian's `prometheus`, installed by
//! scripts/setup), configured as operators configure blackbox_exporter: the targets in a static
//! config, relabelled into `__param_target`, the scrape sent to the monitor. Two Prometheus
//! servers shard the targets with `hashmod`, as a Prometheus Operator's shards do. Everything on
//! loopback: 100 TCP listeners in this process, the monitor and the two servers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");
const TARGETS: usize = 100;

/// A child process killed when the test ends, however it ends.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET path` on `addr`: (status, body), `None` when nothing answers yet.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    Some((
        head.split_whitespace().nth(1)?.parse().ok()?,
        body.to_string(),
    ))
}

/// One Prometheus server keeping the targets whose hash modulo 2 is `shard`.
fn prometheus(
    dir: &std::path::Path,
    shard: u32,
    targets: &[String],
    monitor: SocketAddr,
) -> (Kill, SocketAddr) {
    let listen = free_addr();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
         scrape_configs:\n\
         - job_name: joinguard-probe\n  metrics_path: /probe\n  params:\n    module: [tcp_connect]\n\
         \x20 static_configs:\n  - targets: [{}]\n\
         \x20 relabel_configs:\n\
         \x20 - {{source_labels: [__address__], modulus: 2, target_label: __tmp_shard, action: hashmod}}\n\
         \x20 - {{source_labels: [__tmp_shard], regex: '{shard}', action: keep}}\n\
         \x20 - {{source_labels: [__address__], target_label: __param_target}}\n\
         \x20 - {{source_labels: [__param_target], target_label: instance}}\n\
         \x20 - {{target_label: __address__, replacement: '{monitor}'}}\n",
        targets.join(", ")
    );
    let file = dir.join(format!("prometheus-{shard}.yml"));
    std::fs::write(&file, config).unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join(format!("data-{shard}")).display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus (Debian's prometheus package; scripts/setup installs it)");
    (Kill(child), listen)
}

/// `probe_success` per instance, as one server has it now.
fn probe_success(server: SocketAddr) -> Vec<(String, String)> {
    let Some((200, body)) = get(server, "/api/v1/query?query=probe_success") else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    (
                        r["metric"]["instance"].as_str().unwrap_or("").to_string(),
                        r["value"][1].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn two_prometheus_shards_probe_every_target_once_through_the_monitor() {
    // The targets: listeners that accept and close.
    let mut targets = Vec::new();
    for _ in 0..TARGETS {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        targets.push(l.local_addr().unwrap().to_string());
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                drop(s);
            }
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let monitor = free_addr();
    let cfg = dir.path().join("monitor.yaml");
    std::fs::write(
        &cfg,
        format!(
            "interval: 1s\nprobeEndpoint: true\ntargets:\n  - {{name: first, kind: api-server, \
             endpoint: {}}}\n",
            targets[0]
        ),
    )
    .unwrap();
    let _monitor = Kill(
        Command::new(JOINGUARD)
            .args(["monitor", "--config"])
            .arg(&cfg)
            .args(["--listen", &monitor.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while get(monitor, "/healthz").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the monitor did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // What Prometheus sends, by hand first: one target, then a closed port, then a bad module.
    let (code, body) = get(
        monitor,
        &format!("/probe?module=tcp_connect&target={}", targets[1]),
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\nprobe_success 1\n"), "{body}");
    let closed = free_addr();
    let (_, body) = get(monitor, &format!("/probe?target={closed}")).unwrap();
    assert!(body.contains("\nprobe_success 0\n"), "{body}");
    assert!(
        body.contains("joinguard_probe_failed{reason=\"refused\"} 1"),
        "{body}"
    );
    let (code, body) = get(monitor, "/probe?target=127.0.0.1:1&module=http_2xx").unwrap();
    assert_eq!(code, 400, "{body}");

    let (_p0, s0) = prometheus(dir.path(), 0, &targets, monitor);
    let (_p1, s1) = prometheus(dir.path(), 1, &targets, monitor);
    let t0 = Instant::now();
    let (a, b) = loop {
        let (a, b) = (probe_success(s0), probe_success(s1));
        if a.len() + b.len() >= TARGETS {
            break (a, b);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "after 60 s the shards hold {} and {} of {TARGETS} targets",
            a.len(),
            b.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    eprintln!(
        "shard 0 probes {} targets, shard 1 {}; {:.1}s after the servers started",
        a.len(),
        b.len(),
        t0.elapsed().as_secs_f64()
    );
    let mut all: Vec<&String> = a.iter().chain(&b).map(|(i, _)| i).collect();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        TARGETS,
        "every target exactly once across the shards"
    );
    assert_eq!(a.len() + b.len(), TARGETS, "no target in both shards");
    assert!(!a.is_empty() && !b.is_empty(), "both shards have targets");
    let mut want: Vec<&String> = targets.iter().collect();
    want.sort();
    assert_eq!(all, want, "the instances are the targets");
    let failed: Vec<&(String, String)> = a.iter().chain(&b).filter(|(_, v)| v != "1").collect();
    assert!(failed.is_empty(), "every listener answers: {failed:?}");
}
