//! The sampler: probes every target of a preflight plan concurrently, paced and adaptively, and
//! collects what it saw. Every stream stops by the run's deadline.
//!
//! This module decides *how much* to measure (through [`SamplingPolicy`]) but never judges or
//! formats: `check` judges the [`Observations`], `report` prints them.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::check::{EtcdMemberHealth, Thresholds};
use crate::failure::TrustFailure;
use crate::notes::Notes;
use crate::probe::etcd::{self, EtcdFailure, EtcdTls, MemberClient, MemberInfo, SnapshotProbe};
use crate::probe::failure::{etcd_probe_failure, http_probe_failure};
use crate::probe::fullsize::{self, FullSize, NoExchange};
use crate::probe::http;
use crate::probe::icmp::{IcmpError, Pinger};
use crate::probe::identity::{ALPN_H2, ALPN_HTTP1};
use crate::probe::peer::PeerSession;
use crate::probe::pmtu::{self, PathMtu};
use crate::probe::tls::{self, TlsClient};
use crate::probe::{tcp, ProbeFailure, ProbeKind, Sample};
use crate::sampling::{Decision, LatencyFigure, Limit, SamplingPolicy};
use crate::stats::LossEstimate;
use crate::target::{Target, TargetKind};

use super::input::PreflightInput;

/// Longest wait for one sample. A lost SYN is retransmitted after 1 s, so a connect sample that
/// takes longer than this has met loss, not latency.
const SAMPLE_TIMEOUT: Duration = Duration::from_millis(2000);
/// Connection set-up (TCP + TLS + HTTP/2 + first call) may take 4 RTTs.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// Gap between two samples of one stream: gentle on production members (at most ~100 calls a
/// second per member) and short enough for a verdict in about a second at 2 ms RTT.
const PACE: Duration = Duration::from_millis(5);
/// `/readyz` samples in flight at once (each its own connection).
const API_IN_FLIGHT: usize = 6;
/// Calls in flight at once on a member's channel, per stream (Status, quorum read). Starts are
/// still [`PACE`] apart, so on a short path this changes nothing.
const ETCD_IN_FLIGHT: usize = 2;
/// Kept connections per peer stream (etcd's `/raft/probing` over HTTP/1.1 answers one request
/// at a time per connection).
const PEER_SESSIONS: usize = 3;
/// Echoes the ICMP train may have sent beyond those whose reply is due: on a long path the
/// train pauses there until the sampling decision has seen them (a clean path needs 168).
const ICMP_AHEAD: usize = 200;
/// ICMP echoes go out as one train, this far apart; the sampling decision is made this often.
const ICMP_INTERVAL: Duration = Duration::from_millis(1);
const ICMP_DECIDE_EVERY: Duration = Duration::from_millis(5);
/// The path MTU probe: at most four rounds of echoes, each about one round trip.
const PMTU_BUDGET: Duration = Duration::from_secs(5);
/// The bandwidth probe: the first 8 MiB of a snapshot (`EtcdSnapshotTransfer`, docs/preflight.md).
const SNAPSHOT_BYTES: u64 = 8 * 1024 * 1024;
/// Write probe lease TTL: short, so nothing outlives a killed run for long.
const WRITE_TTL: Duration = Duration::from_secs(10);
/// The report needs a moment after the last sample.
const REPORT_MARGIN: Duration = Duration::from_millis(150);

/// The samples of one (target, probe).
#[derive(Clone, Debug)]
pub struct Series {
    pub target: Target,
    pub probe: ProbeKind,
    pub samples: Vec<Sample>,
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Observations {
    pub series: Vec<Series>,
    /// One per etcd client target that was tried.
    pub members: Vec<EtcdMemberHealth>,
    /// The member list, as the first member that answered gave it.
    pub member_list: Option<Vec<MemberInfo>>,
    /// Clock differences (remote minus local, seconds), per target.
    pub skews: Vec<(Target, f64)>,
    /// The bandwidth probe's result: the member, its DB size and the throughput.
    pub snapshot: Option<(Target, u64, Result<SnapshotProbe, EtcdFailure>)>,
    /// Opt-in write probe failures (the successes are in `series`).
    pub write_failures: Vec<(Target, String)>,
    /// The first trust failure (CA pin or certificate): the run must exit 3.
    pub trust_failure: Option<TrustFailure>,
    /// What was not measured and why, for the report.
    pub notes: Vec<String>,
    /// Stream and host keys for loss: which endpoint carries each host's ICMP loss stream.
    pub icmp_endpoints: BTreeSet<String>,
    /// The path MTU per host, on the target that carries its ICMP stream (`PathMTU`).
    pub pmtu: Vec<(Target, Result<PathMtu, IcmpError>)>,
    /// The full-size TCP exchange per etcd peer target (`PathMTU`'s TCP side).
    pub fullsize: Vec<(Target, Result<FullSize, NoExchange>)>,
    /// Each family of an API endpoint name with addresses of both (`APIServerAddressFamily`).
    pub families: Vec<crate::check::FamilyProbe>,
    /// The targets the join would reach through a proxy, with the proxy's answers (`HTTPProxy`).
    pub proxied: Vec<crate::check::ProxiedPath>,
}

/// Where each stream is offered the moment it finishes, before the run is over: preflight
/// judges it alone and starts a failing target's trace beside the streams still running
/// (`traces::Early`).
pub(crate) type Settled = tokio::sync::mpsc::UnboundedSender<Series>;

struct Shared {
    obs: Mutex<Observations>,
    started: Instant,
    settled: Option<Settled>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new(None)
    }
}

impl Shared {
    fn new(settled: Option<Settled>) -> Shared {
        Shared {
            obs: Mutex::default(),
            started: Instant::now(),
            settled,
        }
    }
    /// A stream's own `Shared` (absorbed later), offering its streams as this one does.
    fn child(&self) -> Shared {
        Shared {
            obs: Mutex::default(),
            started: self.started,
            settled: self.settled.clone(),
        }
    }
    fn with<R>(&self, f: impl FnOnce(&mut Observations) -> R) -> R {
        f(&mut self.obs.lock().unwrap_or_else(|e| e.into_inner()))
    }
    fn push(&self, target: &Target, probe: ProbeKind, samples: Vec<Sample>) {
        // When each stream settled: where a run's time goes (`-vv`).
        tracing::debug!(
            %target,
            ?probe,
            samples = samples.len(),
            at_ms = self.started.elapsed().as_millis() as u64,
            "stream finished"
        );
        if !samples.is_empty() {
            let series = Series {
                target: target.clone(),
                probe,
                samples,
            };
            if let Some(tx) = &self.settled {
                // The receiver is gone once the run's verdict is in: nothing to offer then.
                let _ = tx.send(series.clone());
            }
            self.with(|o| o.series.push(series));
        }
    }
    fn note(&self, n: String) {
        self.with(|o| {
            if !o.notes.contains(&n) {
                o.notes.push(n)
            }
        });
    }
    /// Adds what another stream's own `Shared` saw.
    fn absorb(&self, o: Observations) {
        self.with(|s| {
            s.series.extend(o.series);
            s.members.extend(o.members);
            s.skews.extend(o.skews);
            s.icmp_endpoints.extend(o.icmp_endpoints);
            s.pmtu.extend(o.pmtu);
            s.fullsize.extend(o.fullsize);
            s.families.extend(o.families);
            s.proxied.extend(o.proxied);
            for n in o.notes {
                if !s.notes.contains(&n) {
                    s.notes.push(n);
                }
            }
            if s.trust_failure.is_none() {
                s.trust_failure = o.trust_failure;
            }
        });
    }
    fn into_observations(self) -> Observations {
        self.obs.into_inner().unwrap_or_else(|e| e.into_inner())
    }
    /// Keeps the first trust failure, with the target it happened on.
    fn trust(&self, target: &Target, t: &TrustFailure) {
        self.with(|o| {
            o.trust_failure
                .get_or_insert_with(|| t.clone().context(&format!("{target}: ")));
        });
    }
}

