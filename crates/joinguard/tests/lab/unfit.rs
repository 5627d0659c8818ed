//! What joinguard calls unfit: every target the run was given is judged, and a join that
//! cannot work is never called fit. Each test is one row of `docs/preflight.md`'s table "what
//! joinguard calls unfit", asserted as an operator sees it: the exit code, the check in error,
//! the target it names and what the message tells them to do.
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::time::Duration;

use netlab::harness::{EnvBuilder, LabEnv, Layout, Run, TOKEN};
use netlab::{labtest, Impairment};

use crate::JOINGUARD;

/// joiner, `members` etcd members and one spare host (nothing listens there).
fn lab(members: usize) -> EnvBuilder {
    crate::lab()
        .members(members)
        .spare_hosts(1)
        .joiner_delay(Duration::from_millis(1))
}

/// The `[ERROR NAME]` line that names `target`, or a panic showing the run.
/// Printed, so that `--nocapture` shows the real lines `docs/preflight.md` quotes.
fn error_line<'a>(run: &'a Run, name: &str, target: &str) -> &'a str {
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(&format!("[ERROR {name}]")) && l.contains(target))
        .unwrap_or_else(|| panic!("no [ERROR {name}] naming {target}:\n{run}"));
    eprintln!("{}\n{line}", run.command);
    line
}

fn assert_not_fit(run: &Run) {
    assert_eq!(run.code, 1, "{run}");
    assert!(!run.stdout.contains("All checks passed"), "{run}");
    assert!(!run.stdout.contains("fit for"), "{run}");
}

/// etcd mTLS flags for the lab's members, plus `extra` endpoints.
fn etcd_args(env: &LabEnv, clients: &[String]) -> Vec<String> {
    let id = env.etcd().client_identity();
    vec![
        "preflight".into(),
        "--etcd-endpoints".into(),
        clients.join(","),
        "--etcd-cacert".into(),
        id.ca.display().to_string(),
        "--etcd-cert".into(),
        id.cert.display().to_string(),
        "--etcd-key".into(),
        id.key.display().to_string(),
    ]
}

labtest!(
    /// `joinguard preflight HOST:6443` with nothing listening there: the host answers pings,
    /// every connect is refused.
    a_closed_api_port_is_unfit,
    lab(1),
    |env| {
        let api = format!("{}:6443", env.host("m2").addr());
        let run = env.run(["preflight", &api]);
        assert_not_fit(&run);
        let line = error_line(&run, "APIServerReachable", &api);
        assert!(line.contains("connection refused"), "{line}");
        assert!(line.contains("kubeadm join would fail at discovery"), "{line}");
    }
);

labtest!(
    /// A dark API host (a blackout: no answer at all) ends within --timeout and is named.
    a_dark_api_host_is_unfit_within_the_timeout,
    lab(1),
    |env| {
        let spare = env.host("m2");
        env.lab()
            .net()
            .set_link(env.joiner(), spare, Impairment::blackout());
        let api = format!("{}:6443", spare.addr());
        let run = env.run(["preflight", &api, "--timeout", "4s"]);
        assert_not_fit(&run);
        eprintln!("margin: --timeout 4s took {:?}, against 5 s", run.took);
        assert!(
            run.took < Duration::from_secs(5),
            "--timeout 4s took {:?}",
            run.took
        );
        let line = error_line(&run, "APIServerReachable", &api);
        assert!(line.contains("nothing came back"), "{line}");
    }
);

labtest!(etcd_a_closed_client_port_is_unfit, lab(3), |env| {
    let spare = format!("{}:2379", env.host("m4").addr());
    let mut clients = env.etcd().client_endpoints();
    clients.push(format!("https://{spare}"));
    let run = env.run(etcd_args(&env, &clients));
    assert_not_fit(&run);
    let line = error_line(&run, "EtcdClientReachable", &spare);
    assert!(line.contains("connection refused"), "{line}");
    assert!(line.contains("member add"), "{line}");
    // The real members are still measured and judged.
    for ep in env.etcd().client_endpoints() {
        let host = ep.trim_start_matches("https://");
        assert!(
            run.stdout.contains(&format!("{host}  etcd-status")),
            "{run}"
        );
    }
});

labtest!(etcd_a_closed_peer_port_is_unfit, lab(3), |env| {
    let spare = format!("{}:2380", env.host("m4").addr());
    let mut args = etcd_args(&env, &env.etcd().client_endpoints());
    args.extend(["--etcd-peer-endpoints".into(), format!("https://{spare}")]);
    let run = env.run(args);
    assert_not_fit(&run);
    let line = error_line(&run, "EtcdPeerReachable", &spare);
    assert!(line.contains("connection refused"), "{line}");
    assert!(line.contains("2380"), "{line}");
});

