//! Token discovery against the API server stand-in over real etcd, from a joiner host: the happy
//! path, every trust failure (and that nothing is requested after it), and retries of transient
//! faults. Needs root.

use joinguard_core::discovery::{
    self, parse_pin, BootstrapToken, CaTrust, Discovered, DiscoveryError,
};
use joinguard_core::retry::Recorder;
use netlab::apiserver::{ApiServer, ApiServerOptions, FaultKind, FaultRule, Method};
use netlab::etcd::EtcdSpec;
use netlab::harness::{EnvBuilder, LabEnv, Layout, Run, CERT_KEY, SECRET, TOKEN};
use netlab::labtest;
use serde_json::Value;

/// api, joiner, m1: the stand-in over one member, with the `kubeadm init` fixture.
fn lab() -> EnvBuilder {
    crate::lab().api()
}

/// Discovery run from the joiner, as a library call.
trait DiscoveryLab {
    fn discover(
        &self,
        token: &str,
        trust: CaTrust,
    ) -> (Result<Discovered, DiscoveryError>, Recorder);
    fn pin(&self) -> CaTrust;
    fn cluster_info_gets(&self) -> usize;
}

impl DiscoveryLab for LabEnv {
    fn discover(
        &self,
        token: &str,
        trust: CaTrust,
    ) -> (Result<Discovered, DiscoveryError>, Recorder) {
        let endpoint = self.api().addr().to_string();
        let token = BootstrapToken::parse(token).expect("token format");
        self.joiner()
            .block_on(|| async move {
                let rec = Recorder::new();
                let r = discovery::discover(
                    &endpoint,
                    &token,
                    &trust,
                    None,
                    &discovery::policy(None),
                    &rec,
                )
                .await;
                (r, rec)
            })
            .expect("run in the joiner")
    }

    fn pin(&self) -> CaTrust {
        CaTrust::Pins(vec![parse_pin(&self.fixture().ca_pin).unwrap()])
    }

    fn cluster_info_gets(&self) -> usize {
        self.api()
            .requests()
            .iter()
            .filter(|r| r.path == discovery::CLUSTER_INFO)
            .count()
    }
}

labtest!(
    token_discovery_finds_the_server_and_its_pinned_ca,
    lab(),
    |env| {
        let (r, _) = env.discover(TOKEN, env.pin());
        let d = r.expect("discovery");
        assert_eq!(d.server, format!("https://{}", env.api().addr()));
        assert_eq!(d.ca_pem, env.api().ca_pem().as_bytes());
        assert!(!d.ca_unverified);
        assert_eq!(
            env.cluster_info_gets(),
            2,
            "one unverified and one verified fetch"
        );

        let (r, _) = env.discover(TOKEN, CaTrust::UnsafeSkip);
        assert!(r.expect("unsafe skip still discovers").ca_unverified);
    }
);

labtest!(every_trust_failure_stops_at_once, lab(), |env| {
    let cases: Vec<(&str, &str, CaTrust, &str)> = vec![
        (
            "wrong pin",
            TOKEN,
            CaTrust::Pins(vec![[7u8; 32]]),
            "matches none of the given CA pins",
        ),
        (
            "unknown token id",
            "zzzzzz.0123456789abcdef",
            env.pin(),
            "unknown to this cluster or has expired",
        ),
        (
            "wrong token secret",
            "abcdef.ffffffffffffffff",
            env.pin(),
            "does not verify",
        ),
    ];
    for (what, token, trust, want) in cases {
        env.api().clear_requests();
        let (r, rec) = env.discover(token, trust);
        let e = r.expect_err(what);
        assert!(e.trust_failure().is_some(), "{what}: {e}");
        assert!(e.to_string().contains(want), "{what}: {e}");
        assert!(
            !e.to_string().contains(SECRET),
            "{what}: the secret leaked: {e}"
        );
        assert!(!e.to_string().contains("ffffffffffffffff"), "{what}: {e}");
        assert_eq!(
            env.cluster_info_gets(),
            1,
            "{what}: no request after the failure"
        );
        assert_eq!(rec.records().len(), 1, "{what}: not retried");
    }

    // Tampered content: the served kubeconfig no longer matches its signature.
    let mut cm: Value = env
        .api()
        .get_object("v1", "ConfigMap", "kube-public", "cluster-info")
        .expect("read")
        .expect("cluster-info exists");
    let kc = cm["data"]["kubeconfig"].as_str().unwrap().to_string();
    cm["data"]["kubeconfig"] = Value::String(kc.replace("https://", "https://evil."));
    env.api().upsert(cm).expect("tamper");
    env.api().clear_requests();
    let (r, _) = env.discover(TOKEN, env.pin());
    let e = r.expect_err("tampered");
    assert!(
        e.trust_failure().is_some() && e.to_string().contains("does not verify"),
        "{e}"
    );
    assert_eq!(env.cluster_info_gets(), 1);
});

labtest!(
    discovery_retries_transient_faults_within_the_connect_budget,
    lab(),
    |env| {
        let faults = env.api().faults();
        faults.add(
            FaultRule::always(FaultKind::Unavailable)
                .method(Method::GET)
                .path(discovery::CLUSTER_INFO)
                .times(2),
        );
        faults.add(
            FaultRule::always(FaultKind::Reset)
                .method(Method::GET)
                .path(discovery::CLUSTER_INFO)
                .times(1),
        );
        faults.add(
            FaultRule::always(FaultKind::Stall(std::time::Duration::from_secs(6)))
                .method(Method::GET)
                .path(discovery::CLUSTER_INFO)
                .times(1),
        );
        let (r, rec) = env.discover(TOKEN, env.pin());
        r.expect("discovery once the faults stop");
        let failed: Vec<String> = rec
            .records()
            .iter()
            .filter(|a| a.error.is_some())
            .map(|a| format!("{:?}", a.reason))
            .collect();
        assert_eq!(failed.len(), 4, "{failed:?}");
    }
);