/// Limits of each stream, so the sampler knows where the evidence must be sharp.
#[derive(Clone, Debug)]
struct Limits {
    peer: Vec<Limit>,
    client: Vec<Limit>,
    quorum: Vec<Limit>,
    api: Vec<Limit>,
    loss: Vec<Limit>,
    connect: Vec<Limit>,
}

impl Limits {
    fn new(t: &Thresholds) -> Limits {
        let lat = |figure, th: &crate::check::Threshold| Limit::Latency {
            figure,
            warn_ms: th.warn,
            error_ms: th.error,
        };
        let loss = Limit::Loss {
            warn: t.packet_loss.warn / 100.0,
            error: t.packet_loss.error / 100.0,
        };
        Limits {
            peer: vec![lat(LatencyFigure::EffectiveRtt, &t.etcd_peer_latency)],
            client: vec![lat(LatencyFigure::RobustP99, &t.etcd_client_latency)],
            quorum: vec![lat(LatencyFigure::RobustP99, &t.etcd_quorum_read_latency)],
            api: vec![lat(LatencyFigure::P90, &t.api_server_latency)],
            loss: vec![loss],
            // Without an identity, connect times stand in for the peer RTT (the strictest).
            connect: vec![lat(LatencyFigure::EffectiveRtt, &t.etcd_peer_latency)],
        }
    }
}

/// The run's clock.
#[derive(Clone, Copy, Debug)]
struct Clock {
    deadline: Instant,
}

impl Clock {
    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
    fn sample_timeout(&self) -> Option<Duration> {
        let left = self.left();
        (left > Duration::from_millis(20)).then(|| left.min(SAMPLE_TIMEOUT))
    }
}

/// Takes samples with `take` until the policy has enough, the deadline nears, or the target
/// proves unreachable.
async fn stream<F, Fut>(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &[Limit],
    mut take: F,
) -> Vec<Sample>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Sample>,
{
    let mut samples = Vec::new();
    while let Some(timeout) = clock.sample_timeout() {
        samples.push(take(timeout).await);
        if policy.decide(&samples, limits) == Decision::Enough {
            break;
        }
        tokio::time::sleep(PACE.min(clock.left())).await;
    }
    samples
}

/// Like [`stream`], with up to `width` samples in flight, started [`PACE`] apart: for samples
/// that each pay their own set-up (a fresh connection), so the round trips of one overlap the
/// next, or several calls on one multiplexed channel. `record` turns an answer into a sample
/// (or none, for an answer that ends the stream without being one), and says whether the
/// stream must stop at once (a trust failure). When the policy has enough, the samples still in flight are awaited and
/// counted before it decides again: dropping them would drop exactly the slow ones and bias
/// the figure low.
async fn wide_stream<T, F, Fut>(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &[Limit],
    width: usize,
    mut take: F,
    mut record: impl FnMut(T) -> (Option<Sample>, bool),
) -> Vec<Sample>
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = T>,
{
    let mut samples = Vec::new();
    let mut flight: Vec<std::pin::Pin<Box<Fut>>> = Vec::new();
    let mut launching = true;
    let mut next_start = tokio::time::Instant::now();
    loop {
        if launching && flight.len() < width && tokio::time::Instant::now() >= next_start {
            match clock.sample_timeout() {
                Some(to) => {
                    flight.push(Box::pin(take(to)));
                    next_start = tokio::time::Instant::now() + PACE;
                    continue;
                }
                None => launching = false,
            }
        }
        if flight.is_empty() {
            if launching {
                tokio::time::sleep_until(next_start).await;
                continue;
            }
            break;
        }
        let room = launching && flight.len() < width;
        let next = std::future::poll_fn(|cx| {
            for (i, f) in flight.iter_mut().enumerate() {
                if let std::task::Poll::Ready(v) = f.as_mut().poll(cx) {
                    return std::task::Poll::Ready((i, v));
                }
            }
            std::task::Poll::Pending
        });
        let done = tokio::select! {
            d = next => Some(d),
            () = tokio::time::sleep_until(next_start), if room => None,
        };
        let Some((i, v)) = done else { continue };
        drop(flight.swap_remove(i));
        let (sample, stop) = record(v);
        samples.extend(sample);
        if stop {
            break;
        }
        let enough = policy.decide(&samples, limits) == Decision::Enough;
        if launching && enough {
            launching = false;
        } else if !launching && flight.is_empty() && !enough && clock.sample_timeout().is_some() {
            // The samples that were in flight changed the decision: sample on.
            launching = true;
        }
    }
    samples
}

