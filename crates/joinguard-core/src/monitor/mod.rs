//! `joinguard monitor`: the preflight probes run continuously against a changing set of targets,
//! served as Prometheus metrics, with `/readyz` reflecting the preflight checks' verdict.
//!
//! Flow: [`config`] (monitor.yaml) -> targets (static list, preflight's input resolution and
//! discovery, etcd MemberList refreshed) -> [`shard`] (this replica's subset) -> one task per
//! target on its own schedule ([`prober`]) -> sliding windows -> the preflight `Checker` ->
//! [`metrics`] -> [`serve`].
//!
//! This module owns the target set and its lifecycle. It does not aggregate across replicas
//! (Prometheus does) and does not retry probes: a failed probe is a sample.

pub(crate) mod config;
pub(crate) mod metrics;
pub use metrics::BuildLabels;
pub mod probe_endpoint;
pub(crate) mod prober;
pub(crate) mod serve;
pub(crate) mod shard;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::check::{CheckResult, Checker, Status, CLUSTER_TARGET};
use crate::failure::Stopped;
use crate::input::{Input, Named};
use crate::notes::Notes;
use crate::probe::etcd::{self, EtcdFailure, EtcdTls, MemberInfo};
use crate::probe::fullsize::{self, FullSize, NoExchange};
use crate::probe::icmp::IcmpError;
use crate::probe::identity::{CaBundle, ALPN_HTTP1};
use crate::probe::pmtu::{self, PathMtu};
use crate::probe::tls::TlsClient;
use crate::retry::{self, ErrorClass, Reason, Recorder, RetryPolicy};
use crate::stats::Summary;
use crate::target::{Target, TargetKind};

pub use config::{ConfigError, MonitorConfig, Shard};
pub use metrics::Metrics;
use prober::{How, TargetState};

/// Where `/metrics` is served unless `--listen` or `listen:` say otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9810";

/// The check verdict `/readyz` serves.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// False until the first evaluation.
    pub evaluated: bool,
    /// One line per check in error: `EtcdHealth etcd-client/198.18.0.3:2379: ...`.
    pub errors: Vec<String>,
}

/// What every task shares.
#[derive(Debug)]
pub struct Shared {
    pub config: MonitorConfig,
    pub metrics: Metrics,
    pub recorder: Recorder,
    pub verdict: RwLock<Verdict>,
    checker: Checker,
    /// Whether etcd client targets have an identity (EtcdIdentity check).
    etcd_identity: bool,
    running: Mutex<BTreeMap<String, Running>>,
    path_mtu: Mutex<PathMtuState>,
    /// Bumped whenever the probed set changes, so the path MTU loop's once-a-second look for
    /// new hosts costs nothing while it stays the same.
    targets_generation: std::sync::atomic::AtomicU64,
    /// The evaluation's map of endpoint to target name, and the `targets_generation` it was
    /// built at: rebuilt only when the probed set changes.
    endpoint_names: Mutex<(Option<u64>, HashMap<String, String>)>,
    /// `/metrics` bodies, rendered at most once a second.
    exposition: serve::ExpositionCache,
    /// The cluster's TLS material (etcd client, peer, API), replaced when the etcd client
    /// identity is renewed ([`renew_loop`]).
    cluster_tls: RwLock<ClusterTls>,
    /// Bumped at each replacement: a probe loop takes the new material at its next round.
    tls_generation: std::sync::atomic::AtomicU64,
    /// `/probe` requests in flight ([`probe_endpoint::MAX_IN_FLIGHT`]).
    probe_slots: tokio::sync::Semaphore,
}

impl Shared {
    /// Nothing probed yet, no verdict.
    fn new(
        config: MonitorConfig,
        checker: Checker,
        etcd_identity: bool,
        recorder: Recorder,
        cluster_tls: ClusterTls,
    ) -> Shared {
        Shared {
            checker,
            etcd_identity,
            metrics: Metrics::with_build(config.build.clone()),
            recorder,
            verdict: RwLock::new(Verdict::default()),
            running: Mutex::new(BTreeMap::new()),
            path_mtu: Mutex::new(PathMtuState::default()),
            targets_generation: Default::default(),
            endpoint_names: Mutex::new((None, HashMap::new())),
            exposition: serve::ExpositionCache::new(serve::EXPOSITION_MAX_AGE),
            cluster_tls: RwLock::new(cluster_tls),
            tls_generation: Default::default(),
            probe_slots: tokio::sync::Semaphore::new(probe_endpoint::MAX_IN_FLIGHT),
            config,
        }
    }

    /// The cluster TLS material now.
    fn cluster_tls(&self) -> ClusterTls {
        self.cluster_tls
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// For a probe loop whose generation is behind: how `target` is probed with the current
    /// material, when `how` uses the cluster's identity (etcd client and peer targets).
    pub(crate) fn renewed_how(&self, target: &Target, how: &How) -> Option<How> {
        match how {
            How::EtcdClient(_) | How::EtcdPeer(_) => {
                let new = self.cluster_tls().how(target);
                (new.kinds() == how.kinds()).then_some(new)
            }
            How::Tcp | How::ApiReadyz(_) => None,
        }
    }
}

/// Why a host's path MTU has no figure.
#[derive(Debug, thiserror::Error)]
enum Unmeasured {
    #[error(
        "no echo of any size was answered: ICMP echo is filtered on the way, or the host does \
         not answer it"
    )]
    NoEcho,
    #[error("{0}")]
    Probe(Arc<IcmpError>),
}

/// The ICMP path MTU probe's result for one host (the error shared with the evaluation).
type IcmpOutcome = Result<PathMtu, Arc<IcmpError>>;

/// What the last path MTU round found.
#[derive(Debug, Default)]
struct PathMtuState {
    /// ICMP, per host: the name of the target it is reported under (the first by name), that
    /// target, and what the probe found.
    hosts: BTreeMap<String, (String, Target, IcmpOutcome)>,
    /// The full-size TCP exchange, per host with an etcd peer target: the peer target's name,
    /// the target, and what the exchange found.
    tcp: BTreeMap<String, (String, Target, Result<FullSize, NoExchange>)>,
    /// Why neither side can run (no CAP_NET_RAW and no etcd peer identity): one warning, not
    /// one per host.
    unavailable: Option<String>,
}

