//! `joinguard update-status` end to end: the binary runs in a joiner host against the API server
//! stand-in over a real etcd, through the impairing fabric; results are read back with the real
//! `kubectl`. Needs root.
//!
//! The tests take a process-wide lock so that one lab runs at a time (2 cores).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use netlab::apiserver::fixture::ApiEndpoint;
use netlab::apiserver::{FaultKind, FaultRule, Method};
use netlab::harness::{self, EnvBuilder, LabEnv, Layout, Run, RUN_TIMEOUT, TOKEN};
use netlab::labtest;
use netlab::Impairment;
use serde_json::{json, Value};

use crate::JOINGUARD;

const CM: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";

/// api, joiner, m1..m`members`, with the stand-in and the `kubeadm init` fixture in `layout`. In
/// the ClusterStatus layout the existing control-plane node is `cp-1` at 198.18.0.10, an address
/// no host has: these tests only read it back from the status, never dial it.
fn lab(members: usize, layout: Layout) -> EnvBuilder {
    let mut b = crate::lab().members(members).layout(layout);
    if layout == Layout::ClusterStatus {
        b = b.fixture(|opts| {
            opts.cluster_status = vec![ApiEndpoint {
                node: "cp-1".into(),
                address: "198.18.0.10".parse().unwrap(),
                port: 6443,
            }];
        });
    }
    b
}

/// What these tests do with an environment: `update-status` from the joiner, and the results
/// read back with the real kubectl.
trait StatusLab {
    fn status_command(&self, kubeconfig: &Path, node: &str, extra: &[&str]) -> Command;
    fn update_status(&self, node: &str, extra: &[&str]) -> Run;
    /// Reads an object with the real kubectl in the joiner; panics unless kubectl succeeds.
    fn kubectl_json(&self, args: &[&str]) -> Value;
    /// The ClusterStatus apiEndpoints, as kubectl reads them.
    fn api_endpoints(&self) -> serde_json::Map<String, serde_json::Value>;
}

impl StatusLab for LabEnv {
    fn status_command(&self, kubeconfig: &Path, node: &str, extra: &[&str]) -> Command {
        let mut cmd = self.command(["update-status"]);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--node-name", node])
            .args(["--apiserver-advertise-address", &address_of(node)])
            .args(["--apiserver-bind-port", "6443"])
            .args(extra);
        cmd
    }

    fn update_status(&self, node: &str, extra: &[&str]) -> Run {
        let mut cmd = self.status_command(self.admin_kubeconfig(), node, extra);
        harness::run(&mut cmd, RUN_TIMEOUT)
    }

    fn kubectl_json(&self, args: &[&str]) -> Value {
        let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
        let run = self.kubectl(&args);
        run.assert_exit(0);
        run.json()
    }

    fn api_endpoints(&self) -> serde_json::Map<String, serde_json::Value> {
        let cm = self.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);
        let status: serde_json::Value = joinguard_core::yaml::from_str(
            cm["data"]["ClusterStatus"].as_str().expect("ClusterStatus"),
        )
        .expect("ClusterStatus YAML");
        status["apiEndpoints"]
            .as_object()
            .expect("apiEndpoints map")
            .clone()
    }
}

/// A spawned run's output as a [`Run`], showing `cmd` on failure.
fn run_of(cmd: &Command, out: Output, took: Duration) -> Run {
    Run::of(format!("{cmd:?}"), out, took)
}

/// A distinct test address per node name (never dialled: it is only written into the status).
fn address_of(node: &str) -> String {
    let n: u32 = node.bytes().map(u32::from).sum();
    format!("198.18.1.{}", n % 250 + 1)
}

fn attempts_of<'a>(v: &'a Value, op: &str) -> Vec<&'a Value> {
    v["attempts"]
        .as_array()
        .expect("attempts")
        .iter()
        .filter(|a| a["op"] == op)
        .collect()
}

