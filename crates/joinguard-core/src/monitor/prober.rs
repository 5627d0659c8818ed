//! One target's probe loop: its own schedule (interval, random phase, jitter), the preflight
//! probes for its kind, every one bounded by the probe timeout, and a sliding window of samples
//! for the checks.
//!
//! Each target runs as its own tokio task, so a slow or blackholed target only delays itself:
//! while its probe waits for a timeout, the other targets' timers fire on schedule. The loop
//! measures how late each round starts against its schedule (the scheduling lag) and skips, and
//! counts, the rounds its own slow probe overran. It never retries a probe: a failure is a sample.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use crate::check::EtcdMemberHealth;
use crate::probe::etcd::{self, EtcdFailure, EtcdTls, MemberClient, MemberStatus};
use crate::probe::failure::{etcd_probe_failure, http_probe_failure};
use crate::probe::http;
use crate::probe::peer::PeerSession;
use crate::probe::tls::TlsClient;
use crate::probe::{tcp, ProbeFailure, ProbeKind, Sample};
use crate::target::Target;

/// How a target is probed.
#[derive(Clone, Debug)]
pub enum How {
    /// TCP connect (no TLS material for this kind of target).
    Tcp,
    /// HTTPS GET /readyz on a fresh connection (API server with its CA).
    ApiReadyz(Arc<TlsClient>),
    /// etcd Maintenance.Status and a linearizable read on a kept connection (with an identity).
    EtcdClient(Arc<EtcdTls>),
    /// etcd peer GET /raft/probing on a kept connection (with an identity).
    EtcdPeer(Arc<TlsClient>),
}

impl How {
    /// The probes a round takes.
    pub fn kinds(&self) -> Vec<ProbeKind> {
        match self {
            How::Tcp => vec![ProbeKind::TcpConnect],
            How::ApiReadyz(_) => vec![ProbeKind::ApiReadyz],
            How::EtcdClient(_) => vec![ProbeKind::EtcdStatus, ProbeKind::EtcdQuorumRead],
            How::EtcdPeer(_) => vec![ProbeKind::EtcdPeerProbe],
        }
    }
}

/// What the checks read about one target.
#[derive(Debug)]
pub struct TargetState {
    pub target: Target,
    /// The last `window` samples per probe, oldest first.
    pub windows: BTreeMap<ProbeKind, VecDeque<Sample>>,
    /// etcd client targets: what the member said last (or that it did not answer).
    pub health: Option<EtcdMemberHealth>,
    window: usize,
}

impl TargetState {
    pub fn new(target: Target, window: usize) -> TargetState {
        TargetState {
            target,
            windows: BTreeMap::new(),
            health: None,
            window,
        }
    }

    pub(crate) fn push(&mut self, probe: ProbeKind, sample: Sample) {
        let w = self.windows.entry(probe).or_default();
        if w.len() == self.window {
            w.pop_front();
        }
        w.push_back(sample);
    }
}

/// A connection kept between rounds, as etcd keeps its own client and peer connections.
enum Conn {
    None,
    Etcd(Box<MemberClient>),
    Peer(Box<PeerSession>),
}

/// The probe loop of one target; runs until aborted.
pub async fn run(
    shared: Arc<Shared>,
    name: String,
    target: Target,
    how: How,
    state: Arc<Mutex<TargetState>>,
) {
    let cfg = &shared.config;
    let interval = cfg.interval;
    // A random phase spreads the targets over the interval, so 10,000 targets do not all fire
    // in the same millisecond (and replicas do not probe a member in lockstep).
    let mut due = Instant::now() + interval.mul_f64(rand::random::<f64>());
    let mut conn = Conn::None;
    let mut how = how;
    let mut series = super::metrics::TargetSeries::new(&name);
    let mut tls_seen = shared
        .tls_generation
        .load(std::sync::atomic::Ordering::Relaxed);
    loop {
        // A renewed etcd client identity: reconnect with it (the old connection would go on
        // working until it broke, then fail its handshake with an expired certificate).
        let g = shared
            .tls_generation
            .load(std::sync::atomic::Ordering::Relaxed);
        if g != tls_seen {
            tls_seen = g;
            if let Some(new) = shared.renewed_how(&target, &how) {
                how = new;
                conn = Conn::None;
            }
        }
        let at = due + interval.mul_f64(cfg.jitter * rand::random::<f64>());
        tokio::time::sleep_until(at).await;
        shared
            .metrics
            .observe_lag(Instant::now().saturating_duration_since(at));

        // The whole round is bounded too: a round takes at most two probes.
        let bound = cfg.probe_timeout * 2 + Duration::from_millis(100);
        let round =
            tokio::time::timeout(bound, round(&target, &how, &mut conn, cfg.probe_timeout)).await;
        let (samples, health) = match round {
            Ok(r) => r,
            Err(_) => {
                conn = Conn::None;
                let f = ProbeFailure::Timeout(u64::try_from(bound.as_millis()).unwrap_or(0));
                let samples = how
                    .kinds()
                    .into_iter()
                    .map(|k| (k, Err(f.clone())))
                    .collect();
                (samples, None)
            }
        };
        let up = !samples.is_empty() && samples.iter().all(|(_, r)| r.is_ok());
        for (kind, r) in &samples {
            shared.metrics.observe(&mut series, *kind, r);
        }
        shared.metrics.set_up(&mut series, up);
        {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            for (kind, r) in samples {
                st.push(kind, Sample { result: r });
            }
            if let Some(h) = health {
                st.health = Some(h);
            }
        }

        // Next round on the schedule; rounds this target's own slow probe overran are skipped.
        due += interval;
        let now = Instant::now();
        while due < now {
            due += interval;
            shared.metrics.skipped();
        }
    }
}

