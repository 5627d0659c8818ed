//! Recovery benchmark: how fast the join's status write completes after an API blackout, with
//! joinguard's `write` policy (and its wake-on-connect watcher) against kubeadm's own policy
//! (`wait.PollUntilContextTimeout` every 500 ms until 40 s, no per-request timeout), on the same
//! fabric in the same run.
//!
//! Run it as root: `cargo bench -p joinguard --bench recovery` (needs the lab's prerequisites
//! and `JOINGUARD_ETCD_BIN`; `scripts/bench` sets both up). It prints one row per (policy,
//! blackout) and a ratio per blackout; docs/retries.md shows a run.
//!
//! What one trial does: the kubeadm-config update (read, set this node's apiEndpoints entry,
//! write) starts from the joiner; the server holds its first read for 1 s, and 0.5 s in, the
//! joiner <-> API link goes dark for the blackout, then comes back. Measured: the time from the
//! restore to the write's completion, the attempts started while the link was dark, and the
//! packets either side sent into the blackout (the fabric's drop counters).

#![allow(clippy::print_stdout)] // A benchmark prints its figures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use joinguard::cli::named;
use joinguard_core::input::Input;
use joinguard_core::kube::{ApiClient, Kubeconfig};
use joinguard_core::retry::{self, Backoff, PolicyKind, Recorder, RetryPolicy, WakeOnConnect};
use joinguard_core::status::set_api_endpoint;
use netlab::apiserver::fixture::{self, ApiEndpoint, FixtureOptions};
use netlab::apiserver::{ApiServer, ApiServerOptions, FaultKind, FaultRule, Method};
use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::{Impairment, Lab};
use serde_json::json;

const CM: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
const TOKEN: &str = "abcdef.0123456789abcdef";

/// kubeadm >= 1.30: `PollUntilContextTimeout(ctx, 500ms, 40s, immediate)`, and client-go with no
/// request timeout (a kubeconfig's default), so an attempt lasts as long as the budget allows.
fn kubeadm_policy() -> RetryPolicy {
    let mut p = RetryPolicy::write();
    p.kind = PolicyKind::Write;
    p.backoff = Backoff {
        start: Duration::from_millis(500),
        factor: 1.0,
        jitter: 0.0,
        max_delay: Duration::from_millis(500),
    };
    p.budget = Duration::from_secs(40);
    p.per_attempt = Duration::from_secs(40);
    p
}

/// When the link went dark, and when it came back.
type DarkWindow = (Instant, Option<Instant>);

struct Trial {
    ok: bool,
    after_restore: Duration,
    attempts_in_blackout: u32,
    attempts: u32,
    packets_into_blackout: u64,
    error: Option<String>,
}

fn main() {
    let lab = Lab::builder()
        .hosts(["api", "m1", "joiner"])
        .build()
        .expect("lab (run as root)");
    let etcd = EtcdCluster::start(&lab, &[lab.host("m1")], &EtcdSpec::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(30)).expect("etcd");
    let api = ApiServer::start(lab.host("api"), &etcd, ApiServerOptions::default()).expect("api");
    let mut opts = FixtureOptions::new(TOKEN, etcd.ca());
    opts.cluster_status = vec![ApiEndpoint {
        node: "cp-1".into(),
        address: "198.18.0.10".parse().unwrap(),
        port: 6443,
    }];
    fixture::kubeadm_init(&api, opts).expect("fixture");
    let kc_path = lab.dir().join("admin.conf");
    let kc_text = api.kubeconfig(Some(api.admin_token()));
    std::fs::write(&kc_path, &kc_text).unwrap();
    let kc = Kubeconfig::parse(&kc_path, kc_text.as_bytes(), None).unwrap();
    let client = ApiClient::new(&named(Input::Kubeconfig), &kc).unwrap();

    let blackouts: Vec<Duration> = std::env::var("JOINGUARD_BENCH_BLACKOUTS")
        .ok()
        .map(|s| {
            s.split(',')
                .filter_map(|x| x.trim().parse().ok())
                .map(Duration::from_secs)
                .collect()
        })
        .unwrap_or_else(|| vec![Duration::from_secs(5), Duration::from_secs(30)]);

    println!(
        "{:<10} {:>9} {:>7} {:>15} {:>13} {:>9} {:>9}",
        "policy", "blackout", "result", "restore->done", "attempts-dark", "attempts", "pkts-dark"
    );
    let mut rows = Vec::new();
    for blackout in &blackouts {
        let mut done = Vec::new();
        for (name, policy, wake) in [
            ("joinguard", RetryPolicy::write(), true),
            ("kubeadm", kubeadm_policy(), false),
        ] {
            let node = format!("bench-{name}-{}", blackout.as_secs());
            let t = trial(&lab, &api, &client, &policy, wake, &node, *blackout);
            println!(
                "{:<10} {:>8}s {:>7} {:>14.2}s {:>13} {:>9} {:>9}{}",
                name,
                blackout.as_secs(),
                if t.ok { "done" } else { "FAILED" },
                t.after_restore.as_secs_f64(),
                t.attempts_in_blackout,
                t.attempts,
                t.packets_into_blackout,
                t.error
                    .as_deref()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default()
            );
            rows.push(json!({
                "policy": name, "blackoutS": blackout.as_secs(), "ok": t.ok,
                "restoreToDoneS": t.after_restore.as_secs_f64(),
                "attemptsInBlackout": t.attempts_in_blackout, "attempts": t.attempts,
                "packetsIntoBlackout": t.packets_into_blackout, "error": t.error,
            }));
            done.push(t);
        }
        if let [j, k] = &done[..] {
            if j.ok && k.ok {
                println!(
                    "  {}s blackout: kubeadm's policy took {:.1}x as long after the restore",
                    blackout.as_secs(),
                    k.after_restore.as_secs_f64() / j.after_restore.as_secs_f64().max(1e-3)
                );
            }
        }
    }
    // For scripts/bench's report (docs/benchmarks.md).
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("recovery.json"),
        serde_json::to_string_pretty(&json!({"etcd": etcd.version(), "rows": rows})).unwrap(),
    )
    .unwrap();
}