labtest!(
    update_status_cluster_status_era_writes_once_then_changes_nothing,
    lab(1, Layout::ClusterStatus),
    |env| {
        // kubeadm init wrote the Role; drop the RoleBinding so that one must be created.
        env.kubectl(&[
            "-n",
            "kube-system",
            "delete",
            "rolebinding",
            "kubeadm:nodes-kubeadm-config",
        ])
        .assert_exit(0);
        let before = env.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);

        let run = env.update_status("cp-2", &[]);
        assert_eq!(run.code, 0, "{run}");
        assert!(
            run.stdout
                .contains("changed:   ClusterStatus.apiEndpoints[cp-2]"),
            "{run}"
        );
        assert!(run.stdout.contains("in place:  Role"), "{run}");
        assert!(run.stdout.contains("changed:   RoleBinding"), "{run}");

        let eps = env.api_endpoints();
        assert_eq!(eps.len(), 2, "{eps:?}");
        assert_eq!(eps["cp-1"]["advertiseAddress"], "198.18.0.10");
        assert_eq!(
            eps["cp-2"]["advertiseAddress"],
            serde_json::Value::from(address_of("cp-2"))
        );
        let after = env.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);
        assert_eq!(
            after["data"]["ClusterConfiguration"], before["data"]["ClusterConfiguration"],
            "other keys stay as they were"
        );
        let rb = env.kubectl_json(&[
            "-n",
            "kube-system",
            "get",
            "rolebinding",
            "kubeadm:nodes-kubeadm-config",
        ]);
        let groups: Vec<&str> = rb["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            groups,
            [
                "system:bootstrappers:kubeadm:default-node-token",
                "system:nodes"
            ]
        );

        // Idempotence: the second run writes nothing, says so, and the object is untouched.
        env.api().clear_requests();
        let again = env.update_status("cp-2", &["-o", "json"]);
        assert_eq!(again.code, 0, "{again}");
        let v = again.json();
        crate::schema::assert_valid("update-status", &again);
        let results: Vec<&str> = v["operations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["result"].as_str().unwrap())
            .collect();
        assert_eq!(results, ["unchanged"; 4], "{again}");
        let writes: Vec<_> = env
            .api()
            .requests()
            .into_iter()
            .filter(|r| r.method != Method::GET)
            .collect();
        assert!(writes.is_empty(), "a second run must not write: {writes:?}");
        let last = env.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);
        assert_eq!(
            last["metadata"]["resourceVersion"],
            after["metadata"]["resourceVersion"]
        );
        let text = env.update_status("cp-2", &[]);
        assert!(
            text.stdout
                .contains("nothing to do, everything was already in place"),
            "{text}"
        );
    }
);

labtest!(
    update_status_modern_era_marks_the_node_and_keeps_its_labels_and_taints,
    lab(1, Layout::Modern),
    |env| {
        env.api()
        .upsert(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "cp-2", "labels": {"kubernetes.io/hostname": "cp-2", "team": "infra"}},
            "spec": {"taints": [{"key": "example.com/dedicated", "value": "db", "effect": "NoExecute"}]},
        }))
        .expect("node");
        let run = env.update_status("cp-2", &[]);
        assert_eq!(run.code, 0, "{run}");
        assert!(run.stdout.contains("no ClusterStatus"), "{run}");
        assert!(run.stdout.contains("changed:   Node cp-2"), "{run}");
        let node = env.kubectl_json(&["get", "node", "cp-2"]);
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["node-role.kubernetes.io/control-plane"], "");
        assert_eq!(labels["team"], "infra");
        assert_eq!(labels["kubernetes.io/hostname"], "cp-2");
        let taints = node["spec"]["taints"].as_array().unwrap();
        assert_eq!(taints.len(), 2, "{taints:?}");
        assert!(taints.iter().any(|t| t["key"] == "example.com/dedicated"));
        assert!(taints
            .iter()
            .any(|t| t["key"] == "node-role.kubernetes.io/control-plane"
                && t["effect"] == "NoSchedule"));
        let again = env.update_status("cp-2", &[]);
        assert_eq!(again.code, 0, "{again}");
        assert!(again.stdout.contains("nothing to do"), "{again}");
    }
);

