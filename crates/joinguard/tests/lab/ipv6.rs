//! IPv6-only control planes end to end: the lab's hosts have only fd00:198:18::/64 addresses,
//! etcd listens and advertises on IPv6 (kubeadm's layout for an IPv6 advertise address: the
//! member's address and ::1), the API stand-in serves on IPv6, and `joinguard preflight` runs
//! from the join line as an operator would, with the same verdict as over IPv4.

use std::time::Duration;

use netlab::harness::{EnvBuilder, LabEnv, Layout, Run, CERT_KEY, TOKEN};
use netlab::{labtest, Impairment, IpFamily};
use serde_json::Value;

/// api, joiner, m1..m3 on IPv6 only, etcd on the etcd pods (kubeadm >= 1.22), kubeadm-certs
/// uploaded; `one_way` each way between the joiner and every member.
fn lab6(one_way: Duration) -> EnvBuilder {
    crate::lab()
        .ip_family(IpFamily::V6)
        .members(3)
        .layout(Layout::EtcdPods)
        .upload_certs()
        .joiner_delay(one_way)
}

/// `joinguard preflight <api> --token .. --discovery-token-ca-cert-hash .. --control-plane
/// --certificate-key ..`, from the joiner, with `extra` flags.
fn join_line(env: &LabEnv, extra: &[&str]) -> Run {
    join_line_to(env, &env.api().addr().to_string(), extra)
}

/// [`join_line`] to the API endpoint `api` (a name, in the dual-stack tests).
fn join_line_to(env: &LabEnv, api: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "preflight",
        api,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &env.fixture().ca_pin,
        "--control-plane",
        "--certificate-key",
        CERT_KEY,
    ];
    args.extend_from_slice(extra);
    env.run(args)
}

/// [`join_line`] with `-o json`.
fn preflight_join_line(env: &LabEnv) -> (Run, Value) {
    let run = join_line(env, &["-o", "json"]);
    let v = run.json();
    (run, v)
}

fn measurement<'a>(v: &'a Value, target: &str, probe: &str) -> Option<&'a Value> {
    v["measurements"]
        .as_array()?
        .iter()
        .find(|m| m["target"] == target && m["probe"] == probe)
}

labtest!(
    etcd_preflight_over_ipv6_is_fit_on_a_clean_path_and_names_a_slow_peer,
    lab6(Duration::from_millis(20)),
    |env| {
        let members: Vec<_> = env
            .etcd()
            .members()
            .iter()
            .map(|m| m.host().clone())
            .collect();
        for m in &members {
            assert!(m.addr6().is_some() && m.ip().is_ipv6(), "{m:?}");
        }
        // The wire's truth from iputils ping over IPv6, right before the run.
        let truth: Vec<f64> = members
            .iter()
            .map(|m| {
                netlab::measure::ping(env.joiner(), m, 20, Duration::from_millis(5))
                    .unwrap()
                    .median_ms
            })
            .collect();
        let (run, v) = preflight_join_line(&env);
        crate::schema::assert_valid("preflight", &run);
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(v["verdict"], "fit", "{run}");
        for (m, truth) in members.iter().zip(truth) {
            assert!((truth - 40.0).abs() < 2.0, "ping's truth {truth} ms");
            let client = format!("[{}]:2379", m.addr6().unwrap());
            let icmp = measurement(&v, &client, "icmp-echo")
                .unwrap_or_else(|| panic!("no icmp-echo row for {client}: {run}"));
            let p50 = icmp["p50Ms"].as_f64().unwrap();
            eprintln!("{client}: icmp-echo p50 {p50:.3} ms, ping {truth:.3} ms");
            assert!(
                (p50 - truth).abs() <= 0.5_f64.max(truth * 0.02),
                "{client}: reported p50 {p50:.3} ms, fabric truth {truth:.3} ms"
            );
            assert_eq!(icmp["lost"], 0, "{icmp}");
            assert!(measurement(&v, &client, "etcd-status").is_some(), "{run}");
            let peer = format!("[{}]:2380", m.addr6().unwrap());
            assert!(measurement(&v, &peer, "etcd-peer-probe").is_some(), "{run}");
        }
        assert!(
            !run.stdout.contains("198.18.") && !run.stderr.contains("198.18."),
            "an IPv4 address in an IPv6-only lab's report: {run}"
        );

        // 300 ms RTT to m2: past 1/4 of the 1 s election timeout, as over IPv4.
        let m2 = env.lab().host("m2");
        env.lab().net().set_link(
            env.joiner(),
            m2,
            Impairment::delay(Duration::from_millis(150)),
        );
        let (run, v) = preflight_join_line(&env);
        assert_eq!(run.code, 1, "{run}");
        assert_eq!(v["verdict"], "unfit");
        let slow_peer = format!("[{}]:2380", m2.addr6().unwrap());
        let peer_checks: Vec<&Value> = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "EtcdPeerLatency")
            .collect();
        assert_eq!(peer_checks.len(), 3, "{run}");
        for c in peer_checks {
            let want = if c["target"] == slow_peer.as_str() {
                "error"
            } else {
                "ok"
            };
            assert_eq!(c["status"], want, "{c}");
        }
    }
);

