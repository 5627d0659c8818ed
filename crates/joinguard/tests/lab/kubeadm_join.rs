//! The kubeadm join line, kubeadm's check names and kubeadm's config files, taken as kubeadm
//! spells them, end to end: the real binary in the joiner host of a netlab lab, against the API
//! server stand-in over a real 3-member etcd cluster (stacked layout, kubeadm-certs under a
//! certificate key). Every test name contains `etcd`, so CI runs them on etcd 3.4 and 3.5.
//!
//! The flag lists come from the recorded fact, `joinguard_core::kubeadm::flags::join_flags`, for each
//! supported kubeadm version: a flag added there is fed here without touching this file.

use std::time::Duration;

use joinguard_core::kubeadm::flags::{self, KubeadmFlag, ValueKind};
use joinguard_core::kubeadm::{KubeadmVersion, SUPPORTED_VERSIONS};
use netlab::harness::{EnvBuilder, LabEnv, Layout, Run, CERT_KEY, TOKEN, WRONG_PIN};
use netlab::{labtest, Impairment};
use serde_json::{json, Value};

/// A kubeadm >= 1.22 cluster: no ClusterStatus, the members named by the etcd pods'
/// annotations, kubeadm-certs encrypted with CERT_KEY; 1 ms each way from the joiner to every
/// member.
fn lab() -> EnvBuilder {
    crate::lab()
        .members(3)
        .layout(Layout::EtcdPods)
        .upload_certs()
        .joiner_delay(Duration::from_millis(1))
}

/// What these tests do with an environment: joinguard from the joiner, and the kubeadm files
/// Cluster API writes.
trait KubeadmLab {
    /// [`LabEnv::run`], then the no-secret check. `--help` runs skip it: their examples show
    /// the example token this lab uses.
    fn run_checked<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Run;
    fn control_plane_config(&self, bootstrap_extra: &str) -> String;
    fn worker_config(&self, bootstrap_extra: &str) -> String;
    fn pin_line(&self) -> String;
}

impl KubeadmLab for LabEnv {
    fn run_checked<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Run {
        let run = self.run(args);
        self.assert_no_secret(&run);
        run
    }

    /// A JoinConfiguration as Cluster API's bootstrap provider renders it for a control-plane
    /// machine (`/run/kubeadm/kubeadm-join-config.yaml`), with `extra` lines under
    /// `discovery.bootstrapToken`.
    fn control_plane_config(&self, bootstrap_extra: &str) -> String {
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    token: {TOKEN}\n{bootstrap_extra}controlPlane:\n  certificateKey: {CERT_KEY}\n  localAPIEndpoint:\n    advertiseAddress: {}\n    bindPort: 6443\nnodeRegistration:\n  name: joiner\n  criSocket: unix:///var/run/containerd/containerd.sock\n  kubeletExtraArgs:\n  - name: node-ip\n    value: {}\n",
            self.api().addr(),
            self.joiner_addr(),
            self.joiner_addr(),
        )
    }

    /// A worker's JoinConfiguration (no controlPlane): only the API path is checked.
    fn worker_config(&self, bootstrap_extra: &str) -> String {
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: {}\n    token: {TOKEN}\n{bootstrap_extra}nodeRegistration:\n  name: joiner\n",
            self.api().addr(),
        )
    }

    fn pin_line(&self) -> String {
        format!("    caCertHashes:\n    - {}\n", self.fixture().ca_pin)
    }
}