/// Probes everything `input` names, until the policy is satisfied or `budget` has passed.
pub async fn observe(
    input: &PreflightInput,
    policy: SamplingPolicy,
    budget: Duration,
    notes: &dyn Notes,
    settled: Option<Settled>,
) -> Observations {
    let counter = Counter::new(notes);
    let clock = Clock {
        deadline: Instant::now() + budget.saturating_sub(REPORT_MARGIN),
    };
    let limits = Limits::new(&input.thresholds);
    let shared = Arc::new(Shared::new(settled));
    let etcd_tls = match &input.etcd_ca {
        Some(ca) => match EtcdTls::new(ca, input.etcd_identity.as_ref()) {
            Ok(t) => Some(t),
            Err(e) => {
                shared.note(format!("etcd TLS configuration: {e}"));
                None
            }
        },
        None => None,
    };
    let etcd_tls = etcd_tls.as_ref();
    let peer_tls = match (&input.etcd_ca, &input.etcd_identity) {
        (Some(ca), Some(id)) => TlsClient::new(ca, Some(id), &[ALPN_HTTP1]).ok(),
        _ => None,
    };
    let handshake_tls = input
        .etcd_ca
        .as_ref()
        .and_then(|ca| TlsClient::new(ca, input.etcd_identity.as_ref(), &[ALPN_H2]).ok());
    // The API is reached as the join reaches it: through the proxy the environment sends it to.
    let api_proxy = input.api.as_ref().and_then(|t| input.proxy.tunnel_for(t));
    let api_tls = match input
        .api_ca
        .as_ref()
        .map(|ca| TlsClient::new(ca, None, &[ALPN_HTTP1]))
    {
        Some(Ok(c)) => Some(c.through(api_proxy)),
        Some(Err(e)) => {
            shared.note(format!("API server TLS configuration: {e}"));
            None
        }
        None => None,
    };

    if input.etcd_identity.is_none() && !input.etcd_clients.is_empty() {
        shared.note(
            "no etcd identity (client certificate and key): etcd health, client and quorum-read \
             latency and the peer probe are not measured; etcd latency is judged from TCP \
             connect times"
                .into(),
        );
    }

    // Every host gets one ICMP loss stream, carried by the first target on that host.
    let mut hosts: BTreeMap<IpAddr, Target> = BTreeMap::new();
    let all_targets: Vec<&Target> = input
        .api
        .iter()
        .chain(&input.etcd_clients)
        .chain(&input.etcd_peers)
        .collect();
    // The API reached through a proxy: this node's packets for it go to the proxy, so the
    // proxy's host carries the ICMP stream (and the path MTU) in the API host's place.
    let api_hop =
        api_proxy.and_then(|p| Target::parse(TargetKind::ApiServer, &p.authority, true).ok());
    for t in &all_targets {
        let t = match (&api_hop, t.kind) {
            (Some(hop), TargetKind::ApiServer) => hop,
            _ => *t,
        };
        if let Ok(ip) = t.host.parse::<IpAddr>() {
            hosts.entry(ip).or_insert_with(|| t.clone());
        }
    }

    let discovery = Discovery::new(input.etcd_clients.len());
    let discovery_wanted = input.etcd_identity.is_some() && !input.etcd_clients.is_empty();
    // The peer streams start now, at kubeadm's layout (each member's peer URL is its client
    // host on 2380), instead of after the member list: the list confirms each guess or cancels
    // and discards it, and starts the peers it names at other addresses.
    let guessed: Vec<Target> = if discovery_wanted {
        input
            .etcd_clients
            .iter()
            .filter_map(kubeadm_peer_of)
            .filter(|g| !input.etcd_peers.iter().any(|p| p.endpoint == g.endpoint))
            .fold(Vec::new(), |mut v, g| {
                if !v.iter().any(|x: &Target| x.endpoint == g.endpoint) {
                    v.push(g);
                }
                v
            })
    } else {
        Vec::new()
    };
    let mut tasks = Vec::new();
    let initial_hosts: BTreeSet<IpAddr> = hosts.keys().copied().collect();

    // etcd client targets (given ones now; discovered ones once the member list is in).
    let discovered = async {
        let Some(list) = discovery.wait(clock).await else {
            return;
        };
        let mut more = Vec::new();
        // Members found here get an ICMP loss stream too, like the given ones.
        let mut new_hosts: BTreeMap<IpAddr, Target> = BTreeMap::new();
        for m in list {
            let (client, peer) = m.targets();
            if let Some(t) = client {
                if let Ok(ip) = t.host.parse::<IpAddr>() {
                    if !initial_hosts.contains(&ip) {
                        new_hosts.entry(ip).or_insert_with(|| t.clone());
                    }
                }
                if !input.etcd_clients.iter().any(|c| c.endpoint == t.endpoint) {
                    more.push(client_target(
                        clock,
                        &policy,
                        &limits,
                        etcd_tls,
                        handshake_tls.as_ref(),
                        t,
                        input,
                        &shared,
                        None,
                    ));
                }
            }
            if let Some(t) = peer {
                if !input.etcd_peers.iter().any(|c| c.endpoint == t.endpoint)
                    && !guessed.iter().any(|g| g.endpoint == t.endpoint)
                {
                    more.push(Box::pin(peer_target(
                        clock,
                        &policy,
                        &limits,
                        peer_tls.as_ref(),
                        t,
                        &shared,
                    )));
                }
            }
        }
        let icmp_thread = spawn_icmp(clock, policy, &limits, new_hosts, &shared);
        let icmp_streams = usize::from(icmp_thread.is_some());
        counter.add(more.len() + icmp_streams);
        let more = more.into_iter().map(|f| counter.counted(f)).collect();
        futures_join_all(more).await;
        merge_icmp(icmp_thread, &shared).await;
        if icmp_streams > 0 {
            counter.finished();
        }
    };

    for t in &input.etcd_clients {
        tasks.push(client_target(
            clock,
            &policy,
            &limits,
            etcd_tls,
            handshake_tls.as_ref(),
            t.clone(),
            input,
            &shared,
            Some(&discovery),
        ));
    }
    for t in &input.etcd_peers {
        tasks.push(Box::pin(peer_target(
            clock,
            &policy,
            &limits,
            peer_tls.as_ref(),
            t.clone(),
            &shared,
        )));
    }
    for g in &guessed {
        tasks.push(Box::pin(guessed_peer(
            clock,
            &policy,
            &limits,
            peer_tls.as_ref(),
            g.clone(),
            &shared,
            &discovery,
        )));
    }
    if let Some(api) = &input.api {
        if input.api_ca.is_none() {
            shared.note(format!(
                "no API server CA ({}): {api} is probed with TCP connects only; /readyz and \
                 APIServerLatency are not measured",
                input.spelling.spell(crate::input::Input::ApiserverCacert)
            ));
        }
        tasks.push(Box::pin(api_target(
            clock,
            &policy,
            &limits,
            api_tls.as_ref(),
            api_proxy,
            api.clone(),
            &shared,
        )));
        // Through a proxy, the proxy resolves the name and picks the family.
        if api_proxy.is_none() {
            tasks.push(Box::pin(api_families(clock, api.clone(), &shared)));
        }
    }
    // kubeadm 1.34's etcd client tunnels every member as its first endpoint goes.
    let decided_by = input.etcd_proxy_decided_by();
    for t in input.api.iter().chain(&input.etcd_clients) {
        let (routed, rule) = match decided_by {
            Some(first) if t.kind == TargetKind::EtcdClient => (first, Some(first.clone())),
            _ => (t, None),
        };
        if let crate::proxy::Route::Proxy(p) = input.proxy.route("https", &routed.host, routed.port)
        {
            // The API's own probes are tunnelled (above); etcd's go direct.
            let through = t.kind == TargetKind::ApiServer && api_proxy.is_some();
            tasks.push(Box::pin(proxied_path(
                clock,
                t.clone(),
                p.clone(),
                through,
                rule,
                &input.proxy,
                &shared,
            )));
        }
    }
    // ICMP streams run on a thread of their own: their timestamps must not wait behind the TLS
    // and gRPC work of the other probes, which all share this task.
    let icmp = {
        let icmp_thread = spawn_icmp(clock, policy, &limits, hosts, &shared);
        let shared = &shared;
        let counter = &counter;
        let streams = usize::from(icmp_thread.is_some());
        counter.add(streams);
        async move {
            merge_icmp(icmp_thread, shared).await;
            if streams > 0 {
                counter.finished();
            }
        }
    };
    let discovered = async {
        if discovery_wanted {
            discovered.await
        }
    };
    counter.add(tasks.len());
    let tasks = tasks.into_iter().map(|f| counter.counted(f)).collect();
    tokio::join!(futures_join_all(tasks), icmp, discovered);

    // The write and bandwidth probes run after the measurements, so their load does not
    // distort them.
    if input.write_probe || (input.bandwidth && input.etcd_identity.is_some()) {
        opt_in(clock, input, etcd_tls, &shared).await;
    }

    let mut obs = std::mem::take(&mut *shared.obs.lock().unwrap_or_else(|e| e.into_inner()));
    obs.member_list = discovery.list();
    label_members(&mut obs);
    obs.series
        .sort_by(|a, b| (&a.target, a.probe).cmp(&(&b.target, b.probe)));
    obs
}

/// Hands the first member list to the task that probes discovered members, or tells it none is
/// coming once every given client target has finished trying.
#[derive(Debug)]
struct Discovery {
    tx: tokio::sync::watch::Sender<DiscoveryState>,
    pending: std::sync::atomic::AtomicUsize,
}

#[derive(Clone, Debug)]
enum DiscoveryState {
    Waiting,
    List(Vec<MemberInfo>),
    NoneComing,
}

struct DiscoveryGuard<'a>(&'a Discovery);

impl Drop for DiscoveryGuard<'_> {
    fn drop(&mut self) {
        if self
            .0
            .pending
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.0.tx.send_if_modified(|s| {
                let waiting = matches!(s, DiscoveryState::Waiting);
                if waiting {
                    *s = DiscoveryState::NoneComing;
                }
                waiting
            });
        }
    }
}

impl Discovery {
    fn new(clients: usize) -> Discovery {
        let (tx, _) = tokio::sync::watch::channel(if clients == 0 {
            DiscoveryState::NoneComing
        } else {
            DiscoveryState::Waiting
        });
        Discovery {
            tx,
            pending: std::sync::atomic::AtomicUsize::new(clients),
        }
    }
    fn guard(&self) -> DiscoveryGuard<'_> {
        DiscoveryGuard(self)
    }
    fn wanted(&self) -> bool {
        matches!(*self.tx.borrow(), DiscoveryState::Waiting)
    }
    fn offer(&self, list: Vec<MemberInfo>) {
        self.tx.send_if_modified(|s| {
            let waiting = matches!(s, DiscoveryState::Waiting);
            if waiting {
                *s = DiscoveryState::List(list);
            }
            waiting
        });
    }
    async fn wait(&self, clock: Clock) -> Option<Vec<MemberInfo>> {
        let mut rx = self.tx.subscribe();
        let state = tokio::time::timeout(
            clock.left(),
            rx.wait_for(|s| !matches!(s, DiscoveryState::Waiting)),
        )
        .await
        .ok()?
        .ok()?
        .clone();
        match state {
            DiscoveryState::List(l) => Some(l),
            _ => None,
        }
    }
    fn list(&self) -> Option<Vec<MemberInfo>> {
        match &*self.tx.borrow() {
            DiscoveryState::List(l) => Some(l.clone()),
            _ => None,
        }
    }
}