labtest!(
    /// IPv6 routers never fragment: a path whose MTU is below the interfaces' either says so with
    /// ICMPv6 Packet Too Big or drops the big packets silently. The silent 1,400-byte blackhole
    /// is unfit (PathMTU names 1,400 and the IPv6 fixes); the same MTU answered with Packet Too
    /// Big is fit with a warning naming it.
    etcd_ipv6_path_mtu_blackhole_is_unfit_and_packet_too_big_warns,
    lab6(Duration::from_millis(1)),
    |env| {
        let m2 = env.lab().host("m2");
        let m2_ip = m2.addr6().unwrap().to_string();
        env.lab().net().set_link(
            env.joiner(),
            m2,
            Impairment::delay(Duration::from_millis(1)).with_mtu(1400, false),
        );
        let run = join_line(&env, &[]);
        assert_eq!(run.code, 1, "{run}");
        let line = run
            .stdout
            .lines()
            .chain(run.stderr.lines())
            .find(|l| l.contains("[ERROR PathMTU]"))
            .unwrap_or_else(|| panic!("no PathMTU error: {run}"));
        assert!(line.contains(&m2_ip), "{line}");
        assert!(
            line.contains("packets above 1400 bytes are dropped without ICMPv6 \"Packet Too Big\""),
            "{line}"
        );
        assert!(line.contains("ICMPv6 type 2"), "{line}");
        assert!(!run.stdout.contains("probed over IPv4 only"), "{run}");

        env.lab().net().set_link(
            env.joiner(),
            m2,
            Impairment::delay(Duration::from_millis(1)).with_mtu(1400, true),
        );
        let run = join_line(&env, &[]);
        assert_eq!(run.code, 0, "{run}");
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains("[WARNING PathMTU]"))
            .unwrap_or_else(|| panic!("no PathMTU warning: {run}"));
        assert!(line.contains("path MTU 1400 bytes"), "{line}");
        assert!(
            line.contains(&format!("{m2_ip} answers larger packets with ICMPv6 \"Packet Too Big\" (MTU 1400)")),
            "{line}"
        );
    }
);

labtest!(
    /// The Cluster API path on IPv6: a JoinConfiguration whose `apiServerEndpoint` is a quoted
    /// bracketed address and whose `advertiseAddress` is the node's IPv6 address is enough for a
    /// control-plane preflight (exit 0, every member probed on IPv6).
    etcd_preflight_from_an_ipv6_join_configuration,
    lab6(Duration::from_millis(1)),
    |env| {
        let path = env.dir().join("kubeadm-join-config-ipv6.yaml");
        std::fs::write(
            &path,
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  \
                 bootstrapToken:\n    apiServerEndpoint: \"{}\"\n    caCertHashes:\n    - {}\n    \
                 token: {TOKEN}\ncontrolPlane:\n  certificateKey: {CERT_KEY}\n  \
                 localAPIEndpoint:\n    advertiseAddress: {}\n    bindPort: 6443\n\
                 nodeRegistration:\n  name: joiner\n",
                env.api().addr(),
                env.fixture().ca_pin,
                env.joiner_ip()
            ),
        )
        .unwrap();
        let run = env.run([
            "preflight".as_ref(),
            "--config".as_ref(),
            path.as_os_str(),
        ]);
        assert_eq!(run.code, 0, "{run}");
        for m in env.etcd().members() {
            let peer = format!("[{}]:2380", m.ip());
            assert!(
                run.stdout.contains(&format!("{peer}  etcd-peer-probe")),
                "{peer}: {run}"
            );
        }
    }
);

