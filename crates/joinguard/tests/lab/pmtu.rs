//! `PathMTU` (issue 27): a path that carries every small probe and drops full-size packets.
//! netlab's forwarder drops packets above a link's `mtu`, silently (a PMTU blackhole, as behind
//! a firewall that eats ICMP) or answering "fragmentation needed" as a router does.
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use netlab::harness::{EnvBuilder, LabEnv, Run};
use netlab::process::output_within;
use netlab::{labtest, Impairment};

/// joiner and 3 members, 1 ms each way from the joiner.
fn lab() -> EnvBuilder {
    crate::lab()
        .members(3)
        .joiner_delay(Duration::from_millis(1))
}

fn preflight(env: &LabEnv) -> Run {
    let mut args = vec!["preflight".to_string()];
    args.extend(env.etcd().joinguard_args());
    let run = env.run(args);
    eprintln!("{run}");
    run
}

/// The `[LEVEL PathMTU]` line naming `host`.
fn pmtu_line<'a>(run: &'a Run, level: &str, host: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|l| l.contains(&format!("[{level} PathMTU]")) && l.contains(host))
        .unwrap_or_else(|| panic!("no [{level} PathMTU] naming {host}:\n{run}"))
}

/// The MTU a PathMTU line reports after `marker` ("packets above " or "path MTU ").
fn mtu_after(line: &str, marker: &str) -> u32 {
    let rest = &line[line
        .find(marker)
        .unwrap_or_else(|| panic!("{marker}: {line}"))
        + marker.len()..];
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// Puts a 1 MiB value through m1 (whose paths are clean), then reads it from the joiner
/// through m2 only: the answer must cross the joiner <-> m2 link in full-size segments.
fn large_value_crosses_to_the_joiner(env: &LabEnv) -> Result<usize, String> {
    let m1 = env.host("m1");
    let mut put = env.etcd().etcdctl(m1);
    put.args(["put", "/joinguard-test/large", "--command-timeout=10s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = put.spawn().expect("etcdctl put");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&vec![b'x'; 1 << 20])
        .expect("value");
    let out = child.wait_with_output().expect("etcdctl put");
    assert!(
        out.status.success(),
        "put through m1: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m2 = format!("https://{}:2379", env.host("m2").addr());
    let out = output_within(
        env.etcd().etcdctl_to(env.joiner(), &[m2]).args([
            "get",
            "/joinguard-test/large",
            "--print-value-only",
            "--command-timeout=8s",
        ]),
        Duration::from_secs(15),
    )
    .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(out.stdout.len())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

labtest!(
    /// Packets above 1400 bytes vanish between the joiner and m2, and nothing says so. Ping
    /// passes; preflight fails with PathMTU naming m2 and 1400 bytes; a large read does not cross.
    etcd_a_silent_mtu_blackhole_is_unfit,
    lab(),
    |env| {
        let m2 = env.host("m2").clone();
        env.lab().net().set_link(
            env.joiner(),
            &m2,
            Impairment::delay(Duration::from_millis(1)).with_mtu(1400, false),
        );
        let ping = output_within(
            env.joiner()
                .command("ping")
                .args(["-c", "3", "-i", "0.2", "-W", "1", &m2.addr().to_string()]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(ping.status.success(), "small pings cross: {ping:?}");

        let run = preflight(&env);
        assert_eq!(run.code, 1, "{run}");
        let host = m2.addr().to_string();
        let line = pmtu_line(&run, "ERROR", &host);
        let mtu = mtu_after(line, "packets above ");
        assert!((1380..=1400).contains(&mtu), "MTU {mtu}: {line}");
        assert!(line.contains("blackhole"), "{line}");
        assert!(line.contains("clamp"), "{line}");
        // A TLS handshake to m2 that timed out (etcd 3.4's certificates need full-size
        // segments) is blamed on the blackhole, not on the CA.
        for l in run.stdout.lines().filter(|l| {
            l.contains("[ERROR") && !l.contains("PathMTU]") && l.contains(&host) && l.contains("timed out")
        }) {
            assert!(l.contains("see PathMTU"), "{l}");
        }
        // The other members' paths are clean.
        for m in ["m1", "m3"] {
            let other = env.host(m).addr().to_string();
            assert!(
                !run.stdout
                    .lines()
                    .any(|l| l.contains("PathMTU]") && l.contains(&other)),
                "{run}"
            );
        }
        let crossed = large_value_crosses_to_the_joiner(&env);
        assert!(crossed.is_err(), "a 1 MiB read crossed the blackhole: {crossed:?}");
    }
);

labtest!(
    /// The same 1400-byte link answering "fragmentation needed": the kernel lowers its segment
    /// size, the join's large transfers cross, and preflight warns with the MTU (exit 0).
    etcd_a_reported_smaller_mtu_warns_and_large_values_cross,
    lab(),
    |env| {
        let m2 = env.host("m2").clone();
        env.lab().net().set_link(
            env.joiner(),
            &m2,
            Impairment::delay(Duration::from_millis(1)).with_mtu(1400, true),
        );
        let run = preflight(&env);
        assert_eq!(run.code, 0, "{run}");
        let line = pmtu_line(&run, "WARNING", &m2.addr().to_string());
        let mtu = mtu_after(line, "path MTU ");
        assert!((1380..=1400).contains(&mtu), "MTU {mtu}: {line}");
        assert!(line.contains("fragmentation needed"), "{line}");
        let crossed = large_value_crosses_to_the_joiner(&env).expect("a 1 MiB read crosses");
        assert!(crossed > 1 << 20, "read {crossed} bytes");
    }
);

labtest!(
    /// A clean path: no PathMTU line in the report.
    etcd_a_clean_path_has_no_path_mtu_finding,
    lab(),
    |env| {
        let run = preflight(&env);
        assert_eq!(run.code, 0, "{run}");
        assert!(!run.stdout.contains("PathMTU"), "{run}");
        assert!(run.stdout.contains("All checks passed"), "{run}");
    }
);

labtest!(
    /// The blackhole of the first test behind a gateway that clamps the TCP MSS to 1360 (the
    /// usual fix, iptables TCPMSS): a 1500-byte echo still vanishes, but every TCP connection
    /// fits the path. PathMTU warns and names the clamp instead of failing the join (exit 0),
    /// and a 1 MiB read crosses.
    etcd_a_blackhole_behind_an_mss_clamp_warns_and_large_values_cross,
    lab(),
    |env| {
        let m2 = env.host("m2").clone();
        env.lab().net().set_link(
            env.joiner(),
            &m2,
            Impairment::delay(Duration::from_millis(1))
                .with_mtu(1400, false)
                .with_mss(1360),
        );
        let run = preflight(&env);
        assert_eq!(run.code, 0, "{run}");
        let line = pmtu_line(&run, "WARNING", &m2.addr().to_string());
        let mtu = mtu_after(line, "ICMP echoes above ");
        assert!((1380..=1400).contains(&mtu), "MTU {mtu}: {line}");
        assert!(line.contains("clamps the TCP MSS"), "{line}");
        let crossed = large_value_crosses_to_the_joiner(&env).expect("a 1 MiB read crosses");
        assert!(crossed > 1 << 20, "read {crossed} bytes");
    }
);

labtest!(
    /// Jitter is not a blackhole. Sweep 4 saw a 50 ms path with 30 ms of jitter each way called
    /// a PMTU blackhole in one run of three: replies held back past a round's window counted as
    /// lost, and a later round ignored them. Now a late reply counts in any round, and a size is
    /// lost only after a second of waiting. Three preflights, nine hosts probed: no PathMTU
    /// finding.
    jitter_is_not_a_path_mtu_blackhole,
    crate::lab().members(3),
    |env| {
        for m in ["m1", "m2", "m3"] {
            let m = env.host(m).clone();
            env.lab().net().set_link(
                env.joiner(),
                &m,
                Impairment::delay(Duration::from_millis(25)).with_jitter(Duration::from_millis(30)),
            );
        }
        for _ in 0..3 {
            let run = preflight(&env);
            assert!(!run.stdout.contains("PathMTU"), "{run}");
        }
    }
);