type BoxFut<'a> = std::pin::Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Runs futures concurrently on this task (no spawn: they borrow the run's state).
/// Streams finished of those started, for the run's progress line.
struct Counter<'a> {
    notes: &'a dyn Notes,
    started: Instant,
    done: std::sync::atomic::AtomicUsize,
    total: std::sync::atomic::AtomicUsize,
}

impl<'a> Counter<'a> {
    fn new(notes: &'a dyn Notes) -> Self {
        Counter {
            notes,
            started: Instant::now(),
            done: Default::default(),
            total: Default::default(),
        }
    }

    fn add(&self, n: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        if n > 0 {
            let total = self.total.fetch_add(n, Relaxed) + n;
            self.notes
                .progress(self.done.load(Relaxed), total, self.started.elapsed());
        }
    }

    fn finished(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let done = self.done.fetch_add(1, Relaxed) + 1;
        self.notes
            .progress(done, self.total.load(Relaxed), self.started.elapsed());
    }

    /// `f`, counted as finished when it returns.
    fn counted<'f>(&'f self, f: BoxFut<'f>) -> BoxFut<'f> {
        Box::pin(async move {
            f.await;
            self.finished();
        })
    }
}

async fn futures_join_all<'a>(futs: Vec<BoxFut<'a>>) {
    let mut set = futs;
    // A small hand-rolled join: poll all until done.
    std::future::poll_fn(move |cx| {
        set.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if set.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

#[allow(clippy::too_many_arguments)]
fn client_target<'a>(
    clock: Clock,
    policy: &'a SamplingPolicy,
    limits: &'a Limits,
    tls: Option<&'a EtcdTls>,
    handshake_tls: Option<&'a TlsClient>,
    target: Target,
    input: &'a PreflightInput,
    shared: &'a Arc<Shared>,
    discovery: Option<&'a Discovery>,
) -> BoxFut<'a> {
    Box::pin(async move {
        let target = &target;
        // Whatever happens below, this target's part in discovery is over when it returns.
        let _done = discovery.map(Discovery::guard);
        let has_identity = input.etcd_identity.is_some();
        let Some(tls) = tls.filter(|_| has_identity) else {
            // No identity: what TCP (and the TLS handshake, with a CA) can show.
            let samples = stream(clock, policy, &limits.connect, |to| tcp::probe(target, to)).await;
            shared.push(target, ProbeKind::TcpConnect, samples);
            if let Some(tc) = handshake_tls {
                handshake_stream(clock, policy, tc, target, shared).await;
            }
            return;
        };
        let endpoint = target.url();
        let setup_timeout = clock.left().min(SETUP_TIMEOUT);
        let mut health = EtcdMemberHealth {
            endpoint: target.endpoint.clone(),
            ..Default::default()
        };
        let client = match etcd::connect(&endpoint, Some(tls), setup_timeout).await {
            Ok(c) => c,
            Err(e) => {
                if let EtcdFailure::Untrusted(t) = &e {
                    shared.trust(target, t);
                }
                let failure = etcd_probe_failure(&e);
                health.failure = Some(failure.clone());
                // A dial that timed out: does the port answer at all? If it does, the path is
                // too slow for the etcd connection (EtcdDialTime), not closed or dark.
                if matches!(e, EtcdFailure::Timeout(_)) && !clock.left().is_zero() {
                    let to = clock.left().min(Duration::from_secs(3));
                    let tcp = tcp::probe(target, to).await;
                    if let Ok(d) = tcp.result {
                        health.dial_tcp = Some(d);
                        shared.with(|o| o.members.push(health));
                        shared.push(target, ProbeKind::TcpConnect, vec![tcp]);
                        return;
                    }
                }
                shared.with(|o| o.members.push(health));
                // The failed dial is this target's one Status attempt: it is judged.
                shared.push(
                    target,
                    ProbeKind::EtcdStatus,
                    vec![Sample {
                        result: Err(failure),
                    }],
                );
                return;
            }
        };
        let st = client.first_status().clone();
        health.reachable = true;
        health.member_id = Some(st.member_id);
        health.cluster_id = Some(st.cluster_id).filter(|&c| c != 0);
        health.leader = Some(st.leader);
        health.is_learner = st.is_learner;
        health.errors = st.errors.clone();
        health.raft_term = Some(st.raft_term);
        health.db_size = u64::try_from(st.db_size).ok();
        health.db_size_in_use = u64::try_from(st.db_size_in_use).ok().filter(|&u| u > 0);
        health.db_size_quota = u64::try_from(st.db_size_quota).ok().filter(|&q| q > 0);
        health.version = Some(st.version.clone()).filter(|v| !v.is_empty());
        health.applied_index = Some(st.raft_applied_index);
        health.raft_index = Some(st.raft_index);
        // Active alarms come from Status' `errors` ("memberID:... alarm:NOSPACE"). AlarmList is
        // not used: etcd serves it through raft, so it would commit a proposal on every member.
        health.alarms = st
            .errors
            .iter()
            .filter(|e| e.contains("alarm:"))
            .cloned()
            .collect();
        // The member list (for discovery), the repeated dials and the measurement streams all
        // start now, beside each other: none waits for another's round trips.
        // Every member's own list (etcd-client asks serializable: each answers from its own
        // view), for EtcdMemberAgreement; a learner refuses the call.
        let offer = async {
            if st.is_learner {
                return None;
            }
            let list = client.clone().member_list().await.ok()?;
            if let Some(d) = discovery.filter(|d| d.wanted()) {
                d.offer(list.clone());
            }
            Some(list)
        };
        // One dial is one sample, and a lost SYN (retransmitted after 1 s) or segment makes it
        // slow on a path that is not. A first dial past the warning but short of what a long
        // path takes (3 s) is repeated, up to twice, and the fastest is judged: EtcdDialTime
        // judges the path's round trips, PacketLoss its loss.
        let warn = Duration::from_secs_f64(input.thresholds.etcd_dial_time.warn / 1000.0);
        let redial = async {
            let (mut dial, mut dials) = (client.setup(), 1);
            while dials < 3
                && dial > warn
                && dial < Duration::from_secs(3)
                && clock.left() > Duration::from_secs(4)
            {
                dials += 1;
                if let Ok(again) =
                    etcd::connect(&endpoint, Some(tls), clock.left().min(SETUP_TIMEOUT)).await
                {
                    dial = dial.min(again.setup());
                }
            }
            (dial, dials)
        };
        let measure = measure_member(
            clock,
            policy,
            limits,
            &client,
            target,
            st.is_learner,
            shared,
        );
        // The member's own view of its raft peers (EtcdPeerConnectivity), beside the rest.
        let metrics = async {
            let tls = handshake_tls?.with_alpn(&[ALPN_HTTP1]);
            let to = clock.left().min(METRICS_TIMEOUT);
            Some(crate::probe::etcd_metrics::fetch(target, &tls, to).await)
        };
        let (list, (dial, dials), (), metrics) = tokio::join!(offer, redial, measure, metrics);
        health.member_list = list;
        health.dial = Some(dial);
        health.dials = dials;
        health.metrics = metrics;
        shared.with(|o| o.members.push(health));
    })
}

/// Status and quorum reads as two streams on the one established channel, concurrently, each
/// stopping when its own evidence is enough.
async fn measure_member(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    client: &MemberClient,
    target: &Target,
    is_learner: bool,
    shared: &Shared,
) {
    if is_learner {
        shared.note(format!(
            "{target} is a learner: it rejects linearizable reads, so its quorum-read latency is not measured"
        ));
    }
    // A clone per call is cheap: it shares the channel.
    let status = async {
        let samples = wide_stream(
            clock,
            policy,
            &limits.client,
            ETCD_IN_FLIGHT,
            |_| {
                let mut c = client.clone();
                async move { c.status().await }
            },
            |r| (Some(etcd_sample(r.map(|(d, _)| d))), false),
        )
        .await;
        shared.push(target, ProbeKind::EtcdStatus, samples);
    };
    let quorum = async {
        if is_learner {
            return;
        }
        let samples = wide_stream(
            clock,
            policy,
            &limits.quorum,
            ETCD_IN_FLIGHT,
            |_| {
                let mut c = client.clone();
                async move { c.quorum_read().await }
            },
            |r| match r {
                // A member that turned out to be a learner: not measured (as above).
                Err(EtcdFailure::Learner(_)) => (None, true),
                r => (Some(etcd_sample(r)), false),
            },
        )
        .await;
        shared.push(target, ProbeKind::EtcdQuorumRead, samples);
    };
    tokio::join!(status, quorum);
}

/// One etcd call's outcome as a sample.
fn etcd_sample(r: Result<Duration, EtcdFailure>) -> Sample {
    Sample {
        result: r.map_err(|e| etcd_probe_failure(&e)),
    }
}

async fn handshake_stream(
    clock: Clock,
    policy: &SamplingPolicy,
    tc: &TlsClient,
    target: &Target,
    shared: &Shared,
) {
    // A few handshakes are enough to verify trust and see the certificate: latency is judged
    // from TCP connects.
    let mut samples = Vec::new();
    for _ in 0..5 {
        let Some(to) = clock.sample_timeout() else {
            break;
        };
        let r = tls::probe(target, tc, to).await;
        if let Err(e) = &r {
            if let Some(t) = e.trust_failure() {
                shared.trust(target, t);
                samples.push(tls::sample(&r));
                break;
            }
        }
        samples.push(tls::sample(&r));
        if policy.decide(&samples, &[]) == Decision::Enough && samples.len() >= 5 {
            break;
        }
    }
    shared.push(target, ProbeKind::TlsHandshake, samples);
}

async fn peer_target(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    tls: Option<&TlsClient>,
    target: Target,
    shared: &Shared,
) {
    if let Some(tls) = tls {
        // PathMTU's TCP side, on its own connection beside the peer stream.
        let full_size = async {
            let budget = clock.left().min(PMTU_BUDGET);
            let r = fullsize::exchange(&target.host, target.port, tls, budget).await;
            shared.with(|o| o.fullsize.push((target.clone(), r)));
        };
        tokio::join!(
            full_size,
            peer_session(clock, policy, limits, tls, &target, shared)
        );
        return;
    }
    let samples = stream(clock, policy, &limits.peer, |to| tcp::probe(&target, to)).await;
    shared.push(&target, ProbeKind::TcpConnect, samples);
}

/// kubeadm's peer URL for a member with this client URL: the same host on 2380
/// (`--initial-advertise-peer-urls=https://<advertise address>:2380`, kubeadm's
/// `cmd/kubeadm/app/phases/etcd/local.go`).
fn kubeadm_peer_of(client: &Target) -> Option<Target> {
    let (host, _) = client.endpoint.rsplit_once(':')?;
    Target::parse_url(TargetKind::EtcdPeer, &format!("https://{host}:2380")).ok()
}

/// A peer stream started at a guessed address ([`kubeadm_peer_of`]) before the member list is
/// in. What it sees is kept only if the member list names that peer URL; if the list names
/// other peers (or none comes), the stream is cancelled and what it saw is dropped: a guess
/// must never fail a run.
async fn guessed_peer(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    tls: Option<&TlsClient>,
    target: Target,
    shared: &Shared,
    discovery: &Discovery,
) {
    let local = shared.child();
    let confirmed = async {
        discovery.wait(clock).await.is_some_and(|list| {
            list.iter()
                .any(|m| m.targets().1.is_some_and(|p| p.endpoint == target.endpoint))
        })
    };
    let keep = {
        let run = peer_target(clock, policy, limits, tls, target.clone(), &local);
        tokio::pin!(run, confirmed);
        tokio::select! {
            () = &mut run => confirmed.await,
            c = &mut confirmed => {
                if c {
                    run.await;
                }
                c
            }
        }
    };
    if keep {
        shared.absorb(local.into_observations());
    } else {
        tracing::debug!(%target, "not a member's peer URL: its peer stream is dropped");
    }
}

/// The peer stream over a kept TLS connection, or TCP connects when it cannot be had.
async fn peer_session(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    tls: &TlsClient,
    target: &Target,
    shared: &Shared,
) {
    let to = clock.left().min(SETUP_TIMEOUT);
    // PEER_SESSIONS kept connections open at once and share one stream: the samples of all are
    // judged together, so the stream takes a fraction of the round trips. The first decides
    // what is reported (skew, failures, notes); the others join when open and warm, and stop
    // (their samples dropped) if the first fails.
    let samples = std::cell::RefCell::new(Vec::new());
    let done = std::cell::Cell::new(false);
    let extra = || async {
        let Ok(mut s) = PeerSession::open(&target.host, target.port, tls, to).await else {
            return;
        };
        if done.get() || s.probe(to).await.is_err() {
            return;
        }
        peer_stream(clock, policy, &limits.peer, &mut s, &samples, &done).await;
    };
    let extras: Vec<BoxFut> = (1..PEER_SESSIONS)
        .map(|_| Box::pin(extra()) as BoxFut)
        .collect();
    let first = async {
        let result =
            first_peer_session(clock, policy, limits, tls, target, shared, &samples, &done).await;
        if !result {
            done.set(true);
        }
        result
    };
    let (streamed, ()) = tokio::join!(first, futures_join_all(extras));
    if streamed {
        shared.push(target, ProbeKind::EtcdPeerProbe, samples.into_inner());
        return;
    }
    let samples = stream(clock, policy, &limits.peer, |to| tcp::probe(target, to)).await;
    shared.push(target, ProbeKind::TcpConnect, samples);
}

/// The first kept connection of a peer stream; false when it could not be had (then the RTT is
/// judged from TCP connects).
#[allow(clippy::too_many_arguments)]
async fn first_peer_session(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    tls: &TlsClient,
    target: &Target,
    shared: &Shared,
    samples: &std::cell::RefCell<Vec<Sample>>,
    done: &std::cell::Cell<bool>,
) -> bool {
    let to = clock.left().min(SETUP_TIMEOUT);
    match PeerSession::open(&target.host, target.port, tls, to).await {
        Ok(mut session) => {
            // The first request pays for cold caches on both sides; it is not a sample.
            match session.probe(to).await {
                Ok(p) => {
                    if let Some(skew) = p.server_now.as_deref().and_then(skew_from_rfc3339) {
                        shared.with(|o| o.skews.push((target.clone(), skew)));
                    }
                    peer_stream(clock, policy, &limits.peer, &mut session, samples, done).await;
                    return true;
                }
                Err(e) => {
                    if let Some(t) = e.trust_failure() {
                        shared.trust(target, t);
                    }
                    shared.note(format!(
                        "{target}: the peer probe failed ({e}); its RTT is judged from TCP connects"
                    ));
                }
            }
        }
        Err(e) => {
            if let Some(t) = e.trust_failure() {
                shared.trust(target, t);
            }
            let failure = http_probe_failure(&e);
            if matches!(failure, ProbeFailure::Tls(_)) {
                // The peer refused this identity: judged (EtcdPeerReachable), not a note.
                shared.push(
                    target,
                    ProbeKind::EtcdPeerProbe,
                    vec![Sample {
                        result: Err(failure),
                    }],
                );
            }
            shared.note(format!(
                "{target}: the peer probe could not connect ({e}); its RTT is judged from TCP connects"
            ));
        }
    }
    false
}

/// One kept connection's part of a peer stream: samples go to `samples`, shared with the other
/// connection's part; `done` is set when the policy has enough. A sample in flight then is
/// still counted.
async fn peer_stream(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &[Limit],
    session: &mut PeerSession,
    samples: &std::cell::RefCell<Vec<Sample>>,
    done: &std::cell::Cell<bool>,
) {
    while let Some(to) = clock.sample_timeout() {
        if done.get() {
            break;
        }
        let s = match session.probe(to).await {
            Ok(p) => Sample { result: Ok(p.rtt) },
            Err(e) => Sample {
                result: Err(http_probe_failure(&e)),
            },
        };
        let broken = s.result.is_err();
        let enough = {
            let mut all = samples.borrow_mut();
            all.push(s);
            policy.decide(&all, limits) == Decision::Enough
        };
        if enough {
            done.set(true);
        }
        if enough || broken {
            // A broken keep-alive connection cannot give more samples; what we have is judged.
            break;
        }
        tokio::time::sleep(PACE.min(clock.left())).await;
    }
}

async fn api_target(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    tls: Option<&TlsClient>,
    proxy: Option<&crate::proxy::ProxyUrl>,
    target: Target,
    shared: &Shared,
) {
    let Some(tls) = tls else {
        let samples = match proxy {
            // Through the proxy: the time to its `200` is the connection the join gets.
            Some(p) => {
                stream(clock, policy, &limits.connect, |to| {
                    crate::probe::proxy::connect(p, &target.host, target.port, to)
                })
                .await
            }
            None => stream(clock, policy, &limits.connect, |to| tcp::probe(&target, to)).await,
        };
        shared.push(&target, ProbeKind::TcpConnect, samples);
        return;
    };
    // Every sample is a fresh connection (TCP, TLS, one GET), as a kube-apiserver client that
    // starts cold sees it; a few are in flight at once, so the verdict takes the round trips of
    // about a quarter of them.
    let mut skew = None;
    let samples = wide_stream(
        clock,
        policy,
        &limits.api,
        API_IN_FLIGHT,
        |to| http::readyz(&target, tls, to),
        |r| {
            if let Err(e) = &r {
                if let Some(t) = e.trust_failure() {
                    shared.trust(&target, t);
                    return (Some(http::sample(&r)), true);
                }
            }
            if let Ok(resp) = &r {
                if let Some(date) = resp.exchange.date {
                    skew.get_or_insert_with(|| skew_from(date));
                }
            }
            (Some(readyz_sample(&r)), false)
        },
    )
    .await;
    if let Some(s) = skew {
        shared.with(|o| o.skews.push((target.clone(), s)));
    }
    shared.push(&target, ProbeKind::ApiReadyz, samples);
}

/// Three CONNECTs to `target` through `proxy`, 100 ms apart, each bounded by
/// [`PROXY_TIMEOUT`] and the run's deadline: what the join's calls to it will meet; beside each,
/// a direct TCP connect (bounded by one second), for what the proxy adds.
async fn proxied_path(
    clock: Clock,
    target: Target,
    proxy: crate::proxy::ProxyUrl,
    probed_through: bool,
    decided_by: Option<Target>,
    env: &crate::proxy::ProxyEnv,
    shared: &Shared,
) {
    let one = |i: u32| {
        let (target, proxy) = (target.clone(), proxy.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(100) * i).await;
            let left = clock.deadline.saturating_duration_since(Instant::now());
            crate::probe::proxy::connect(&proxy, &target.host, target.port, left.min(PROXY_TIMEOUT))
                .await
        }
    };
    let direct_one = |i: u32| {
        let target = target.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(100) * i).await;
            let left = clock.deadline.saturating_duration_since(Instant::now());
            tcp::probe(&target, left.min(Duration::from_secs(1))).await
        }
    };
    // Only http:// proxies tunnel with a plain CONNECT; the others are reported unprobed.
    let (samples, direct) = if proxy.scheme == "http" {
        let ((a, b, c), (x, y, z)) =
            tokio::join!(async { tokio::join!(one(0), one(1), one(2)) }, async {
                tokio::join!(direct_one(0), direct_one(1), direct_one(2))
            });
        (vec![a, b, c], vec![x, y, z])
    } else {
        (Vec::new(), Vec::new())
    };
    // Under kubeadm 1.34's rule only the first endpoint in NO_PROXY sends the members direct.
    let fix = env.no_proxy_with(&decided_by.as_ref().unwrap_or(&target).host);
    shared.with(|o| {
        o.proxied.push(crate::check::ProxiedPath {
            target,
            proxy,
            samples,
            direct,
            probed_through,
            decided_by,
            no_proxy_fix: fix,
        })
    });
}