labtest!(
    preflight_with_only_the_join_token_verifies_the_api_with_the_discovered_ca,
    lab(),
    |env| {
        let joinguard = crate::JOINGUARD;
        let run = |pin: &str| {
            let mut cmd = env.joiner().command(joinguard);
            cmd.args(["preflight", &env.api().addr().to_string(), "--token", TOKEN])
                .args(["--discovery-token-ca-cert-hash", pin])
                .args(["-v"]);
            let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(60))
                .expect("joinguard ran");
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (code, stdout, stderr) = run(&env.fixture().ca_pin);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stderr.contains("The cluster CA matches the pin"),
            "{stderr}"
        );
        assert!(
            stdout.contains("api-readyz"),
            "/readyz was probed with the CA: {stdout}"
        );
        for text in [&stdout, &stderr] {
            assert!(!text.contains(SECRET), "the token secret leaked:\n{text}");
        }

        let wrong = format!("sha256:{}", "00".repeat(32));
        let (code, stdout, stderr) = run(&wrong);
        assert_eq!(code, 3, "{stdout}{stderr}");
        assert!(stderr.contains("matches none of the given"), "{stderr}");
        assert!(!stderr.contains(SECRET) && !stdout.contains(SECRET));
    }
);

#[test]
fn preflight_bad_discovery_input_exits_2_before_any_network_call() {
    let joinguard = crate::JOINGUARD;
    let run = |args: &[&str]| {
        let out = std::process::Command::new(joinguard)
            .arg("preflight")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[
        "198.18.0.1:6443",
        "--token",
        "abcdef.NOT-A-SECRET-OK",
        "--discovery-token-unsafe-skip-ca-verification",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--token") && !err.contains("NOT-A-SECRET-OK"),
        "{err}"
    );
    let (code, err) = run(&["198.18.0.1:6443", "--token", TOKEN]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--discovery-token-ca-cert-hash"), "{err}");
    let (code, err) = run(&[
        "198.18.0.1:6443",
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        "sha256:abcd",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("64 hex digits"), "{err}");
    let (code, err) = run(&["--token", TOKEN]);
    assert_eq!(code, Some(2), "the endpoint is required: {err}");
}

/// 3 members, the stand-in in `layout`, and kubeadm-certs under CERT_KEY, on this run's lab PKI
/// (`NETLAB_PKI`, RSA-2048 PKCS#1 by default).
fn lab3(layout: Layout) -> EnvBuilder {
    crate::lab().members(3).layout(layout).upload_certs()
}

fn preflight_with_join_inputs(env: &LabEnv, key: &str) -> (i32, String, String) {
    let run = env.run([
        "preflight",
        &env.api().addr().to_string(),
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &env.fixture().ca_pin,
        "--certificate-key",
        key,
        "-vvv",
    ]);
    streams(run)
}

/// A run as (exit code, stdout, stderr), the form these tests assert on.
fn streams(run: Run) -> (i32, String, String) {
    (run.code, run.stdout, run.stderr)
}

/// The admin certificate minted to list the etcd pods carries kubeadm's 1.29+ admin group,
/// `kubeadm:cluster-admins` (bound through RBAC, revocable), and the node's name in its CN. With
/// that binding gone, the list is forbidden (403) and joinguard mints once more with kubeadm's
/// pre-1.29 group, which is how this test tells the two groups apart.
#[test]
fn etcd_pods_are_listed_as_kubeadm_cluster_admins_and_fall_back_on_403() {
    let _s = netlab::harness::serial();
    let env = lab3(Layout::EtcdPods)
        .name("etcd_pods_are_listed_as_kubeadm_cluster_admins_and_fall_back_on_403")
        .build()
        .expect("lab environment");
    let lists = |env: &LabEnv| -> Vec<(Option<String>, Option<u16>)> {
        env.api()
            .requests()
            .into_iter()
            .filter(|r| r.path == "/api/v1/namespaces/kube-system/pods")
            .map(|r| (r.user, r.status))
            .collect()
    };
    let args = |env: &LabEnv| {
        vec![
            "preflight".to_string(),
            env.api().addr().to_string(),
            "--token".into(),
            TOKEN.into(),
            "--discovery-token-ca-cert-hash".into(),
            env.fixture().ca_pin.clone(),
            "--certificate-key".into(),
            CERT_KEY.into(),
            "--node-name".into(),
            "cp-9".into(),
        ]
    };
    let user = Some("joinguard-preflight:cp-9".to_string());
    let run = env.run(args(&env));
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(lists(&env), vec![(user.clone(), Some(200))]);

    // kubeadm's binding of its admin group removed: forbidden, then the old group.
    env.api()
        .upsert(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:cluster-admins"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [],
        }))
        .expect("unbind kubeadm:cluster-admins");
    env.api().clear_requests();
    let run = env.run(args(&env));
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        lists(&env),
        vec![(user.clone(), Some(403)), (user, Some(200))],
        "{run}"
    );
}