labtest!(
    update_status_rides_out_5s_and_20s_blackouts_of_the_api_link,
    lab(1, Layout::ClusterStatus),
    |env| {
        let (api, joiner) = (env.lab().host("api"), env.joiner());
        for (i, blackout) in [Duration::from_secs(5), Duration::from_secs(20)]
            .into_iter()
            .enumerate()
        {
            let node = format!("cp-{}", i + 2);
            // The first read is held 1 s by the server, so the blackout starts mid-operation.
            env.api().faults().add(
                FaultRule::always(FaultKind::Stall(Duration::from_secs(1)))
                    .method(Method::GET)
                    .path(CM)
                    .times(1),
            );
            let mut cmd = env.status_command(env.admin_kubeconfig(), &node, &["-o", "json"]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            let child = cmd.spawn().expect("spawn joinguard");
            std::thread::sleep(Duration::from_millis(500));
            env.lab()
                .net()
                .set_link(joiner, api, Impairment::blackout());
            std::thread::sleep(blackout);
            env.lab().net().set_link(joiner, api, Impairment::none());
            let restored = Instant::now();
            let out = wait_output(child, Duration::from_secs(60));
            let after_restore = restored.elapsed();
            let run = run_of(&cmd, out, after_restore);
            assert_eq!(run.code, 0, "{blackout:?} blackout: {run}");
            let v = run.json();
            crate::schema::assert_valid("update-status", &run);
            let failed = v["attempts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["class"] == "transient")
                .count();
            assert!(failed >= 1, "the blackout must have cost attempts: {run}");
            // Where the attempts fell (the figure below depends on it more than on load).
            for a in v["attempts"].as_array().unwrap() {
                eprintln!(
                    "  {} #{} {} at {} ms, next in {} ms: {}",
                    a["op"],
                    a["attempt"],
                    a["class"],
                    a["elapsedMs"],
                    a["delayBeforeNextMs"],
                    a["error"]
                );
            }
            assert!(
            after_restore < Duration::from_secs(2),
            "{blackout:?} blackout: completed {after_restore:?} after the link came back: {run}"
        );
            eprintln!(
            "{blackout:?} blackout: done {after_restore:?} after restore, {failed} failed attempts"
        );
            assert!(env.api_endpoints().contains_key(node.as_str()));
        }
    }
);

fn wait_output(mut child: std::process::Child, within: Duration) -> Output {
    let t = Instant::now();
    loop {
        if let Some(_status) = child.try_wait().expect("wait") {
            return child.wait_with_output().expect("output");
        }
        if t.elapsed() > within {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "joinguard still running after {within:?}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

labtest!(
    update_status_retries_leader_changed_and_503_and_waits_out_retry_after,
    lab(1, Layout::ClusterStatus),
    |env| {
        let faults = env.api().faults();
        faults.add(
            FaultRule::always(FaultKind::LeaderChanged)
                .method(Method::PUT)
                .path(CM)
                .times(5),
        );
        faults.add(
            FaultRule::always(FaultKind::Unavailable)
                .method(Method::GET)
                .path("rolebindings")
                .times(5),
        );
        let run = env.update_status("cp-2", &["-o", "json"]);
        assert_eq!(run.code, 0, "{run}");
        let v = run.json();
        crate::schema::assert_valid("update-status", &run);
        let cm = attempts_of(&v, "kube-system/kubeadm-config update");
        let leader = cm
            .iter()
            .filter(|a| a["reason"] == "etcd-leader-changed")
            .count();
        assert_eq!(leader, 5, "{run}");
        let rb = attempts_of(&v, "kube-system/rolebinding kubeadm:nodes-kubeadm-config");
        let unavailable = rb
            .iter()
            .filter(|a| a["reason"] == "service-unavailable")
            .count();
        assert_eq!(unavailable, 5, "{run}");
        assert!(env.api_endpoints().contains_key("cp-2"));

        // 429 with Retry-After: 2: the next attempt is not sooner than 2 s.
        faults.clear();
        faults.add(
            FaultRule::always(FaultKind::TooManyRequests { retry_after_s: 2 })
                .method(Method::PUT)
                .path(CM)
                .times(1),
        );
        env.api().clear_requests();
        let run = env.update_status("cp-3", &["-o", "json"]);
        assert_eq!(run.code, 0, "{run}");
        let puts: Vec<_> = env
            .api()
            .requests()
            .into_iter()
            .filter(|r| r.method == Method::PUT && r.path == CM)
            .collect();
        assert_eq!(puts.len(), 2, "{puts:?}");
        assert_eq!(puts[0].status, Some(429));
        let gap = puts[1].at.duration_since(puts[0].at);
        assert!(
            gap >= Duration::from_secs(2),
            "the retry came {gap:?} after a 429 with Retry-After: 2"
        );
    }
);

labtest!(
    etcd_update_status_completes_when_the_etcd_leader_is_killed,
    lab(3, Layout::ClusterStatus),
    |mut env| {
        // Slow every write a little so that the kill lands mid-operation.
        env.api().faults().add(
            FaultRule::always(FaultKind::Stall(Duration::from_millis(300)))
                .method(Method::GET)
                .path(CM),
        );
        let mut cmd = env.status_command(env.admin_kubeconfig(), "cp-2", &["-o", "json"]);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = cmd.spawn().expect("spawn joinguard");
        std::thread::sleep(Duration::from_millis(200));
        let leader = env.etcd().leader().expect("a leader");
        env.etcd_mut().kill_member(leader).expect("kill the leader");
        let run = run_of(
            &cmd,
            wait_output(child, Duration::from_secs(90)),
            Duration::ZERO,
        );
        assert_eq!(run.code, 0, "{run}");
        assert!(env.api_endpoints().contains_key("cp-2"));
    }
);

labtest!(
    update_status_permanent_errors_fail_at_once_naming_the_call,
    lab(1, Layout::ClusterStatus),
    |env| {
        // A bootstrap token may read kubeadm-config but not update it: 403, never retried.
        let weak = env.lab().dir().join("bootstrap.conf");
        std::fs::write(&weak, env.api().kubeconfig(Some(TOKEN))).unwrap();
        let mut cmd = env.status_command(&weak, "cp-2", &[]);
        let run = harness::run(&mut cmd, RUN_TIMEOUT);
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.stdout.contains("kube-system/kubeadm-config update") && run.stdout.contains("403"),
            "{run}"
        );
        assert!(run.took < Duration::from_secs(3), "{run}");
        let puts = env
            .api()
            .requests()
            .into_iter()
            .filter(|r| r.method == Method::PUT)
            .count();
        assert_eq!(puts, 1, "a 403 is not retried");

        // A kubeconfig whose CA did not sign the server: a trust failure, exit 3, no retries.
        let other = netlab::pki::TestCa::new("another cluster").unwrap();
        let text = env.api().kubeconfig(Some(env.api().admin_token()));
        let theirs = base64_of(env.api().ca_pem());
        let mine = base64_of(other.cert_pem());
        let wrong = env.lab().dir().join("wrong-ca.conf");
        std::fs::write(&wrong, text.replace(&theirs, &mine)).unwrap();
        let mut cmd = env.status_command(&wrong, "cp-2", &[]);
        let run = harness::run(&mut cmd, RUN_TIMEOUT);
        assert_eq!(run.code, 3, "{run}");
        assert!(run.stdout.contains("trust failure"), "{run}");
        assert!(
            !run.stdout.contains(env.api().admin_token()),
            "no secret printed"
        );
        assert!(
            !run.stderr.contains(env.api().admin_token()),
            "no secret printed"
        );
    }
);

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

labtest!(
    update_status_gives_up_within_the_budget_with_a_summary,
    lab(1, Layout::ClusterStatus),
    |env| {
        env.api()
            .faults()
            .add(FaultRule::always(FaultKind::Unavailable).method(Method::PUT));
        let run = env.update_status("cp-2", &["--timeout", "6s"]);
        assert_eq!(run.code, 1, "{run}");
        eprintln!("margin: a 6 s budget took {:?}, against 7 s", run.took);
        assert!(
            run.took < Duration::from_secs(7),
            "6 s budget, took {:?}",
            run.took
        );
        assert!(run.stdout.contains("gave up after"), "{run}");
        assert!(
            run.stdout
                .contains("attempts of `kube-system/kubeadm-config update`"),
            "{run}"
        );
        assert!(run.stdout.contains("503 Service Unavailable"), "{run}");
    }
);

labtest!(
    update_status_20_concurrent_joiners_lose_no_update,
    lab(1, Layout::ClusterStatus),
    |env| {
        let before = env.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);
        let children: Vec<(String, Command, std::process::Child)> = (2..22)
            .map(|i| {
                let node = format!("cp-{i}");
                let mut cmd = env.status_command(env.admin_kubeconfig(), &node, &["-o", "json"]);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                let child = cmd.spawn().expect("spawn");
                (node, cmd, child)
            })
            .collect();
        let mut conflicts = 0;
        // The update's time from its start to its last attempt, against the write budget (40 s):
        // the margin this test has on a loaded machine (docs/testing.md).
        let mut slowest_ms = 0;
        for (node, cmd, child) in children {
            let run = run_of(
                &cmd,
                wait_output(child, Duration::from_secs(90)),
                Duration::ZERO,
            );
            assert_eq!(run.code, 0, "{node}: {run}");
            let v = run.json();
            let attempts = attempts_of(&v, "kube-system/kubeadm-config update");
            conflicts += attempts.iter().filter(|a| a["class"] == "conflict").count();
            slowest_ms = attempts
                .iter()
                .filter_map(|a| a["elapsedMs"].as_u64())
                .fold(slowest_ms, u64::max);
        }
        let eps = env.api_endpoints();
        for i in 1..22 {
            assert!(
                eps.contains_key(&format!("cp-{i}")),
                "cp-{i} missing from {eps:?}"
            );
        }
        assert_eq!(eps.len(), 21);
        let after = env.kubectl_json(&["-n", "kube-system", "get", "configmap", "kubeadm-config"]);
        assert_eq!(
            after["data"]["ClusterConfiguration"],
            before["data"]["ClusterConfiguration"]
        );
        eprintln!(
            "20 concurrent joiners: {conflicts} conflicts resolved by re-reading; margin: the \
             slowest kubeadm-config update took {slowest_ms} ms of its 40000 ms write budget"
        );
    }
);

#[test]
fn update_status_bad_input_exits_2_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.conf");
    let out = Command::new(JOINGUARD)
        .arg("update-status")
        .arg("--kubeconfig")
        .arg(&missing)
        .args(["--node-name", "cp-2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--kubeconfig") && err.contains("nope.conf"),
        "{err}"
    );

    let kc = dir.path().join("k.conf");
    std::fs::write(&kc, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    insecure-skip-tls-verify: true\ncontexts:\n- name: x\n  context:\n    cluster: c\ncurrent-context: x\n").unwrap();
    let out = Command::new(JOINGUARD)
        .args(["update-status", "--node-name", "cp-2", "--kubeconfig"])
        .arg(&kc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("insecure-skip-tls-verify"));

    // A usable kubeconfig from here on, so each case fails on its own flag.
    let ca = netlab::pki::TestCa::new("kubernetes").unwrap();
    std::fs::write(&kc, format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    certificate-authority-data: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n", base64_of(ca.cert_pem()))).unwrap();
    let out = Command::new(JOINGUARD)
        .args(["update-status", "--node-name", "Not_A_Node", "--kubeconfig"])
        .arg(&kc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--node-name \"Not_A_Node\""));

    let join = dir.path().join("join.yaml");
    std::fs::write(
        &join,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
    )
    .unwrap();
    let out = Command::new(JOINGUARD)
        .args(["update-status", "--config"])
        .arg(&join)
        .arg("--kubeconfig")
        .arg(&kc)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("worker join"));

    let out = Command::new(JOINGUARD)
        .args(["update-status", "--config"])
        .arg(&join)
        .args(["--node-name", "cp-2"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--config and --node-name conflict"
    );
}

labtest!(
    update_status_works_with_an_admin_conf_style_client_certificate,
    lab(1, Layout::ClusterStatus),
    |env| {
        // kubeadm's admin.conf: an embedded client certificate for kubernetes-admin, O=system:masters.
        let id = env
            .api()
            .ca()
            .issue(&netlab::pki::CertSpec::client(
                "kubernetes-admin",
                Some("system:masters"),
            ))
            .expect("client certificate");
        let token_conf = env.api().kubeconfig(Some(env.api().admin_token()));
        let cert_conf = token_conf.replace(
            &format!("    token: {}\n", env.api().admin_token()),
            &format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                base64_of(&id.cert_pem),
                base64_of(&id.key_pem)
            ),
        );
        assert_ne!(cert_conf, token_conf, "the token line was replaced");
        let path = env.lab().dir().join("admin-cert.conf");
        std::fs::write(&path, cert_conf).unwrap();
        env.api().clear_requests();
        let mut cmd = env.status_command(&path, "cp-2", &[]);
        let run = harness::run(&mut cmd, RUN_TIMEOUT);
        assert_eq!(run.code, 0, "{run}");
        let users: Vec<Option<String>> = env.api().requests().into_iter().map(|r| r.user).collect();
        assert!(
            !users.is_empty()
                && users
                    .iter()
                    .all(|u| u.as_deref() == Some("kubernetes-admin")),
            "every call authenticated by the certificate: {users:?}"
        );
        assert!(env.api_endpoints().contains_key("cp-2"));
    }
);