/// How long reading a member's `/metrics` may take (about 150 KB; a few round trips even on a
/// slow path).
const METRICS_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one CONNECT through a proxy may take: a proxy that answers in seconds still works
/// (client-go waits 30 s), so only one that does not answer in this long is judged refusing.
const PROXY_TIMEOUT: Duration = Duration::from_secs(3);

/// Connects to each family of an API endpoint name, when it has addresses of both: the first
/// address of each in the order a Go client dials them, three connects each, 100 ms apart, each bounded by [`FAMILY_CONNECT_TIMEOUT`] and the run's deadline. The API
/// streams themselves dial the name as kubeadm does (both families, `probe::dial`), so they
/// cannot tell a dark family from a slow path.
async fn api_families(clock: Clock, target: Target, shared: &Shared) {
    if target.ip().is_some() {
        return;
    }
    let left = clock.deadline.saturating_duration_since(Instant::now());
    let lookup = tokio::net::lookup_host((target.host.as_str(), target.port));
    let Ok(Ok(found)) = tokio::time::timeout(left.min(Duration::from_secs(2)), lookup).await else {
        return;
    };
    let addrs: Vec<std::net::SocketAddr> = found.collect();
    let (primaries, fallbacks) = crate::probe::dial::go_order(&addrs);
    let (Some(&pa), Some(&fa)) = (primaries.first(), fallbacks.first()) else {
        return;
    };
    let connects = |addr: std::net::SocketAddr| async move {
        let literal = Target::parse(target.kind, &addr.to_string(), true).ok();
        let one = |i: u32| {
            let literal = literal.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(100) * i).await;
                let left = clock.deadline.saturating_duration_since(Instant::now());
                match literal {
                    Some(t) => tcp::probe(&t, left.min(FAMILY_CONNECT_TIMEOUT)).await,
                    None => Sample {
                        result: Err(ProbeFailure::Io(format!("{addr}: not an endpoint"))),
                    },
                }
            }
        };
        let (a, b, c) = tokio::join!(one(0), one(1), one(2));
        vec![a, b, c]
    };
    let (ps, fs) = tokio::join!(connects(pa), connects(fa));
    shared.with(|o| {
        o.families.push(crate::check::FamilyProbe {
            target: target.clone(),
            primary: (pa, ps),
            fallback: (fa, fs),
        })
    });
}

