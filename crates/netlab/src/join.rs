//! The join oracle: a real etcd learner join, driven from the joiner's namespace the way kubeadm
//! drives it, then a stability window under a kube-apiserver-like load. It answers the question
//! preflight's verdict predicts: would this join have worked on this path?
//!
//! kubeadm's sequence and constants (kubernetes/kubernetes `cmd/kubeadm/app/phases/etcd/local.go`
//! `CreateStackedEtcdStaticPodManifestFile` and `cmd/kubeadm/app/util/etcd/etcd.go`; read at the
//! upstream snapshots danwinship/kubernetes d1e0676e081d3414450dea9848b0cdd5c2bca3e5 for local.go
//! and Nordix/kubernetes cd70e54c566279d2a94aa8e86ac4e6300920d4b8 for etcd.go, and summarised in
//! the project's reference notes):
//! 1. the etcd client is dialled once, 2 s, blocking (`etcdTimeout`, `grpc.WithBlock`), and synced
//!    (MemberList), before the retry loop: a slow dial fails the step (CAPZ #5687);
//! 2. `AddMemberAsLearner`: MemberList first (a member already holding this peer URL is reused),
//!    then MemberAddAsLearner, every 500 ms (`EtcdAPICallRetryInterval`) until
//!    `timeouts.etcdAPICall` (2 min), each call capped at 2 s;
//! 3. the new member starts with kubeadm's flags and `--initial-cluster-state=existing`
//!    (netlab's members already run with kubeadm's `getEtcdCommand` flags);
//! 4. a second 2 s dial, then `MemberPromote` every 500 ms for 2 min: "can only promote a learner
//!    member which is in sync with leader" is retried, and after any failed call the member is
//!    re-read: already a voter is success (k/k #139842);
//! 5. `WaitForClusterAvailable(8, 5 s)`: up to 8 checks 5 s apart that every member answers
//!    Status (kubeadm before k/k #138403, which made it quorum-based in 2026: the stricter rule).
//!
//! The client identity is the lab's (`apiserver-etcd-client`, signed by the etcd CA), where
//! kubeadm uses `healthcheck-client`: the same CA and the same TLS, another CN.
//!
//! Everything here is bounded: kubeadm's own budgets for the join, `window` for the load.

use std::fs;
use std::time::{Duration, Instant};

use etcd_client::{
    Certificate, Client, ConnectOptions, DeleteOptions, Identity, MemberAddOptions, TlsOptions,
};
use serde::Serialize;

use crate::etcd::EtcdCluster;
use crate::host::Host;
use crate::Error;

/// kubeadm's etcd timing for a join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeadmEtcdTiming {
    /// The blocking dial before each retry loop (`etcdTimeout`, 2 s).
    pub dial: Duration,
    /// One etcd call (`etcdTimeout`, 2 s).
    pub call: Duration,
    /// Between attempts (`constants.EtcdAPICallRetryInterval`, 500 ms).
    pub retry_interval: Duration,
    /// A retried step's budget (`timeouts.etcdAPICall`, default 2 min in v1beta4).
    pub etcd_api_call: Duration,
    /// `WaitForClusterAvailable(retries, interval)` as the join calls it: 8 checks, 5 s apart.
    pub health_checks: u32,
    pub health_interval: Duration,
}

impl Default for KubeadmEtcdTiming {
    fn default() -> Self {
        KubeadmEtcdTiming {
            dial: Duration::from_secs(2),
            call: Duration::from_secs(2),
            retry_interval: Duration::from_millis(500),
            etcd_api_call: Duration::from_secs(120),
            health_checks: 8,
            health_interval: Duration::from_secs(5),
        }
    }
}

/// The join's steps, in kubeadm's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JoinStep {
    /// The blocking client dial and sync before member add.
    Dial,
    /// MemberAddAsLearner, retried.
    MemberAdd,
    /// The new member's process started.
    Start,
    /// The second dial, before promotion.
    PromoteDial,
    /// MemberPromote, retried until the learner is in sync.
    Promote,
    /// WaitForClusterAvailable.
    ClusterHealth,
}

