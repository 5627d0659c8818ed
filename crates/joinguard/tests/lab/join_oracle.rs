//! The join oracle (`netlab::join`): a real etcd learner join from the joiner's namespace, on
//! kubeadm's budgets, then a stability window. These tests pin what the oracle reports on a
//! clean path and on a path whose dial kubeadm cannot finish in 2 s (CAPZ #5687), so that the
//! sweep (`scripts/join-sweep`) can trust it.
//!
//! Tests whose name contains `etcd` run twice in CI, once per etcd version.

use std::time::Duration;

use netlab::harness::EnvBuilder;
use netlab::join::{JoinStep, KubeadmEtcdTiming, StabilityWindow};
use netlab::{labtest, Impairment};

/// joiner + 3 members, 1 ms each way between the joiner and every member.
fn lab() -> EnvBuilder {
    crate::lab()
        .members(3)
        .joiner_delay(Duration::from_millis(1))
}

labtest!(
    etcd_oracle_a_clean_path_joins_and_stays_stable,
    lab(),
    |mut env| {
        let joiner = env.joiner().clone();
        let out = env
            .etcd_mut()
            .kubeadm_join(&joiner, &KubeadmEtcdTiming::default())
            .expect("lab");
        eprintln!("oracle, clean path: {}", out.summary());
        assert!(out.joined(), "{}", out.summary());
        let steps: Vec<JoinStep> = out.steps.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            steps,
            [
                JoinStep::Dial,
                JoinStep::MemberAdd,
                JoinStep::Start,
                JoinStep::PromoteDial,
                JoinStep::Promote,
                JoinStep::ClusterHealth
            ]
        );
        // The member really is a voter now, as etcdctl sees it.
        let list = env
            .etcd()
            .etcdctl(env.joiner())
            .args(["member", "list", "-w", "json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let members = v["members"].as_array().unwrap();
        assert_eq!(members.len(), 4, "{v}");
        assert!(
            members
                .iter()
                .all(|m| m["isLearner"].as_bool() != Some(true)),
            "{v}"
        );
        let window = StabilityWindow {
            duration: Duration::from_secs(10),
            ..StabilityWindow::default()
        };
        let st = env.etcd().stability(&window).expect("lab");
        eprintln!("oracle, clean path, window: {}", st.summary());
        assert!(st.requests > 100, "{}", st.summary());
        assert!(st.stable(), "{}", st.summary());
        // The window's keys are gone.
        let left = env
            .etcd()
            .etcdctl(env.joiner())
            .args(["get", "--prefix", "/netlab-oracle/", "--keys-only"])
            .output()
            .unwrap();
        assert!(left.status.success());
        assert!(
            String::from_utf8_lossy(&left.stdout).trim().is_empty(),
            "keys left behind"
        );
    }
);

labtest!(
    /// A 1.4 s RTT: the TCP and TLS handshakes and the sync cannot finish within kubeadm's
    /// 2 s blocking dial, so the join fails at its first step, within about 2 s, and nothing
    /// was added to etcd.
    etcd_oracle_a_slow_dial_fails_the_join_at_its_first_step,
    lab(),
    |mut env| {
        let joiner = env.joiner().clone();
        let members: Vec<_> = env.etcd().members().iter().map(|m| m.host.clone()).collect();
        for m in &members {
            env.lab()
                .net()
                .set_link(&joiner, m, Impairment::delay(Duration::from_millis(700)));
        }
        let out = env
            .etcd_mut()
            .kubeadm_join(&joiner, &KubeadmEtcdTiming::default())
            .expect("lab");
        eprintln!("oracle, 1.4 s RTT: {}", out.summary());
        let (step, why) = out.failed.clone().expect("the join must fail");
        assert_eq!(step, JoinStep::Dial, "{}", out.summary());
        assert!(why.contains("deadline"), "{why}");
        eprintln!("margin: the oracle's 2 s dial took {:?}, against 3 s", out.took);
        assert!(out.took < Duration::from_secs(3), "{:?}", out.took);
        // Nothing was added: the member list still has 3 members (read from a member's host).
        let list = env
            .etcd()
            .etcdctl(&members[0])
            .args(["member", "list"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&list.stdout).lines().count(), 3);
    }
);

/// joinguard's verdict from the joiner, as `(exit code, checks in error)`.
fn verdict(env: &netlab::harness::LabEnv) -> (i32, Vec<String>) {
    let mut args = vec!["preflight".to_string(), "-o".into(), "json".into()];
    args.extend(env.etcd().joinguard_args());
    let run = env.run(args);
    let v = run.json();
    eprintln!(
        "DEBUG {}",
        serde_json::to_string_pretty(&v["checks"]).unwrap()
    );
    let errors = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "error")
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    (run.code, errors)
}