/// How long one of them may take: past Go's 300 ms fallback delay several times over.
const FAMILY_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A `/readyz` answer as a sample: only `200 ok` is a ready answer. Anything else (a 503, an
/// error page, a body over [`http::MAX_BODY`]) is a not-ready answer, which `APIServerReady`
/// judges (found by `tests/hostile.rs`: a 100 MB 200 answer was taken as ready).
fn readyz_sample(r: &Result<http::HttpResponse, http::HttpFailure>) -> Sample {
    match r {
        Ok(resp) if !resp.is_ok() => {
            let ex = &resp.exchange;
            let why = if ex.body_truncated {
                format!(
                    "/readyz answered {} with a body over {} KiB (cut there), not `ok`; this is \
                     not a kube-apiserver",
                    ex.status,
                    http::MAX_BODY / 1024
                )
            } else {
                let body = String::from_utf8_lossy(&ex.body[..ex.body.len().min(80)]);
                format!("/readyz answered {} {:?}, not `ok`", ex.status, body.trim())
            };
            Sample {
                result: Err(ProbeFailure::Protocol(why)),
            }
        }
        _ => http::sample(r),
    }
}

/// Starts the ICMP loss streams of every host on one thread of their own: their send stamps
/// must not wait behind the TLS and gRPC work of the other probes, which all share the
/// sampler's task. One thread for all the hosts rather than one each: the trains' sends fall
/// due on the same millisecond, so one wake-up serves every train. Each train keeps its own
/// socket, and a reply's RTT ends at the kernel's receive stamp however late the thread reads it.
fn spawn_icmp(
    clock: Clock,
    policy: SamplingPolicy,
    limits: &Limits,
    hosts: BTreeMap<IpAddr, Target>,
    shared: &Shared,
) -> Option<std::thread::JoinHandle<Vec<Observations>>> {
    if hosts.is_empty() {
        return None;
    }
    let limits = limits.clone();
    let streams: Vec<(IpAddr, Target, Shared)> = hosts
        .into_iter()
        .map(|(ip, t)| (ip, t, shared.child()))
        .collect();
    Some(std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            let trains: Vec<BoxFut<'_>> = streams
                .iter()
                .map(|(ip, t, local)| -> BoxFut<'_> {
                    Box::pin(icmp_host(clock, &policy, &limits, *ip, t.clone(), local))
                })
                .collect();
            rt.block_on(futures_join_all(trains));
        }
        streams
            .into_iter()
            .map(|(_, _, local)| local.into_observations())
            .collect()
    }))
}