impl JoinStep {
    pub fn as_str(self) -> &'static str {
        match self {
            JoinStep::Dial => "dial",
            JoinStep::MemberAdd => "member-add",
            JoinStep::Start => "start",
            JoinStep::PromoteDial => "promote-dial",
            JoinStep::Promote => "promote",
            JoinStep::ClusterHealth => "cluster-health",
        }
    }
}

/// What the join did.
#[derive(Clone, Debug, Serialize)]
pub struct JoinOutcome {
    /// `None`: joined. Otherwise the step that failed and its last error.
    pub failed: Option<(JoinStep, String)>,
    /// Each step that ended, with how long it took.
    pub steps: Vec<(JoinStep, Duration)>,
    /// Start to end of the join (success or failure).
    pub took: Duration,
    /// The new member's index in the cluster, once started.
    #[serde(skip)]
    pub member: Option<usize>,
    /// MemberAddAsLearner and MemberPromote attempts.
    pub add_attempts: u32,
    pub promote_attempts: u32,
}

impl JoinOutcome {
    pub fn joined(&self) -> bool {
        self.failed.is_none()
    }

    /// "joined in 4.2s" or "failed at promote after 121.0s: ...".
    pub fn summary(&self) -> String {
        match &self.failed {
            None => format!("joined in {:.1}s", self.took.as_secs_f64()),
            Some((step, e)) => format!(
                "failed at {} after {:.1}s: {e}",
                step.as_str(),
                self.took.as_secs_f64()
            ),
        }
    }
}

/// The load of the stability window: kube-apiserver-like writes and linearizable reads, spread
/// over every member (the new one included), one request at a time per member.
#[derive(Clone, Debug)]
pub struct StabilityWindow {
    pub duration: Duration,
    /// Requests per second per member (writes and reads alternate).
    pub rate_per_member: u32,
    /// Value size of each write, bytes (kube-apiserver objects are typically 1-10 KB).
    pub value_bytes: usize,
}

impl Default for StabilityWindow {
    fn default() -> Self {
        StabilityWindow {
            duration: Duration::from_secs(30),
            rate_per_member: 10,
            value_bytes: 2048,
        }
    }
}

/// What the window saw.
#[derive(Clone, Debug, Serialize)]
pub struct Stability {
    pub requests: u64,
    /// Requests that failed (error or no answer within the request timeout).
    pub failed: u64,
    /// Requests slower than etcd's request timeout (5 s + 2 x election timeout), answered or not.
    pub past_request_timeout: u64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Leader changes seen by any member during the window (`etcd_server_leader_changes_seen_total`).
    pub leader_changes: u64,
    pub request_timeout: Duration,
}

impl Stability {
    /// No leader change, no request failed or past the request timeout.
    pub fn stable(&self) -> bool {
        self.leader_changes == 0 && self.failed == 0 && self.past_request_timeout == 0
    }

    pub fn summary(&self) -> String {
        format!(
            "{} requests, {} failed, {} past the {:.1}s request timeout, p99 {:.1} ms, max {:.1} ms, {} leader changes",
            self.requests,
            self.failed,
            self.past_request_timeout,
            self.request_timeout.as_secs_f64(),
            self.p99_ms,
            self.max_ms,
            self.leader_changes
        )
    }
}

/// The TLS material every client of the oracle uses.
struct Tls {
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl Tls {
    fn options(&self, timeout: Duration) -> ConnectOptions {
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(&self.ca))
            .identity(Identity::from_pem(&self.cert, &self.key));
        ConnectOptions::new()
            .with_tls(tls)
            .with_connect_timeout(timeout)
            .with_timeout(timeout)
    }

    /// kubeadm's blocking dial and sync: connected and the member list read within `timeout`.
    async fn dial(&self, endpoints: &[String], timeout: Duration) -> Result<Client, String> {
        let f = async {
            let mut c = Client::connect(endpoints, Some(self.options(timeout)))
                .await
                .map_err(|e| e.to_string())?;
            c.member_list().await.map_err(|e| e.to_string())?;
            Ok::<_, String>(c)
        };
        match tokio::time::timeout(timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "context deadline exceeded (dial and sync within {timeout:?})"
            )),
        }
    }
}

async fn within<T, E: std::fmt::Display>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("context deadline exceeded".into()),
    }
}