/// A realistic value for each kubeadm flag, as a kubeadm join line would carry it.
fn flag_args(f: &KubeadmFlag, env: &LabEnv) -> Vec<String> {
    let v = |value: &str| vec![format!("--{}", f.name), value.to_string()];
    match f.name {
        "apiserver-advertise-address" => v(&env.joiner_addr().to_string()),
        "apiserver-bind-port" => v("6443"),
        "certificate-key" => v(CERT_KEY),
        "cri-socket" => v("unix:///var/run/containerd/containerd.sock"),
        "discovery-token" | "tls-bootstrap-token" | "token" => v(TOKEN),
        "discovery-token-ca-cert-hash" => v(&env.fixture().ca_pin),
        "ignore-preflight-errors" => v("NumCPU,Mem,IsPrivilegedUser"),
        "node-name" => v("joiner"),
        "patches" => v("/etc/kubernetes/patches"),
        "skip-phases" => v("control-plane-join/mark-control-plane"),
        "rootfs" => v("/"),
        // kubeadm's troubleshooting level.
        "v" => vec!["--v=5".into()],
        "vmodule" => vec!["--vmodule=join*=5".into()],
        "log-backtrace-at" => vec!["--log-backtrace-at=join.go:120".into()],
        "log-dir" => v("/var/log/kubeadm"),
        "log-file" => v("/var/log/kubeadm-join.log"),
        "log-file-max-size" => v("1800"),
        "stderrthreshold" => vec!["--stderrthreshold=ERROR".into()],
        "logtostderr" => vec!["--logtostderr=true".into()],
        // The other booleans as a join line has them: bare, or `=true` for klog's.
        _ if f.value == ValueKind::Bool && f.origin == flags::Origin::Klog => {
            vec![format!("--{}=true", f.name)]
        }
        _ if f.value == ValueKind::Bool => vec![format!("--{}", f.name)],
        other => panic!("no realistic value for --{other}: add one"),
    }
}

labtest!(
    every_kubeadm_join_flag_of_each_version_runs_etcd,
    lab(),
    |env| {
        let discovery_kc = env.write("discovery.conf", &env.fixture().cluster_info_kubeconfig);
        let config = env.write(
            "kubeadm-join-config.yaml",
            &env.control_plane_config(&env.pin_line()),
        );
        // 1.28-1.30, 1.31-1.33 and 1.34-1.35 have the same lists within each group; a line is run
        // once per distinct list (the assertions hold for every version that has it).
        let mut ran: Vec<(Vec<String>, Vec<KubeadmVersion>)> = Vec::new();
        for version in SUPPORTED_VERSIONS {
            let all = flags::join_flags(version);
            let names: Vec<String> = all.iter().map(|f| f.name.to_string()).collect();
            if let Some((_, vs)) = ran.iter_mut().find(|(n, _)| *n == names) {
                vs.push(version);
                continue;
            }
            ran.push((names.clone(), vec![version]));

            // 1. The token-discovery line: every flag but --config and --discovery-file.
            let mut line: Vec<String> = vec!["preflight".into(), env.api().addr().to_string()];
            let mut fed: Vec<&str> = Vec::new();
            for f in all
                .iter()
                .filter(|f| !["config", "discovery-file"].contains(&f.name))
            {
                line.extend(flag_args(f, &env));
                fed.push(f.name);
            }
            let run = env.run_checked(&line);
            assert_eq!(run.code, 0, "kubeadm {version}: {line:?}\n{run}");
            // A control-plane join: the etcd members were found and probed with the minted identity.
            assert!(run.stdout.contains("etcd-status"), "{version}: {run}");
            assert!(
                run.stdout
                    .contains("etcd traffic leaves from the advertise address"),
                "{version}: {run}"
            );
            for k in ["NumCPU", "Mem", "IsPrivilegedUser"] {
                assert!(
                    run.stdout.contains(&format!(
                        "{k} is a kubeadm check; joinguard has nothing to ignore"
                    )),
                    "{version}: {run}"
                );
            }
            let listed = run
                .stderr
                .lines()
                .find(|l| l.contains("kubeadm flags accepted, not used by joinguard:"))
                .unwrap_or_else(|| panic!("{version}: no list of unused flags at --v=5\n{run}"));
            for f in all.iter().filter(|f| fed.contains(&f.name)) {
                let shown = listed.contains(&format!("--{},", f.name))
                    || listed.ends_with(&format!("--{}", f.name));
                assert_eq!(
                    shown,
                    !f.is_used(),
                    "{version}: --{} {} in the unused list: {listed}",
                    f.name,
                    if f.is_used() { "is" } else { "is not" }
                );
            }

            // 2. File discovery.
            let run = env.run_checked(&[
                "preflight".to_string(),
                "--discovery-file".into(),
                discovery_kc.display().to_string(),
                "--tls-bootstrap-token".into(),
                TOKEN.into(),
            ]);
            assert_eq!(run.code, 0, "{version} --discovery-file: {run}");
            assert!(
                run.stdout
                    .contains(&format!("{}  api-readyz", env.api().addr())),
                "{run}"
            );
            fed.push("discovery-file");

            // 3. --config with every flag kubeadm allows beside it in this version.
            let mut line = vec![
                "preflight".to_string(),
                "--config".into(),
                config.display().to_string(),
            ];
            for f in all
                .iter()
                .filter(|f| f.name != "config" && flags::allowed_with_config(f.name))
            {
                line.extend(flag_args(f, &env));
            }
            let run = env.run_checked(&line);
            assert_eq!(run.code, 0, "{version} --config: {line:?}\n{run}");
            assert!(run.stdout.contains("etcd-status"), "{version}: {run}");
            fed.push("config");

            for f in &all {
                assert!(
                    fed.contains(&f.name),
                    "{version}: --{} was never fed",
                    f.name
                );
            }
        }
        // -h, --help: every version.
        for help in ["-h", "--help"] {
            let run = env.run(["preflight", help]);
            assert_eq!(run.code, 0, "{run}");
            assert!(
                run.stdout
                    .contains("kubeadm flags accepted and not used by joinguard"),
                "{run}"
            );
        }
        assert_eq!(
            ran.iter().map(|(_, v)| v.len()).sum::<usize>(),
            SUPPORTED_VERSIONS.len()
        );
    }
);