/// Waits for the ICMP thread (off the async task) and adds what it saw.
async fn merge_icmp(thread: Option<std::thread::JoinHandle<Vec<Observations>>>, shared: &Shared) {
    let Some(thread) = thread else { return };
    let joined = tokio::task::spawn_blocking(move || thread.join().unwrap_or_default())
        .await
        .unwrap_or_default();
    for o in joined {
        shared.absorb(o);
    }
}

async fn icmp_host(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    ip: IpAddr,
    target: Target,
    shared: &Shared,
) {
    let mut pinger = match Pinger::open(ip) {
        Ok(p) => p,
        Err(IcmpError::NoPrivilege(_)) => {
            shared.note(
                "ICMP echo needs root or CAP_NET_RAW: packet loss is judged from the other \
                 probes' failures, with less certainty, and the path MTU (PathMTU) is not \
                 measured"
                    .into(),
            );
            return;
        }
        Err(e) => {
            shared.note(format!("{target}: ICMP echo unavailable ({e})"));
            return;
        }
    };
    // The path MTU probe runs beside the loss stream, on its own socket.
    let pmtu = async {
        let budget = clock.deadline.saturating_duration_since(Instant::now());
        match pmtu::probe(ip, budget.min(PMTU_BUDGET)).await {
            Ok(p) => shared.with(|o| o.pmtu.push((target.clone(), Ok(p)))),
            Err(IcmpError::NoPrivilege(_)) => {}
            Err(IcmpError::Unsupported(_)) => shared.note(format!(
                "{target}: the path MTU is probed over IPv4 only; not measured"
            )),
            Err(e) => shared.with(|o| o.pmtu.push((target.clone(), Err(e)))),
        }
    };
    tokio::join!(
        pmtu,
        icmp_loss(clock, policy, limits, &mut pinger, &target, shared)
    );
}

/// The ICMP loss stream of one host.
async fn icmp_loss(
    clock: Clock,
    policy: &SamplingPolicy,
    limits: &Limits,
    pinger: &mut Pinger,
    target: &Target,
    shared: &Shared,
) {
    // The clock's deadline already leaves the report its margin.
    let end = clock.deadline;
    // One train of echoes ICMP_INTERVAL apart, from the start. An echo is judged once its
    // reply is due: 3 x the p90 RTT seen (at least 50 ms), or the late limit while no RTT is
    // known; one still unanswered then counts as lost for the sampling decision. A reply that
    // comes later still counts (the pinger keeps listening), so a slow straggler costs no time.
    let due = |pinger: &Pinger| {
        let answered: Vec<Duration> = pinger
            .samples()
            .iter()
            .filter_map(|s| s.result.as_ref().ok().copied())
            .collect();
        match p90(answered) {
            Some(rtt) => (rtt * 3).clamp(Duration::from_millis(50), pinger.late_limit()),
            None => pinger.late_limit(),
        }
    };
    let cap = policy.loss_cap_error;
    let mut next_send = Instant::now();
    let mut next_decision = Instant::now();
    let mut last_sent = None;
    loop {
        let now = Instant::now();
        let wait = due(pinger);
        // The train stops where the replies of what it sends could not be in by the deadline:
        // `wait` before it once an RTT is known. Before that (the first echoes, or a dark
        // host) it sends while 100 ms are left, as the batches did: a short budget (`--wait`'s
        // last 500 ms check) must still measure loss, not leave the host without a loss stream.
        let answered = pinger.samples().iter().any(|s| s.result.is_ok());
        let tail = if answered { wait } else { Duration::ZERO };
        let sending = pinger.sent() < cap && now + tail + Duration::from_millis(100) < end;
        let ahead = pinger.sent() - pinger.due(wait) >= ICMP_AHEAD;
        if now >= next_decision || !sending {
            next_decision = now + ICMP_DECIDE_EVERY;
            let due_now = pinger.samples_older_than(wait);
            let settled = due_now.len() == pinger.sent();
            if !sending || policy.decide(&due_now, &limits.loss) == Decision::Enough {
                // Enough on the echoes that are due (or no time to send more): stop sending,
                // let the rest come due, and decide on every echo.
                if let Some(last) = last_sent.filter(|_| !settled) {
                    pinger.drain(end.min(last + wait)).await;
                }
                if !sending || policy.decide(&pinger.samples(), &limits.loss) == Decision::Enough {
                    if !stragglers_matter(policy, limits, pinger) {
                        break;
                    }
                    // Echoes of a queue stall come back late, all at once: wait for them (or for
                    // their late limit) before judging loss on them.
                    pinger.drain(end).await;
                    if !sending
                        || policy.decide(&pinger.samples(), &limits.loss) == Decision::Enough
                    {
                        break;
                    }
                }
                next_send = Instant::now();
                continue;
            }
        }
        if now >= next_send && !ahead {
            last_sent = Some(pinger.send());
            next_send += ICMP_INTERVAL;
            // After a stall (the thread descheduled), do not send a burst to catch up.
            next_send = next_send.max(now);
        }
        let until = if ahead {
            next_decision
        } else {
            next_send.min(next_decision)
        };
        pinger.listen(until).await;
    }
    if stragglers_matter(policy, limits, pinger) {
        pinger.drain(end).await;
    }
    let samples = pinger.samples();
    shared.with(|o| {
        o.icmp_endpoints.insert(target.endpoint.clone());
    });
    shared.push(target, ProbeKind::IcmpEcho, samples);
}

/// Whether the echoes still outstanding could change a loss verdict if they were answered.
fn stragglers_matter(policy: &SamplingPolicy, limits: &Limits, pinger: &Pinger) -> bool {
    let outstanding = pinger.outstanding();
    if outstanding == 0 {
        return false;
    }
    let samples = pinger.samples();
    let attempts = u32::try_from(samples.len()).unwrap_or(u32::MAX);
    let lost =
        u32::try_from(samples.iter().filter(|s| s.result.is_err()).count()).unwrap_or(u32::MAX);
    let as_lost = LossEstimate { lost, attempts };
    let as_answered = LossEstimate {
        lost: lost.saturating_sub(u32::try_from(outstanding).unwrap_or(u32::MAX)),
        attempts,
    };
    limits.loss.iter().any(|l| match *l {
        Limit::Loss { warn, error } => {
            policy.loss_band(&as_lost, warn, error) != policy.loss_band(&as_answered, warn, error)
        }
        Limit::Latency { .. } => false,
    })
}

/// Nearest-rank p90.
fn p90(mut xs: Vec<Duration>) -> Option<Duration> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_unstable();
    let rank = (xs.len() * 9).div_ceil(10).max(1);
    xs.get(rank - 1).copied()
}