impl EtcdCluster {
    /// Joins `host` as kubeadm's control-plane join does (see the module docs), from `host`'s
    /// namespace. The outcome is data: a failed join is `Ok` with `failed` set; `Err` is a lab
    /// failure (certificates, the process could not start).
    pub fn kubeadm_join(
        &mut self,
        host: &Host,
        timing: &KubeadmEtcdTiming,
    ) -> Result<JoinOutcome, Error> {
        let tls = self.oracle_tls()?;
        let m = self.plan_member(host, true);
        self.issue_member_certs(&m)?;
        let endpoints: Vec<String> = self
            .running()
            .iter()
            .map(|&i| self.members()[i].client_url.clone())
            .collect();
        let started = Instant::now();
        let mut out = JoinOutcome {
            failed: None,
            steps: Vec::new(),
            took: Duration::ZERO,
            member: None,
            add_attempts: 0,
            promote_attempts: 0,
        };
        let (name, peer) = (m.name.clone(), m.peer_url.clone());

        // 1 and 2: dial, then MemberAddAsLearner on the retry schedule.
        let added = host.block_on(|| {
            add_as_learner(&tls, &endpoints, &name, &peer, timing, &mut out, started)
        })?;
        let Some(initial_cluster) = added else {
            out.took = started.elapsed();
            return Ok(out);
        };

        // 3: start the member.
        let t = Instant::now();
        let i = self.admit(m, initial_cluster)?;
        out.member = Some(i);
        out.steps.push((JoinStep::Start, t.elapsed()));

        // 4 and 5: promote, then wait for the cluster.
        let all: Vec<String> = self
            .running()
            .iter()
            .map(|&j| self.members()[j].client_url.clone())
            .collect();
        host.block_on(|| promote_and_wait(&tls, &endpoints, &all, &peer, timing, &mut out))?;
        out.took = started.elapsed();
        Ok(out)
    }

    /// Runs the stability window: each running member gets the load of the kube-apiserver beside
    /// it (kubeadm points each API server at its local etcd member), from its own host, so the
    /// load crosses the paths etcd itself uses (raft between members, the leader's read index),
    /// as a cluster's does. Writes (under `/netlab-oracle/`, deleted afterwards) alternate with
    /// linearizable reads.
    pub fn stability(&self, window: &StabilityWindow) -> Result<Stability, Error> {
        let tls = self.oracle_tls()?;
        let running = self.running();
        let request_timeout =
            Duration::from_secs(5) + Duration::from_millis(2 * self.spec().election_ms);
        let leader_changes = |c: &EtcdCluster| -> u64 {
            running
                .iter()
                .map(|&i| {
                    c.metric_sum(i, "etcd_server_leader_changes_seen_total")
                        .unwrap_or(0.0) as u64
                })
                .sum()
        };
        let before = leader_changes(self);
        let per_member: Vec<Result<LoadTally, Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = running
                .iter()
                .map(|&i| {
                    let m = &self.members()[i];
                    let tls = &tls;
                    s.spawn(move || {
                        m.host
                            .block_on(|| load(tls, i, &m.client_url, window, request_timeout))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Etcd("load thread panicked".into())))
                })
                .collect()
        });
        let after = leader_changes(self);
        let (mut requests, mut failed, mut latencies) = (0, 0, Vec::new());
        for r in per_member {
            let (r, f, l) = r?;
            requests += r;
            failed += f;
            latencies.extend(l);
        }
        latencies.sort_by(f64::total_cmp);
        let pick = |q: f64| -> f64 {
            if latencies.is_empty() {
                return 0.0;
            }
            let idx = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            latencies[idx.min(latencies.len() - 1)]
        };
        let timeout_ms = request_timeout.as_secs_f64() * 1000.0;
        Ok(Stability {
            requests,
            failed,
            past_request_timeout: latencies.iter().filter(|&&l| l > timeout_ms).count() as u64,
            p99_ms: pick(0.99),
            max_ms: pick(1.0),
            leader_changes: after.saturating_sub(before),
            request_timeout,
        })
    }

    /// Grows the database by about `bytes`, written from `from` (a member's host, so the
    /// joiner's impaired path is not in the way): 100 KB values under `/netlab-fill/`. What a
    /// learner must receive as a snapshot; the keys stay for the life of the cluster.
    pub fn fill(&self, from: &Host, bytes: u64) -> Result<u64, Error> {
        const VALUE: usize = 100 * 1024;
        let tls = self.oracle_tls()?;
        let endpoints: Vec<String> = self
            .running()
            .iter()
            .map(|&i| self.members()[i].client_url.clone())
            .collect();
        let n = bytes.div_ceil(VALUE as u64);
        from.block_on(|| async {
            let mut c = within(
                Duration::from_secs(10),
                Client::connect(&endpoints, Some(tls.options(Duration::from_secs(10)))),
            )
            .await
            .map_err(Error::Etcd)?;
            let value = vec![b'f'; VALUE];
            for k in 0..n {
                within(
                    Duration::from_secs(10),
                    c.put(format!("/netlab-fill/{k:06}"), value.clone(), None),
                )
                .await
                .map_err(|e| Error::Etcd(format!("fill: put {k}: {e}")))?;
            }
            Ok(n * VALUE as u64)
        })?
    }

    fn oracle_tls(&self) -> Result<Tls, Error> {
        let id = self.client_identity();
        let read = |p: &std::path::Path| {
            fs::read(p).map_err(|e| Error::Etcd(format!("read {}: {e}", p.display())))
        };
        Ok(Tls {
            ca: read(&id.ca)?,
            cert: read(&id.cert)?,
            key: read(&id.key)?,
        })
    }
}