#[derive(Debug)]
struct Running {
    target: Target,
    how_kinds: Vec<crate::probe::ProbeKind>,
    state: Arc<Mutex<TargetState>>,
    task: JoinHandle<()>,
}

/// One target as the planner sees it: a name and how to probe it.
#[derive(Clone, Debug)]
pub struct Planned {
    pub name: String,
    pub target: Target,
    pub how: How,
}

/// TLS material for the targets that come from the cluster section and MemberList.
#[derive(Clone, Debug, Default)]
struct ClusterTls {
    etcd: Option<Arc<EtcdTls>>,
    peer: Option<Arc<TlsClient>>,
    api: Option<Arc<TlsClient>>,
}

impl ClusterTls {
    /// The material of a resolved cluster section.
    fn of(input: &crate::discovery::input::PreflightInput) -> Result<ClusterTls, Stopped> {
        let invalid = |e: &dyn std::fmt::Display| Stopped::input(e.to_string());
        let mut tls = ClusterTls::default();
        if let (Some(ca), Some(id)) = (&input.etcd_ca, &input.etcd_identity) {
            tls.etcd = Some(Arc::new(
                EtcdTls::new(ca, Some(id)).map_err(|e| invalid(&e))?,
            ));
            tls.peer = Some(Arc::new(
                TlsClient::new(ca, Some(id), &[ALPN_HTTP1]).map_err(|e| invalid(&e))?,
            ));
        }
        if let Some(ca) = &input.api_ca {
            tls.api = Some(Arc::new(
                TlsClient::new(ca, None, &[ALPN_HTTP1]).map_err(|e| invalid(&e))?,
            ));
        }
        Ok(tls)
    }

    fn how(&self, t: &Target) -> How {
        match t.kind {
            TargetKind::ApiServer => match &self.api {
                Some(tls) => How::ApiReadyz(tls.clone()),
                None => How::Tcp,
            },
            TargetKind::EtcdClient => match &self.etcd {
                Some(tls) => How::EtcdClient(tls.clone()),
                None => How::Tcp,
            },
            TargetKind::EtcdPeer => match &self.peer {
                Some(tls) => How::EtcdPeer(tls.clone()),
                None => How::Tcp,
            },
        }
    }
}

/// A running monitor.
#[derive(Debug)]
pub struct Monitor {
    pub shared: Arc<Shared>,
    pub addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Monitor {
    /// Stops every task.
    pub fn stop(&self) {
        for t in &self.tasks {
            t.abort();
        }
        let running = self
            .shared
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for r in running.values() {
            r.task.abort();
        }
    }
}

/// Resolves the targets, starts the probes, the evaluator, the MemberList refresher and the HTTP
/// server. Errors carry the exit code.
pub async fn start(
    mut config: MonitorConfig,
    listen: SocketAddr,
    notes: &dyn Notes,
) -> Result<Monitor, Stopped> {
    let recorder = Recorder::new();
    let mut planned: Vec<Planned> = Vec::new();
    for s in &config.targets {
        let how = match (&s.cacert, s.target.kind) {
            (Some(path), TargetKind::ApiServer) => {
                let ca = CaBundle::load(Named::new(Input::ApiserverCacert, "cacert"), path)
                    .map_err(|e| Stopped::input(format!("targets `{}`: {e}", s.name)))?;
                let tls = TlsClient::new(&ca, None, &[ALPN_HTTP1])
                    .map_err(|e| Stopped::input(format!("targets `{}`: {e}", s.name)))?;
                How::ApiReadyz(Arc::new(tls))
            }
            _ => How::Tcp,
        };
        planned.push(Planned {
            name: s.name.clone(),
            target: s.target.clone(),
            how,
        });
    }

    let mut cluster_tls = ClusterTls::default();
    let mut seeds: Vec<Target> = Vec::new();
    let mut thresholds = crate::check::Thresholds::default();
    let mut ignore = crate::check::IgnoreList::default();
    let mut etcd_identity = true;
    // Targets MemberList does not change: the static list and the cluster's API endpoint.
    let mut fixed: Vec<Planned> = planned.clone();
    // The cluster section as given, to resolve again when the etcd client identity is renewed.
    let mut renew: Option<(
        crate::spec::PreflightSpec,
        Option<crate::probe::tls::CertValidity>,
    )> = None;
    if let Some(args) = config.cluster.take() {
        let spec = args.clone();
        let input = crate::discovery::input::PreflightInput::from_spec(args, &recorder, notes)
            .await
            .map_err(|e| match e {
                // Invalid input names its `cluster.*` key already.
                e @ Stopped::Invalid(_) => e,
                e => e.context("cluster: "),
            })?;
        thresholds = input.thresholds.clone();
        ignore = input.ignore.clone();
        etcd_identity = input.etcd_identity.is_some() || input.etcd_clients.is_empty();
        cluster_tls = ClusterTls::of(&input)?;
        if input.etcd_identity.is_some() {
            renew = Some((spec, identity_validity(&input)));
        }
        if let Some(t) = &input.api {
            planned.push(Planned {
                name: config::default_name(t),
                target: t.clone(),
                how: cluster_tls.how(t),
            });
        }
        fixed = planned.clone();
        for t in input.etcd_clients.iter().chain(&input.etcd_peers) {
            planned.push(Planned {
                name: config::default_name(t),
                target: t.clone(),
                how: cluster_tls.how(t),
            });
        }
        seeds = input.etcd_clients.clone();
    }

    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
        Stopped::input(format!(
            "cannot listen on {listen} ({e}); pick a free address to listen on"
        ))
    })?;
    let addr = listener.local_addr().unwrap_or(listen);

    let shared = Arc::new(Shared::new(
        config,
        // Only failing checks' messages are shown (the verdict, /readyz).
        Checker::new(thresholds, ignore)
            .terse()
            .spelled(config::KEYS),
        etcd_identity,
        recorder,
        cluster_tls.clone(),
    ));
    apply_targets(&shared, planned);

    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(serve::serve(listener, shared.clone())));
    tasks.push(tokio::spawn(evaluate_loop(shared.clone())));
    if !shared.config.path_mtu_interval.is_zero() {
        tasks.push(tokio::spawn(path_mtu_loop(shared.clone())));
    }
    if cluster_tls.etcd.is_some() && !seeds.is_empty() {
        tasks.push(tokio::spawn(member_list_loop(shared.clone(), seeds, fixed)));
    }
    if let Some((spec, validity)) = renew {
        shared
            .metrics
            .identity_expiry(validity.as_ref().map(|v| v.not_after));
        tasks.push(tokio::spawn(renew_loop(shared.clone(), spec, validity)));
    }
    info!(%addr, "serving /metrics, /healthz and /readyz");
    notes.note(&format!(
        "[monitor] probing {} targets every {}; metrics on {}://{addr}/metrics",
        shared.running.lock().map(|r| r.len()).unwrap_or(0),
        humantime::format_duration(shared.config.interval),
        if shared.config.tls.is_some() {
            "https"
        } else {
            "http"
        }
    ));
    Ok(Monitor {
        shared,
        addr,
        tasks,
    })
}

