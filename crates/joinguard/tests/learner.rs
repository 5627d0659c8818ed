//! The etcd learner library (`joinguard_core::learner`) on real 3-member etcd clusters in netlab:
//! cleanup of leftover members made with the real `etcdctl member add`, promotion of a started
//! learner, and a promotion whose answer the forwarder drops after etcd applied it. Each test
//! asserts the outcome a user would see and the writes etcd counted
//! (`grpc_server_started_total{grpc_method=...}` on every member's `/metrics`).
//!
//! In CI (scripts/test) every test here runs on etcd 3.4.23; all but the 100 MiB catch-up run
//! again on Debian sid's etcd (3.5.30), and that one again on 3.5.1.

#[allow(dead_code)]
#[path = "lab/schema.rs"]
mod schema;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use joinguard::cli::named;
use joinguard_core::input::Input;
use joinguard_core::learner::{
    cleanup, promote, CleanupOutcome, CleanupSpec, EtcdAccess, MemberState, NodeRef, Progress,
    PromoteOutcome, PromoteSpec,
};
use joinguard_core::probe::identity::{CaBundle, ClientIdentity};
use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::harness::serial;
use netlab::process::output_within;
use netlab::{Host, Impairment, IpFamily, Lab};

struct Fixture {
    etcd: EtcdCluster,
    lab: Lab,
}

impl Fixture {
    /// joiner, m1..m3 running etcd, m4 without etcd (the node whose join failed).
    fn new() -> Fixture {
        Fixture::with_spec(&EtcdSpec::default())
    }

    fn with_spec(spec: &EtcdSpec) -> Fixture {
        Fixture::with(spec, IpFamily::V4)
    }

    fn with(spec: &EtcdSpec, family: IpFamily) -> Fixture {
        let lab = Lab::builder()
            .hosts(["joiner", "m1", "m2", "m3", "m4"])
            .ip_family(family)
            .build()
            .expect("lab");
        let hosts: Vec<&Host> = lab.hosts()[1..=3].iter().collect();
        let etcd = EtcdCluster::start(&lab, &hosts, spec).expect("etcd");
        etcd.wait_healthy(Duration::from_secs(30))
            .expect("etcd healthy");
        Fixture { etcd, lab }
    }

    fn joiner(&self) -> &Host {
        self.lab.host("joiner")
    }

    fn m4(&self) -> &Host {
        self.lab.host("m4")
    }

    fn access(&self) -> EtcdAccess {
        let id = self.etcd.client_identity();
        EtcdAccess {
            endpoints: self.etcd.members()[..3]
                .iter()
                .map(|m| m.client_url().to_string())
                .collect(),
            ca: CaBundle::load(named(Input::EtcdCacert), &id.ca).expect("ca"),
            identity: Some(
                ClientIdentity::load(
                    (named(Input::EtcdCert), &id.cert),
                    (named(Input::EtcdKey), &id.key),
                )
                .expect("identity"),
            ),
        }
    }

    /// m4 as kubeadm names it: node name `m4`, advertise address m4's.
    fn m4_node(&self) -> NodeRef {
        NodeRef::new(Some("m4"), Some(self.m4().addr().into()))
    }