labtest!(
    kubeadm_check_names_pass_and_a_slow_etcd_member_is_ignored,
    lab(),
    |env| {
        let m2 = env.lab().host("m2");
        env.lab().net().set_link(
            env.joiner(),
            m2,
            // 300 ms RTT: past 1/4 of the 1 s election timeout.
            Impairment::delay(Duration::from_millis(150)),
        );
        let m2_peer = format!("{}:2380", m2.addr());
        let line = |extra: &[&str]| -> Vec<String> {
            let mut l: Vec<String> = [
                "preflight",
                &env.api().addr().to_string(),
                "--control-plane",
                "--token",
                TOKEN,
                "--discovery-token-ca-cert-hash",
                &env.fixture().ca_pin,
                "--certificate-key",
                CERT_KEY,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            l.extend(extra.iter().map(|s| s.to_string()));
            l
        };

        // Without the ignore list the slow member fails the join.
        let run = env.run_checked(&line(&[]));
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains("[ERROR EtcdPeerLatency]") && l.contains(&m2_peer)),
            "{run}"
        );

        let ignore = "--ignore-preflight-errors=NumCPU,Mem,EtcdPeerLatency";
        let run = env.run_checked(&line(&[ignore]));
        assert_eq!(run.code, 0, "{run}");
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains("[WARNING EtcdPeerLatency]")
                    && l.contains(&m2_peer)
                    && l.ends_with("(ignored: --ignore-preflight-errors)")),
            "{run}"
        );
        for k in ["NumCPU", "Mem"] {
            assert!(
                run.stdout.contains(&format!(
                "[preflight] Note: {k} is a kubeadm check; joinguard has nothing to ignore for it"
            )),
                "{run}"
            );
        }

        let run = env.run_checked(&line(&[ignore, "-o", "json"]));
        assert_eq!(run.code, 0, "{run}");
        let v = run.json();
        assert_eq!(v["verdict"], "fit");
        assert!(
            v["checks"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == "EtcdPeerLatency"
                    && c["target"] == m2_peer.as_str()
                    && c["status"] == "ignored"),
            "{run}"
        );
        let notes: Vec<&str> = v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for k in ["NumCPU", "Mem"] {
            assert!(
                notes.contains(
                    &format!("{k} is a kubeadm check; joinguard has nothing to ignore for it")
                        .as_str()
                ),
                "{notes:?}"
            );
        }
        assert!(v.get("ignoredAll").is_none(), "{run}");

        // `all` keeps kubeadm's meaning, and the report says so loudly.
        let run = env.run_checked(&line(&["--ignore-preflight-errors=all"]));
        assert_eq!(run.code, 0, "{run}");
        assert!(
            run.stdout
                .contains("--ignore-preflight-errors=all: every joinguard error was ignored"),
            "{run}"
        );
        assert!(
            run.stdout
                .contains("No fatal errors only because every error was ignored"),
            "{run}"
        );
        let run = env.run_checked(&line(&["--ignore-preflight-errors=all", "-o", "json"]));
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(run.json()["ignoredAll"], true, "{run}");

        // `all` beside a name: kubeadm's exit 2.
        let run = env.run_checked(&line(&["--ignore-preflight-errors=all,NumCPU"]));
        assert_eq!(run.code, 2, "{run}");
        assert!(
            run.stderr.contains(
                "ignore-preflight-errors: Invalid value: \"all,numcpu\": don't specify individual \
             checks if 'all' is used"
            ),
            "{run}"
        );
        // Names kubeadm takes (any name: checks come and go between its versions) are taken,
        // with a note; they ignore nothing of joinguard's, so the slow member still fails it.
        let run = env.run_checked(&line(&[
            "--ignore-preflight-errors=NumCPU,IsDockerSystemdCheck,EtcdLatency",
            "-o",
            "json",
        ]));
        assert_eq!(run.code, 1, "{run}");
        let notes = run.json()["notes"].clone();
        for k in ["IsDockerSystemdCheck", "EtcdLatency"] {
            assert!(
                notes
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n
                        .as_str()
                        .is_some_and(|n| n.starts_with(&format!(
                            "{k} is not a check joinguard runs, nor one of kubeadm's it knows"
                        )) && n.contains("EtcdPeerLatency, EtcdClientLatency"))),
                "{notes}"
            );
        }

        // `all` in a JoinConfiguration's nodeRegistration.ignorePreflightErrors: kubeadm's
        // error, exit 2.
        let path = env.dir().join("join-all.yaml");
        std::fs::write(
            &path,
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  \
                 bootstrapToken:\n    apiServerEndpoint: {}\n    caCertHashes:\n    - {}\n    \
                 token: {TOKEN}\nnodeRegistration:\n  ignorePreflightErrors:\n  - all\n",
                env.api().addr(),
                env.fixture().ca_pin,
            ),
        )
        .unwrap();
        let run = env.run_checked(&[
            "preflight".to_string(),
            "--config".into(),
            path.display().to_string(),
        ]);
        assert_eq!(run.code, 2, "{run}");
        assert!(
            run.stderr.contains(
                "ignorePreflightErrors: Invalid value: \"all\": 'all' cannot be used in \
                 configuration file"
            ),
            "{run}"
        );
    }
);