/// Makes the probed set equal to this shard's part of `all` (capped): starts what is new, stops
/// and forgets what is gone. A target whose probe method changed is restarted.
fn apply_targets(shared: &Arc<Shared>, all: Vec<Planned>) {
    let mut by_name: BTreeMap<String, Planned> = BTreeMap::new();
    for p in all {
        by_name.entry(p.name.clone()).or_insert(p);
    }
    let total = by_name.len();
    let mine: Vec<Planned> = by_name
        .into_values()
        .filter(|p| shared.config.shard.owns(&p.name))
        .collect();
    let other_shards = total - mine.len();
    let cap = shared.config.max_targets;
    let capped = mine.len().saturating_sub(cap);
    if capped > 0 {
        warn!(
            capped,
            max_targets = cap,
            "more targets than maxTargets: the names sorting last are not probed; add replicas \
             (shard.replicas) or raise maxTargets"
        );
    }
    let keep: BTreeMap<String, Planned> = mine
        .into_iter()
        .take(cap)
        .map(|p| (p.name.clone(), p))
        .collect();
    let mut running = shared.running.lock().unwrap_or_else(|e| e.into_inner());
    let gone: Vec<String> = running
        .iter()
        .filter(|(name, r)| {
            keep.get(*name)
                .is_none_or(|p| p.target != r.target || p.how.kinds() != r.how_kinds)
        })
        .map(|(n, _)| n.clone())
        .collect();
    for name in gone {
        if let Some(r) = running.remove(&name) {
            r.task.abort();
            shared.metrics.forget(&name, &r.how_kinds);
            info!(target = %name, "target removed");
        }
    }
    for (name, p) in keep {
        if running.contains_key(&name) {
            continue;
        }
        let state = Arc::new(Mutex::new(TargetState::new(
            p.target.clone(),
            shared.config.window,
        )));
        let how_kinds = p.how.kinds();
        let task = tokio::spawn(prober::run(
            shared.clone(),
            name.clone(),
            p.target.clone(),
            p.how.clone(),
            state.clone(),
        ));
        info!(target = %name, probes = ?how_kinds, "target added");
        running.insert(
            name,
            Running {
                target: p.target,
                how_kinds,
                state,
                task,
            },
        );
    }
    shared
        .metrics
        .set_target_counts(running.len(), capped, other_shards);
    shared
        .targets_generation
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Re-judges every window once per interval and publishes the check gauges and the verdict.
async fn evaluate_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Judging 10,000 windows takes tens of milliseconds: off the probes' worker threads, so
        // it never delays a probe's timer.
        let s = shared.clone();
        let _ = tokio::task::spawn_blocking(move || evaluate(&s)).await;
    }
}

/// One evaluation: the preflight checks over the sliding windows. Never inlined: once a
/// second, and a profiler or callgrind's `--toggle-collect` can then find it by name.
#[inline(never)]
pub(crate) fn evaluate(shared: &Shared) {
    let mut summaries = Vec::new();
    let mut members = Vec::new();
    let mut names = shared
        .endpoint_names
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let mut etcd_clients = false;
    let generation;
    {
        let running = shared.running.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the `running` lock, which `apply_targets` holds while it bumps it.
        generation = shared
            .targets_generation
            .load(std::sync::atomic::Ordering::Relaxed);
        let (built_at, name_of) = &mut *names;
        let rebuild = *built_at != Some(generation);
        if rebuild {
            name_of.clear();
            *built_at = Some(generation);
        }
        for (name, r) in running.iter() {
            let mut guard = r.state.lock().unwrap_or_else(|e| e.into_inner());
            let st = &mut *guard;
            if rebuild {
                name_of.insert(r.target.endpoint.clone(), name.clone());
            }
            etcd_clients |= r.target.kind == TargetKind::EtcdClient;
            for (probe, window) in st.windows.iter_mut() {
                if !window.is_empty() {
                    // In place (the window's ring made one slice), not a copy of every sample.
                    let samples = window.make_contiguous();
                    summaries.push(Summary::from_samples(&st.target, *probe, samples));
                }
            }
            if let Some(h) = &st.health {
                members.push(h.clone());
            }
        }
    }
    let checker = &shared.checker;
    let mut checks: Vec<CheckResult> = checker.evaluate_summaries(&summaries);
    if !members.is_empty() {
        checks.extend(checker.etcd_health(&members));
    }
    if etcd_clients {
        checks.push(checker.etcd_identity(shared.etcd_identity));
    }
    checks.extend(path_mtu_checks(shared));
    let checks = checker.finish(checks);
    let name_of = &names.1;
    let name = |endpoint: &str| {
        name_of
            .get(endpoint)
            .cloned()
            .unwrap_or_else(|| endpoint.to_string())
    };
    shared.metrics.set_checks(&checks, name_of, generation);
    let errors: Vec<String> = checks
        .iter()
        .filter(|c| c.status == Status::Error)
        .map(|c| {
            let target = if c.target == CLUSTER_TARGET {
                c.target.clone()
            } else {
                name(&c.target)
            };
            format!("{} {}: {}", c.name, target, c.message)
        })
        .collect();
    let mut v = shared.verdict.write().unwrap_or_else(|e| e.into_inner());
    *v = Verdict {
        evaluated: true,
        errors,
    };
}