    /// Real etcdctl, from the joiner; panics with stderr on failure.
    fn etcdctl(&self, args: &[&str]) -> String {
        let mut cmd = self.etcd.etcdctl_to(
            self.joiner(),
            &self.etcd.members()[..1]
                .iter()
                .map(|m| m.client_url().to_string())
                .collect::<Vec<_>>(),
        );
        cmd.args(args);
        let out = output_within(&mut cmd, Duration::from_secs(20)).expect("etcdctl");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `etcdctl member add m4 [--learner] --peer-urls=https://<m4>:2380`, never started.
    /// Retried while etcd says "unhealthy cluster" (members connected < 5 s ago).
    fn add_unstarted(&self, learner: bool) -> u64 {
        let peer = format!(
            "--peer-urls=https://{}",
            netlab::authority(self.m4().ip(), 2380)
        );
        let mut args = vec!["member", "add", "m4", peer.as_str()];
        if learner {
            args.push("--learner");
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut cmd = self.etcd.etcdctl(self.joiner());
            cmd.args(&args);
            let out = output_within(&mut cmd, Duration::from_secs(20)).expect("etcdctl");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.status.success() {
                // "Member 8e9e05c52164694d added to cluster ..."
                let hex = text
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_else(|| panic!("member add output: {text}"));
                return u64::from_str_radix(hex, 16).expect("member id");
            }
            assert!(
                Instant::now() < deadline,
                "member add: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits until the learner on m4 (index 3) has the leader's raft index, from `etcdctl
    /// endpoint status` on both.
    fn wait_learner_caught_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let index = |url: &str| -> Option<u64> {
            let mut cmd = self.etcd.etcdctl_to(self.joiner(), &[url.to_string()]);
            cmd.args(["endpoint", "status", "-w", "json"]);
            let out = output_within(&mut cmd, Duration::from_secs(10)).ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            // etcdctl's JSON printer spells it `raftIndex`.
            v[0]["Status"]["raftIndex"].as_u64()
        };
        loop {
            let leader = self.etcd.leader().expect("leader");
            let l = index(self.etcd.member(leader).client_url());
            let m = index(self.etcd.member(3).client_url());
            if let (Some(l), Some(m)) = (l, m) {
                if m >= l {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "learner never caught up: {l:?} vs {m:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Member ids etcdctl lists (hex, as etcdctl prints them).
    fn member_ids(&self) -> Vec<String> {
        self.etcdctl(&["member", "list"])
            .lines()
            .filter_map(|l| l.split(',').next().map(|s| s.trim().to_string()))
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The sum over running members of `grpc_server_started_total` for `method`: every call
    /// etcd received, whatever its answer.
    fn calls(&self, method: &str) -> u64 {
        let needle = format!("grpc_method=\"{method}\"");
        self.etcd
            .running()
            .into_iter()
            .map(|i| {
                let text = self.etcd.metrics(i).expect("metrics");
                text.lines()
                    .filter(|l| l.starts_with("grpc_server_started_total{") && l.contains(&needle))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum::<f64>() as u64
            })
            .sum()
    }

    fn run_cleanup(&self, spec: &CleanupSpec) -> (CleanupOutcome, Vec<String>) {
        let seen = Mutex::new(Vec::new());
        let sink = |p: &Progress| seen.lock().unwrap().push(p.to_string());
        let out = self
            .joiner()
            .block_on(|| async { cleanup(spec, &sink).await })
            .expect("block_on")
            .expect("cleanup");
        // The outcome as the run ended, for the runbook (docs/etcd-learner.md) and for failures.
        let events = seen.into_inner().unwrap();
        eprintln!("cleanup {:?}: {out:?}\n  events: {events:?}", spec.node);
        (out, events)
    }

    fn cleanup_spec(&self, node: NodeRef, member_id: Option<u64>, dry_run: bool) -> CleanupSpec {
        CleanupSpec {
            access: self.access(),
            node,
            member_id,
            dry_run,
            timeout: Duration::from_secs(30),
            per_attempt: None,
        }
    }

    fn promote_spec(&self) -> PromoteSpec {
        PromoteSpec {
            access: self.access(),
            node: self.m4_node(),
            timeout: Duration::from_secs(60),
            per_attempt: None,
            learner_metrics_url: None,
        }
    }
}

#[test]
fn cleanup_etcd_removes_an_unstarted_member_once_and_a_second_run_writes_nothing() {
    let _g = serial();
    let f = Fixture::new();
    let id = f.add_unstarted(false);
    assert_eq!(f.member_ids().len(), 4);

    let (dry, _) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), None, true));
    match &dry {
        CleanupOutcome::WouldRemove { member, quorum } => {
            assert_eq!(member.id, id);
            assert_eq!(member.state, MemberState::Unstarted);
            let q = quorum.expect("an unstarted voter counts toward quorum");
            assert_eq!((q.voters, q.voters_after, q.answering), (4, 3, 3));
        }
        other => panic!("dry run: {other:?}"),
    }
    assert_eq!(f.calls("MemberRemove"), 0, "a dry run writes nothing");
    assert_eq!(f.member_ids().len(), 4);

    let (first, events) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), None, false));
    match &first {
        CleanupOutcome::Removed { member, .. } => {
            assert_eq!(member.id, id);
            assert_eq!(member.state, MemberState::Unstarted);
        }
        other => panic!("cleanup: {other:?}"),
    }
    assert!(events
        .iter()
        .any(|e| e.starts_with("removing unstarted member")));
    assert_eq!(f.member_ids().len(), 3);
    assert_eq!(f.calls("MemberRemove"), 1);

    let (second, _) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), None, false));
    match &second {
        CleanupOutcome::NothingToDo(msg) => assert!(msg.contains("nothing to remove"), "{msg}"),
        other => panic!("second cleanup: {other:?}"),
    }
    assert_eq!(
        f.calls("MemberRemove"),
        1,
        "the second run sent no MemberRemove"
    );
}

#[test]
fn cleanup_etcd_removes_a_stale_learner() {
    let _g = serial();
    let f = Fixture::new();
    let id = f.add_unstarted(true);
    let (out, _) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), None, false));
    match &out {
        CleanupOutcome::Removed { member, quorum, .. } => {
            assert_eq!(member.id, id);
            assert_eq!(member.state, MemberState::Learner);
            assert_eq!(*quorum, None, "a learner never counts toward quorum");
        }
        other => panic!("cleanup: {other:?}"),
    }
    assert_eq!(f.member_ids().len(), 3);
    assert_eq!(f.calls("MemberRemove"), 1);
}

#[test]
fn cleanup_etcd_refuses_a_started_voter_by_name_and_by_member_id() {
    let _g = serial();
    let f = Fixture::new();
    let m1 = f.lab.host("m1");
    let (by_name, _) = f.run_cleanup(&f.cleanup_spec(
        NodeRef::new(Some("m1"), Some(m1.addr().into())),
        None,
        false,
    ));
    let CleanupOutcome::Refused(msg) = &by_name else {
        panic!("by name: {by_name:?}")
    };
    assert!(
        msg.contains("is a started voter: cleanup never removes one"),
        "{msg}"
    );
    assert!(msg.contains("kubeadm join phase control-plane-join mark-control-plane"));
    let m1_id = u64::from_str_radix(&f.member_ids()[0], 16).unwrap();
    let (by_id, _) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), Some(m1_id), false));
    assert!(
        matches!(&by_id, CleanupOutcome::Refused(m) if m.contains("started voter")),
        "{by_id:?}"
    );
    assert_eq!(f.calls("MemberRemove"), 0);
    assert_eq!(f.member_ids().len(), 3);
}