labtest!(
    unsafe_skip_ca_verification_in_a_config_file_and_pins_beside_it_etcd,
    lab(),
    |env| {
        // kubeadm's spelling, no pins: discovery goes on without a pin, with the warning.
        let path = env.write(
            "skip.yaml",
            &env.worker_config("    unsafeSkipCAVerification: true\n"),
        );
        let run = env.run_checked(&["preflight", "--config", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run}");
        assert!(
            run.stderr
                .contains("the cluster CA was not verified against a pin"),
            "{run}"
        );
        assert!(
            run.stdout
                .contains("Running joinguard pre-flight checks for a worker join"),
            "{run}"
        );
        assert!(!run.stderr.contains("unknown field"), "{run}");

        // A wrong pin beside it is still checked, as kubeadm checks every pin it is given: exit 3.
        let path = env.write(
            "skip-wrong-pin.yaml",
            &env.worker_config(&format!(
                "    unsafeSkipCAVerification: true\n    caCertHashes:\n    - {WRONG_PIN}\n"
            )),
        );
        let run = env.run_checked(&["preflight", "--config", path.to_str().unwrap()]);
        assert_eq!(run.code, 3, "{run}");
        assert!(
            run.stderr.contains("matches none of the given CA pins"),
            "{run}"
        );

        // The same with flags.
        let run = env.run_checked(&[
            "preflight",
            &env.api().addr().to_string(),
            "--token",
            TOKEN,
            "--discovery-token-unsafe-skip-ca-verification",
            "--discovery-token-ca-cert-hash",
            WRONG_PIN,
        ]);
        assert_eq!(run.code, 3, "{run}");
    }
);

labtest!(
    config_beside_kubeadm_flags_follows_kubeadms_rule_for_preflight_and_update_status_etcd,
    lab(),
    |env| {
        let path = env.write("join.yaml", &env.worker_config(&env.pin_line()));
        let config = [
            "preflight".to_string(),
            "--config".into(),
            path.display().to_string(),
        ];
        let with = |extra: &[&str]| -> Vec<String> {
            config
                .iter()
                .cloned()
                .chain(extra.iter().map(|s| s.to_string()))
                .collect()
        };

        for (extra, names) in [
            (&["--control-plane"][..], "[control-plane]"),
            (
                &["--token", TOKEN, "--cri-socket", "unix:///x.sock"][..],
                "[cri-socket token]",
            ),
            (
                &["--discovery-token-ca-cert-hash", WRONG_PIN][..],
                "[discovery-token-ca-cert-hash]",
            ),
            (&["--vmodule=join*=5"][..], "[vmodule]"),
        ] {
            let run = env.run_checked(&with(extra));
            assert_eq!(run.code, 2, "{extra:?}: {run}");
            assert!(
                run.stderr
                    .contains(&format!("can not mix '--config' with arguments {names}")),
                "{extra:?}: {run}"
            );
        }

        // What kubeadm allows beside --config, and joinguard's own flags.
        let run = env.run_checked(&with(&[
            "--node-name",
            "joiner-2",
            "--ignore-preflight-errors=NumCPU",
            "--skip-phases=preflight",
            "--dry-run",
            "--v=5",
            "--rootfs=/",
            "--timeout",
            "30s",
            "-o",
            "json",
        ]));
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(run.json()["verdict"], "fit");

        // update-status: --node-name beside --config is kubeadm's, and overrides the file.
        let admin = env.write(
            "admin.conf",
            &env.api().kubeconfig(Some(env.api().admin_token())),
        );
        env.api()
            .upsert(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "cp-3", "labels": {"kubernetes.io/hostname": "cp-3"}},
            }))
            .expect("node");
        let cp_config = env.write("cp.yaml", &env.control_plane_config(&env.pin_line()));
        let status = |extra: &[&str]| -> Vec<String> {
            [
                "update-status",
                "--kubeconfig",
                &admin.display().to_string(),
                "--config",
                &cp_config.display().to_string(),
            ]
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
        };
        let run = env.run_checked(&status(&["--node-name", "cp-3"]));
        assert_eq!(run.code, 0, "{run}");
        assert!(run.stdout.contains("changed:   Node cp-3"), "{run}");
        let run = env.run_checked(&status(&[
            "--apiserver-bind-port",
            "6444",
            "--node-name",
            "cp-3",
        ]));
        assert_eq!(run.code, 2, "{run}");
        assert!(
            run.stderr
                .contains("can not mix '--config' with arguments [apiserver-bind-port]"),
            "{run}"
        );
    }
);