#[test]
fn etcd_preflight_from_join_inputs_finds_and_probes_every_member_with_mtls() {
    let _s = netlab::harness::serial();
    for layout in [Layout::ClusterStatus, Layout::EtcdPods, Layout::External] {
        let external = layout == Layout::External;
        let env = lab3(layout)
            .name("etcd_preflight_from_join_inputs_finds_and_probes_every_member_with_mtls")
            .build()
            .expect("lab environment");
        let eps = env.etcd().client_endpoints();
        let (code, stdout, stderr) = preflight_with_join_inputs(&env, CERT_KEY);
        assert_eq!(code, 0, "{layout:?}\n{stdout}{stderr}");
        if layout == Layout::EtcdPods {
            assert!(
                stderr.contains("etcd endpoints from the etcd pods"),
                "{stderr}"
            );
            // The pods were listed as the minted x509 user, not with the bootstrap token.
            let lists: Vec<_> = env
                .api()
                .requests()
                .into_iter()
                .filter(|r| r.path == "/api/v1/namespaces/kube-system/pods")
                .collect();
            assert_eq!(lists.len(), 1, "{lists:?}");
            assert_eq!(lists[0].user.as_deref(), Some("joinguard-preflight"));
            assert_eq!(lists[0].status, Some(200));
        }
        let want = if external {
            "using the external etcd client certificate"
        } else {
            "minted an in-memory etcd client certificate"
        };
        assert!(stderr.contains(want), "{stderr}");
        for ep in &eps {
            let host = ep.trim_start_matches("https://");
            assert!(
                stdout.contains(&format!("{host}  etcd-status")),
                "{host} probed with mTLS (Status): {stdout}"
            );
            assert!(
                stdout.contains(&format!("{host}  icmp-echo")),
                "{host} has a loss stream, found through MemberList or not: {stdout}"
            );
            let peer = host.replace(":2379", ":2380");
            assert!(
                stdout.contains(&format!("{peer}  etcd-peer-probe")),
                "{peer} from MemberList: {stdout}"
            );
        }
        for text in [&stdout, &stderr] {
            assert!(!text.contains(SECRET), "token secret leaked");
            assert!(!text.contains(CERT_KEY), "certificate key leaked");
            assert!(!text.contains("PRIVATE KEY"), "key material leaked");
        }

        // A slow member: the same inputs, exit 1, and it is named.
        let m2 = env.lab().host("m2");
        env.lab().net().set_link(
            env.joiner(),
            m2,
            // 300 ms RTT: past 1/4 of the 1 s election timeout.
            netlab::Impairment::delay(std::time::Duration::from_millis(150)),
        );
        let (code, stdout, stderr) = preflight_with_join_inputs(&env, CERT_KEY);
        assert_eq!(code, 1, "{stdout}{stderr}");
        let m2_peer = format!("{}:2380", m2.addr());
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("[ERROR EtcdPeerLatency]") && l.contains(&m2_peer)),
            "{stdout}"
        );
    }
}

labtest!(
    preflight_with_a_wrong_certificate_key_says_so,
    lab3(Layout::ClusterStatus),
    |env| {
        let wrong = "f".repeat(64);
        let (code, stdout, stderr) = preflight_with_join_inputs(&env, &wrong);
        assert_eq!(code, 2, "{stdout}{stderr}");
        assert!(
            stderr.contains("--certificate-key does not decrypt kubeadm-certs"),
            "{stderr}"
        );
        assert!(!stderr.contains(&wrong) && !stdout.contains(&wrong));
    }
);

#[test]
fn etcd_preflight_config_alone_is_enough_with_v1beta4_and_v1beta3_files() {
    let _s = netlab::harness::serial();
    // A cluster of the kubeadm >= 1.22 layout: no ClusterStatus, the members on the etcd pods.
    let env = lab3(Layout::EtcdPods)
        .name("etcd_preflight_config_alone_is_enough_with_v1beta4_and_v1beta3_files")
        .build()
        .expect("lab environment");
    let eps = env.etcd().client_endpoints();
    let joinguard = crate::JOINGUARD;
    for version in ["v1beta4", "v1beta3"] {
        // As Cluster API writes it (plus the certificate key a control-plane join carries).
        let path = env
            .dir()
            .join(format!("kubeadm-join-config-{version}.yaml"));
        std::fs::write(
            &path,
            format!(
                "apiVersion: kubeadm.k8s.io/{version}\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    caCertHashes:\n    - {}\n    token: {TOKEN}\ncontrolPlane:\n  certificateKey: {CERT_KEY}\n  localAPIEndpoint:\n    advertiseAddress: {}\n    bindPort: 6443\nnodeRegistration:\n  name: joiner\n",
                env.api().addr(),
                env.fixture().ca_pin,
                env.joiner().addr()
            ),
        )
        .unwrap();
        let mut cmd = env.joiner().command(joinguard);
        cmd.arg("preflight").arg("--config").arg(&path);
        let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(90))
            .expect("joinguard ran");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{version}\n{stdout}{stderr}");
        assert!(
            stdout.contains(&format!("{}  api-readyz", env.api().addr())),
            "{stdout}"
        );
        for ep in &eps {
            let host = ep.trim_start_matches("https://");
            assert!(
                stdout.contains(&format!("{host}  etcd-status")),
                "{version}: {stdout}"
            );
        }
    }

    // File discovery: the kubeconfig it names is trusted as is (kubeadm's discovery.file).
    let kc = env.lab().dir().join("cluster-info.conf");
    std::fs::write(&kc, &env.fixture().cluster_info_kubeconfig).unwrap();
    let file_cfg = env.lab().dir().join("join-file.yaml");
    std::fs::write(
        &file_cfg,
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  file:\n    kubeConfigPath: {}\n",
            kc.display()
        ),
    )
    .unwrap();
    let mut cmd = env.joiner().command(joinguard);
    cmd.arg("preflight").arg("--config").arg(&file_cfg);
    let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(60)).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("{}  api-readyz", env.api().addr())),
        "{stdout}"
    );

    // A pin flag beside --config is refused with kubeadm's own message, as `kubeadm join`
    // refuses it (ValidateMixedArguments): the file's pins are not silently replaced.
    let path = env.lab().dir().join("kubeadm-join-config-v1beta4.yaml");
    let mut cmd = env.joiner().command(joinguard);
    cmd.arg("preflight").arg("--config").arg(&path).args([
        "--discovery-token-ca-cert-hash",
        &format!("sha256:{}", "11".repeat(32)),
    ]);
    let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(60)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("can not mix '--config' with arguments [discovery-token-ca-cert-hash]"),
        "{stderr}"
    );
}