labtest!(
    /// A client certificate the members do not trust (another CA's): etcd refuses the
    /// handshake, so no member answers and the run is unfit, not a pass on TCP timings.
    etcd_a_refused_client_identity_is_unfit,
    lab(3),
    |env| {
        let other = netlab::pki::TestCa::new("another-etcd-ca").unwrap();
        let cert = other
            .issue(&netlab::pki::CertSpec::client("kube-apiserver-etcd-client", None))
            .unwrap();
        let (crt, key) = cert.write(env.dir(), "foreign-client").unwrap();
        let id = env.etcd().client_identity();
        let clients = env.etcd().client_endpoints();
        let run = env.run([
            "preflight".to_string(),
            "--etcd-endpoints".into(),
            clients.join(","),
            "--etcd-cacert".into(),
            id.ca.display().to_string(),
            "--etcd-cert".into(),
            crt.display().to_string(),
            "--etcd-key".into(),
            key.display().to_string(),
        ]);
        assert_not_fit(&run);
        for ep in &clients {
            let host = ep.trim_start_matches("https://");
            let line = error_line(&run, "EtcdClientReachable", host);
            assert!(line.contains("TLS"), "{line}");
        }
    }
);

/// `--control-plane` with no etcd input and no token: exit 2 before any network call, naming
/// the inputs that would let joinguard check etcd.
#[test]
fn a_control_plane_join_without_etcd_inputs_is_invalid_input() {
    let out = std::process::Command::new(JOINGUARD)
        .args(["preflight", "198.18.0.250:6443", "--control-plane"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for input in [
        "--certificate-key",
        "--cert-dir",
        "--config",
        "--etcd-endpoints",
    ] {
        assert!(stderr.contains(input), "{input}: {stderr}");
    }
    assert!(out.stdout.is_empty(), "nothing judged, nothing printed");
}

labtest!(
    /// With token discovery and no certificate key, kubeadm expects the shared certificates in
    /// the cluster's certificatesDir; joinguard reads the etcd CA there and measures every
    /// member. Without them: exit 2 naming the inputs.
    etcd_a_control_plane_join_reads_the_shared_certificates_from_certificates_dir,
    crate::lab().members(3).layout(Layout::EtcdPods),
    |env| {
        let run = |env: &LabEnv| {
            env.run([
                "preflight",
                &env.api().addr().to_string(),
                "--token",
                TOKEN,
                "--discovery-token-ca-cert-hash",
                &env.fixture().ca_pin,
                "--control-plane",
            ])
        };
        // kubeadm-config says /etc/kubernetes/pki, which this machine does not have.
        let missing = run(&env);
        assert_eq!(missing.code, 2, "{missing}");
        assert!(
            missing.stderr.contains("/etc/kubernetes/pki/etcd/ca.crt")
                && missing.stderr.contains("--certificate-key")
                && missing.stderr.contains("--cert-dir"),
            "{missing}"
        );

        // The shared certificates in place, at the certificatesDir the cluster names.
        let dir = env.dir().join("shared-pki");
        crate::discovery::copy_shared_pki(&env.etcd().member(0).dir.join("pki"), &dir);
        let mut cm = env
            .api()
            .get_object("v1", "ConfigMap", "kube-system", "kubeadm-config")
            .unwrap()
            .expect("kubeadm-config");
        let cc = cm["data"]["ClusterConfiguration"].as_str().unwrap().replace(
            "certificatesDir: /etc/kubernetes/pki",
            &format!("certificatesDir: {}", dir.display()),
        );
        cm["data"]["ClusterConfiguration"] = cc.into();
        env.api().upsert(cm).unwrap();
        let found = run(&env);
        assert_eq!(found.code, 0, "{found}");
        assert!(found.stdout.contains("fit for a control-plane join"), "{found}");
        for ep in env.etcd().client_endpoints() {
            let host = ep.trim_start_matches("https://");
            assert!(found.stdout.contains(&format!("{host}  etcd-status")), "{found}");
            let peer = host.replace(":2379", ":2380");
            assert!(found.stdout.contains(&format!("{peer}  etcd-peer-probe")), "{found}");
        }
    }
);

/// `etcdctl member add` with the real etcdctl, from the joiner; returns the new member's id (hex).
/// etcd refuses a member add ("unhealthy cluster") until every voter has been connected for
/// 5 s (StrictReconfigCheck), so a fresh lab is retried, within a bound.
fn member_add(env: &LabEnv, args: &[&str]) -> String {
    let mut tries = 0;
    let out = loop {
        let mut cmd = env.etcd().etcdctl(env.joiner());
        cmd.arg("member").arg("add").args(args);
        let out = netlab::process::output_within(&mut cmd, Duration::from_secs(30)).unwrap();
        tries += 1;
        let refused = String::from_utf8_lossy(&out.stderr).contains("unhealthy cluster");
        if out.status.success() || !refused || tries == 30 {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "etcdctl member add: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "Member 8e9e05c52164694d added to cluster ..."
    text.split_whitespace()
        .skip_while(|w| *w != "Member")
        .nth(1)
        .unwrap_or_else(|| panic!("no member id in: {text}"))
        .to_string()
}

labtest!(
    /// What a failed join leaves (Cluster API #13221): a member added and never started. It is
    /// named with the quorum arithmetic and the command that removes it; after that command,
    /// the cluster is fit again.
    etcd_an_unstarted_member_is_unfit_until_cleaned_up,
    lab(3),
    |env| {
        let ghost_peer = format!("https://{}:2380", env.host("m4").addr());
        let id = member_add(&env, &["ghost", &format!("--peer-urls={ghost_peer}")]);
        let args = etcd_args(&env, &env.etcd().client_endpoints());
        let run = env.run(&args);
        assert_not_fit(&run);
        let line = error_line(&run, "EtcdUnstartedMember", ghost_peer.trim_start_matches("https://"));
        assert!(line.contains(&id), "{line}");
        assert!(
            line.contains("4 voters, quorum 3, 1 not started: one more failure loses quorum"),
            "{line}"
        );
        assert!(
            line.contains(&format!("joinguard etcd cleanup --member-id {id}")),
            "{line}"
        );

        // The command the message gives, with the same etcd flags.
        let mut cleanup = vec!["etcd".to_string(), "cleanup".into(), "--member-id".into(), id.clone()];
        cleanup.extend(args[1..].iter().cloned());
        let cleaned = env.run(&cleanup);
        assert_eq!(cleaned.code, 0, "{cleaned}");
        let after = env.run(&args);
        assert_eq!(after.code, 0, "{after}");
        assert!(!after.stdout.contains("EtcdUnstartedMember"), "{after}");
    }
);

labtest!(
    /// This node's own leftover registration, as kubeadm would meet it: an unstarted learner
    /// with this node's peer URL is reused by kubeadm (a warning, fit); a started member with
    /// this node's name at another address makes kubeadm list the name twice (unfit); neither
    /// says nothing.
    etcd_this_nodes_leftover_registration_states_what_kubeadm_will_do,
    lab(3),
    |env| {
        let me = env.joiner_addr().to_string();
        let mut args = etcd_args(&env, &env.etcd().client_endpoints());
        args.extend([
            "--control-plane".into(),
            "--apiserver-advertise-address".into(),
            me.clone(),
            "--node-name".into(),
            "cp-new".into(),
        ]);
        let clean = env.run(&args);
        assert_eq!(clean.code, 0, "{clean}");
        assert!(!clean.stdout.contains("EtcdMemberRegistered"), "{clean}");

        // The same name as a running member: kubeadm would add a second "m1".
        let mut same_name = args.clone();
        *same_name.last_mut().unwrap() = env.etcd().member(0).name.clone();
        let run = env.run(&same_name);
        assert_not_fit(&run);
        let line = error_line(&run, "EtcdMemberRegistered", &env.etcd().member(0).peer_url.replace("https://", ""));
        assert!(line.contains("twice"), "{line}");

        // An unstarted learner holding this node's peer URL: kubeadm reuses it.
        let mine = format!("https://{me}:2380");
        let id = member_add(&env, &["--learner", "leftover", &format!("--peer-urls={mine}")]);
        let run = env.run(&args);
        assert_eq!(run.code, 0, "{run}");
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains("[WARNING EtcdMemberRegistered]"))
            .unwrap_or_else(|| panic!("{run}"));
        assert!(line.contains(&id) && line.contains("reuses it"), "{line}");
        assert!(!run.stdout.contains("EtcdUnstartedMember"), "{run}");
    }
);

labtest!(
    /// The report's first line comes at once, before anything the run prints on stderr (the
    /// note that the lossy path is being traced), as kubeadm's `[preflight] Running pre-flight checks` does:
    /// read here from one stream that holds both, as a terminal shows them. With `-o json`,
    /// stdout stays the JSON document alone.
    the_running_line_comes_before_the_runs_own_notes,
    lab(1),
    |env| {
        use std::io::Read;
        // A lossy path to the API host: PacketLoss fails, and its path is traced.
        let m2 = env.host("m2");
        env.lab()
            .net()
            .set_link(env.joiner(), m2, Impairment::none().with_loss(0.3));
        let api = format!("{}:6443", m2.addr());
        let (mut reader, writer) = std::io::pipe().expect("pipe");
        let mut cmd = env.command(["preflight", &api, "--timeout", "10s"]);
        cmd.stdout(writer.try_clone().expect("pipe"))
            .stderr(writer)
            .stdin(std::process::Stdio::null());
        let mut child = cmd.spawn().expect("spawn");
        drop(cmd);
        let mut both = String::new();
        reader.read_to_string(&mut both).expect("read");
        let status = child.wait().expect("wait");
        eprintln!("{both}");
        assert_eq!(status.code(), Some(1), "{both}");
        let lines: Vec<&str> = both.lines().collect();
        assert_eq!(
            lines.first().copied(),
            Some("[preflight] Running joinguard pre-flight checks for a worker join"),
            "{both}"
        );
        let tracing = lines
            .iter()
            .position(|l| l.starts_with("[preflight] Tracing the path to"))
            .unwrap_or_else(|| panic!("the failing API port is traced:\n{both}"));
        assert!(tracing > 0);
        assert_eq!(
            both.matches("[preflight] Running joinguard").count(),
            1,
            "the line once, not again with the report:\n{both}"
        );

        let json = env.run(["preflight", &api, "--timeout", "10s", "-o", "json"]);
        assert_eq!(json.code, 1, "{json}");
        let doc: serde_json::Value = serde_json::from_str(&json.stdout)
            .unwrap_or_else(|e| panic!("stdout is the JSON document alone ({e}):\n{json}"));
        assert_eq!(doc["verdict"], "unfit", "{json}");
        assert!(!json.stdout.contains("[preflight]"), "{json}");
    }
);

labtest!(
    /// On a terminal (a pty from `script`, as an ssh session has one) preflight draws its
    /// measurement as a one-line bar on stderr (probe streams finished of those started) and
    /// clears it before the report; stdout, redirected to a file, holds the report alone with no
    /// terminal control bytes, and with `-o json` the JSON document alone.
    preflight_draws_progress_on_a_terminal_and_never_on_stdout,
    lab(1),
    |env| {
        // A clean path to a closed API port: unfit at once (APIServerReachable); the bar is drawn
        // from the first stream on, however short the run.
        let api = format!("{}:6443", env.host("m2").addr());
        let dir = tempfile::tempdir().expect("temp dir");
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let on_a_terminal = |extra: &[&str]| -> (String, String) {
            let out = dir.path().join("stdout");
            let mut args = vec![JOINGUARD, "preflight", api.as_str(), "--timeout", "10s"];
            args.extend_from_slice(extra);
            let line: Vec<String> = args.iter().map(|a| quote(a)).collect();
            let shell = format!(
                "TERM=xterm {} >{}",
                line.join(" "),
                quote(&out.to_string_lossy())
            );
            let mut cmd = env.joiner().command("script");
            cmd.args(["-qec", &shell, "/dev/null"]);
            let r = netlab::harness::run(&mut cmd, Duration::from_secs(60));
            let stdout = std::fs::read_to_string(&out).expect("preflight's stdout");
            eprintln!("terminal: {:?}\nstdout: {stdout}", r.stdout);
            assert_eq!(r.code, 1, "unfit: {r}");
            (r.stdout, stdout)
        };
        let (terminal, stdout) = on_a_terminal(&[]);
        assert!(terminal.contains("[preflight] ["), "{terminal:?}");
        assert!(terminal.contains("probe streams finished"), "{terminal:?}");
        assert!(terminal.contains('\u{1b}'), "drawn in place: {terminal:?}");
        assert!(
            stdout.starts_with("[preflight] Running joinguard pre-flight checks"),
            "{stdout}"
        );
        assert!(stdout.contains("[ERROR APIServerReachable]"), "{stdout}");
        assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
        assert!(!stdout.contains("probe streams"), "{stdout}");

        let (terminal, stdout) = on_a_terminal(&["-o", "json"]);
        assert!(terminal.contains("probe streams finished"), "{terminal:?}");
        let doc: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is the JSON document alone ({e}):\n{stdout:?}"));
        assert_eq!(doc["verdict"], "unfit", "{stdout}");
    }
);