labtest!(
    /// A dual-stack lab whose etcd members advertise IPv4 (the node IPs' first family): a
    /// joining node that advertises its IPv6 address would register a member the others must
    /// dial over IPv6, and is unfit (EtcdAddressFamily, exit 1); the same node advertising its
    /// IPv4 address is fit.
    etcd_dual_stack_advertise_address_of_the_other_family_is_unfit,
    lab6(Duration::from_millis(1)).ip_family(IpFamily::Dual),
    |env| {
        let v6 = env.joiner().addr6().expect("dual stack").to_string();
        let v4 = env.joiner().addr().to_string();
        let run = join_line(&env, &["--apiserver-advertise-address", &v6]);
        assert_eq!(run.code, 1, "{run}");
        let line = run
            .stdout
            .lines()
            .chain(run.stderr.lines())
            .find(|l| l.contains("[ERROR EtcdAddressFamily]"))
            .unwrap_or_else(|| panic!("no EtcdAddressFamily error: {run}"));
        assert!(
            line.contains(&format!(
                "this node's advertise address {v6} is IPv6, but the etcd members advertise \
                 IPv4 addresses"
            )) && line.contains(&format!("https://[{v6}]:2380")),
            "{line}"
        );
        let run = join_line(&env, &["--apiserver-advertise-address", &v4]);
        assert_eq!(run.code, 0, "{run}");
        assert!(!run.stdout.contains("EtcdAddressFamily"), "{run}");
    }
);

/// The `APIServerAddressFamily` check of a run, as JSON.
fn family_check(run: &Run) -> Value {
    let v = run.json();
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "APIServerAddressFamily")
        .cloned()
        .unwrap_or_else(|| panic!("no APIServerAddressFamily check: {run}"))
}

labtest!(
    /// A dual-stack API name (`api`, with an A and an AAAA record in every host's /etc/hosts):
    /// with both families answering, no finding; with its AAAA path dark, a warning that names
    /// IPv6 and says Go clients dial IPv4 first (the unique-local address sorts after IPv4 in
    /// RFC 6724) and are not slowed; with its A path dark, a warning that Go clients wait 300 ms
    /// for IPv6 on every connection. The join works every time: exit 0, as a Go client's would.
    etcd_dual_stack_api_name_with_a_dark_family_warns_and_joins,
    lab6(Duration::from_millis(1)).ip_family(IpFamily::Dual),
    |env| {
        let api = env.api().host().clone();
        let (v4, v6) = (api.addr().to_string(), api.addr6().unwrap().to_string());
        let run = join_line_to(&env, "api:6443", &["-o", "json"]);
        assert_eq!(run.code, 0, "{run}");
        crate::schema::assert_valid("preflight", &run);
        let c = family_check(&run);
        assert_eq!(c["status"], "ok", "{c}");
        assert!(
            c["message"].as_str().unwrap().contains(&format!(
                "api has IPv4 {v4} (a Go client such as kubeadm dials it first) and IPv6 {v6}; \
                 both answer"
            )),
            "{c}"
        );

        let dark = Impairment::blackout();
        env.lab()
            .net()
            .set_link_family(env.joiner(), &api, IpFamily::V6, dark.clone());
        let run = join_line_to(&env, "api:6443", &["-o", "json"]);
        assert_eq!(run.code, 0, "{run}");
        let c = family_check(&run);
        assert_eq!(c["status"], "warning", "{c}");
        let m = c["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("IPv6 {v6} does not answer (connects timed out"))
                && m.contains("Go clients dial IPv4 first and are not slowed"),
            "{m}"
        );

        env.lab()
            .net()
            .set_link_family(env.joiner(), &api, IpFamily::V6, Impairment::none());
        env.lab()
            .net()
            .set_link_family(env.joiner(), &api, IpFamily::V4, dark);
        let run = join_line_to(&env, "api:6443", &["-o", "json"]);
        assert_eq!(run.code, 0, "{run}");
        let c = family_check(&run);
        assert_eq!(c["status"], "warning", "{c}");
        let m = c["message"].as_str().unwrap();
        assert!(
            m.contains(&format!(
                "IPv4 {v4} does not answer (connects timed out after 1000 ms), so every new \
                 connection of a Go client waits 300 ms before it tries IPv6 {v6}"
            )),
            "{m}"
        );
    }
);