/// Steps 1 and 2. Returns `--initial-cluster` for the new member, or `None` when a step failed
/// (recorded in `out`).
async fn add_as_learner(
    tls: &Tls,
    endpoints: &[String],
    name: &str,
    peer: &str,
    timing: &KubeadmEtcdTiming,
    out: &mut JoinOutcome,
    started: Instant,
) -> Option<String> {
    let t = Instant::now();
    let mut client = match tls.dial(endpoints, timing.dial).await {
        Ok(c) => c,
        Err(e) => {
            out.failed = Some((JoinStep::Dial, e));
            return None;
        }
    };
    out.steps.push((JoinStep::Dial, t.elapsed()));
    let t = Instant::now();
    let deadline = t + timing.etcd_api_call;
    let mut last = String::new();
    loop {
        out.add_attempts += 1;
        // kubeadm lists first and reuses a member that already has this peer URL.
        let listed = within(timing.call, client.member_list()).await;
        let members = match listed {
            Ok(l)
                if l.members()
                    .iter()
                    .any(|m| m.peer_urls().first().map(String::as_str) == Some(peer)) =>
            {
                Some(l.members().to_vec())
            }
            Ok(_) => {
                let opts = MemberAddOptions::new().with_is_learner();
                match within(timing.call, client.member_add([peer], Some(opts))).await {
                    Ok(r) => Some(r.member_list().to_vec()),
                    Err(e) => {
                        last = e;
                        None
                    }
                }
            }
            Err(e) => {
                last = e;
                None
            }
        };
        if let Some(members) = members {
            out.steps.push((JoinStep::MemberAdd, t.elapsed()));
            // kubeadm's --initial-cluster: every member by name (this one under its node name,
            // an unstarted one under its hex id), at its first peer URL.
            let list: Vec<String> = members
                .iter()
                .filter_map(|m| {
                    let url = m.peer_urls().first()?;
                    let n = if url == peer {
                        name.to_string()
                    } else if m.name().is_empty() {
                        format!("{:x}", m.id())
                    } else {
                        m.name().to_string()
                    };
                    Some(format!("{n}={url}"))
                })
                .collect();
            return Some(list.join(","));
        }
        if Instant::now() + timing.retry_interval >= deadline {
            out.failed = Some((
                JoinStep::MemberAdd,
                format!(
                    "{} attempts in {:.1}s, last: {last}",
                    out.add_attempts,
                    started.elapsed().as_secs_f64()
                ),
            ));
            return None;
        }
        tokio::time::sleep(timing.retry_interval).await;
    }
}

