//! Promote benchmark: how soon a learner is promoted once etcd would accept it, and how many
//! `MemberPromote` calls it took, with `joinguard etcd promote` (the learner library: it watches
//! the learner's metrics listener and sends `MemberPromote` when the learner is within etcd's 90%)
//! against kubeadm's own way (`MemberPromote` every 500 ms until `timeouts.etcdAPICall`, 2 min:
//! `cmd/kubeadm/app/phases/etcd/local.go`, ../shared/reference/etcd-latency-facts.md), on the same
//! fabric in the same run, the two alternating.
//!
//! Run it as root: `cargo bench -p joinguard --bench promote` (needs the lab's prerequisites and
//! `JOINGUARD_ETCD_BIN`; `source .cache/env`). `JOINGUARD_BENCH_PROMOTE_RUNS` (default 3) trials
//! per promoter, `JOINGUARD_BENCH_PROMOTE_MIB` (default 20) MiB pre-loaded. docs/etcd-learner.md
//! shows a run.
//!
//! One trial: three members on m1..m3, the database pre-loaded, every member -> m4 link limited
//! so that the catch-up takes about 25 s, then `etcdctl member add --learner` and etcd started on
//! m4. An outside watcher reads both members' `etcd_server_proposals_committed_total` every 100 ms
//! and notes when the learner reaches 90% of the leader's (when etcd would accept the promotion);
//! measured: that moment (the catch-up), the promotion's completion after it, and the
//! `MemberPromote` calls etcd counted (`grpc_server_started_total` on every member).
//!
//! One blackout trial: a caught-up learner; the joiner <-> leader path goes dark (both ways) as
//! the first `MemberPromote` is sent and comes back some seconds later: run i takes the i-th of
//! `JOINGUARD_BENCH_PROMOTE_BLACKOUTS` (default 4,5,6; a single length would favour whichever
//! retry cadence happens to line up with it: kubeadm's 2 s call plus 500 ms pause does with 5 s). Both promoters send to the leader's client URL (kubeadm's client balances
//! over every member; only a call to the leader crosses the dark path). kubeadm's calls each have
//! 2 s (`etcdTimeout` in `cmd/kubeadm/app/util/etcd/etcd.go`). Measured: the time from the
//! path's return to the promotion.

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use joinguard::cli::named;
use joinguard_core::input::Input;
use joinguard_core::learner::{
    promote, EtcdAccess, NodeRef, Progress, PromoteOutcome, PromoteSpec,
};
use joinguard_core::probe::identity::{CaBundle, ClientIdentity};
use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::{Impairment, Lab};
use serde_json::json;

/// kubeadm's `EtcdAPICallRetryInterval`.
const KUBEADM_INTERVAL: Duration = Duration::from_millis(500);
/// kubeadm's timeout of one etcd call (`etcdTimeout`).
const KUBEADM_CALL: Duration = Duration::from_secs(2);
/// kubeadm's default `timeouts.etcdAPICall`.
const KUBEADM_BUDGET: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Promoter {
    Joinguard,
    Kubeadm,
}

impl Promoter {
    fn name(self) -> &'static str {
        match self {
            Promoter::Joinguard => "joinguard etcd promote",
            Promoter::Kubeadm => "kubeadm (MemberPromote every 500 ms)",
        }
    }
}

struct Trial {
    ok: bool,
    /// Learner added -> the watcher saw it at 90%.
    ready: Duration,
    /// The promoter's return after `ready` (negative: before the watcher's next read).
    after_ready: f64,
    calls: u64,
}

