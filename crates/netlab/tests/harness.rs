//! The lab test harness, checked from outside the crate as joinguard's tests will use it: the
//! `labtest!` macro, the environment builder in each kubeadm layout (read back with the real
//! `kubectl`), runs of a program inside lab hosts with a deadline, and the no-secret check
//! against the lab's own key material. Needs root. Every test name contains `etcd`, so they run
//! on etcd 3.4 and 3.5.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use netlab::harness::{self, EnvBuilder, Layout, CERT_KEY, SECRET, TOKEN_ID};
use netlab::{labtest, Impairment};
use serde_json::Value;

/// The "program under test" of these tests: a shell, so a run can print and exit at will.
fn lab() -> EnvBuilder {
    EnvBuilder::new().bin("/bin/sh")
}

fn names(env: &harness::LabEnv) -> Vec<&str> {
    env.lab().hosts().iter().map(|h| h.name()).collect()
}

fn panic_message(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(AssertUnwindSafe(f)).expect_err("it panics");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn kubeadm_config(env: &harness::LabEnv) -> Value {
    env.kubectl(&[
        "-n",
        "kube-system",
        "get",
        "configmap",
        "kubeadm-config",
        "-o",
        "json",
    ])
    .assert_exit(0)
    .json()
}

/// The bootstrap token's Secret, as kubectl reads it.
fn token_secret(env: &harness::LabEnv) -> Value {
    let name = format!("bootstrap-token-{TOKEN_ID}");
    env.kubectl(&["-n", "kube-system", "get", "secret", &name, "-o", "json"])
        .assert_exit(0)
        .json()
}

labtest!(
    /// The default environment: a joiner and one etcd member, no stand-in, no program.
    harness_etcd_default_environment_is_a_joiner_and_one_healthy_member,
    |env| {
        assert_eq!(names(&env), ["joiner", "m1"]);
        assert!(env.try_api().is_none());
        let etcd = env.etcd();
        assert_eq!(etcd.members().len(), 1);
        assert_eq!(etcd.member(0).host().name(), "m1");
        etcd.member_health(0, Duration::from_secs(2))
            .expect("m1 healthy");
        let recorded = std::fs::read_to_string(env.dir().join("test-name")).unwrap();
        assert_eq!(
            recorded.trim(),
            "harness_etcd_default_environment_is_a_joiner_and_one_healthy_member"
        );
        // Any command can run in a host with the harness's deadline.
        let mut ip = env.joiner().command("ip");
        ip.args(["-4", "-o", "addr", "show", "dev", "lab0"]);
        harness::run(&mut ip, Duration::from_secs(10))
            .assert_exit(0)
            .assert_stdout_contains(&format!("inet {}/24", env.joiner_addr()));
        let msg = panic_message(|| {
            env.run(["--version"]);
        });
        assert!(msg.contains("no program to run"), "{msg}");
    }
);

labtest!(
    harness_etcd_runs_in_lab_hosts_with_a_deadline_and_catches_leaked_keys,
    lab().run_timeout(Duration::from_millis(500)),
    |env| {
        let run = env.run([
            "-c",
            "ip -4 -o addr show dev lab0; echo to-stderr >&2; exit 7",
        ]);
        run.assert_exit(7)
            .assert_stdout_contains(&format!("inet {}/24", env.joiner_addr()))
            .assert_stderr_contains("to-stderr");
        assert!(
            run.command.contains("ip\" \"netns\" \"exec\""),
            "{}",
            run.command
        );
        env.run_in(env.host("m1"), ["-c", "ip -4 -o addr show dev lab0"])
            .assert_exit(0)
            .assert_stdout_contains(&format!("inet {}/24", env.host("m1").addr()));

        let t = Instant::now();
        let err = env.try_run(["-c", "sleep 10"]).unwrap_err();
        assert!(matches!(err, netlab::Error::Timeout { .. }), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

        // One base64 line of the etcd client key, without its PEM armor, is a leak.
        let key = env.etcd().client_identity().key;
        let leak = env.run(["-c", &format!("sed -n 2p {}", key.display())]);
        leak.assert_exit(0);
        let msg = panic_message(|| env.assert_no_secret(&leak));
        assert!(msg.contains("is printed on stdout"), "{msg}");
        let clean = env.run(["-c", "echo the report; echo the log >&2"]);
        env.assert_no_secret(&clean);
    }
);

labtest!(
    harness_etcd_cluster_status_layout_has_the_stand_in_and_the_kubeadm_init_objects,
    lab().layout(Layout::ClusterStatus),
    |env| {
        assert_eq!(names(&env), ["api", "joiner", "m1"]);
        assert!(env.api().url().starts_with("https://198.18.0.1:6443"));
        let cm = kubeadm_config(&env);
        let status = cm["data"]["ClusterStatus"].as_str().expect("ClusterStatus");
        assert!(status.contains("cp-1:"), "{status}");
        assert!(
            status.contains(&format!("advertiseAddress: {}", env.host("m1").addr())),
            "{status}"
        );
        let secret = token_secret(&env);
        assert_eq!(
            secret["data"]["token-secret"],
            Value::String(STANDARD.encode(SECRET))
        );
        // No certificate key, so no kubeadm-certs.
        assert!(env.fixture().certificate_key.is_none());
        env.kubectl(&["-n", "kube-system", "get", "secret", "kubeadm-certs"])
            .assert_exit(1)
            .assert_stderr_contains("NotFound");
        assert!(env.fixture().ca_pin.starts_with("sha256:"));
        // The admin kubeconfig carries the admin token; the no-secret check knows it.
        let kc = std::fs::read_to_string(env.admin_kubeconfig()).unwrap();
        assert!(kc.contains(env.api().admin_token()));
        assert!(env.secrets().iter().any(|s| s == env.api().admin_token()));
    }
);

labtest!(
    harness_etcd_pods_layout_with_uploaded_certs_on_three_members,
    lab()
        .members(3)
        .layout(Layout::EtcdPods)
        .upload_certs()
        .joiner_delay(Duration::from_millis(1)),
    |env| {
        assert_eq!(names(&env), ["api", "joiner", "m1", "m2", "m3"]);
        let pods = env
            .kubectl(&[
                "-n",
                "kube-system",
                "get",
                "pods",
                "-l",
                "component=etcd,tier=control-plane",
                "-o",
                "json",
            ])
            .assert_exit(0)
            .json();
        let mut urls: Vec<&str> = pods["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|p| {
                p["metadata"]["annotations"]["kubeadm.kubernetes.io/etcd.advertise-client-urls"]
                    .as_str()
                    .expect("annotation")
            })
            .collect();
        urls.sort();
        assert_eq!(urls, env.etcd().client_endpoints());
        assert!(kubeadm_config(&env)["data"].get("ClusterStatus").is_none());
        assert_eq!(env.fixture().certificate_key.as_deref(), Some(CERT_KEY));
        assert!(
            env.fixture()
                .kubeadm_certs
                .iter()
                .any(|n| n == "etcd-ca.key"),
            "{:?}",
            env.fixture().kubeadm_certs
        );
        env.kubectl(&["-n", "kube-system", "get", "secret", "kubeadm-certs"])
            .assert_exit(0);
        for m in ["m1", "m2", "m3"] {
            assert_eq!(
                env.lab().net().get(env.joiner(), env.host(m)),
                Impairment::delay(Duration::from_millis(1)),
                "joiner -> {m}"
            );
            assert_eq!(
                env.lab().net().get(env.host(m), env.joiner()),
                Impairment::delay(Duration::from_millis(1)),
                "{m} -> joiner"
            );
        }
        assert!(env
            .lab()
            .net()
            .get(env.joiner(), env.host("api"))
            .is_clean());
    }
);

labtest!(
    harness_etcd_external_layout_names_the_members_in_the_cluster_configuration,
    lab().layout(Layout::External).upload_certs(),
    |env| {
        let config = &env.fixture().cluster_configuration;
        assert!(config.contains("external:"), "{config}");
        for url in env.etcd().client_endpoints() {
            assert!(config.contains(&url), "{url} in {config}");
        }
        for entry in [
            "external-etcd.crt",
            "external-etcd.key",
            "external-etcd-ca.crt",
        ] {
            assert!(
                env.fixture().kubeadm_certs.iter().any(|n| n == entry),
                "{entry}: {:?}",
                env.fixture().kubeadm_certs
            );
        }
    }
);

labtest!(
    harness_etcd_fixture_hook_runs_after_the_layout,
    lab().fixture(|opts| {
        opts.token_expiration = None;
    }),
    |env| {
        let secret = token_secret(&env);
        assert!(
            secret["data"].get("expiration").is_none(),
            "a token without expiration: {}",
            secret["data"]
        );
    }
);