/// Each host's path MTU probe is bounded by this (a round is a few round trips; a silent host
/// waits out one second per round).
const PATH_MTU_BUDGET: Duration = Duration::from_secs(5);
/// Hosts probed at once in a path MTU round.
const PATH_MTU_CONCURRENCY: usize = 16;

/// The PathMTU check over the last round: preflight's judgement per host, ICMP and TCP
/// together; a host that answered no echo of any size and had no TCP exchange, or could not be
/// probed, is a warning that says so (the monitor has no PacketLoss check to judge it instead);
/// when neither side can run, one warning for the cluster.
fn path_mtu_checks(shared: &Shared) -> Vec<CheckResult> {
    let st = shared.path_mtu.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = &st.unavailable {
        return vec![CheckResult {
            name: crate::check::CheckName::PathMtu,
            target: CLUSTER_TARGET.to_string(),
            status: Status::Warning,
            message: format!(
                "path MTU not measured: {why}. Grant the monitor CAP_NET_RAW or give the \
                 cluster section an etcd identity (the TCP side uses the peer port), or set \
                 pathMtuInterval: 0s"
            ),
            measured: None,
            threshold: None,
        }];
    }
    let icmp: Vec<(Target, Result<PathMtu, Unmeasured>)> = st
        .hosts
        .iter()
        .map(|(host, (_, t, r))| {
            let r = match r {
                Ok(p) if p.largest_ok.is_none() && !st.tcp.contains_key(host) => {
                    Err(Unmeasured::NoEcho)
                }
                Ok(p) => Ok(p.clone()),
                Err(e) => Err(Unmeasured::Probe(e.clone())),
            };
            (t.clone(), r)
        })
        .collect();
    let tcp: Vec<(Target, Result<FullSize, NoExchange>)> = st
        .tcp
        .values()
        .map(|(_, t, r)| (t.clone(), r.clone()))
        .collect();
    shared.checker.path_mtu(&icmp, &tcp)
}

/// Every `pathMtuInterval`: the ICMP path MTU probe to every host of the running targets, and,
/// with an etcd peer identity, the full-size TCP exchange with every member's peer port;
/// `PATH_MTU_CONCURRENCY` hosts at a time. A host or peer target that appears in between (the
/// members MemberList brings after the seed) is probed within a second, not an interval later.
/// Without CAP_NET_RAW the ICMP side stops for good (that does not change while the process
/// runs) and TCP judges alone.
async fn path_mtu_loop(shared: Arc<Shared>) {
    // Why the ICMP side cannot run, once known.
    let mut icmp_off: Option<String> = None;
    let mut last_full: Option<tokio::time::Instant> = None;
    // Hosts probed since the last full round, by ICMP and by the TCP exchange.
    let mut probed_icmp: std::collections::BTreeSet<String> = Default::default();
    let mut probed_tcp: std::collections::BTreeSet<String> = Default::default();
    let every = shared.config.path_mtu_interval;
    let mut seen_generation = None;
    loop {
        let full = last_full.is_none_or(|t| t.elapsed() >= every);
        let generation = shared
            .targets_generation
            .load(std::sync::atomic::Ordering::Relaxed);
        if !full && seen_generation == Some(generation) {
            tokio::time::sleep(every.min(Duration::from_secs(1))).await;
            continue;
        }
        seen_generation = Some(generation);
        let peer_tls = shared.cluster_tls().peer;
        // Per host: (the first target's name, it), and its etcd peer target if there is one.
        let mut hosts: BTreeMap<String, (String, Target)> = BTreeMap::new();
        let mut peers: BTreeMap<String, (String, Target)> = BTreeMap::new();
        {
            let running = shared.running.lock().unwrap_or_else(|e| e.into_inner());
            for (name, r) in running.iter() {
                hosts
                    .entry(r.target.host.clone())
                    .or_insert_with(|| (name.clone(), r.target.clone()));
                if r.target.kind == TargetKind::EtcdPeer {
                    peers
                        .entry(r.target.host.clone())
                        .or_insert_with(|| (name.clone(), r.target.clone()));
                }
            }
        }
        if full {
            last_full = Some(tokio::time::Instant::now());
            probed_icmp.clear();
            probed_tcp.clear();
            // Hosts that are gone lose their results and series.
            let mut st = shared.path_mtu.lock().unwrap_or_else(|e| e.into_inner());
            st.hosts.retain(|host, (name, _, _)| {
                let keep = hosts.contains_key(host);
                if !keep {
                    shared.metrics.set_path_mtu(name, None);
                }
                keep
            });
            st.tcp.retain(|host, (name, _, _)| {
                let keep = peers.contains_key(host);
                if !keep {
                    shared.metrics.set_tcp_mss(name, None);
                }
                keep
            });
        }
        let mut todo = Vec::new();
        for (host, (name, target)) in hosts {
            let icmp = icmp_off.is_none() && !probed_icmp.contains(&host);
            let peer = peers
                .get(&host)
                .filter(|_| !probed_tcp.contains(&host))
                .cloned()
                .zip(peer_tls.clone());
            if icmp || peer.is_some() {
                if icmp {
                    probed_icmp.insert(host.clone());
                }
                if peer.is_some() {
                    probed_tcp.insert(host.clone());
                }
                todo.push((host, name, target, icmp, peer));
            }
        }
        let mut no_privilege = None;
        let mut todo = todo.into_iter();
        let mut set = tokio::task::JoinSet::new();
        loop {
            while set.len() < PATH_MTU_CONCURRENCY {
                let Some((host, name, target, icmp_on, peer)) = todo.next() else {
                    break;
                };
                set.spawn(async move {
                    let icmp = async {
                        if !icmp_on {
                            return None;
                        }
                        Some(match host_ip(&host).await {
                            Ok(ip) => pmtu::probe(ip, PATH_MTU_BUDGET).await,
                            Err(e) => Err(IcmpError::Io(e)),
                        })
                    };
                    let exchange = async {
                        let ((name, t), tls) = peer?;
                        let r = fullsize::exchange(&t.host, t.port, &tls, PATH_MTU_BUDGET).await;
                        Some((name, t, r))
                    };
                    let (icmp, exchange) = tokio::join!(icmp, exchange);
                    (host, name, target, icmp, exchange)
                });
            }
            let Some(done) = set.join_next().await else {
                break;
            };
            let Ok((host, name, target, icmp, exchange)) = done else {
                continue;
            };
            let mut st = shared.path_mtu.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((peer_name, t, r)) = exchange {
                let mss = r
                    .as_ref()
                    .ok()
                    .filter(|x| x.outbound_ok())
                    .map(|x| x.snd_mss);
                shared.metrics.set_tcp_mss(&peer_name, mss);
                st.tcp.insert(host.clone(), (peer_name, t, r));
            }
            let r = match icmp {
                None => continue,
                Some(Ok(p)) => Ok(p),
                Some(Err(e @ IcmpError::NoPrivilege(_))) => {
                    no_privilege = Some(e.to_string());
                    continue;
                }
                Some(Err(e)) => Err(Arc::new(e)),
            };
            shared
                .metrics
                .set_path_mtu(&name, r.as_ref().ok().and_then(|p| p.largest_ok));
            st.hosts.insert(host, (name, target, r));
        }
        if let Some(why) = no_privilege {
            warn!(
                error = %why,
                tcp_side = peer_tls.is_some(),
                "the ICMP path MTU probe cannot run; only the TCP side (etcd peers) is measured"
            );
            icmp_off = Some(why);
        }
        {
            let mut st = shared.path_mtu.lock().unwrap_or_else(|e| e.into_inner());
            st.unavailable = icmp_off
                .as_ref()
                .filter(|_| peer_tls.is_none())
                .map(|why| format!("{why}; and without an etcd identity there is no TCP side"));
        }
        // New hosts are looked for every second; everything is probed again every interval.
        tokio::time::sleep(every.min(Duration::from_secs(1))).await;
    }
}