#[test]
fn preflight_with_an_expired_bootstrap_token_names_the_cause() {
    let _s = netlab::harness::serial();
    let env = lab()
        .fixture(|opts| {
            opts.token_expiration =
                Some(std::time::SystemTime::now() - std::time::Duration::from_secs(60));
        })
        .name("preflight_with_an_expired_bootstrap_token_names_the_cause")
        .build()
        .expect("lab environment");
    let (lab, api, f) = (env.lab(), env.api(), env.fixture());
    let mut cmd = lab.host("joiner").command(crate::JOINGUARD);
    cmd.args(["preflight", &api.addr().to_string(), "--token", TOKEN])
        .args(["--discovery-token-ca-cert-hash", &f.ca_pin]);
    let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(60)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has expired or was deleted"), "{stderr}");
    assert!(!stderr.contains(SECRET));
}

#[test]
fn a_relaying_mitm_with_another_ca_is_a_trust_failure_at_the_verified_fetch() {
    let _s = netlab::harness::serial();
    let env = lab()
        .extra_hosts(["mitm"])
        .name("a_relaying_mitm_with_another_ca_is_a_trust_failure_at_the_verified_fetch")
        .build()
        .expect("lab environment");
    let (lab, etcd, api, f) = (env.lab(), env.etcd(), env.api(), env.fixture());
    // The attacker serves the real, public, signed cluster-info (it reads the same store), but
    // under its own CA: the JWS and the pin both verify, only the verified re-fetch can tell.
    let mitm_opts = ApiServerOptions {
        ca: Some(netlab::pki::TestCa::new("attacker").unwrap()),
        ..ApiServerOptions::default()
    };
    let mitm = ApiServer::start(lab.host("mitm"), etcd, mitm_opts).expect("mitm");
    let mut cmd = lab.host("joiner").command(crate::JOINGUARD);
    cmd.args(["preflight", &mitm.addr().to_string(), "--token", TOKEN])
        .args(["--discovery-token-ca-cert-hash", &f.ca_pin]);
    let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(60)).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("trust failure") && stderr.contains("cluster-info get (verified)"),
        "{stderr}"
    );
    let seen: Vec<_> = mitm.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        seen,
        [discovery::CLUSTER_INFO],
        "only the unverified fetch reached the MITM; nothing after the failure"
    );
    assert!(
        api.requests().is_empty(),
        "the real server was never contacted"
    );
}

labtest!(
    /// Cluster API and kubeadm's manual certificate distribution: no certificate key, the CAs are on
    /// disk before the join. `--cert-dir` gives the same mTLS coverage without reading kubeadm-certs.
    etcd_preflight_with_a_kubeadm_cert_dir_needs_no_certificate_key,
    lab3(Layout::EtcdPods),
    |env| {
        let eps = env.etcd().client_endpoints();
        let dir = tempfile::tempdir().unwrap();
        copy_shared_pki(&env.etcd().member(0).dir.join("pki"), dir.path());
        let joinguard = crate::JOINGUARD;
        let run = |cert_dir: &std::path::Path| {
            let mut cmd = env.joiner().command(joinguard);
            cmd.args(["preflight", &env.api().addr().to_string(), "--token", TOKEN])
                .args(["--discovery-token-ca-cert-hash", &env.fixture().ca_pin])
                .arg("--cert-dir")
                .arg(cert_dir)
                .arg("-vvv");
            let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(90))
                .expect("joinguard ran");
            (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (code, stdout, stderr) = run(dir.path());
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stderr.contains("minted an in-memory etcd client certificate from the etcd CA"),
            "{stderr}"
        );
        for ep in &eps {
            let host = ep.trim_start_matches("https://");
            assert!(stdout.contains(&format!("{host}  etcd-status")), "{stdout}");
            let peer = host.replace(":2379", ":2380");
            assert!(
                stdout.contains(&format!("{peer}  etcd-peer-probe")),
                "{stdout}"
            );
        }
        let reqs = env.api().requests();
        assert!(
            !reqs.iter().any(|r| r.path.contains("kubeadm-certs")),
            "kubeadm-certs is not read with --cert-dir: {reqs:?}"
        );
        let lists: Vec<_> = reqs
            .iter()
            .filter(|r| r.path == "/api/v1/namespaces/kube-system/pods")
            .collect();
        assert_eq!(lists.len(), 1, "{lists:?}");
        assert_eq!(lists[0].user.as_deref(), Some("joinguard-preflight"));
        for text in [&stdout, &stderr] {
            assert!(!text.contains("PRIVATE KEY"), "key material leaked");
        }

        // A directory without the etcd CA: exit 2 before any network call, naming the file.
        let before = env.api().requests().len();
        let empty = tempfile::tempdir().unwrap();
        let (code, stdout, stderr) = run(empty.path());
        assert_eq!(code, 2, "{stdout}{stderr}");
        assert!(
            stderr.contains("--cert-dir") && stderr.contains("etcd/ca.crt"),
            "{stderr}"
        );
        assert_eq!(env.api().requests().len(), before, "no request was made");
    }
);