fn trial(
    lab: &Lab,
    api: &ApiServer,
    client: &ApiClient,
    policy: &RetryPolicy,
    wake: bool,
    node: &str,
    blackout: Duration,
) -> Trial {
    let (joiner, api_host) = (lab.host("joiner"), lab.host("api"));
    api.faults().clear();
    api.faults().add(
        FaultRule::always(FaultKind::Stall(Duration::from_secs(1)))
            .method(Method::GET)
            .path(CM)
            .times(1),
    );
    let dark_from: Arc<Mutex<Option<DarkWindow>>> = Arc::new(Mutex::new(None));
    let in_dark = AtomicU32::new(0);
    let started = AtomicU32::new(0);
    let dropped = || {
        lab.net().stats(joiner, api_host).dropped_blackout
            + lab.net().stats(api_host, joiner).dropped_blackout
    };
    let before = dropped();
    let endpoint = json!({"advertiseAddress": "198.18.1.1", "bindPort": 6443});
    let (result, finished) = std::thread::scope(|s| {
        let dark = dark_from.clone();
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            lab.net().set_link(joiner, api_host, Impairment::blackout());
            *dark.lock().unwrap() = Some((Instant::now(), None));
            std::thread::sleep(blackout);
            lab.net().set_link(joiner, api_host, Impairment::none());
            if let Some(d) = dark.lock().unwrap().as_mut() {
                d.1 = Some(Instant::now());
            }
        });
        let count = |_: ()| {
            started.fetch_add(1, Ordering::Relaxed);
            if let Some((_, None)) = *dark_from.lock().unwrap() {
                in_dark.fetch_add(1, Ordering::Relaxed);
            }
        };
        joiner
            .block_on(|| async {
                let recorder = Recorder::new();
                let watcher = client.socket_addr().map(WakeOnConnect::new);
                let w = if wake { watcher.as_ref() } else { None };
                let r = retry::run_mutation(
                    policy,
                    "kube-system/kubeadm-config update",
                    &recorder,
                    w,
                    || {
                        count(());
                        client.get(CM, policy.per_attempt)
                    },
                    |cm| set_api_endpoint(cm, node, &endpoint),
                    |cm| {
                        count(());
                        async move { client.update(CM, &cm, policy.per_attempt).await }
                    },
                )
                .await;
                (r.map(|_| ()).map_err(|e| e.to_string()), Instant::now())
            })
            .expect("run in the joiner")
    });
    // Let the blackout thread's restore land before reading it (scope joined it already).
    let restored = dark_from
        .lock()
        .unwrap()
        .and_then(|(_, r)| r)
        .unwrap_or(finished);
    Trial {
        ok: result.is_ok(),
        after_restore: finished.saturating_duration_since(restored),
        attempts_in_blackout: in_dark.load(Ordering::Relaxed),
        attempts: started.load(Ordering::Relaxed),
        packets_into_blackout: dropped() - before,
        error: result.err(),
    }
}