/// The address of a target's host: the host itself, or its first address by name (5 s).
async fn host_ip(host: &str) -> std::io::Result<std::net::IpAddr> {
    if let Ok(ip) = host.trim_matches(|c| c == '[' || c == ']').parse() {
        return Ok(ip);
    }
    let mut addrs = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((host, 0u16)),
    )
    .await
    .map_err(|_| std::io::Error::other(format!("{host}: name lookup timed out")))??;
    addrs
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| std::io::Error::other(format!("{host}: the name has no address")))
}

/// MemberList failures on the retry layer's etcd policy: reaching the member is transient, trust
/// is final.
#[derive(Debug)]
struct ListFailure(EtcdFailure);

impl std::fmt::Display for ListFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl retry::Classify for ListFailure {
    fn classify(&self) -> ErrorClass {
        match &self.0 {
            EtcdFailure::Timeout(_) => ErrorClass::Transient(Reason::Timeout),
            EtcdFailure::Refused => ErrorClass::Transient(Reason::ConnectionRefused),
            EtcdFailure::Io(_) | EtcdFailure::Rpc { .. } => {
                ErrorClass::Transient(Reason::GrpcUnavailable)
            }
            EtcdFailure::Untrusted(_) | EtcdFailure::Tls(_) => ErrorClass::Trust,
            _ => ErrorClass::Permanent(Reason::Other),
        }
    }
}

/// Follows the cluster's members: every `memberListInterval`, lists them from the first member
/// that answers (seeds, then the members last seen) and replaces the etcd targets by the list's.
/// When no member answers, the targets stay as they are (and show as down).
async fn member_list_loop(shared: Arc<Shared>, seeds: Vec<Target>, fixed: Vec<Planned>) {
    let every = shared.config.member_list_interval;
    let mut known: Vec<String> = seeds.iter().map(Target::url).collect();
    loop {
        // The current material: a renewed identity is used from the next listing on.
        let cluster_tls = shared.cluster_tls();
        let Some(tls) = cluster_tls.etcd.clone() else {
            tokio::time::sleep(every).await;
            continue;
        };
        let policy = RetryPolicy::etcd()
            .with_budget(every)
            .with_per_attempt(shared.config.probe_timeout.max(Duration::from_secs(1)));
        let list = list_members(&shared, &tls, &known, &policy).await;
        match list {
            Some(members) => {
                let mut planned = fixed.clone();
                let mut urls = Vec::new();
                let (targets, dropped) = member_list_targets(&members);
                if dropped > 0 {
                    warn!(
                        members = members.len(),
                        dropped,
                        cap = MAX_MEMBER_TARGETS,
                        "MemberList lists more members than an etcd cluster has; the members \
                         listed last are not probed"
                    );
                }
                for t in targets {
                    if t.kind == TargetKind::EtcdClient {
                        urls.push(t.url());
                    }
                    planned.push(Planned {
                        name: config::default_name(&t),
                        how: cluster_tls.how(&t),
                        target: t,
                    });
                }
                if !urls.is_empty() {
                    // Seeds first, then the members as listed: a seed that left still gets tried.
                    for s in seeds.iter().map(Target::url) {
                        if !urls.contains(&s) {
                            urls.push(s);
                        }
                    }
                    known = urls;
                }
                apply_targets(&shared, planned);
            }
            None => warn!("no etcd member answered MemberList; keeping the current targets"),
        }
        tokio::time::sleep(every).await;
    }
}