#[test]
fn cleanup_etcd_refuses_another_nodes_learner_unless_named_by_member_id() {
    let _g = serial();
    let f = Fixture::new();
    let id = f.add_unstarted(true);
    // Run as the joiner: the learner is m4's, not ours.
    let joiner = NodeRef::new(Some("joiner"), Some(f.joiner().addr().into()));
    let (out, _) = f.run_cleanup(&f.cleanup_spec(joiner.clone(), None, false));
    let CleanupOutcome::Refused(msg) = &out else {
        panic!("without --member-id: {out:?}")
    };
    assert!(msg.contains("which is not this node's"), "{msg}");
    assert!(msg.contains(&format!("--member-id {id:x}")), "{msg}");
    assert_eq!(f.calls("MemberRemove"), 0);
    assert_eq!(f.member_ids().len(), 4);

    let (named, _) = f.run_cleanup(&f.cleanup_spec(joiner, Some(id), false));
    assert!(
        matches!(&named, CleanupOutcome::Removed { member, .. } if member.id == id),
        "{named:?}"
    );
    assert_eq!(f.calls("MemberRemove"), 1);
    assert_eq!(f.member_ids().len(), 3);
}

#[test]
fn cleanup_etcd_refuses_a_removal_that_leaves_no_quorum() {
    let _g = serial();
    let mut f = Fixture::new();
    f.add_unstarted(false);
    // 4 voters (one never started); stop two of the three that run: after removing the
    // unstarted one, 3 voters need 2 and only m1 answers.
    f.etcd.stop_member(1).unwrap();
    f.etcd.stop_member(2).unwrap();
    let (out, _) = f.run_cleanup(&f.cleanup_spec(f.m4_node(), None, false));
    let CleanupOutcome::Refused(msg) = &out else {
        panic!("cleanup: {out:?}")
    };
    assert!(
        msg.contains("would leave the cluster without quorum"),
        "{msg}"
    );
    assert!(
        msg.contains(
            "4 voters now (quorum 3); after the removal 3 voters need 2 for quorum and 1 answer"
        ),
        "{msg}"
    );
    assert_eq!(f.calls("MemberRemove"), 0);
}

#[test]
fn promote_etcd_promotes_a_started_learner_and_a_second_run_has_nothing_to_do() {
    let _g = serial();
    let mut f = Fixture::new();
    let m4 = f.m4().clone();
    f.etcd.add_learner(&m4).expect("learner");
    let spec = f.promote_spec();
    let seen = Mutex::new(Vec::new());
    let sink = |p: &Progress| seen.lock().unwrap().push(p.to_string());
    let out = f
        .joiner()
        .block_on(|| async { promote(&spec, &sink).await })
        .unwrap()
        .expect("promote");
    let events = seen.into_inner().unwrap();
    match &out {
        PromoteOutcome::Promoted {
            member,
            confirmed_by_reread,
            ..
        } => {
            assert_eq!(member.state, MemberState::Voter);
            assert!(!confirmed_by_reread);
        }
        other => panic!("promote: {other:?}\n{events:#?}"),
    }
    assert!(
        events.iter().any(|e| e.contains("catching up")),
        "{events:#?}"
    );
    let listed = f.etcdctl(&["member", "list"]);
    assert!(
        listed.lines().all(|l| l.trim_end().ends_with("false")),
        "no learner left:\n{listed}"
    );
    let calls = f.calls("MemberPromote");

    let again = f
        .joiner()
        .block_on(|| async { promote(&spec, &|_: &Progress| {}).await })
        .unwrap()
        .expect("promote again");
    assert!(
        matches!(&again, PromoteOutcome::AlreadyVoter { .. }),
        "{again:?}"
    );
    assert_eq!(
        f.calls("MemberPromote"),
        calls,
        "nothing sent the second time"
    );
}

#[test]
fn promote_etcd_lost_answer_is_resolved_by_member_list_with_one_member_promote() {
    let _g = serial();
    let mut f = Fixture::new();
    let m4 = f.m4().clone();
    f.etcd.add_learner(&m4).expect("learner");
    // Caught up first, so that the one MemberPromote sent is accepted (a refused one, its
    // answer dropped, would be re-read and sent again: correct, but not this test).
    f.wait_learner_caught_up();
    let leader = f.etcd.leader().expect("leader");
    let leader_host = f.etcd.member(leader).host().clone();
    let spec = f.promote_spec();
    let net = f.lab.net();
    let joiner = f.joiner().clone();
    let dropped_at = Mutex::new(None::<Instant>);
    // Drop everything the leader sends the joiner from the moment MemberPromote is sent: the
    // request reaches etcd and is applied, its answer never arrives. The path comes back 3 s
    // later (after the 2 s attempt timeout).
    let sink = |p: &Progress| {
        if let Progress::Promoting { .. } = p {
            let mut at = dropped_at.lock().unwrap();
            if at.is_none() {
                net.set(&leader_host, &joiner, Impairment::blackout());
                *at = Some(Instant::now());
            }
        }
        if let Some(t) = *dropped_at.lock().unwrap() {
            if t.elapsed() >= Duration::from_secs(3) {
                net.set(&leader_host, &joiner, Impairment::none());
            }
        }
    };
    let restore = std::thread::scope(|s| {
        let h = s.spawn(|| {
            // The sink only runs when promote reports something; lift the blackout on time
            // even if it is silent.
            loop {
                std::thread::sleep(Duration::from_millis(50));
                if let Some(t) = *dropped_at.lock().unwrap() {
                    if t.elapsed() >= Duration::from_secs(3) {
                        net.set(&leader_host, &joiner, Impairment::none());
                        return t.elapsed();
                    }
                }
            }
        });
        let out = f
            .joiner()
            .block_on(|| async { promote(&spec, &sink).await })
            .unwrap();
        (out, h.join().unwrap())
    });
    let (out, _) = restore;
    let out = out.expect("promote");
    match &out {
        PromoteOutcome::Promoted {
            confirmed_by_reread,
            promote_calls,
            ..
        } => {
            assert!(confirmed_by_reread, "{out:?}");
            assert_eq!(*promote_calls, 1);
        }
        other => panic!("promote: {other:?}"),
    }
    assert!(dropped_at.lock().unwrap().is_some(), "the blackout was set");
    assert_eq!(
        f.calls("MemberPromote"),
        1,
        "etcd received exactly one MemberPromote"
    );
}