type Round = (
    Vec<(ProbeKind, Result<Duration, ProbeFailure>)>,
    Option<EtcdMemberHealth>,
);

async fn round(target: &Target, how: &How, conn: &mut Conn, timeout: Duration) -> Round {
    match how {
        How::Tcp => (
            vec![(
                ProbeKind::TcpConnect,
                tcp::probe(target, timeout).await.result,
            )],
            None,
        ),
        // The TLS, HTTP and gRPC futures are large: boxed, they take memory only while a round
        // is in flight, not in each of 10,000 idle tasks.
        How::ApiReadyz(tls) => {
            let r = Box::pin(http::readyz(target, tls, timeout)).await;
            (vec![(ProbeKind::ApiReadyz, http::sample(&r).result)], None)
        }
        How::EtcdClient(tls) => Box::pin(etcd_round(target, tls, conn, timeout)).await,
        How::EtcdPeer(tls) => (
            vec![(
                ProbeKind::EtcdPeerProbe,
                Box::pin(peer_round(target, tls, conn, timeout)).await,
            )],
            None,
        ),
    }
}

async fn etcd_round(target: &Target, tls: &EtcdTls, conn: &mut Conn, timeout: Duration) -> Round {
    let mut health = EtcdMemberHealth {
        endpoint: target.endpoint.clone(),
        name: target.member.clone(),
        ..Default::default()
    };
    let unreachable = |mut health: EtcdMemberHealth, e: &EtcdFailure| {
        let f = etcd_probe_failure(e);
        health.failure = Some(f.clone());
        (
            vec![
                (ProbeKind::EtcdStatus, Err(f.clone())),
                (ProbeKind::EtcdQuorumRead, Err(f)),
            ],
            Some(health),
        )
    };
    if !matches!(conn, Conn::Etcd(_)) {
        // Set-up (TCP + TLS + HTTP/2 + a warm-up Status) is not a sample; its failure is.
        match etcd::connect(&target.url(), Some(tls), timeout).await {
            Ok(c) => *conn = Conn::Etcd(Box::new(c)),
            Err(e) => return unreachable(health, &e),
        }
    }
    let Conn::Etcd(client) = conn else {
        return (Vec::new(), None);
    };
    let (d, st) = match client.status().await {
        Ok(ok) => ok,
        Err(e) => {
            *conn = Conn::None;
            return unreachable(health, &e);
        }
    };
    fill_health(&mut health, &st);
    let mut samples = vec![(ProbeKind::EtcdStatus, Ok(d))];
    if !st.is_learner {
        match client.quorum_read().await {
            Ok(d) => samples.push((ProbeKind::EtcdQuorumRead, Ok(d))),
            // A member that just became a learner (or is one): no quorum-read sample.
            Err(EtcdFailure::Learner(_)) => {}
            Err(e) => {
                samples.push((ProbeKind::EtcdQuorumRead, Err(etcd_probe_failure(&e))));
                *conn = Conn::None;
            }
        }
    }
    (samples, Some(health))
}

fn fill_health(h: &mut EtcdMemberHealth, st: &MemberStatus) {
    h.reachable = true;
    h.member_id = Some(st.member_id);
    h.leader = Some(st.leader);
    h.is_learner = st.is_learner;
    h.errors = st.errors.clone();
    h.raft_term = Some(st.raft_term);
    h.db_size = u64::try_from(st.db_size).ok();
    // Alarms from Status' errors, as preflight reads them (AlarmList would be a raft proposal).
    h.alarms = st
        .errors
        .iter()
        .filter(|e| e.contains("alarm:"))
        .cloned()
        .collect();
}

async fn peer_round(
    target: &Target,
    tls: &TlsClient,
    conn: &mut Conn,
    timeout: Duration,
) -> Result<Duration, ProbeFailure> {
    if !matches!(conn, Conn::Peer(_)) {
        let mut s = PeerSession::open(&target.host, target.port, tls, timeout)
            .await
            .map_err(|e| http_probe_failure(&e))?;
        // The first request pays for cold caches on both sides; it is not a sample.
        s.probe(timeout).await.map_err(|e| http_probe_failure(&e))?;
        *conn = Conn::Peer(Box::new(s));
    }
    let Conn::Peer(session) = conn else {
        return Err(ProbeFailure::Io("no peer session".into()));
    };
    match session.probe(timeout).await {
        Ok(p) => Ok(p.rtt),
        Err(e) => {
            // A broken keep-alive connection is reopened next round.
            *conn = Conn::None;
            Err(http_probe_failure(&e))
        }
    }
}