/// The validity of the etcd client identity a resolved cluster section carries.
fn identity_validity(
    input: &crate::discovery::input::PreflightInput,
) -> Option<crate::probe::tls::CertValidity> {
    let id = input.etcd_identity.as_ref()?;
    crate::probe::tls::CertValidity::from_der(id.chain().first()?)
}

/// When to renew an identity valid `v`, seen at `now`: two thirds into its lifetime (kubelet
/// rotates its own between 70 and 90 %), at least 1 s and at most a day from now (a day: a
/// certificate on disk that kubeadm renewed is picked up within one).
fn renew_in(v: &crate::probe::tls::CertValidity, now: std::time::SystemTime) -> Duration {
    let life = v.not_after.duration_since(v.not_before).unwrap_or_default();
    let at = v.not_before + life * 2 / 3;
    at.duration_since(now)
        .unwrap_or_default()
        .clamp(Duration::from_secs(1), Duration::from_secs(24 * 3600))
}

/// Keeps the etcd client identity fresh. A monitor given `certDir` mints a client certificate
/// that lives [`crate::discovery::cluster::MINTED_LIFETIME`] (1 h): the connections made with
/// it keep working after it expires, but the next reconnect (a member restarted, a path that
/// broke) would fail its TLS handshake. Before two thirds of its life are over, the cluster
/// section is resolved again as at start (the certificate directory read again, a new
/// certificate minted) and every etcd client and peer probe reconnects with the new one at its
/// next round. A failed renewal is retried every minute, and says so, while the old identity
/// lasts.
async fn renew_loop(
    shared: Arc<Shared>,
    spec: crate::spec::PreflightSpec,
    mut validity: Option<crate::probe::tls::CertValidity>,
) {
    const RETRY: Duration = Duration::from_secs(60);
    let mut wait = validity
        .as_ref()
        .map_or(Duration::from_secs(24 * 3600), |v| {
            renew_in(v, std::time::SystemTime::now())
        });
    loop {
        tokio::time::sleep(wait).await;
        let recorder = Recorder::new();
        let resolved = crate::discovery::input::PreflightInput::from_spec(
            spec.clone(),
            &recorder,
            &crate::notes::Silent,
        )
        .await
        .and_then(|input| Ok((ClusterTls::of(&input)?, identity_validity(&input))));
        match resolved {
            Ok((tls, new_validity)) => {
                *shared
                    .cluster_tls
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = tls;
                shared
                    .tls_generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let until = new_validity
                    .as_ref()
                    .map(|v| humantime::format_rfc3339_seconds(v.not_after).to_string())
                    .unwrap_or_else(|| "an unknown time".into());
                info!(valid_until = %until, "renewed the etcd client identity; the etcd probes reconnect with it");
                shared
                    .metrics
                    .identity_renewed(new_validity.as_ref().map(|v| v.not_after));
                validity = new_validity;
                wait = validity
                    .as_ref()
                    .map_or(Duration::from_secs(24 * 3600), |v| {
                        renew_in(v, std::time::SystemTime::now())
                    });
            }
            Err(e) => {
                let left = validity
                    .as_ref()
                    .and_then(|v| {
                        v.not_after
                            .duration_since(std::time::SystemTime::now())
                            .ok()
                    })
                    .unwrap_or_default();
                warn!(
                    error = %e,
                    expires_in_s = left.as_secs(),
                    "could not renew the etcd client identity; retrying in 60s (the current one \
                     keeps working until it expires; after that the etcd probes fail to reconnect)"
                );
                wait = RETRY;
            }
        }
    }
}

/// The most targets MemberList may add: two (client and peer) for each of 9 members. etcd
/// advises at most 7 voters, plus a learner or two; a longer list is a broken or hostile answer,
/// and it must not crowd the configured targets out of `maxTargets`.
pub const MAX_MEMBER_TARGETS: usize = 2 * 9;

/// The targets of a MemberList answer, at most [`MAX_MEMBER_TARGETS`], and how many were left out.
fn member_list_targets(members: &[MemberInfo]) -> (Vec<Target>, usize) {
    let all: Vec<Target> = members.iter().flat_map(member_targets).collect();
    let dropped = all.len().saturating_sub(MAX_MEMBER_TARGETS);
    (all.into_iter().take(MAX_MEMBER_TARGETS).collect(), dropped)
}

/// The first client URL and the first peer URL of a member, named after the member. A member
/// added but not started yet has no client URL: its peer is probed (and shows as down).
fn member_targets(m: &MemberInfo) -> Vec<Target> {
    let mut out = Vec::new();
    for (kind, urls) in [
        (TargetKind::EtcdClient, &m.client_urls),
        (TargetKind::EtcdPeer, &m.peer_urls),
    ] {
        if let Some(Ok(mut t)) = urls.first().map(|u| Target::parse_url(kind, u)) {
            if !m.name.is_empty() {
                t.member = Some(m.name.clone());
            }
            out.push(t);
        }
    }
    out
}

async fn list_members(
    shared: &Shared,
    tls: &EtcdTls,
    endpoints: &[String],
    policy: &RetryPolicy,
) -> Option<Vec<MemberInfo>> {
    let mut turn = 0usize;
    let r = retry::run(policy, "etcd MemberList", &shared.recorder, None, |ctx| {
        // Each attempt asks the next endpoint: one dead member must not stall the refresh.
        let ep = endpoints[turn % endpoints.len().max(1)].clone();
        turn += 1;
        async move {
            let mut c = etcd::connect(&ep, Some(tls), ctx.timeout)
                .await
                .map_err(ListFailure)?;
            c.member_list().await.map_err(ListFailure)
        }
    })
    .await;
    match r {
        Ok(l) if !l.is_empty() => Some(l),
        Ok(_) => None,
        Err(e) => {
            warn!(error = %e, "etcd MemberList failed");
            None
        }
    }
}