/// Puts `mib` MiB into the cluster from the joiner, in 512 KiB values (etcd's default request
/// limit is 1.5 MiB), four at a time.
fn preload(f: &Fixture, mib: usize, kib: usize) {
    use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
    let id = f.etcd.client_identity();
    let tls = TlsOptions::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&id.ca).unwrap()))
        .identity(Identity::from_pem(
            std::fs::read(&id.cert).unwrap(),
            std::fs::read(&id.key).unwrap(),
        ));
    let endpoints = f.access().endpoints;
    f.joiner()
        .block_on(|| async move {
            let opts = ConnectOptions::new()
                .with_tls(tls)
                .with_timeout(Duration::from_secs(30));
            let client = Client::connect(endpoints, Some(opts))
                .await
                .expect("connect");
            // Smaller values make more raft entries for the same size (past etcd's 5000
            // catch-up entries, the learner needs a snapshot).
            let value = vec![b'x'; kib << 10];
            let puts = mib * 1024 / kib;
            let width = if kib < 64 { 16 } else { 4 };
            let mut next = 0;
            while next < puts {
                let mut batch = Vec::new();
                for k in next..(next + width).min(puts) {
                    let (mut c, v) = (client.clone(), value.clone());
                    batch.push(tokio::spawn(async move {
                        c.put(format!("/preload/{k:05}"), v, None).await
                    }));
                }
                next += batch.len();
                for b in batch {
                    b.await.unwrap().expect("put");
                }
            }
        })
        .unwrap();
}