/// Steps 4 and 5.
async fn promote_and_wait(
    tls: &Tls,
    endpoints: &[String],
    all: &[String],
    peer: &str,
    timing: &KubeadmEtcdTiming,
    out: &mut JoinOutcome,
) {
    let t = Instant::now();
    let mut client = match tls.dial(endpoints, timing.dial).await {
        Ok(c) => c,
        Err(e) => {
            out.failed = Some((JoinStep::PromoteDial, e));
            return;
        }
    };
    out.steps.push((JoinStep::PromoteDial, t.elapsed()));
    let t = Instant::now();
    let deadline = t + timing.etcd_api_call;
    let mut last = String::new();
    let mut id = None;
    loop {
        // GetMemberID by peer URL, and the re-check after a failed promote: a voter is done.
        match within(timing.call, client.member_list()).await {
            Ok(l) => match l
                .members()
                .iter()
                .find(|m| m.peer_urls().first().map(String::as_str) == Some(peer))
            {
                Some(m) if !m.is_learner() => break,
                Some(m) => id = Some(m.id()),
                None => last = format!("no member with peer URL {peer}"),
            },
            Err(e) => last = e,
        }
        if let Some(id) = id {
            out.promote_attempts += 1;
            match within(timing.call, client.member_promote(id)).await {
                Ok(_) => break,
                Err(e) => last = e,
            }
        }
        if Instant::now() + timing.retry_interval >= deadline {
            out.failed = Some((
                JoinStep::Promote,
                format!("{} attempts, last: {last}", out.promote_attempts),
            ));
            return;
        }
        tokio::time::sleep(timing.retry_interval).await;
    }
    out.steps.push((JoinStep::Promote, t.elapsed()));

    // WaitForClusterAvailable: every member answers Status, up to `health_checks` times.
    let t = Instant::now();
    let mut last = String::new();
    for check in 0..timing.health_checks {
        if check > 0 {
            tokio::time::sleep(timing.health_interval).await;
        }
        let mut ok = true;
        for ep in all {
            let answered = async {
                let mut c = Client::connect([ep], Some(tls.options(timing.call)))
                    .await
                    .map_err(|e| e.to_string())?;
                c.status().await.map_err(|e| e.to_string())
            };
            if let Err(e) = within(timing.call, answered).await {
                last = format!("{ep}: {e}");
                ok = false;
                break;
            }
        }
        if ok {
            out.steps.push((JoinStep::ClusterHealth, t.elapsed()));
            return;
        }
    }
    out.failed = Some((
        JoinStep::ClusterHealth,
        format!(
            "not available after {} checks, last: {last}",
            timing.health_checks
        ),
    ));
}

/// One member's load: (requests, failed, latencies in ms).
type LoadTally = (u64, u64, Vec<f64>);

/// One member's share of the window's load: paced requests to `endpoint`; returns (requests,
/// failed, latencies in ms).
async fn load(
    tls: &Tls,
    n: usize,
    endpoint: &str,
    window: &StabilityWindow,
    request_timeout: Duration,
) -> LoadTally {
    let end = tokio::time::Instant::now() + window.duration;
    let pace = Duration::from_secs(1) / window.rate_per_member.max(1);
    let value = vec![b'x'; window.value_bytes];
    let (mut requests, mut failed, mut lat) = (0u64, 0u64, Vec::new());
    let connect = Client::connect([endpoint], Some(tls.options(request_timeout)));
    let mut client = match within(request_timeout, connect).await {
        Ok(c) => c,
        Err(_) => return (1, 1, vec![request_timeout.as_secs_f64() * 1000.0]),
    };
    let mut k = 0u64;
    while tokio::time::Instant::now() < end {
        let key = format!("/netlab-oracle/{n}/{}", k % 64);
        let t = Instant::now();
        let r = if k.is_multiple_of(2) {
            within(request_timeout, client.put(key, value.clone(), None))
                .await
                .map(|_| ())
        } else {
            // Linearizable (the default): through the leader's read index.
            within(request_timeout, client.get(key, None))
                .await
                .map(|_| ())
        };
        requests += 1;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        if r.is_err() {
            failed += 1;
        }
        k += 1;
        tokio::time::sleep(pace.saturating_sub(t.elapsed())).await;
    }
    let prefix = format!("/netlab-oracle/{n}/");
    let _ = within(
        request_timeout,
        client.delete(prefix, Some(DeleteOptions::new().with_prefix())),
    )
    .await;
    (requests, failed, lat)
}