/// Copies what kubeadm's manual certificate distribution copies from a control-plane node's
/// /etc/kubernetes/pki to a joining one (copycerts.go `certsToTransfer`): byte for byte, modes kept.
pub(crate) fn copy_shared_pki(from: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    for rel in netlab::pki::names::SHARED_FILES {
        let (src, dst) = (from.join(rel), to.join(rel));
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        let mode = std::fs::metadata(&src).unwrap().permissions().mode();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// One way a joining node's own inputs reach etcd.
struct JoinInputs {
    name: &'static str,
    args: Vec<std::ffi::OsString>,
}

/// The headline path on kubeadm's own key formats: a lab whose every key is RSA-2048 PKCS#1
/// (kubeadm's default), one whose every key is ECDSA-P256 SEC1 (`encryptionAlgorithm:
/// ECDSA-P256`), and one in PKCS#8 (never kubeadm's, but an operator's own CA may be), so that all
/// three encodings stay covered end to end. Each join input must reach every member's :2379 (Status) and :2380 (peer
/// probe) with mTLS. To cover one more input (e.g. the verbatim `kubeadm join` line), add it to
/// `inputs`.
#[test]
fn etcd_preflight_on_kubeadm_pkis_from_every_join_input() {
    use netlab::pki::{KeyProfile, KubeadmPki};
    let _s = netlab::harness::serial();
    for profile in [
        KeyProfile::RSA_2048,
        KeyProfile::ECDSA_P256,
        KeyProfile::PKCS8_P256,
    ] {
        let spec = EtcdSpec {
            pki: Some(std::sync::Arc::new(
                KubeadmPki::with_profile(profile).expect("pki"),
            )),
            ..EtcdSpec::default()
        };
        let env = lab3(Layout::EtcdPods)
            .etcd_spec(spec)
            .name("etcd_preflight_on_kubeadm_pkis_from_every_join_input")
            .build()
            .expect("lab environment");
        let eps = env.etcd().client_endpoints();
        // The kubeadm-certs entries are the lab PKI's files, in kubeadm's encoding.
        let m1_pki = env.etcd().member(0).dir.join("pki");
        let ca_key = std::fs::read_to_string(m1_pki.join("etcd/ca.key")).unwrap();
        assert!(
            ca_key.starts_with(&format!("-----BEGIN {}-----", profile.pem_label())),
            "{profile}"
        );
        let config = env.lab().dir().join("kubeadm-join-config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    caCertHashes:\n    - {}\n    token: {TOKEN}\ncontrolPlane:\n  certificateKey: {CERT_KEY}\n  localAPIEndpoint:\n    advertiseAddress: {}\n    bindPort: 6443\nnodeRegistration:\n  name: joiner\n",
                env.api().addr(),
                env.fixture().ca_pin,
                env.joiner().addr()
            ),
        )
        .unwrap();
        let cert_dir = tempfile::tempdir().unwrap();
        copy_shared_pki(&m1_pki, cert_dir.path());
        let discovery: Vec<std::ffi::OsString> = [
            "preflight",
            &env.api().addr().to_string(),
            "--token",
            TOKEN,
            "--discovery-token-ca-cert-hash",
            &env.fixture().ca_pin,
        ]
        .iter()
        .map(|s| s.into())
        .collect();
        let with = |extra: &[&std::ffi::OsStr]| -> Vec<std::ffi::OsString> {
            discovery
                .iter()
                .cloned()
                .chain(extra.iter().map(|s| s.to_os_string()))
                .collect()
        };
        let inputs = [
            JoinInputs {
                name: "--certificate-key",
                args: with(&["--certificate-key".as_ref(), CERT_KEY.as_ref()]),
            },
            JoinInputs {
                name: "--config",
                args: vec!["preflight".into(), "--config".into(), config.clone().into()],
            },
            JoinInputs {
                name: "--cert-dir",
                args: with(&["--cert-dir".as_ref(), cert_dir.path().as_os_str()]),
            },
            // The control-plane join line `kubeadm init --upload-certs` prints, with `kubeadm
            // join` replaced by `joinguard preflight` and nothing else changed.
            JoinInputs {
                name: "the kubeadm join line",
                args: with(&[
                    "--control-plane".as_ref(),
                    "--certificate-key".as_ref(),
                    CERT_KEY.as_ref(),
                ]),
            },
        ];
        let joinguard = crate::JOINGUARD;
        for input in &inputs {
            let mut cmd = env.joiner().command(joinguard);
            cmd.args(&input.args).arg("-v");
            let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(90))
                .expect("joinguard ran");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{profile}, {}", input.name);
            assert_eq!(out.status.code(), Some(0), "{what}\n{stdout}{stderr}");
            assert!(
                stderr.contains(&format!("etcd CA key {profile}")),
                "{what}: the CA key kubeadm wrote signed: {stderr}"
            );
            for ep in &eps {
                let host = ep.trim_start_matches("https://");
                let peer = host.replace(":2379", ":2380");
                assert!(
                    stdout.contains(&format!("{host}  etcd-status")),
                    "{what}: {host} Status with mTLS: {stdout}"
                );
                assert!(
                    stdout.contains(&format!("{peer}  etcd-peer-probe")),
                    "{what}: {peer} peer probe with mTLS: {stdout}"
                );
            }
            for text in [&stdout, &stderr] {
                assert!(!text.contains(SECRET), "{what}: token secret leaked");
                assert!(!text.contains(CERT_KEY), "{what}: certificate key leaked");
                assert!(!text.contains("PRIVATE KEY"), "{what}: key material leaked");
            }
        }
    }
}