fn env_usize(k: &str, default: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let runs = env_usize("JOINGUARD_BENCH_PROMOTE_RUNS", 3);
    let mib = env_usize("JOINGUARD_BENCH_PROMOTE_MIB", 20);
    let mut version = String::new();
    let mut results: Vec<(Promoter, Trial)> = Vec::new();
    for run in 0..runs {
        for p in [Promoter::Joinguard, Promoter::Kubeadm] {
            let (t, v) = trial(p, mib);
            version = v;
            println!(
                "run {run} {:<38} ok={} catch-up {:6.2}s  promoted {:+.2}s after  {} MemberPromote calls",
                p.name(),
                t.ok,
                t.ready.as_secs_f64(),
                t.after_ready,
                t.calls
            );
            results.push((p, t));
        }
    }
    let blackouts: Vec<u64> = std::env::var("JOINGUARD_BENCH_PROMOTE_BLACKOUTS")
        .unwrap_or_else(|_| "4,5,6".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("JOINGUARD_BENCH_PROMOTE_BLACKOUTS: seconds, e.g. 4,5,6")
        })
        .collect();
    let mut recovery: Vec<(Promoter, u64, Option<f64>)> = Vec::new();
    for run in 0..runs {
        let blackout = Duration::from_secs(blackouts[run % blackouts.len()]);
        for p in [Promoter::Joinguard, Promoter::Kubeadm] {
            let after = blackout_trial(p, blackout);
            println!(
                "run {run} {:<38} blackout {}s: promoted {} after the path returned",
                p.name(),
                blackout.as_secs(),
                after.map_or("never".to_string(), |a| format!("{:.0} ms", a * 1000.0))
            );
            recovery.push((p, blackout.as_secs(), after));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let mut rows = Vec::new();
    let mut summary = std::collections::BTreeMap::new();
    println!("\netcd {version}, {mib} MiB pre-loaded, {runs} runs each (medians):");
    println!(
        "{:<38} {:>10} {:>16} {:>15} {:>4}",
        "promoter", "catch-up", "promoted after", "MemberPromote", "ok"
    );
    for p in [Promoter::Joinguard, Promoter::Kubeadm] {
        let of: Vec<&Trial> = results
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, t)| t)
            .collect();
        let ready = median(&mut of.iter().map(|t| t.ready.as_secs_f64()).collect());
        let after = median(&mut of.iter().map(|t| t.after_ready).collect());
        let calls = median(&mut of.iter().map(|t| t.calls as f64).collect());
        let ok = of.iter().filter(|t| t.ok).count();
        println!(
            "{:<38} {:>9.2}s {:>15.2}s {:>15.0} {:>2}/{}",
            p.name(),
            ready,
            after,
            calls,
            ok,
            of.len()
        );
        summary.insert(format!("{p:?}"), (after, calls));
        rows.push(json!({
            "promoter": p.name(), "catch_up_s": ready, "promoted_after_ready_s": after,
            "member_promote_calls": calls, "ok": ok, "runs": of.len(),
            "trials": of
                .iter()
                .map(|t| json!({
                    "catch_up_s": t.ready.as_secs_f64(), "after_ready_s": t.after_ready,
                    "member_promote_calls": t.calls, "ok": t.ok,
                }))
                .collect::<Vec<_>>(),
        }));
    }
    println!(
        "\nblackout of the path to the leader, {blackouts:?} s, {runs} runs each (median time from its return to the promotion):"
    );
    let mut recovered = std::collections::BTreeMap::new();
    for p in [Promoter::Joinguard, Promoter::Kubeadm] {
        let mut v: Vec<f64> = recovery
            .iter()
            .filter(|(q, _, _)| *q == p)
            .map(|(_, _, a)| a.unwrap_or(f64::INFINITY))
            .collect();
        let m = median(&mut v);
        let worst = v.last().copied().unwrap_or(f64::NAN);
        println!(
            "{:<38} {:>8.0} ms (worst {:.0} ms)",
            p.name(),
            m * 1000.0,
            worst * 1000.0
        );
        recovered.insert(format!("{p:?}"), m);
        let finite = |x: f64| if x.is_finite() { json!(x) } else { json!(null) };
        rows.push(json!({
            "promoter": p.name(), "blackouts_s": blackouts,
            "promoted_after_return_s": finite(m),
            "worst_after_return_s": finite(worst),
            "trials": recovery
                .iter()
                .filter(|(q, _, _)| *q == p)
                .map(|(_, b, a)| json!({"blackout_s": b, "after_return_s": a}))
                .collect::<Vec<_>>(),
        }));
    }
    println!(
        "ratio kubeadm/joinguard after a blackout: {:.1}x",
        recovered["Kubeadm"] / recovered["Joinguard"]
    );
    let (j_after, j_calls) = summary["Joinguard"];
    let (k_after, k_calls) = summary["Kubeadm"];
    println!(
        "ratio kubeadm/joinguard: MemberPromote calls {:.1}x; promoted after ready: joinguard {:.2}s, kubeadm {:.2}s",
        k_calls / j_calls.max(1.0),
        j_after,
        k_after
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(
        dir.join("promote.json"),
        serde_json::to_string_pretty(&json!({"etcd": version, "mib": mib, "rows": rows})).unwrap(),
    )
    .expect("write target/bench/promote.json");
}