/// One catch-up behind a rate-limited link: `mib` of values of `kib` each, etcd with
/// `--snapshot-count=snapshot_count` when given. Returns the progress lines (seconds since the
/// learner was added, text).
fn rate_limited_catch_up(
    mib: usize,
    kib: usize,
    snapshot_count: Option<u64>,
) -> Vec<(f64, String)> {
    let env_u64 = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let mib = env_u64("JOINGUARD_LEARNER_DB_MIB").map_or(mib, |v| v as usize);
    let kib = env_u64("JOINGUARD_LEARNER_VALUE_KIB").map_or(kib, |v| v as usize);
    let mut spec = EtcdSpec::default();
    if let Some(n) = env_u64("JOINGUARD_LEARNER_SNAPSHOT_COUNT").or(snapshot_count) {
        spec.extra_args.push(format!("--snapshot-count={n}"));
    }
    let mut f = Fixture::with_spec(&spec);
    let t = Instant::now();
    preload(&f, mib, kib);
    let leader = f.etcd.leader().expect("leader");
    let db = f
        .etcd
        .metric_sum(leader, "etcd_mvcc_db_total_size_in_bytes")
        .unwrap_or(0.0) as u64;
    eprintln!(
        "preloaded {mib} MiB in {:.1}s; leader db {} bytes",
        t.elapsed().as_secs_f64(),
        db
    );
    // A rate that makes the transfer take about 25 s (at least 20 s), on every member -> m4
    // link: only the leader sends bulk data, but a leader change must not lift the limit.
    // JOINGUARD_LEARNER_RATE_BPS and JOINGUARD_LEARNER_QUEUE_BYTES set another link (the
    // experiments in docs/etcd-learner.md: a slow link with a deep queue).
    let bps = env_u64("JOINGUARD_LEARNER_RATE_BPS").unwrap_or((mib as u64 * 1024 * 1024 * 8) / 25);
    let mut link = Impairment::none().with_rate(bps);
    if let Some(q) = env_u64("JOINGUARD_LEARNER_QUEUE_BYTES") {
        link.queue_bytes = q as usize;
    }
    let m4 = f.m4().clone();
    for i in 0..3 {
        let h = f.etcd.member(i).host().clone();
        f.lab.net().set(&h, &m4, link.clone());
    }
    let added = Instant::now();
    f.etcd.add_learner(&m4).expect("learner");
    let mut spec = f.promote_spec();
    spec.timeout = Duration::from_secs(240);
    spec.learner_metrics_url = Some(f.etcd.member(3).metrics_url().to_string());

    let seen = Mutex::new(Vec::<(f64, String)>::new());
    let sink = |p: &Progress| {
        seen.lock()
            .unwrap()
            .push((added.elapsed().as_secs_f64(), p.to_string()))
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (out, returned, ready_at) = std::thread::scope(|s| {
        // The moment etcd would accept the promotion, watched from outside: the learner's
        // committed index (its metrics) at 90% of the leader's, every 100 ms.
        let watcher = s.spawn(|| {
            let committed = |i| {
                f.etcd
                    .metric_sum(i, "etcd_server_proposals_committed_total")
            };
            let read = || {
                let (l, m) = (committed(leader), committed(3));
                let ready = matches!((&l, &m), (Ok(l), Ok(m)) if *l > 0.0 && *m >= l * 0.9);
                (ready, (l, m))
            };
            // Every 100 ms while promote runs, and on for up to 3 s after it returns: promote
            // can finish between two reads (a snapshot applied moves the index from 0 to the
            // leader's at once), or just before the watcher sees 90%: etcd judges the learner's
            // raft Match index as the leader tracks it, and the committed index the learner's
            // metrics show trails it by the entries in flight (a paired run on 2026-12-06 saw
            // 195 of 217, 89.9%, when etcd accepted the promotion). The promoted member keeps
            // receiving entries, and `ready_at` may then fall just after `returned`.
            let mut until = None;
            let last = loop {
                let (ready, seen) = read();
                if ready {
                    return Some(added.elapsed());
                }
                if done.load(std::sync::atomic::Ordering::Relaxed) {
                    let until =
                        *until.get_or_insert_with(|| Instant::now() + Duration::from_secs(3));
                    if Instant::now() >= until {
                        break seen;
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            eprintln!("watcher: last leader, learner committed: {last:?}");
            None
        });
        let out = f
            .joiner()
            .block_on(|| async { promote(&spec, &sink).await })
            .unwrap();
        let returned = added.elapsed();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (out, returned, watcher.join().unwrap())
    });
    let events = seen.into_inner().unwrap();
    // Every 8th progress line; all of them with JOINGUARD_LEARNER_ALL_EVENTS set.
    let every = if std::env::var_os("JOINGUARD_LEARNER_ALL_EVENTS").is_some() {
        1
    } else {
        8
    };
    for (t, e) in events
        .iter()
        .filter(|(_, e)| every == 1 || !e.contains("attempt"))
        .step_by(every)
    {
        eprintln!("{t:7.2}s  {e}");
    }
    eprintln!(
        "outcome after {:.2}s: {out:?}; watcher: {ready_at:?}; {} MemberPromote calls",
        returned.as_secs_f64(),
        f.calls("MemberPromote")
    );
    let out = out.expect("promote");
    assert!(matches!(out, PromoteOutcome::Promoted { .. }), "{out:?}");
    let ready_at = ready_at.expect("the watcher saw the learner reach 90%");
    eprintln!(
        "etcd {}: db {mib} MiB, rate {:.1} Mbit/s: learner at 90% after {:.2}s, promoted at {:.2}s: \
         {:.2}s after; {} MemberPromote calls",
        f.etcd.version(),
        bps as f64 / 1e6,
        ready_at.as_secs_f64(),
        returned.as_secs_f64(),
        returned.as_secs_f64() - ready_at.as_secs_f64(),
        f.calls("MemberPromote")
    );
    assert!(
        ready_at >= Duration::from_secs(15),
        "the catch-up took {ready_at:?}: the link limit did not hold"
    );
    // A loose bound: the figure is the report, not the assertion.
    assert!(
        returned < ready_at + Duration::from_secs(5),
        "promoted {returned:?}, ready {ready_at:?}"
    );
    events
}

/// The learner behind a rate-limited link with a pre-loaded database, caught up by raft
/// entries: promote waits, reports progress with a rate from the learner's metrics listener (its
/// client port does not serve until it has caught up), and promotes soon after the learner
/// reaches etcd's 90%. The figures are printed (run with `--nocapture`); only loose bounds are
/// asserted. `JOINGUARD_LEARNER_DB_MIB` sets the database size (default 100);
/// `JOINGUARD_LEARNER_VALUE_KIB`, `JOINGUARD_LEARNER_SNAPSHOT_COUNT`,
/// `JOINGUARD_LEARNER_RATE_BPS` and `JOINGUARD_LEARNER_QUEUE_BYTES` set the rest (the
/// experiments in docs/etcd-learner.md).
#[test]
fn promote_etcd_waits_for_a_learner_behind_a_rate_limited_link_with_progress() {
    let _g = serial();
    let events = rate_limited_catch_up(100, 512, None);
    assert!(
        events
            .iter()
            .any(|(_, e)| e.contains("catching up") && e.contains("/s")),
        "progress with a rate: {events:#?}"
    );
}

/// The same on a cluster whose raft log is compacted (`--snapshot-count=1000`, 4 KiB values: the
/// learner is more than etcd's 5000 catch-up entries behind), as on any long-lived cluster: the
/// learner receives the leader's database as one snapshot, during which etcd counts no progress
/// (index 0, only heartbeat bytes). promote says it is receiving the snapshot instead of
/// reading the heartbeats as the rate (it printed "about 82380s left" before), and promotes
/// once the snapshot is applied. (Not named `etcd`: it runs on 3.4.23 and on Debian sid's
/// etcd, not again on 3.5.1, to keep CI under an hour.)
#[test]
fn promote_says_when_the_learner_receives_a_snapshot() {
    let _g = serial();
    let events = rate_limited_catch_up(24, 4, Some(1000));
    let during: Vec<&String> = events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| e.contains("receiving the leader's snapshot"))
        .collect();
    assert!(
        during.len() >= 3,
        "the snapshot named while it is received: {events:#?}"
    );
    assert!(
        during
            .iter()
            .all(|e| !e.contains("left") && !e.contains("/s")),
        "no rate or estimate from heartbeat bytes: {during:#?}"
    );
}

/// The path to the leader blacks out (both ways) the moment MemberPromote is sent and comes back
/// 5 s later: the request never reached etcd, so the re-read after the outage finds a learner
/// and promotes it. The time from the path's return to the outcome is printed (the issue's goal
/// is 250 ms; asserted loosely).
#[test]
fn promote_etcd_completes_after_a_blackout_of_the_path_to_the_leader() {
    let _g = serial();
    let mut f = Fixture::new();
    let m4 = f.m4().clone();
    f.etcd.add_learner(&m4).expect("learner");
    f.wait_learner_caught_up();
    let leader = f.etcd.leader().expect("leader");
    let leader_host = f.etcd.member(leader).host().clone();
    let spec = f.promote_spec();
    let net = f.lab.net();
    let joiner = f.joiner().clone();
    let dark_at = Mutex::new(None::<Instant>);
    let sink = |p: &Progress| {
        if let Progress::Promoting { .. } = p {
            let mut at = dark_at.lock().unwrap();
            if at.is_none() {
                net.set_link(&leader_host, &joiner, Impairment::blackout());
                *at = Some(Instant::now());
            }
        }
    };
    let (out, back_at, returned) = std::thread::scope(|s| {
        let h = s.spawn(|| loop {
            std::thread::sleep(Duration::from_millis(10));
            if let Some(t) = *dark_at.lock().unwrap() {
                if t.elapsed() >= Duration::from_secs(5) {
                    net.set_link(&leader_host, &joiner, Impairment::none());
                    return Instant::now();
                }
            }
        });
        let out = f
            .joiner()
            .block_on(|| async { promote(&spec, &sink).await })
            .unwrap();
        let returned = Instant::now();
        (out, h.join().unwrap(), returned)
    });
    let out = out.expect("promote");
    assert!(matches!(out, PromoteOutcome::Promoted { .. }), "{out:?}");
    let after = returned.saturating_duration_since(back_at);
    eprintln!(
        "etcd {}: path back -> promoted: {:.0} ms; {} MemberPromote calls; {out:?}",
        f.etcd.version(),
        after.as_secs_f64() * 1000.0,
        f.calls("MemberPromote")
    );
    assert!(returned > back_at, "promoted only after the path returned");
    assert!(after < Duration::from_secs(5), "{after:?}");
}

/// The commands an operator runs, `joinguard etcd cleanup` and `joinguard etcd promote`, from
/// the joiner with kubeadm's certificate directory: what they print and how they exit.
#[test]
fn etcd_cli_cleanup_and_promote_print_and_exit_as_documented() {
    let _g = serial();
    let f = Fixture::new();
    let id = f.add_unstarted(false);
    let pki = f.etcd.pki_dir();
    let endpoints = f.access().endpoints.join(",");
    let m4 = f.m4().addr().to_string();
    let jg = |args: &[&str]| {
        let mut cmd = f.joiner().command(env!("CARGO_BIN_EXE_joinguard"));
        cmd.arg("etcd").args(args);
        let r = netlab::harness::run(&mut cmd, Duration::from_secs(60));
        // Shown with --nocapture: docs/etcd-learner.md quotes these runs.
        eprintln!(
            "$ joinguard etcd {}\n{}{}exit {}\n",
            args.join(" "),
            r.stderr,
            r.stdout,
            r.code
        );
        r
    };
    let pki_s = pki.to_string_lossy().into_owned();
    let common = |sub: &'static str| -> Vec<String> {
        vec![
            sub.into(),
            "--cert-dir".into(),
            pki_s.clone(),
            "--etcd-endpoints".into(),
            endpoints.clone(),
            "--node-name".into(),
            "m4".into(),
            "--apiserver-advertise-address".into(),
            m4.clone(),
            "--timeout".into(),
            "30s".into(),
        ]
    };
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    // Bad input: no way to name this node, and a CA that is not there: exit 2, before any call.
    let r = jg(&[
        "cleanup",
        "--cert-dir",
        "/nonexistent",
        "--etcd-endpoints",
        &endpoints,
    ]);
    r.assert_exit(2);
    assert!(
        r.stderr.contains("/nonexistent"),
        "names the file: {}",
        r.stderr
    );
    let r = jg(&[
        "promote",
        "--cert-dir",
        &pki_s,
        "--etcd-endpoints",
        &endpoints,
    ]);
    r.assert_exit(2);
    assert!(r.stderr.contains("--node-name"), "{}", r.stderr);
    assert_eq!(f.calls("MemberRemove") + f.calls("MemberPromote"), 0);

    // Dry run: exit 0, says what it would remove, removes nothing.
    let mut a = common("cleanup");
    a.push("--dry-run".into());
    let r = jg(&strs(&a));
    r.assert_exit(0);
    assert!(r.stdout.contains("dry run: would remove"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("{id:x}")), "{}", r.stdout);
    assert_eq!(f.member_ids().len(), 4);

    // As a Cluster API node has them before its join: the join's JoinConfiguration (this node's
    // name and address, the etcdAPICall budget) and a certificate directory with the etcd CA
    // and its key but no apiserver-etcd-client pair: the client certificate is minted in memory.
    let node_dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(node_dir.path().join("etcd")).unwrap();
    for f in ["etcd/ca.crt", "etcd/ca.key"] {
        std::fs::copy(pki.join(f), node_dir.path().join(f)).unwrap();
    }
    let join_config = node_dir.path().join("kubeadm-join-config.yaml");
    std::fs::write(
        &join_config,
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistration:\n  \
             name: m4\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: {m4}\n\
             discovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.10:6443\n    \
             token: abcdef.0123456789abcdef\n    caCertHashes: ['sha256:{}']\ntimeouts:\n  \
             etcdAPICall: 45s\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let node_dir_s = node_dir.path().to_string_lossy().into_owned();
    let config_s = join_config.to_string_lossy().into_owned();
    let r = jg(&[
        "cleanup",
        "--cert-dir",
        &node_dir_s,
        "--config",
        &config_s,
        "--etcd-endpoints",
        &endpoints,
        "--dry-run",
    ]);
    r.assert_exit(0);
    assert!(
        r.stderr
            .contains("minted an in-memory etcd client certificate"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.contains("dry run: would remove"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("{id:x}")), "{}", r.stdout);
    assert_eq!(f.member_ids().len(), 4);
    assert_eq!(f.calls("MemberRemove"), 0);

    // The removal, as JSON: exit 0, result "removed", the member, every attempt.
    let mut a = common("cleanup");
    a.extend(["-o".into(), "json".into()]);
    let r = jg(&strs(&a));
    r.assert_exit(0);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("one JSON document");
    schema::assert_valid("etcd", &r);
    assert_eq!(v["schemaVersion"], 2);
    assert_eq!(v["result"], "removed");
    assert_eq!(v["member"]["id"], format!("{id:x}"));
    assert!(v["attempts"].as_array().is_some_and(|a| !a.is_empty()));
    assert_eq!(f.member_ids().len(), 3);
    assert_eq!(f.calls("MemberRemove"), 1);

    // Again: nothing to do, exit 0, no write.
    let r = jg(&strs(&common("cleanup")));
    r.assert_exit(0);
    assert!(r.stdout.contains("nothing to remove"), "{}", r.stdout);
    assert_eq!(f.calls("MemberRemove"), 1);

    // A started voter is never removed: m1 by --member-id is refused, exit 1.
    let m1 = f.member_ids()[0].clone();
    let mut a = common("cleanup");
    a.extend(["--member-id".into(), m1]);
    let r = jg(&strs(&a));
    r.assert_exit(1);
    assert_eq!(f.calls("MemberRemove"), 1);
    assert_eq!(f.member_ids().len(), 3);

    // promote for a node that is already a voter (m1 by name): exit 0, nothing to do.
    let r = jg(&[
        "promote",
        "--cert-dir",
        &pki_s,
        "--etcd-endpoints",
        &endpoints,
        "--node-name",
        "m1",
        "--timeout",
        "30s",
    ]);
    r.assert_exit(0);
    assert!(r.stdout.contains("already a voter"), "{}", r.stdout);
    assert_eq!(f.calls("MemberPromote"), 0);
}

/// The same commands on an IPv6-only cluster (members advertise `https://[fd00:198:18::N]:2380`,
/// the node's advertise address is IPv6): cleanup finds and removes the unstarted member by its
/// bracketed peer URL, and promote finds and promotes the learner.
#[test]
fn etcd_ipv6_cleanup_and_promote_by_the_cli() {
    let _g = serial();
    let mut f = Fixture::with(&EtcdSpec::default(), IpFamily::V6);
    let pki = f.etcd.pki_dir().to_string_lossy().into_owned();
    let endpoints = f.access().endpoints.join(",");
    assert!(endpoints.contains("https://[fd00:198:18::"), "{endpoints}");
    let m4 = f.m4().ip().to_string();
    assert!(m4.starts_with("fd00:198:18::"), "{m4}");
    let joiner = f.joiner().clone();
    let jg = |args: &[&str]| {
        let mut cmd = joiner.command(env!("CARGO_BIN_EXE_joinguard"));
        cmd.arg("etcd").args(args);
        netlab::harness::run(&mut cmd, Duration::from_secs(60))
    };
    let common = |sub: &str| -> Vec<String> {
        [
            sub,
            "--cert-dir",
            &pki,
            "--etcd-endpoints",
            &endpoints,
            "--node-name",
            "m4",
            "--apiserver-advertise-address",
            &m4,
            "--timeout",
            "30s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let strs = |v: &[String]| -> Vec<String> { v.to_vec() };

    let id = f.add_unstarted(false);
    let a = strs(&common("cleanup"));
    let r = jg(&a.iter().map(String::as_str).collect::<Vec<_>>());
    r.assert_exit(0);
    assert!(r.stdout.contains(&format!("{id:x}")), "{r}");
    assert_eq!(f.member_ids().len(), 3, "{r}");

    let m4_host = f.lab.host("m4").clone();
    let i = f.etcd.add_learner(&m4_host).expect("learner on m4");
    assert!(f.etcd.members()[i].is_learner());
    let a = strs(&common("promote"));
    let r = jg(&a.iter().map(String::as_str).collect::<Vec<_>>());
    r.assert_exit(0);
    assert!(
        r.stdout.contains(&format!(
            "promoted started voter {:x} (m4) at https://[{m4}]:2380",
            f_id(&f, i)
        )),
        "{r}"
    );
    assert!(f.calls("MemberPromote") >= 1, "{r}");
}

/// The etcd member id of the member at `i`, as `etcdctl member list` prints it (hex).
fn f_id(f: &Fixture, i: usize) -> u64 {
    let name = f.etcd.members()[i].name().to_string();
    let list = f.etcdctl(&["member", "list"]);
    let line = list
        .lines()
        .find(|l| l.contains(&format!(", {name}, ")))
        .unwrap_or_else(|| panic!("{name} not in: {list}"));
    u64::from_str_radix(line.split(',').next().unwrap().trim(), 16).unwrap()
}

/// `joinguard etcd promote` on a terminal (a pty from `script`, as an operator's ssh session
/// has one) draws its catch-up as a bar on stderr and clears it; stdout, redirected to a file,
/// holds the outcome alone, with no terminal control bytes. Without a terminal the same events
/// are plain lines (etcd_cli_cleanup_and_promote_print_and_exit_as_documented).
#[test]
fn promote_cli_draws_a_bar_on_a_terminal_and_keeps_stdout_plain() {
    let _g = serial();
    let mut f = Fixture::new();
    let m4 = f.m4().clone();
    f.etcd.add_learner(&m4).expect("learner");
    let pki = f.etcd.pki_dir();
    let endpoints = f.access().endpoints.join(",");
    let m4_addr = m4.addr().to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let out_file = dir.path().join("stdout");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let line = [
        env!("CARGO_BIN_EXE_joinguard"),
        "etcd",
        "promote",
        "--cert-dir",
        &pki.to_string_lossy(),
        "--etcd-endpoints",
        &endpoints,
        "--node-name",
        "m4",
        "--apiserver-advertise-address",
        &m4_addr,
        "--timeout",
        "30s",
    ]
    .iter()
    .map(|a| quote(a))
    .collect::<Vec<_>>()
    .join(" ");
    let shell = format!("TERM=xterm {line} >{}", quote(&out_file.to_string_lossy()));
    let mut cmd = f.joiner().command("script");
    cmd.args(["-qec", &shell, "/dev/null"]);
    let r = netlab::harness::run(&mut cmd, Duration::from_secs(60));
    let terminal = r.stdout.clone();
    let stdout = std::fs::read_to_string(&out_file).expect("joinguard's stdout");
    eprintln!("terminal: {terminal:?}\nstdout: {stdout:?}");
    r.assert_exit(0);
    // The bar: its prefix, a bracketed bar and a percentage, drawn with terminal control
    // sequences, and the events above it as lines.
    assert!(terminal.contains("[etcd promote] ["), "{terminal:?}");
    assert!(terminal.contains("100%"), "{terminal:?}");
    assert!(terminal.contains('\u{1b}'), "drawn in place: {terminal:?}");
    assert!(
        terminal.contains("[etcd promote] this node's member: learner"),
        "{terminal:?}"
    );
    // stdout: the outcome, one line, no control bytes.
    assert!(stdout.starts_with("[etcd promote] promoted"), "{stdout:?}");
    assert_eq!(stdout.lines().count(), 1, "{stdout:?}");
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
    assert!(f.calls("MemberPromote") >= 1);
}

/// A snapshot that fails on the way and the next that arrives: 16 MiB in 4 KiB values on a
/// compacted log (`--snapshot-count=1000`), every member -> learner link at a rate that makes the
/// snapshot take about 20 s. Two seconds into the snapshot the learner's links black out for
/// 8 s: its etcd's 5 s peer read timeout fails the transfer, as a deep queue on a router does
/// (docs/etcd-learner.md). promote reads the leader's `/metrics` and names the failed snapshot
/// while it waits, then promotes once the leader's next snapshot is applied.
#[test]
fn promote_names_the_leaders_failed_snapshot_and_promotes_after_the_next() {
    let _g = serial();
    let mut spec = EtcdSpec::default();
    spec.extra_args.push("--snapshot-count=1000".into());
    let mut f = Fixture::with_spec(&spec);
    let mib = 16;
    preload(&f, mib, 4);
    let m4 = f.m4().clone();
    let members: Vec<Host> = (0..3).map(|i| f.etcd.member(i).host().clone()).collect();
    let rate = Impairment::none().with_rate((mib as u64 * 1024 * 1024 * 8) / 20);
    for h in &members {
        f.lab.net().set(h, &m4, rate.clone());
    }
    f.etcd.add_learner(&m4).expect("learner");
    let mut spec = f.promote_spec();
    spec.timeout = Duration::from_secs(180);
    spec.learner_metrics_url = Some(f.etcd.member(3).metrics_url().to_string());
    let added = Instant::now();
    let seen = Mutex::new(Vec::<(f64, String)>::new());
    let sink = |p: &Progress| {
        seen.lock()
            .unwrap()
            .push((added.elapsed().as_secs_f64(), p.to_string()))
    };
    let net = f.lab.net();
    let (out, cut) = std::thread::scope(|s| {
        let cutter = s.spawn(|| {
            // The snapshot on its way: the learner's own metrics listener (not impaired).
            let receiving = || {
                f.etcd
                    .metric_sum(3, "etcd_network_snapshot_receive_inflights_total")
                    .is_ok_and(|v| v > 0.0)
            };
            let until = Instant::now() + Duration::from_secs(60);
            while !receiving() {
                if Instant::now() > until {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_secs(2));
            let at = added.elapsed();
            for h in &members {
                net.set_link(h, &m4, Impairment::blackout());
            }
            std::thread::sleep(Duration::from_secs(8));
            for h in &members {
                net.set_link(h, &m4, Impairment::none());
                net.set(h, &m4, rate.clone());
            }
            Some(at)
        });
        let out = f
            .joiner()
            .block_on(|| async { promote(&spec, &sink).await })
            .unwrap();
        (out, cutter.join().unwrap())
    });
    let events = seen.into_inner().unwrap();
    for (t, e) in events.iter().filter(|(_, e)| !e.contains("catching up")) {
        eprintln!("{t:7.2}s  {e}");
    }
    let cut = cut.expect("the snapshot started within 60 s");
    eprintln!(
        "etcd {}: links cut at {:.1}s for 8 s; outcome after {:.1}s: {out:?}",
        f.etcd.version(),
        cut.as_secs_f64(),
        added.elapsed().as_secs_f64()
    );
    let named: Vec<&(f64, String)> = events
        .iter()
        .filter(|(_, e)| e.contains("the leader's database snapshot to this learner failed"))
        .collect();
    assert!(
        !named.is_empty(),
        "the failed snapshot named while promote waits: {events:#?}"
    );
    assert!(
        named[0].1.contains("failed once") && named[0].1.contains("5s under"),
        "{named:#?}"
    );
    let out = out.expect("promote");
    assert!(matches!(out, PromoteOutcome::Promoted { .. }), "{out:?}");
}