/// The JoinConfiguration Cluster API leaves on the joiner (`/run/kubeadm/kubeadm-join-config.yaml`,
/// v1beta4, kubeadm's spellings): token discovery against the stand-in with its CA pin, the
/// certificate key, this node's name and address, and `timeouts.etcdAPICall`. Its path.
fn write_join_config(env: &LabEnv, etcd_api_call: &str) -> String {
    let path = env.dir().join("kubeadm-join-config.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    caCertHashes:\n    - {}\n    token: {TOKEN}\ncontrolPlane:\n  certificateKey: {CERT_KEY}\n  localAPIEndpoint:\n    advertiseAddress: {}\n    bindPort: 6443\nnodeRegistration:\n  name: joiner\ntimeouts:\n  etcdAPICall: {etcd_api_call}\n",
            env.api().addr(),
            env.fixture().ca_pin,
            env.joiner().addr(),
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// `joinguard etcd cleanup` from the join's JoinConfiguration alone (issue 29): token discovery
/// finds the members (ClusterStatus) and the etcd CA (kubeadm-certs, with the config's
/// `certificateKey`), as preflight does; this node's name and address come from the same file.
/// The leftover of a failed join (this node's learner, added and never started) is found by
/// that address, shown by a dry run and removed; a second run has nothing to do.
#[test]
fn etcd_cleanup_from_the_join_config_alone() {
    let _s = netlab::harness::serial();
    let env = lab3(Layout::ClusterStatus)
        .name("etcd_cleanup_from_the_join_config_alone")
        .build()
        .expect("lab environment");
    let joiner = env.joiner().addr();
    let peer = format!("--peer-urls=https://{joiner}:2380");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let id = loop {
        let mut cmd = env.etcd().etcdctl(env.joiner());
        cmd.args(["member", "add", "joiner", peer.as_str(), "--learner"]);
        let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(20))
            .expect("etcdctl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            // "Member 8e9e05c52164694d added to cluster ..."
            break text
                .split_whitespace()
                .nth(1)
                .expect("member id")
                .to_string();
        }
        // etcd refuses a member add for 5 s after a member (re)connected ("unhealthy cluster").
        assert!(
            std::time::Instant::now() < deadline,
            "member add: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let config = write_join_config(&env, "40s");

    let run = env.run(["etcd", "cleanup", "--config", &config, "--dry-run"]);
    eprintln!("{run}");
    run.assert_exit(0);
    assert!(
        run.stderr.contains("Discovering the cluster CA"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("dry run: would remove"), "{run}");
    assert!(run.stdout.contains(&id), "{run}");

    // The same from kubeadm's join line, with no --config and no --etcd-* flag. An unstarted
    // member has no name yet: this node is found by its address, as kubeadm join gives it.
    let api = env.api().addr().to_string();
    let pin = env.fixture().ca_pin.clone();
    let addr = joiner.to_string();
    let run = env.run([
        "etcd",
        "cleanup",
        api.as_str(),
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        pin.as_str(),
        "--certificate-key",
        CERT_KEY,
        "--node-name",
        "joiner",
        "--apiserver-advertise-address",
        addr.as_str(),
        "--dry-run",
    ]);
    eprintln!("{run}");
    run.assert_exit(0);
    assert!(run.stdout.contains("dry run: would remove"), "{run}");
    assert!(run.stdout.contains(&id), "{run}");

    let run = env.run(["etcd", "cleanup", "--config", &config, "-o", "json"]);
    eprintln!("{run}");
    run.assert_exit(0);
    crate::schema::assert_valid("etcd", &run);
    let v = run.json();
    assert_eq!(v["result"], "removed", "{run}");
    assert_eq!(v["member"]["id"], id.as_str());
    let mut cmd = env.etcd().etcdctl(env.joiner());
    cmd.args(["member", "list"]);
    let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(20))
        .expect("etcdctl");
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(!list.contains(&id), "{list}");

    let run = env.run(["etcd", "cleanup", "--config", &config]);
    run.assert_exit(0);
    assert!(run.stdout.contains("nothing to remove"), "{run}");
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(SECRET), "token secret leaked");
        assert!(!text.contains(CERT_KEY), "certificate key leaked");
    }
}

/// `joinguard etcd promote` as a Cluster API node runs it after `kubeadm join` (issue 29): no
/// `--etcd-*` flag; the members and the etcd client identity come from token discovery, this
/// node's name from the join's JoinConfiguration or the join line. The learner runs on the
/// joiner (`etcdctl member add --learner`, then etcd started with `--initial-cluster-state
/// existing`, as kubeadm's join does); the join line promotes it, `--config` then finds a voter.
/// The members come from the etcd pods' annotations, as on kubeadm 1.22 and later.
#[test]
fn etcd_promote_from_the_join_inputs_alone() {
    let _s = netlab::harness::serial();
    let mut env = lab3(Layout::EtcdPods)
        .name("etcd_promote_from_the_join_inputs_alone")
        .build()
        .expect("lab environment");
    let joiner_host = env.joiner().clone();
    env.etcd_mut().add_learner(&joiner_host).expect("learner");
    env.etcd()
        .wait_healthy(std::time::Duration::from_secs(30))
        .expect("healthy with the learner");
    let learner_of = |env: &LabEnv| -> Option<bool> {
        let mut cmd = env.etcd().etcdctl(env.joiner());
        cmd.args(["member", "list", "-w", "json"]);
        let out = netlab::process::output_within(&mut cmd, std::time::Duration::from_secs(20))
            .expect("etcdctl");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("member list json");
        v["members"]
            .as_array()?
            .iter()
            .find(|m| m["name"] == "joiner")
            .map(|m| m["isLearner"].as_bool().unwrap_or(false))
    };
    assert_eq!(learner_of(&env), Some(true), "the joiner runs a learner");

    let api = env.api().addr().to_string();
    let pin = env.fixture().ca_pin.clone();
    let run = env.run([
        "etcd",
        "promote",
        api.as_str(),
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        pin.as_str(),
        "--certificate-key",
        CERT_KEY,
        "--node-name",
        "joiner",
        "--timeout",
        "60s",
    ]);
    eprintln!("{run}");
    run.assert_exit(0);
    assert!(
        run.stderr.contains("Discovering the cluster CA"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("promoted"), "{run}");
    assert_eq!(learner_of(&env), Some(false), "a voter now: {run}");

    let config = write_join_config(&env, "40s");
    // Runbook case 1's command, as written there.
    let run = env.run([
        "etcd",
        "promote",
        "--config",
        &config,
        "--timeout",
        "10m",
        "-o",
        "json",
    ]);
    eprintln!("{run}");
    run.assert_exit(0);
    crate::schema::assert_valid("etcd", &run);
    let v = run.json();
    assert_eq!(v["result"], "nothingToDo", "{run}");
    assert_eq!(v["member"]["name"], "joiner", "{run}");
    for text in [&run.stdout, &run.stderr] {
        assert!(!text.contains(SECRET), "token secret leaked");
        assert!(!text.contains(CERT_KEY), "certificate key leaked");
    }
}

/// Runbook case 5 (docs/etcd-learner.md; CAPZ #5687): `kubeadm join` fails with "context
/// deadline exceeded" 2 s after "Adding etcd member": kubeadm dials etcd once, blocking, for at
/// most 2 s, outside its retry loop, and this path needs longer. Here the member was added and
/// its learner started (the path was fast then), and the path to every member is now 800 ms RTT:
/// preflight names the dial, and `joinguard etcd promote --config` (which gives its dial the
/// join's budget, not 2 s) promotes the learner.
#[test]
fn runbook_a_dial_past_2s_preflight_names_it_and_promote_completes() {
    let _s = netlab::harness::serial();
    let mut env = lab3(Layout::EtcdPods)
        .name("runbook_a_dial_past_2s")
        .build()
        .expect("lab environment");
    let joiner_host = env.joiner().clone();
    env.etcd_mut().add_learner(&joiner_host).expect("learner");
    env.etcd()
        .wait_healthy(std::time::Duration::from_secs(30))
        .expect("healthy with the learner");
    let members: Vec<_> = env.etcd().members()[..3]
        .iter()
        .map(|m| m.host.clone())
        .collect();
    for m in &members {
        env.lab().net().set_link(
            &joiner_host,
            m,
            netlab::Impairment::delay(std::time::Duration::from_millis(400)),
        );
    }
    let config = write_join_config(&env, "2m");

    // 15 s bound the run (the dials are measured in its first seconds; the latency streams
    // at 800 ms RTT would take about 40 s to fill).
    let run = env.run(["preflight", "--config", &config, "--timeout", "15s"]);
    eprintln!("{run}");
    assert_eq!(run.code, 1, "{run}");
    let dial = run
        .stdout
        .lines()
        .filter(|l| l.contains("[ERROR EtcdDialTime]"))
        .count();
    assert_eq!(dial, 3, "each member's dial is named: {run}");

    let run = env.run(["etcd", "promote", "--config", &config, "--timeout", "2m"]);
    eprintln!("{run}");
    run.assert_exit(0);
    assert!(run.stdout.contains("promoted"), "{run}");
}

/// preflight from the join line (control plane, `-o json`), with `extra` flags.
fn join_line_json(env: &LabEnv, extra: &[&str]) -> Run {
    let api = env.api().addr().to_string();
    let mut args = vec![
        "preflight",
        &api,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &env.fixture().ca_pin,
        "--control-plane",
        "--certificate-key",
        CERT_KEY,
        "--no-bandwidth",
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    env.run(args)
}

/// The warn threshold EtcdPeerLatency used (the lower of 2 heartbeats and a tenth of the
/// election timeout), in ms.
fn peer_warn_threshold(run: &Run) -> f64 {
    let v = run.json();
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "EtcdPeerLatency" && c["status"] == "ok")
        .and_then(|c| c["threshold"].as_f64())
        .unwrap_or_else(|| panic!("no ok EtcdPeerLatency: {run}"))
}

/// kubeadm-config says the election timeout is 5 s (`etcd.local.extraArgs`). Not given, the
/// verdict takes 5 s from it; given explicitly as `--etcd-election-timeout 1s` (the default's
/// value), the flag wins and the run says so (before, a flag at its default value was taken as
/// not given, and kubeadm-config overrode it). A kubeadm-config timing etcd would refuse gets the
/// error a flag gets, naming kubeadm-config.
#[test]
fn etcd_an_explicit_timing_flag_wins_over_kubeadm_config() {
    let _s = netlab::harness::serial();
    let env = lab3(Layout::EtcdPods)
        .fixture(|opts| {
            opts.etcd_extra_args = vec![("election-timeout".into(), "5000".into())];
        })
        .name("etcd_an_explicit_timing_flag_wins_over_kubeadm_config")
        .build()
        .expect("lab environment");
    let run = join_line_json(&env, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr
            .contains("etcd timing: heartbeat 100 ms, election 5000 ms (from kubeadm-config"),
        "{run}"
    );
    // min(2 x 100 ms, 5 s / 10)
    assert_eq!(peer_warn_threshold(&run), 200.0, "{run}");

    let run = join_line_json(&env, &["--etcd-election-timeout", "1s"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr.contains(
            "etcd election-timeout 1s as given (--etcd-election-timeout); kubeadm-config says \
             5s: the given value is used"
        ),
        "{run}"
    );
    // min(2 x 100 ms, 1 s / 10)
    assert_eq!(peer_warn_threshold(&run), 100.0, "{run}");
    drop(env);

    let env = lab3(Layout::EtcdPods)
        .fixture(|opts| {
            opts.etcd_extra_args = vec![("election-timeout".into(), "60000".into())];
        })
        .name("etcd_an_explicit_timing_flag_wins_over_kubeadm_config_2")
        .build()
        .expect("lab environment");
    let run = join_line_json(&env, &[]);
    assert_eq!(run.code, 2, "{run}");
    assert!(
        run.stderr.contains(
            "kubeadm-config's etcd.local.extraArgs election-timeout `1m`: expected at least 5x \
             the heartbeat interval and at most 50s (etcd default 1s)"
        ),
        "{run}"
    );
}

/// `--wait` covers token discovery (issue 46 item 2): the joiner's link to the API dark for
/// 20 s, longer than the connect policy's own 15 s: with `--wait 60s` discovery retries through
/// it and the run is fit once the link is back; without `--wait` it stops after the 15 s.
#[test]
fn etcd_wait_covers_token_discovery_through_an_api_outage() {
    let _s = netlab::harness::serial();
    let env = lab3(Layout::EtcdPods)
        .name("etcd_wait_covers_token_discovery_through_an_api_outage")
        .build()
        .expect("lab environment");
    let set = |imp: netlab::Impairment| {
        env.lab()
            .net()
            .set_link(env.joiner(), env.api().host(), imp);
    };
    // The link dark now and lit again after 20 s, while `run` runs; (its result, how long).
    let through_outage = |extra: &[&str]| {
        set(netlab::Impairment::blackout());
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_secs(20));
                set(netlab::Impairment::none());
            });
            let t0 = std::time::Instant::now();
            let run = join_line_json(&env, extra);
            (run, t0.elapsed())
        })
    };
    let (run, took) = through_outage(&["--wait", "60s"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(took > std::time::Duration::from_secs(19), "{took:?}");
    eprintln!("--wait 60s through a 20 s outage: fit after {took:?}");

    let (run, took) = through_outage(&[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("token discovery"), "{run}");
    assert!(took < std::time::Duration::from_secs(19), "{took:?}");
    eprintln!("without --wait: stopped after {took:?}");
}

/// `-o json` always prints one document (issue 46 item 5): on invalid input (exit 2) and on a
/// trust failure (exit 3) it has `verdict: "error"` with the class, exit code and message, and
/// validates against the schema; an unfit run also puts its reason on stderr, where a bootstrap
/// log (cloud-init's) keeps it.
#[test]
fn etcd_every_exit_of_preflight_json_writes_a_document() {
    let _s = netlab::harness::serial();
    let env = lab3(Layout::EtcdPods)
        .name("etcd_every_exit_of_preflight_json_writes_a_document")
        .build()
        .expect("lab environment");
    let error_of = |run: &Run, code: i32, class: &str| {
        assert_eq!(run.code, code, "{run}");
        crate::schema::assert_valid("preflight", run);
        let v = run.json();
        assert_eq!(v["verdict"], "error", "{run}");
        assert_eq!(v["error"]["class"], class, "{run}");
        assert_eq!(v["error"]["exitCode"], code, "{run}");
        let m = v["error"]["message"].as_str().unwrap().to_string();
        assert!(run.stderr.contains(&m), "the same reason on stderr: {run}");
        m
    };
    let m = error_of(
        &join_line_json(&env, &["--etcd-election-timeout", "1ms"]),
        2,
        "invalid-input",
    );
    assert!(m.contains("--etcd-election-timeout `1ms`"), "{m}");

    let api = env.api().addr().to_string();
    let wrong_pin = format!("sha256:{}", "ab".repeat(32));
    let run = env.run([
        "preflight",
        &api,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &wrong_pin,
        "-o",
        "json",
    ]);
    let m = error_of(&run, 3, "trust");
    assert!(m.contains("trust failure during token discovery"), "{m}");

    // Unfit: the document as always, and the reason on stderr too.
    env.lab().net().set_link(
        env.joiner(),
        env.lab().host("m2"),
        netlab::Impairment::delay(std::time::Duration::from_millis(150)),
    );
    let run = join_line_json(&env, &[]);
    assert_eq!(run.code, 1, "{run}");
    crate::schema::assert_valid("preflight", &run);
    assert!(
        run.stderr
            .lines()
            .any(|l| l.starts_with("joinguard preflight: not fit: ")
                && l.contains("EtcdPeerLatency")),
        "{run}"
    );
}