/// The lab of one trial: three members on m1..m3, the joiner, m4 without etcd yet.
fn cluster() -> (Lab, EtcdCluster) {
    let lab = Lab::builder()
        .hosts(["joiner", "m1", "m2", "m3", "m4"])
        .build()
        .expect("lab (run as root)");
    let hosts: Vec<_> = lab.hosts()[1..=3].iter().collect();
    let etcd = EtcdCluster::start(&lab, &hosts, &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("etcd");
    (lab, etcd)
}

/// An etcd client with the lab's client identity (etcd-client, as the tests use it).
fn client(
    etcd: &EtcdCluster,
    endpoints: Vec<String>,
) -> impl std::future::Future<Output = etcd_client::Client> {
    use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
    let id = etcd.client_identity();
    let tls = TlsOptions::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&id.ca).unwrap()))
        .identity(Identity::from_pem(
            std::fs::read(&id.cert).unwrap(),
            std::fs::read(&id.key).unwrap(),
        ));
    async move {
        let opts = ConnectOptions::new()
            .with_tls(tls)
            .with_timeout(Duration::from_secs(5));
        Client::connect(endpoints, Some(opts))
            .await
            .expect("connect")
    }
}

/// `joinguard etcd promote`'s spec for m4, sending to `endpoints`.
fn promote_spec(etcd: &EtcdCluster, lab: &Lab, endpoints: Vec<String>) -> PromoteSpec {
    let id = etcd.client_identity();
    PromoteSpec {
        access: EtcdAccess {
            endpoints,
            ca: CaBundle::load(named(Input::EtcdCacert), &id.ca).expect("ca"),
            identity: Some(
                ClientIdentity::load(
                    (named(Input::EtcdCert), &id.cert),
                    (named(Input::EtcdKey), &id.key),
                )
                .expect("identity"),
            ),
        },
        node: NodeRef::new(Some("m4"), Some(lab.host("m4").addr().into())),
        timeout: KUBEADM_BUDGET,
        per_attempt: None,
        learner_metrics_url: None,
    }
}

/// m4's member id, from the member list (kubeadm has it from MemberAdd's answer).
fn learner_id(lab: &Lab, etcd: &EtcdCluster, endpoints: &[String]) -> u64 {
    let peer = format!("https://{}:2380", lab.host("m4").addr());
    lab.host("joiner")
        .block_on(|| async {
            let mut c = client(etcd, endpoints.to_vec()).await;
            let list = c.member_list().await.expect("member list");
            list.members()
                .iter()
                .find(|m| m.peer_urls().contains(&peer))
                .map(|m| m.id())
                .expect("m4 listed")
        })
        .expect("block_on")
}

/// kubeadm's promotion: `MemberPromote` every 500 ms, each call within 2 s, until the 2 min
/// budget is spent; `before_each` runs before every call. Whether it promoted.
async fn kubeadm_promote(mut c: etcd_client::Client, id: u64, before_each: &dyn Fn()) -> bool {
    let deadline = Instant::now() + KUBEADM_BUDGET;
    loop {
        before_each();
        let call = c.member_promote(id);
        if let Ok(Ok(_)) = tokio::time::timeout(KUBEADM_CALL, call).await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(KUBEADM_INTERVAL).await;
    }
}

fn blackout_trial(p: Promoter, blackout: Duration) -> Option<f64> {
    let (lab, mut etcd) = cluster();
    let joiner = lab.host("joiner").clone();
    let m4 = lab.host("m4").clone();
    let learner = etcd.add_learner(&m4).expect("learner");
    let leader = etcd.leader().expect("leader");
    let committed = |i: usize| etcd.metric_sum(i, "etcd_server_proposals_committed_total");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!((committed(leader), committed(learner)), (Ok(l), Ok(m)) if l > 0.0 && m >= l) {
        assert!(Instant::now() < deadline, "the learner never caught up");
        std::thread::sleep(Duration::from_millis(100));
    }
    let leader_url = vec![etcd.member(leader).client_url().to_string()];
    let leader_host = etcd.member(leader).host().clone();
    let net = lab.net();
    let dark_at = std::sync::Mutex::new(None::<Instant>);
    let go_dark = || {
        let mut at = dark_at.lock().unwrap();
        if at.is_none() {
            net.set_link(&leader_host, &joiner, Impairment::blackout());
            *at = Some(Instant::now());
        }
    };
    let id = learner_id(&lab, &etcd, &leader_url);
    let (ok, back_at, returned) = std::thread::scope(|s| {
        let h = s.spawn(|| loop {
            std::thread::sleep(Duration::from_millis(10));
            if let Some(t) = *dark_at.lock().unwrap() {
                if t.elapsed() >= blackout {
                    net.set_link(&leader_host, &joiner, Impairment::none());
                    return Instant::now();
                }
            }
        });
        let ok = match p {
            Promoter::Joinguard => {
                let spec = promote_spec(&etcd, &lab, leader_url.clone());
                let sink = |e: &Progress| {
                    if let Progress::Promoting { .. } = e {
                        go_dark();
                    }
                };
                let out = joiner
                    .block_on(|| async { promote(&spec, &sink).await })
                    .expect("block_on");
                matches!(out, Ok(PromoteOutcome::Promoted { .. }))
            }
            Promoter::Kubeadm => joiner
                .block_on(|| async {
                    let c = client(&etcd, leader_url.clone()).await;
                    kubeadm_promote(c, id, &go_dark).await
                })
                .expect("block_on"),
        };
        (ok, h.join().unwrap(), Instant::now())
    });
    (ok && returned > back_at).then(|| (returned - back_at).as_secs_f64())
}