/// Returns on SIGTERM or SIGINT (how a DaemonSet or a terminal stops the monitor).
pub async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_renewed_two_thirds_into_its_life() {
        use crate::probe::tls::CertValidity;
        use std::time::UNIX_EPOCH;
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        // A minted certificate: valid from 30 s before it was made, for an hour after.
        let minted = CertValidity {
            not_before: t0 - Duration::from_secs(30),
            not_after: t0 + Duration::from_secs(3600),
            subject: "CN=joinguard-preflight".into(),
        };
        // (3630 s * 2/3) - 30 s = 2390 s after minting.
        assert_eq!(renew_in(&minted, t0), Duration::from_secs(2390));
        // Past the mark (a renewal that failed and is retried): soon, not at once in a loop.
        assert_eq!(
            renew_in(&minted, t0 + Duration::from_secs(3000)),
            Duration::from_secs(1)
        );
        // A kubeadm certificate on disk, a year long: looked at again within a day.
        let year = CertValidity {
            not_before: t0,
            not_after: t0 + Duration::from_secs(365 * 86400),
            subject: "CN=kube-apiserver-etcd-client".into(),
        };
        assert_eq!(renew_in(&year, t0), Duration::from_secs(86400));
    }

    /// Not a check but a measurement (docs/monitor.md, "What one evaluation costs"): one
    /// evaluation of 10,000 TCP targets with full windows, one in ten of them timing out, as
    /// `monitor_scale`'s blackholed row. Run it alone, under callgrind for an instruction
    /// count that does not drift with the host:
    /// `cargo test -p joinguard-core --release --lib evaluation_of_10000_targets -- --ignored
    /// --nocapture`.
    #[tokio::test]
    #[ignore = "a measurement, run by hand"]
    #[allow(clippy::print_stdout)]
    async fn evaluation_of_10000_targets() {
        const N: usize = 10_000;
        const ROUNDS: usize = 5;
        let mut yaml = String::from("pathMtuInterval: 0s\ntargets:\n");
        for i in 0..N {
            yaml.push_str(&format!(
                "  - {{name: t{i}, kind: etcd-peer, endpoint: 198.18.{}.{}:2380}}\n",
                i / 250,
                i % 250 + 1
            ));
        }
        let config = MonitorConfig::parse(&yaml, "monitor.yaml", &|_| None).unwrap();
        let window = config.window;
        let shared = Shared::new(
            config,
            Checker::new(Default::default(), Default::default()).terse(),
            true,
            Recorder::new(),
            ClusterTls::default(),
        );
        {
            let mut running = shared.running.lock().unwrap();
            for (i, s) in shared.config.targets.iter().enumerate() {
                let mut st = TargetState::new(s.target.clone(), window);
                for k in 0..window {
                    let result = if i % 10 == 0 {
                        Err(crate::probe::ProbeFailure::Timeout(1000))
                    } else {
                        Ok(Duration::from_micros(
                            900 + (k as u64 * 37 + i as u64) % 300,
                        ))
                    };
                    st.push(
                        crate::probe::ProbeKind::TcpConnect,
                        crate::probe::Sample { result },
                    );
                }
                running.insert(
                    s.name.clone(),
                    Running {
                        target: s.target.clone(),
                        how_kinds: vec![crate::probe::ProbeKind::TcpConnect],
                        state: Arc::new(Mutex::new(st)),
                        task: tokio::spawn(async {}),
                    },
                );
            }
        }
        let mut took = Vec::new();
        for _ in 0..ROUNDS {
            let t = std::time::Instant::now();
            evaluate(&shared);
            took.push(t.elapsed());
        }
        let v = shared.verdict.read().unwrap();
        // Each blackholed target fails two checks: unreachable (latency) and its loss.
        assert_eq!(v.errors.len(), 2 * N / 10, "{:?}", v.errors.get(..2));
        took.sort();
        println!(
            "evaluation of {N} targets: median {:?} of {ROUNDS} rounds (min {:?})",
            took[ROUNDS / 2],
            took[0]
        );
    }

    fn member(i: u64) -> MemberInfo {
        MemberInfo {
            id: i,
            name: format!("m{i}"),
            client_urls: vec![format!("https://198.18.0.{i}:2379")],
            peer_urls: vec![format!("https://198.18.0.{i}:2380")],
            is_learner: false,
        }
    }

    /// A client that never finishes its request head (slowloris) is closed after
    /// HEADER_READ_TIMEOUT, while a scrape on another connection is answered at once.
    #[tokio::test]
    async fn a_slow_client_is_closed_and_scrapes_go_on() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = MonitorConfig::parse(
            "pathMtuInterval: 0s\ntargets:\n  - kind: etcd-peer\n    endpoint: 127.0.0.1:1\n",
            "monitor.yaml",
            &|_| None,
        )
        .unwrap();
        let m = start(
            config,
            "127.0.0.1:0".parse().unwrap(),
            &crate::notes::Silent,
        )
        .await
        .unwrap();
        let mut slow = tokio::net::TcpStream::connect(m.addr).await.unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        // Meanwhile, a whole scrape is served.
        let mut scrape = tokio::net::TcpStream::connect(m.addr).await.unwrap();
        scrape
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        scrape.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The slow one is closed by the server (EOF, or a 408 then EOF), within the timeout
        // plus a margin for a loaded machine.
        let mut buf = Vec::new();
        let closed = tokio::time::timeout(
            serve::HEADER_READ_TIMEOUT + Duration::from_secs(10),
            slow.read_to_end(&mut buf),
        )
        .await;
        assert!(closed.is_ok(), "the slow connection is still open");
        assert!(started.elapsed() >= serve::HEADER_READ_TIMEOUT - Duration::from_millis(500));
        m.stop();
    }

    /// One source cannot take every connection slot: with 64 slow connections from 127.0.0.1
    /// held open, a 65th from there is closed at once, and a scrape from 127.0.0.2 (another
    /// host, as a Prometheus server is) is served.
    #[tokio::test]
    async fn one_source_cannot_hold_every_connection() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = MonitorConfig::parse(
            "pathMtuInterval: 0s\ntargets:\n  - kind: etcd-peer\n    endpoint: 127.0.0.1:1\n",
            "monitor.yaml",
            &|_| None,
        )
        .unwrap();
        let m = start(
            config,
            "127.0.0.1:0".parse().unwrap(),
            &crate::notes::Silent,
        )
        .await
        .unwrap();
        let mut held = Vec::new();
        for _ in 0..serve::MAX_CONNECTIONS_PER_SOURCE {
            let mut s = tokio::net::TcpStream::connect(m.addr).await.unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
            held.push(s);
        }
        let closed_at_once = |mut s: tokio::net::TcpStream| async move {
            let _ = s
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await;
            let mut buf = Vec::new();
            matches!(
                tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut buf)).await,
                Ok(Ok(0)) | Ok(Err(_))
            ) && buf.is_empty()
        };
        let one_more = tokio::net::TcpStream::connect(m.addr).await.unwrap();
        assert!(
            closed_at_once(one_more).await,
            "a 65th connection from one source was served"
        );
        let other = tokio::net::TcpSocket::new_v4().unwrap();
        other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut scrape = other.connect(m.addr).await.unwrap();
        scrape
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        scrape.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        drop(held);
        m.stop();
    }

    /// With `tls:` the endpoints are served over HTTPS, and with `clientCAFile` only to a scraper
    /// whose client certificate that CA signed: such a scrape gets /healthz, one without a
    /// client certificate and a plain-HTTP one get nothing. The keys are RSA PKCS#1, as kubeadm
    /// writes them.
    #[tokio::test]
    async fn tls_serves_scrapers_with_a_client_certificate_only() {
        use netlab::pki::{CertSpec, KeyAlgorithm, KeyProfile, TestCa};
        use rustls::pki_types::pem::PemObject;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        // A CA with kubeadm's RSA-2048 PKCS#1 keys: the serving pair for 127.0.0.1 and a
        // scraper's client pair.
        let ca = TestCa::with_profile("scrape-ca", KeyProfile::kubeadm(KeyAlgorithm::Rsa(2048)))
            .unwrap();
        let localhost = [std::net::IpAddr::from([127, 0, 0, 1])];
        let (crt, key) = ca
            .issue(&CertSpec::server("joinguard-monitor", &localhost, &[]))
            .unwrap()
            .write(dir.path(), "tls")
            .unwrap();
        assert!(std::fs::read_to_string(&key)
            .unwrap()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let client = ca.issue(&CertSpec::client("prometheus", None)).unwrap();
        let ca_pem = ca.cert_pem().to_string();
        let client_ca = ca.write_ca(dir.path(), "client-ca").unwrap();
        let yaml = format!(
            "pathMtuInterval: 0s\ntargets:\n  - kind: etcd-peer\n    endpoint: 127.0.0.1:1\n\
             tls:\n  certFile: {}\n  keyFile: {}\n  clientCAFile: {}\n",
            crt.display(),
            key.display(),
            client_ca.display(),
        );
        let config = MonitorConfig::parse(&yaml, "monitor.yaml", &|_| None).unwrap();
        let m = start(
            config,
            "127.0.0.1:0".parse().unwrap(),
            &crate::notes::Silent,
        )
        .await
        .unwrap();

        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = crate::probe::identity::crypto_provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let client_chain: Vec<_> =
            rustls::pki_types::CertificateDer::pem_slice_iter(client.cert_pem.as_bytes())
                .map(Result::unwrap)
                .collect();
        let client_key = crate::key::PrivateKey::from_pem(client.key_pem.as_bytes(), None).unwrap();
        let with_cert = builder
            .clone()
            .with_client_auth_cert(client_chain, client_key.to_rustls())
            .unwrap();
        let without_cert = builder.with_no_client_auth();
        let addr = m.addr;
        let get = |config: rustls::ClientConfig| async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
            let mut tls = connector.connect(name, tcp).await.ok()?;
            tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .ok()?;
            let mut answer = String::new();
            tls.read_to_string(&mut answer).await.ok()?;
            Some(answer)
        };
        let answer = get(with_cert)
            .await
            .expect("a scrape with a client certificate");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let refused = get(without_cert).await;
        assert!(
            !refused.as_deref().unwrap_or("").contains("200"),
            "answered without a client certificate: {refused:?}"
        );
        // Plain HTTP on the TLS port: no answer.
        let mut plain = tokio::net::TcpStream::connect(m.addr).await.unwrap();
        plain
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut buf)).await;
        assert!(
            !String::from_utf8_lossy(&buf).contains("200 OK"),
            "{:?}",
            String::from_utf8_lossy(&buf)
        );
        // A client that opens a connection and never starts its handshake is closed too.
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = tokio::time::Instant::now();
        let closed = tokio::time::timeout(
            serve::HEADER_READ_TIMEOUT + Duration::from_secs(10),
            silent.read_to_end(&mut Vec::new()),
        )
        .await;
        assert!(closed.is_ok(), "the silent connection is still open");
        assert!(started.elapsed() >= serve::HEADER_READ_TIMEOUT - Duration::from_millis(500));
        m.stop();
    }

    /// A MemberList of 100 members adds at most 18 targets (2 x 9), whatever maxTargets is.
    #[test]
    fn member_list_targets_have_their_own_cap() {
        let three: Vec<MemberInfo> = (1..=3).map(member).collect();
        let (t, dropped) = member_list_targets(&three);
        assert_eq!((t.len(), dropped), (6, 0));
        let many: Vec<MemberInfo> = (1..=100).map(member).collect();
        let (t, dropped) = member_list_targets(&many);
        assert_eq!(
            (t.len(), dropped),
            (MAX_MEMBER_TARGETS, 200 - MAX_MEMBER_TARGETS)
        );
        assert_eq!(t[0].member.as_deref(), Some("m1"));
    }
}