async fn opt_in(clock: Clock, input: &PreflightInput, tls: Option<&EtcdTls>, shared: &Shared) {
    let Some(tls) = tls else { return };
    // The leader first: a new learner gets its snapshot from the leader.
    let reachable: Vec<(String, bool, u64)> = shared.with(|o| {
        let mut ms: Vec<&EtcdMemberHealth> = o.members.iter().filter(|m| m.reachable).collect();
        ms.sort_by_key(|m| !(m.member_id.is_some() && m.member_id == m.leader));
        ms.iter()
            .map(|m| (m.endpoint.clone(), m.is_learner, m.db_size.unwrap_or(0)))
            .collect()
    });
    for (endpoint, is_learner, db_size) in reachable {
        if !input.write_probe && shared.with(|o| o.snapshot.is_some()) {
            break;
        }
        let Some(target) = input
            .etcd_clients
            .iter()
            .find(|t| t.endpoint == endpoint)
            .cloned()
            .or_else(|| {
                Target::parse_url(TargetKind::EtcdClient, &format!("https://{endpoint}")).ok()
            })
        else {
            continue;
        };
        let to = clock.left().min(SETUP_TIMEOUT);
        if to < Duration::from_millis(100) {
            shared.note(format!(
                "the run's deadline ({}) ended before the bandwidth or write probe",
                input.spelling.spell(crate::input::Input::Timeout)
            ));
            return;
        }
        let Ok(mut client) = etcd::connect(&target.url(), Some(tls), to).await else {
            continue;
        };
        if input.write_probe && !is_learner {
            match client.write_probe(&input.node_name, WRITE_TTL).await {
                Ok(w) => shared.push(
                    &target,
                    ProbeKind::EtcdWrite,
                    vec![Sample {
                        result: Ok(w.grant + w.put + w.get + w.revoke),
                    }],
                ),
                Err(e) => shared.with(|o| o.write_failures.push((target.clone(), e.to_string()))),
            }
        }
        if input.bandwidth && shared.with(|o| o.snapshot.is_none()) {
            let cap = clock.left().min(input.bandwidth_cap);
            let r = client.snapshot_probe(SNAPSHOT_BYTES, cap).await;
            shared.with(|o| o.snapshot = Some((target.clone(), db_size, r)));
        }
    }
}

/// Names members from the member list, for messages ("m2 (198.18.0.3:2380)").
fn label_members(obs: &mut Observations) {
    let Some(list) = &obs.member_list else { return };
    for h in &mut obs.members {
        let hit = list.iter().find(|m| {
            Some(m.id) == h.member_id
                || m.client_urls
                    .iter()
                    .any(|u| u.trim_end_matches('/').ends_with(&h.endpoint))
        });
        if let Some(m) = hit {
            if !m.name.is_empty() {
                h.name = Some(m.name.clone());
            }
            h.peer_endpoint = m
                .peer_urls
                .first()
                .and_then(|u| Target::parse_url(TargetKind::EtcdPeer, u).ok())
                .map(|t| t.endpoint);
            h.is_learner |= m.is_learner;
        }
    }
}

/// Remote clock minus local clock, in seconds.
fn skew_from(remote: SystemTime) -> f64 {
    let now = SystemTime::now();
    match remote.duration_since(now) {
        Ok(ahead) => ahead.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// etcd's `/raft/probing` reports `Now` as RFC 3339 (Go's time.Time JSON). Only UTC forms are
/// parsed; others are left out rather than misread.
fn skew_from_rfc3339(s: &str) -> Option<f64> {
    humantime::parse_rfc3339_weak(s.trim_end_matches('Z'))
        .ok()
        .filter(|_| s.ends_with('Z'))
        .map(skew_from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &[u8], truncated: bool) -> http::HttpResponse {
        http::HttpResponse {
            tls: tls::TlsHandshake {
                peer: "127.0.0.1:6443".parse().unwrap(),
                dns: Duration::ZERO,
                connect: Duration::from_millis(1),
                handshake: Duration::from_millis(2),
                protocol: None,
                alpn: None,
                server_cert: None,
                client_cert_requested: false,
                client_cert_sent: false,
            },
            exchange: http::HttpExchange {
                status,
                body: bytes::Bytes::copy_from_slice(body),
                body_truncated: truncated,
                date: None,
                first_byte: Duration::from_millis(1),
                total: Duration::from_millis(1),
            },
        }
    }

    #[test]
    fn the_guessed_peer_is_the_client_host_on_2380() {
        let peer = |url| {
            let t = Target::parse_url(TargetKind::EtcdClient, url).unwrap();
            kubeadm_peer_of(&t).map(|p| (p.endpoint, p.kind))
        };
        assert_eq!(
            peer("https://10.0.0.11:2379"),
            Some(("10.0.0.11:2380".into(), TargetKind::EtcdPeer))
        );
        assert_eq!(
            peer("https://[fd00::11]:2379"),
            Some(("[fd00::11]:2380".into(), TargetKind::EtcdPeer))
        );
        assert_eq!(
            peer("https://etcd-1.example:12379"),
            Some(("etcd-1.example:2380".into(), TargetKind::EtcdPeer))
        );
    }

    fn member(peer: &str) -> MemberInfo {
        MemberInfo {
            id: 1,
            name: "m1".into(),
            client_urls: vec!["https://127.0.0.1:2379".into()],
            peer_urls: vec![peer.into()],
            is_learner: false,
        }
    }

    /// What a guessed peer stream leaves in the run, when the member list names `listed`.
    async fn guess_with(listed: Option<&str>) -> Observations {
        // A port nothing listens on: the stream's samples are connection failures, which would
        // fail EtcdPeerReachable if they were kept.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let target =
            Target::parse_url(TargetKind::EtcdPeer, &format!("https://127.0.0.1:{port}")).unwrap();
        let clock = Clock {
            deadline: Instant::now() + Duration::from_secs(3),
        };
        let discovery = Discovery::new(1);
        let shared = Shared::default();
        let policy = SamplingPolicy::default();
        let limits = Limits::new(&Thresholds::default());
        let offer = async {
            // After the stream has its three refused connects: the list must still discard them.
            tokio::time::sleep(Duration::from_millis(300)).await;
            match listed {
                Some(url) => {
                    let url = url.replace("PORT", &port.to_string());
                    discovery.offer(vec![member(&url)]);
                }
                None => drop(discovery.guard()),
            }
        };
        tokio::join!(
            guessed_peer(clock, &policy, &limits, None, target, &shared, &discovery),
            offer
        );
        shared.into_observations()
    }

    #[tokio::test]
    async fn a_guessed_peer_the_member_list_does_not_name_leaves_nothing_behind() {
        let o = guess_with(Some("https://127.0.0.2:2380")).await;
        assert!(o.series.is_empty(), "{:?}", o.series);
        assert!(o.notes.is_empty(), "{:?}", o.notes);
        // No member list at all: nothing confirms the guess either.
        let o = guess_with(None).await;
        assert!(o.series.is_empty(), "{:?}", o.series);
    }

    #[tokio::test]
    async fn a_guessed_peer_the_member_list_names_is_kept() {
        let o = guess_with(Some("https://127.0.0.1:PORT")).await;
        let [s] = &o.series[..] else {
            panic!("{:?}", o.series)
        };
        assert_eq!(s.probe, ProbeKind::TcpConnect);
        assert!(!s.samples.is_empty() && s.samples.iter().all(|x| x.result.is_err()));
    }

    #[test]
    fn only_200_ok_is_a_ready_answer() {
        assert!(readyz_sample(&Ok(answer(200, b"ok\n", false)))
            .result
            .is_ok());
        // Regression (tests/hostile.rs, HugeBody): a 200 with 100 MB was taken as ready.
        let huge = readyz_sample(&Ok(answer(200, &[b'x'; 1024], true)));
        let Err(ProbeFailure::Protocol(why)) = huge.result else {
            panic!("{huge:?}")
        };
        assert!(why.contains("body over 64 KiB"), "{why}");
        let busy = readyz_sample(&Ok(answer(503, b"[-]etcd failed", false)));
        let Err(ProbeFailure::Protocol(why)) = busy.result else {
            panic!("{busy:?}")
        };
        assert!(why.contains("503") && why.contains("etcd failed"), "{why}");
    }
}