fn trial(p: Promoter, mib: usize) -> (Trial, String) {
    let (lab, mut etcd) = cluster();
    let endpoints: Vec<String> = etcd.members()[..3]
        .iter()
        .map(|m| m.client_url().to_string())
        .collect();
    let joiner = lab.host("joiner").clone();
    let m4 = lab.host("m4").clone();
    // The same pre-load as the learner tests: 512 KiB values, four puts in flight.
    joiner
        .block_on(|| async {
            let c = client(&etcd, endpoints.clone()).await;
            let value = vec![b'x'; 512 << 10];
            for chunk in (0..mib * 2).collect::<Vec<_>>().chunks(4) {
                let puts: Vec<_> = chunk
                    .iter()
                    .map(|&k| {
                        let (mut c, v) = (c.clone(), value.clone());
                        tokio::spawn(
                            async move { c.put(format!("/preload/{k:05}"), v, None).await },
                        )
                    })
                    .collect();
                for put in puts {
                    put.await.expect("join").expect("put");
                }
            }
        })
        .expect("preload");
    let bps = (mib as u64 * 1024 * 1024 * 8) / 25;
    for i in 0..3 {
        let h = etcd.member(i).host().clone();
        lab.net().set(&h, &m4, Impairment::none().with_rate(bps));
    }
    let calls = |etcd: &EtcdCluster| -> u64 {
        etcd.running()
            .into_iter()
            .filter_map(|i| etcd.metrics(i).ok())
            .flat_map(|text| {
                text.lines()
                    .filter(|l| {
                        l.starts_with("grpc_server_started_total{")
                            && l.contains("grpc_method=\"MemberPromote\"")
                    })
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum::<f64>() as u64
    };
    let before = calls(&etcd);
    let leader = etcd.leader().expect("leader");
    let added = Instant::now();
    let learner = etcd.add_learner(&m4).expect("learner");
    let learner_id = learner_id(&lab, &etcd, &endpoints);
    let done = AtomicBool::new(false);
    let committed = |i: usize| etcd.metric_sum(i, "etcd_server_proposals_committed_total");
    let at_90 = || matches!((committed(leader), committed(learner)), (Ok(l), Ok(m)) if l > 0.0 && m >= l * 0.9);
    let (ok, returned, ready) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if at_90() {
                    return Some(added.elapsed());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            // The promotion can land between two reads: one more, at 100 ms resolution.
            at_90().then(|| added.elapsed())
        });
        let ok = match p {
            Promoter::Joinguard => {
                let mut spec = promote_spec(&etcd, &lab, endpoints.clone());
                spec.learner_metrics_url = Some(etcd.member(learner).metrics_url().to_string());
                let out = joiner
                    .block_on(|| async { promote(&spec, &|_: &Progress| {}).await })
                    .expect("block_on");
                matches!(out, Ok(PromoteOutcome::Promoted { .. }))
            }
            Promoter::Kubeadm => joiner
                .block_on(|| async {
                    let c = client(&etcd, endpoints.clone()).await;
                    kubeadm_promote(c, learner_id, &|| {}).await
                })
                .expect("block_on"),
        };
        let returned = added.elapsed();
        done.store(true, Ordering::Relaxed);
        (ok, returned, watcher.join().unwrap())
    });
    let ready = ready.unwrap_or(returned);
    let t = Trial {
        ok,
        ready,
        after_ready: returned.as_secs_f64() - ready.as_secs_f64(),
        calls: calls(&etcd) - before,
    };
    (t, etcd.version().to_string())
}