labtest!(
    /// The verdict against the oracle on three cells: a clean path (fit; the clean join is
    /// `etcd_oracle_a_clean_path_joins_and_stays_stable`), a 1.4 s RTT (unfit, and the join
    /// fails at its dial), and a 200 ms RTT near the peer-latency error limit (250 ms, 1/4 of
    /// the 1 s election timeout): fit with warnings, and the join works and stays stable, as
    /// every cell up to 300 ms did in the join sweep (docs/thresholds.md).
    etcd_verdict_agrees_with_the_oracle_on_a_clean_a_failing_and_a_near_boundary_path,
    lab(),
    |mut env| {
        let joiner = env.joiner().clone();
        let (code, errors) = verdict(&env);
        assert_eq!((code, errors.as_slice()), (0, &[] as &[String]), "clean path");

        let members: Vec<_> = env.etcd().members().iter().map(|m| m.host.clone()).collect();
        let set_delay = |env: &netlab::harness::LabEnv, ms: u64| {
            for m in &members {
                env.lab()
                    .net()
                    .set_link(&joiner, m, Impairment::delay(Duration::from_millis(ms)));
            }
        };
        set_delay(&env, 700);
        let (code, errors) = verdict(&env);
        assert_eq!(code, 1, "1.4 s RTT: {errors:?}");
        // What fails the join is named: the dial (2 s in kubeadm) of every member. etcd 3.4
        // completes the connection in about 3 RTT (a dial of ~4 s), 3.5 not within the probe's
        // 5 s; either way each member is an EtcdDialTime error, not unreachable.
        let dial_errors = errors.iter().filter(|e| *e == "EtcdDialTime").count();
        assert_eq!(dial_errors, members.len(), "{errors:?}");
        assert!(!errors.iter().any(|e| e.ends_with("Reachable")), "{errors:?}");
        let out = env
            .etcd_mut()
            .kubeadm_join(&joiner, &KubeadmEtcdTiming::default())
            .expect("lab");
        assert!(!out.joined(), "unfit, and the join failed: {}", out.summary());

        // Near the boundary: fit (warnings only), and the join works and stays stable.
        set_delay(&env, 100);
        // Packets still queued under the 700 ms delay hold back the ones behind them (the
        // forwarder never reorders a direction), so for up to 700 ms each way the path is not
        // yet the 200 ms one: a preflight started at once lost the first echoes of one member
        // to that backlog (49 of 50 late, a PacketLoss error). Let it drain.
        std::thread::sleep(Duration::from_millis(1500));
        let (code, errors) = verdict(&env);
        assert_eq!((code, errors.as_slice()), (0, &[] as &[String]), "200 ms RTT");
        let out = env
            .etcd_mut()
            .kubeadm_join(&joiner, &KubeadmEtcdTiming::default())
            .expect("lab");
        eprintln!("oracle, 200 ms RTT: {}", out.summary());
        assert!(out.joined(), "{}", out.summary());
        let window = StabilityWindow {
            duration: Duration::from_secs(10),
            ..StabilityWindow::default()
        };
        let st = env.etcd().stability(&window).expect("lab");
        eprintln!("oracle, 200 ms RTT, window: {}", st.summary());
        assert!(st.stable(), "{}", st.summary());
    }
);