labtest!(
    an_unknown_config_field_warns_with_the_nearest_and_keeps_the_exit_code_etcd,
    lab(),
    |env| {
        let good = env.worker_config(&env.pin_line());
        let typo = good.replace("  name: joiner\n", "  nmae: joiner\n") + "discovery2: {}\n";
        for (name, text, want_warnings) in [("good.yaml", &good, false), ("typo.yaml", &typo, true)]
        {
            let path = env.write(name, text);
            let run = env.run_checked(&["preflight", "--config", path.to_str().unwrap()]);
            assert_eq!(run.code, 0, "{name}: {run}");
            let warned = |w: &str| run.stderr.contains(w);
            assert_eq!(
            warned(
                "unknown field nodeRegistration.nmae (kubeadm ignores it too); the nearest known \
                 field is nodeRegistration.name"
            ),
            want_warnings,
            "{name}: {run}"
        );
            assert_eq!(
            warned(
                "unknown field discovery2 (kubeadm ignores it too); the nearest known field is \
                 discovery"
            ),
            want_warnings,
            "{name}: {run}"
        );
        }
        // The same for a failing file: a wrong pin stays exit 3 with the typo.
        let failing = typo.replace(&env.fixture().ca_pin, WRONG_PIN);
        let path = env.write("typo-wrong-pin.yaml", &failing);
        let run = env.run_checked(&["preflight", "--config", path.to_str().unwrap()]);
        assert_eq!(run.code, 3, "{run}");
        assert!(
            run.stderr.contains("unknown field nodeRegistration.nmae"),
            "{run}"
        );
    }
);
