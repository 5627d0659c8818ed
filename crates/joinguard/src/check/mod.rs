//! Checks: named judgements of the figures against thresholds, the ignore list and the verdict.
//!
//! This module owns check names (kubeadm style, so `--ignore-preflight-errors` feels native), the
//! default thresholds and where each comes from (DESIGN section 5), the wording of every check
//! message, and the exit codes. It takes summaries and health facts as data: it must not probe,
//! sample or print (`report` formats results). It does no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::probe::{ProbeFailure, ProbeKind};
use crate::sampling::{latency_band, Band, LatencyFigure, SamplingPolicy};
use crate::stats::{trim_count, Latency, Summary};
use crate::target::{Target, TargetKind};

/// Process exit codes (issue 3; the CLI returns them, scripts branch on them).
pub mod exit {
    /// Fit for a control-plane join; warnings allowed.
    pub const FIT: u8 = 0;
    /// Not fit: at least one check that is not ignored failed.
    pub const UNFIT: u8 = 1;
    /// A flag or file could not be used; nothing was judged.
    pub const INVALID_INPUT: u8 = 2;
    /// A CA pin, JWS signature or server certificate did not verify. Never retried or downgraded.
    pub const TRUST_FAILURE: u8 = 3;
}

/// Target name of checks about the etcd cluster as a whole rather than one endpoint.
pub const CLUSTER_TARGET: &str = "etcd-cluster";

/// The checks, named as kubeadm names its preflight checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CheckName {
    EtcdPeerLatency,
    EtcdClientLatency,
    EtcdQuorumReadLatency,
    PacketLoss,
    ApiServerLatency,
    ApiServerReady,
    EtcdHealth,
    EtcdSnapshotTransfer,
    ClockSkew,
    /// Warns that no etcd identity was given, so etcd checks fell back to TCP and TLS timing.
    EtcdIdentity,
}

impl CheckName {
    pub const ALL: [CheckName; 10] = [
        CheckName::EtcdPeerLatency,
        CheckName::EtcdClientLatency,
        CheckName::EtcdQuorumReadLatency,
        CheckName::PacketLoss,
        CheckName::ApiServerLatency,
        CheckName::ApiServerReady,
        CheckName::EtcdHealth,
        CheckName::EtcdSnapshotTransfer,
        CheckName::ClockSkew,
        CheckName::EtcdIdentity,
    ];

    /// The name as printed (`[ERROR EtcdPeerLatency]`) and as given to
    /// `--ignore-preflight-errors`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::EtcdPeerLatency => "EtcdPeerLatency",
            CheckName::EtcdClientLatency => "EtcdClientLatency",
            CheckName::EtcdQuorumReadLatency => "EtcdQuorumReadLatency",
            CheckName::PacketLoss => "PacketLoss",
            CheckName::ApiServerLatency => "APIServerLatency",
            CheckName::ApiServerReady => "APIServerReady",
            CheckName::EtcdHealth => "EtcdHealth",
            CheckName::EtcdSnapshotTransfer => "EtcdSnapshotTransfer",
            CheckName::ClockSkew => "ClockSkew",
            CheckName::EtcdIdentity => "EtcdIdentity",
        }
    }

    fn valid_names() -> String {
        let names: Vec<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
        names.join(", ")
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CheckName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A check name that is neither joinguard's nor kubeadm's, or `all` mixed with names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckNameError {
    #[error(
        "unknown check `{name}`: it is neither one of joinguard's checks ({valid}) nor one of \
         kubeadm's (NumCPU, Mem, Swap, Port-6443, DirAvailable--etc-kubernetes-manifests, ... \
         which joinguard accepts and passes over); or `all`"
    )]
    Unknown { name: String, valid: String },
    /// kubeadm's own message (`ValidateIgnorePreflightErrors`): the merged, lower-cased set.
    #[error(
        "ignore-preflight-errors: Invalid value: \"{set}\": don't specify individual checks if \
         'all' is used"
    )]
    AllWithOthers { set: String },
}

impl FromStr for CheckName {
    type Err = CheckNameError;

    /// Case-insensitive, as kubeadm lower-cases `--ignore-preflight-errors` entries.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = s.trim();
        CheckName::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(want))
            .ok_or_else(|| CheckNameError::Unknown {
                name: want.to_string(),
                valid: CheckName::valid_names(),
            })
    }
}

/// The checks whose failures are printed as warnings and do not fail the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IgnoreList {
    all: bool,
    names: BTreeSet<CheckName>,
    /// kubeadm's check names that were given (kubeadm's spelling): joinguard has nothing to
    /// ignore for them, and says so.
    kubeadm: BTreeSet<String>,
}

impl IgnoreList {
    /// Parses one comma-separated list (`--ignore-preflight-errors`).
    pub fn parse(s: &str) -> Result<IgnoreList, CheckNameError> {
        let entries: Vec<String> = s.split(',').map(str::to_string).collect();
        IgnoreList::from_sources(&entries, &[])
    }

    /// Merges the flag's entries and the config file's `nodeRegistration.ignorePreflightErrors`
    /// as kubeadm's `ValidateIgnorePreflightErrors` does: one lower-cased set, `all` alone or not
    /// at all. Entries may themselves hold commas (pflag splits the flag, not the file). Each
    /// entry is joinguard's check name or kubeadm's ([`crate::kubeadm::checks`]), any case.
    pub fn from_sources(flag: &[String], config: &[String]) -> Result<IgnoreList, CheckNameError> {
        let mut set: BTreeSet<String> = BTreeSet::new();
        let mut list = IgnoreList::default();
        for entry in config
            .iter()
            .chain(flag)
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            set.insert(entry.to_ascii_lowercase());
            if entry.eq_ignore_ascii_case("all") {
                list.all = true;
            } else if let Ok(name) = entry.parse::<CheckName>() {
                list.names.insert(name);
            } else if let Some(k) = crate::kubeadm::checks::canonical(entry) {
                list.kubeadm.insert(k);
            } else {
                return Err(CheckNameError::Unknown {
                    name: entry.to_string(),
                    valid: CheckName::valid_names(),
                });
            }
        }
        if list.all && set.len() > 1 {
            let set: Vec<String> = set.into_iter().collect();
            return Err(CheckNameError::AllWithOthers { set: set.join(",") });
        }
        Ok(list)
    }

    /// `all`: every joinguard error becomes a warning.
    pub fn is_all(&self) -> bool {
        self.all
    }

    /// kubeadm's check names in the list, in kubeadm's spelling.
    pub fn kubeadm_checks(&self) -> impl Iterator<Item = &str> {
        self.kubeadm.iter().map(String::as_str)
    }

    pub fn contains(&self, name: CheckName) -> bool {
        self.all || self.names.contains(&name)
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.names.is_empty()
    }

    /// Marks warnings and errors of ignored checks as [`Status::Ignored`].
    pub fn apply(&self, results: Vec<CheckResult>) -> Vec<CheckResult> {
        results
            .into_iter()
            .map(|mut r| {
                if matches!(r.status, Status::Warning | Status::Error) && self.contains(r.name) {
                    r.status = Status::Ignored;
                }
                r
            })
            .collect()
    }
}

/// Outcome of one check on one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Error,
    /// Would have been a warning or an error, but the check is in the ignore list. Printed as a
    /// warning, as kubeadm prints ignored errors.
    Ignored,
}

/// One check's judgement of one target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckResult {
    pub name: CheckName,
    /// `host:port` (or the URL given), or [`CLUSTER_TARGET`] for cluster-wide checks.
    pub target: String,
    pub status: Status,
    /// What was measured, the limit and where it comes from, and what to do.
    pub message: String,
    /// The judged figure, in the check's unit (see `docs/preflight.md`).
    pub measured: Option<f64>,
    /// The limit the figure was compared with: the one crossed, or the warning limit when none.
    pub threshold: Option<f64>,
}

/// Whether the node may join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Fit,
    Unfit,
}

impl Verdict {
    /// Unfit if any error remains after the ignore list was applied.
    pub fn from_checks(checks: &[CheckResult]) -> Verdict {
        if checks.iter().any(|c| c.status == Status::Error) {
            Verdict::Unfit
        } else {
            Verdict::Fit
        }
    }

    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Fit => exit::FIT,
            Verdict::Unfit => exit::UNFIT,
        }
    }
}

/// A warning and an error limit, and why each has its value (quoted in messages).
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub warn: f64,
    pub error: f64,
    pub warn_basis: String,
    pub error_basis: String,
}

impl Threshold {
    fn new(warn: f64, error: f64, warn_basis: String, error_basis: String) -> Threshold {
        Threshold {
            warn,
            error,
            warn_basis,
            error_basis,
        }
    }

    /// Limits set by the operator instead of derived.
    pub fn overridden(warn: f64, error: f64) -> Threshold {
        Threshold::new(warn, error, "override".into(), "override".into())
    }
}

/// Every limit the checks use. Fields are public so any limit can be overridden.
///
/// Units: latency limits in ms, packet loss in percent, snapshot transfer and clock skew in s.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// The members' `--heartbeat-interval` the limits were derived from (for messages).
    pub heartbeat: Duration,
    /// The members' `--election-timeout`.
    pub election: Duration,
    pub etcd_peer_latency: Threshold,
    pub etcd_client_latency: Threshold,
    pub etcd_quorum_read_latency: Threshold,
    pub packet_loss: Threshold,
    pub api_server_latency: Threshold,
    /// kubeadm's budget for etcd calls such as promoting the learner (EtcdAPICall).
    pub etcd_api_call_budget: Duration,
    pub etcd_snapshot_transfer: Threshold,
    pub clock_skew: Threshold,
}

impl Default for Thresholds {
    /// etcd's defaults: heartbeat 100 ms, election timeout 1000 ms (`server/embed/config.go`
    /// TickMs/ElectionMs; kubeadm overrides neither).
    fn default() -> Self {
        Thresholds::from_etcd_timing(Duration::from_millis(100), Duration::from_millis(1000))
    }
}

impl Thresholds {
    /// The DESIGN section 5 table, scaled by the members' timing.
    pub fn from_etcd_timing(heartbeat: Duration, election: Duration) -> Thresholds {
        let hb = heartbeat.as_secs_f64() * 1000.0;
        let el = election.as_secs_f64() * 1000.0;
        let hb_s = fmt_duration(heartbeat);
        let el_s = fmt_duration(election);

        // Peer RTT. OpenShift's etcd docs (etcd-network-latency-jitter.adoc) recommend an
        // effective RTT (RTT + jitter) below 33 ms and at most 66 ms for a 100 ms heartbeat: 1/3
        // and 2/3 of it. The etcd tuning guide (docs/v3.5/tuning.md) also requires the election
        // timeout to be at least 10 x RTT, so a short election timeout lowers the error limit.
        let by_heartbeat = 2.0 * hb / 3.0;
        let by_election = el / 10.0;
        let (peer_error, peer_error_basis) = if by_election < by_heartbeat {
            (
                by_election,
                format!(
                    "1/10 of the {el_s} election timeout; etcd needs it to be at least 10 x RTT"
                ),
            )
        } else {
            (
                by_heartbeat,
                format!("2/3 of the {hb_s} heartbeat interval"),
            )
        };
        let peer_warn = (hb / 3.0).min(peer_error);

        // The etcd API call budget: kubeadm's EtcdAPICall timeout (2 min) bounds promoting the
        // learner (cmd/kubeadm/app/phases/etcd/local.go); v1beta4 timeouts.etcdAPICall overrides.
        let budget = Duration::from_secs(120);
        let budget_s = budget.as_secs_f64();

        Thresholds {
            heartbeat,
            election,
            etcd_peer_latency: Threshold::new(
                peer_warn,
                peer_error,
                format!("1/3 of the {hb_s} heartbeat interval, the recommended maximum"),
                peer_error_basis,
            ),
            // A client request that takes longer than the heartbeat interval waits for more than
            // one raft round; DESIGN section 5.
            etcd_client_latency: Threshold::new(
                hb / 2.0,
                hb,
                format!("1/2 of the {hb_s} heartbeat interval"),
                format!("the {hb_s} heartbeat interval"),
            ),
            etcd_quorum_read_latency: Threshold::new(
                hb / 2.0,
                hb,
                format!("1/2 of the {hb_s} heartbeat interval"),
                format!("the {hb_s} heartbeat interval"),
            ),
            // joinguard defaults (DESIGN section 5); loss is the round-trip loss of a probe.
            packet_loss: Threshold::new(
                1.0,
                5.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
            // joinguard defaults (DESIGN section 5) for the /readyz p90 through the endpoint.
            api_server_latency: Threshold::new(
                250.0,
                1000.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
            etcd_api_call_budget: budget,
            etcd_snapshot_transfer: Threshold::new(
                0.25 * budget_s,
                0.5 * budget_s,
                "25% of kubeadm's 2 min etcd API call budget (EtcdAPICall)".into(),
                "50% of kubeadm's 2 min etcd API call budget (EtcdAPICall)".into(),
            ),
            // joinguard defaults (DESIGN section 5): certificates and tokens carry second-level
            // validity times; 30 s of skew makes fresh ones "not yet valid" on the other side.
            clock_skew: Threshold::new(
                1.0,
                30.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
        }
    }
}

/// What an etcd member told us about itself (filled by the etcd probe from Maintenance.Status).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EtcdMemberHealth {
    /// Client endpoint probed, `host:port`.
    pub endpoint: String,
    /// Member name from MemberList, when known.
    pub name: Option<String>,
    /// Peer endpoint from MemberList, `host:port`, when known.
    pub peer_endpoint: Option<String>,
    /// Member id from the response header.
    pub member_id: Option<u64>,
    /// The leader this member knows; `None` or `Some(0)` means it has none.
    pub leader: Option<u64>,
    pub is_learner: bool,
    /// Active alarms (`NOSPACE`, `CORRUPT`).
    pub alarms: Vec<String>,
    /// The `errors` field of the Status response.
    pub errors: Vec<String>,
    /// Whether the member answered Status at all.
    pub reachable: bool,
    /// Why not, when it did not.
    pub failure: Option<ProbeFailure>,
    pub raft_term: Option<u64>,
    /// Backend size in bytes.
    pub db_size: Option<u64>,
}

impl EtcdMemberHealth {
    /// "m4 (198.18.0.5:2380)", or the client endpoint when the name is unknown.
    fn label(&self) -> String {
        match (&self.name, &self.peer_endpoint) {
            (Some(n), Some(p)) => format!("{n} ({p})"),
            (Some(n), None) => format!("{n} ({})", self.endpoint),
            (None, _) => self.endpoint.clone(),
        }
    }

    fn leader(&self) -> Option<u64> {
        self.leader.filter(|&l| l != 0)
    }
}

/// Judges figures and facts. Holds the limits, the sampling policy (the loss verdict depends on
/// how much evidence there is) and the ignore list.
#[derive(Clone, Debug, Default)]
pub struct Checker {
    pub thresholds: Thresholds,
    pub sampling: SamplingPolicy,
    pub ignore: IgnoreList,
}

impl Checker {
    pub fn new(thresholds: Thresholds, ignore: IgnoreList) -> Checker {
        Checker {
            thresholds,
            sampling: SamplingPolicy::default(),
            ignore,
        }
    }

    /// Every check that summaries alone can decide: latency per target and probe, and packet
    /// loss per target. Without an etcd identity the etcd latency checks use TCP connect times.
    /// The ignore list is not applied yet; see [`Checker::finish`].
    pub fn evaluate_summaries(&self, summaries: &[Summary]) -> Vec<CheckResult> {
        let has = |endpoint: &str, probe: ProbeKind| {
            summaries
                .iter()
                .any(|s| s.target.endpoint == endpoint && s.probe == probe)
        };
        let mut out = Vec::new();
        for s in summaries {
            let ep = s.target.endpoint.as_str();
            match (s.target.kind, s.probe) {
                (TargetKind::EtcdPeer, ProbeKind::EtcdPeerProbe) => out.push(self.peer_latency(s)),
                (TargetKind::EtcdPeer, ProbeKind::TcpConnect)
                    if !has(ep, ProbeKind::EtcdPeerProbe) =>
                {
                    out.push(self.peer_latency(s))
                }
                (TargetKind::EtcdClient, ProbeKind::EtcdStatus) => out.push(self.client_latency(s)),
                (TargetKind::EtcdClient, ProbeKind::TcpConnect)
                    if !has(ep, ProbeKind::EtcdStatus) =>
                {
                    out.push(self.client_latency(s))
                }
                (TargetKind::EtcdClient, ProbeKind::EtcdQuorumRead) => {
                    out.push(self.quorum_read_latency(s))
                }
                (TargetKind::ApiServer, ProbeKind::ApiReadyz) => {
                    out.push(self.api_server_ready(s));
                    out.push(self.api_server_latency(s));
                }
                _ => {}
            }
        }
        // Loss per target, judged on the loss probe (ICMP echo) where there is one, else on the
        // stream with the most attempts. The echo stream stops as soon as its confidence bound
        // settles, so a clearly lossy path may have fewer echoes than a latency stream has
        // samples; the latency streams ride on retransmitting TCP and hide loss.
        let rank = |s: &Summary| {
            (
                s.probe == ProbeKind::IcmpEcho,
                s.samples,
                s.probe == ProbeKind::TcpConnect,
            )
        };
        let mut loss_stream: BTreeMap<&str, &Summary> = BTreeMap::new();
        for s in summaries {
            let e = loss_stream.entry(s.target.endpoint.as_str()).or_insert(s);
            let better = rank(s) > rank(e);
            if better {
                *e = s;
            }
        }
        // Keep the targets' order as given.
        for s in summaries {
            if loss_stream
                .get(s.target.endpoint.as_str())
                .is_some_and(|l| std::ptr::eq(*l, s))
            {
                out.push(self.packet_loss(s));
            }
        }
        out
    }

    /// Applies the ignore list.
    pub fn finish(&self, results: Vec<CheckResult>) -> Vec<CheckResult> {
        self.ignore.apply(results)
    }

    /// `EtcdPeerLatency`: effective RTT (robust p99 + robust jitter) to a member's peer port.
    pub fn peer_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdPeerLatency,
            s,
            LatencyFigure::EffectiveRtt,
            &self.thresholds.etcd_peer_latency,
            "the join would risk leader elections. Fix the path or raise \
             --etcd-heartbeat-interval/--etcd-election-timeout on all members",
            "the margin to leader elections is small",
        )
    }

    /// `EtcdClientLatency`: robust p99 of Status (or TCP connect) to a member's client port.
    pub fn client_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdClientLatency,
            s,
            LatencyFigure::RobustP99,
            &self.thresholds.etcd_client_latency,
            "kubeadm's etcd calls (member add, promote) through this member would be slow to \
             time out. Fix the path to this member",
            "etcd calls through this member will be slow",
        )
    }

    /// `EtcdQuorumReadLatency`: robust p99 of a linearizable read (member, leader, quorum).
    pub fn quorum_read_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdQuorumReadLatency,
            s,
            LatencyFigure::RobustP99,
            &self.thresholds.etcd_quorum_read_latency,
            "every consistent read through this member waits on the leader and a quorum. Fix \
             the paths between this member, the leader and the others",
            "consistent reads through this member are slow",
        )
    }

    /// `APIServerLatency`: p90 of `/readyz` through the API endpoint or load balancer.
    pub fn api_server_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::ApiServerLatency,
            s,
            LatencyFigure::P90,
            &self.thresholds.api_server_latency,
            "kubeadm join's API calls would time out or retry. Check the load balancer and the \
             path to it",
            "API calls during the join will be slow",
        )
    }

    fn latency_check(
        &self,
        name: CheckName,
        s: &Summary,
        figure: LatencyFigure,
        t: &Threshold,
        error_consequence: &str,
        warn_consequence: &str,
    ) -> CheckResult {
        let head = format!("{} ({})", describe(&s.target), s.probe.as_str());
        let Some(l) = &s.latency else {
            return unreachable(name, s, &head);
        };
        let value = figure.value(l);
        let what = describe_figure(figure, l, s.samples);
        let (status, message, threshold) = match latency_band(l, figure, t.warn, t.error) {
            Band::Error => (
                Status::Error,
                format!(
                    "{head}: {what} exceeds {} ({}); {error_consequence}",
                    fmt_ms(t.error),
                    t.error_basis
                ),
                t.error,
            ),
            Band::Warning => (
                Status::Warning,
                format!(
                    "{head}: {what} exceeds {} ({}); {warn_consequence}",
                    fmt_ms(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
            Band::Ok => (
                Status::Ok,
                format!(
                    "{head}: {what} is within {} ({})",
                    fmt_ms(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
        };
        CheckResult {
            name,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: Some(value),
            threshold: Some(threshold),
        }
    }

    /// `PacketLoss`: round-trip loss of a probe stream, in percent. An error needs statistical
    /// evidence (see [`SamplingPolicy::loss_band`]), not just an observed ratio.
    pub fn packet_loss(&self, s: &Summary) -> CheckResult {
        let t = &self.thresholds.packet_loss;
        let est = s.loss();
        let pct = est.ratio() * 100.0;
        let head = format!(
            "{} ({}): loss {pct:.1}% ({} of {} probes)",
            describe(&s.target),
            s.probe.as_str(),
            est.lost,
            est.attempts
        );
        let band = self
            .sampling
            .loss_band(&est, t.warn / 100.0, t.error / 100.0);
        let (status, message, threshold) = match band {
            Band::Error => (
                Status::Error,
                format!(
                    "{head} exceeds {}% ({}); raft messages and the join's API calls would stall \
                     on retransmissions. Fix the path",
                    fmt_num(t.error),
                    t.error_basis
                ),
                t.error,
            ),
            Band::Warning if pct > t.error => (
                Status::Warning,
                format!(
                    "{head} is above {}% ({}), but too few probes to be sure; check the path \
                     and run again",
                    fmt_num(t.error),
                    t.error_basis
                ),
                t.warn,
            ),
            Band::Warning => (
                Status::Warning,
                format!(
                    "{head} exceeds {}% ({}); the join can proceed, but expect retransmission \
                     delays",
                    fmt_num(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
            Band::Ok => (
                Status::Ok,
                format!("{head} is within {}% ({})", fmt_num(t.warn), t.warn_basis),
                t.warn,
            ),
        };
        CheckResult {
            name: CheckName::PacketLoss,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: Some(pct),
            threshold: Some(threshold),
        }
    }

    /// `APIServerReady`: `/readyz` answered ok at least once. A stream with some not-ready
    /// answers is a warning (a load balancer in rotation, a restarting server).
    pub fn api_server_ready(&self, s: &Summary) -> CheckResult {
        let ok = s.samples - s.lost;
        let why = s
            .last_failure
            .as_ref()
            .map_or_else(|| "no answer".to_string(), ToString::to_string);
        let (status, message) = if ok == 0 {
            (
                Status::Error,
                format!(
                    "{} is not ready: {why} ({} of {} /readyz probes failed); kubeadm join would \
                     fail at its first API call. Check the API server and the load balancer",
                    describe(&s.target),
                    s.lost,
                    s.samples
                ),
            )
        } else if s.lost > 0 && matches!(s.last_failure, Some(ProbeFailure::Protocol(_))) {
            (
                Status::Warning,
                format!(
                    "{}: /readyz failed in {} of {} probes (last: {why}); some backends may not \
                     be ready",
                    describe(&s.target),
                    s.lost,
                    s.samples
                ),
            )
        } else {
            (
                Status::Ok,
                format!(
                    "{}: /readyz answered ok in {ok} of {} probes",
                    describe(&s.target),
                    s.samples
                ),
            )
        };
        CheckResult {
            name: CheckName::ApiServerReady,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: None,
            threshold: None,
        }
    }

    /// `EtcdHealth`: what the members say about the cluster. One result per problem, or one ok
    /// result per member without problems; cluster-wide results have target [`CLUSTER_TARGET`].
    pub fn etcd_health(&self, members: &[EtcdMemberHealth]) -> Vec<CheckResult> {
        let mut out = Vec::new();
        let result = |target: &str, status: Status, message: String| CheckResult {
            name: CheckName::EtcdHealth,
            target: target.to_string(),
            status,
            message,
            measured: None,
            threshold: None,
        };
        let reachable: Vec<&EtcdMemberHealth> = members.iter().filter(|m| m.reachable).collect();
        let leaders: BTreeSet<u64> = reachable.iter().filter_map(|m| m.leader()).collect();

        for m in members {
            let before = out.len();
            if !m.reachable {
                let why = m
                    .failure
                    .as_ref()
                    .map_or_else(|| "no answer".to_string(), ToString::to_string);
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} is unreachable: {why}; the join would fail at member \
                         add. Bring the member back or remove it (etcdctl member remove) first",
                        m.label()
                    ),
                ));
                continue;
            }
            if m.is_learner {
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} is already a learner; etcd allows one learner, so the \
                         join would fail with \"etcdserver: too many learner members in \
                         cluster\". Wait for it to be promoted, or remove it if its join failed",
                        m.label()
                    ),
                ));
            }
            if !m.alarms.is_empty() {
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} has active alarms: {}; the cluster refuses writes, so \
                         member add would fail. Fix the cause, then `etcdctl alarm disarm`",
                        m.label(),
                        m.alarms.join(", ")
                    ),
                ));
            }
            if m.leader().is_none() && !leaders.is_empty() {
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} has no leader while others follow {}; it is cut off \
                         from the cluster, and a join through it would fail",
                        m.label(),
                        fmt_ids(&leaders)
                    ),
                ));
            }
            if !m.errors.is_empty() {
                out.push(result(
                    &m.endpoint,
                    Status::Warning,
                    format!("etcd member {} reports: {}", m.label(), m.errors.join("; ")),
                ));
            }
            if out.len() == before {
                let leader = m
                    .leader()
                    .map_or_else(|| "none".into(), |l| format!("{l:x}"));
                let term = m.raft_term.map_or_else(|| "?".into(), |t| t.to_string());
                out.push(result(
                    &m.endpoint,
                    Status::Ok,
                    format!(
                        "etcd member {}: healthy (leader {leader}, term {term})",
                        m.label()
                    ),
                ));
            }
        }

        if !reachable.is_empty() && leaders.is_empty() {
            out.push(result(
                CLUSTER_TARGET,
                Status::Error,
                format!(
                    "no etcd member reports a leader ({} of {} answered); the cluster cannot \
                     accept a new member. Restore quorum first",
                    reachable.len(),
                    members.len()
                ),
            ));
        } else if leaders.len() > 1 {
            out.push(result(
                CLUSTER_TARGET,
                Status::Warning,
                format!(
                    "etcd members disagree on the leader ({}); an election may be in progress. \
                     Run again; if it persists, the members' paths to each other are unstable",
                    fmt_ids(&leaders)
                ),
            ));
        }
        out
    }

    /// `EtcdSnapshotTransfer`: predicted time to send the backend to a new member (DB size /
    /// measured throughput), against kubeadm's etcd API call budget.
    pub fn snapshot_transfer(
        &self,
        target: &Target,
        db_size_bytes: u64,
        bytes_per_second: f64,
    ) -> CheckResult {
        let t = &self.thresholds.etcd_snapshot_transfer;
        let secs = if bytes_per_second > 0.0 {
            db_size_bytes as f64 / bytes_per_second
        } else {
            f64::INFINITY
        };
        let head = format!(
            "{}: a full snapshot of {} at the measured {}/s would take {}",
            describe(target),
            fmt_bytes(db_size_bytes as f64),
            fmt_bytes(bytes_per_second.max(0.0)),
            fmt_secs(secs)
        );
        let (status, message, threshold) = if secs > t.error {
            (
                Status::Error,
                format!(
                    "{head}, more than {} ({}); the learner would likely not catch up before \
                     kubeadm gives up promoting it. Join over a faster path, or compact and \
                     defragment etcd first",
                    fmt_secs(t.error),
                    t.error_basis
                ),
                t.error,
            )
        } else if secs > t.warn {
            (
                Status::Warning,
                format!(
                    "{head}, more than {} ({}); promotion may be slow",
                    fmt_secs(t.warn),
                    t.warn_basis
                ),
                t.warn,
            )
        } else {
            (
                Status::Ok,
                format!("{head}, within {} ({})", fmt_secs(t.warn), t.warn_basis),
                t.warn,
            )
        };
        CheckResult {
            name: CheckName::EtcdSnapshotTransfer,
            target: target.endpoint.clone(),
            status,
            message,
            measured: Some(secs),
            threshold: Some(threshold),
        }
    }

    /// `ClockSkew`: difference between this node's clock and the target's, in seconds (sign
    /// ignored).
    pub fn clock_skew(&self, target: &Target, skew_seconds: f64) -> CheckResult {
        let t = &self.thresholds.clock_skew;
        let skew = skew_seconds.abs();
        let head = format!(
            "{}: its clock differs from this node's by {}",
            describe(target),
            fmt_secs(skew)
        );
        let (status, message, threshold) = if skew > t.error {
            (
                Status::Error,
                format!(
                    "{head}, more than {} ({}); certificates and tokens issued during the join \
                     would be rejected as not yet valid or expired. Synchronise the clocks (NTP)",
                    fmt_secs(t.error),
                    t.error_basis
                ),
                t.error,
            )
        } else if skew > t.warn {
            (
                Status::Warning,
                format!(
                    "{head}, more than {} ({}); synchronise the clocks (NTP)",
                    fmt_secs(t.warn),
                    t.warn_basis
                ),
                t.warn,
            )
        } else {
            (
                Status::Ok,
                format!("{head}, within {} ({})", fmt_secs(t.warn), t.warn_basis),
                t.warn,
            )
        };
        CheckResult {
            name: CheckName::ClockSkew,
            target: target.endpoint.clone(),
            status,
            message,
            measured: Some(skew),
            threshold: Some(threshold),
        }
    }

    /// `EtcdIdentity`: a warning when etcd checks ran without a client identity.
    pub fn etcd_identity(&self, identity_given: bool) -> CheckResult {
        let (status, message) = if identity_given {
            (
                Status::Ok,
                "etcd client identity given; etcd checks use etcd's own requests".to_string(),
            )
        } else {
            (
                Status::Warning,
                "no etcd client identity given (--etcd-cacert, --etcd-cert, --etcd-key): etcd \
                 latency checks fell back to TCP connect timing, and EtcdHealth, quorum reads \
                 and peer probes were skipped"
                    .to_string(),
            )
        };
        CheckResult {
            name: CheckName::EtcdIdentity,
            target: CLUSTER_TARGET.to_string(),
            status,
            message,
            measured: None,
            threshold: None,
        }
    }
}

fn unreachable(name: CheckName, s: &Summary, head: &str) -> CheckResult {
    let why = s
        .last_failure
        .as_ref()
        .map_or_else(|| "no attempt was made".to_string(), ToString::to_string);
    CheckResult {
        name,
        target: s.target.endpoint.clone(),
        status: Status::Error,
        message: format!(
            "{head}: unreachable, all {} attempts failed (last: {why}); the join needs this \
             path. Check that the endpoint is up and that the network and firewalls pass it",
            s.samples
        ),
        measured: None,
        threshold: None,
    }
}

/// "etcd peer 198.18.0.3:2380 (m2)".
fn describe(t: &Target) -> String {
    match &t.member {
        Some(m) => format!("{t} ({m})"),
        None => t.to_string(),
    }
}

fn describe_figure(figure: LatencyFigure, l: &Latency, attempts: u32) -> String {
    let trimmed = trim_count(l.n);
    let over = format!("{attempts} samples, top {trimmed} discarded");
    match figure {
        LatencyFigure::EffectiveRtt => format!(
            "effective RTT {:.1} ms (p99 {:.1} + jitter {:.1}; {over})",
            l.effective_rtt_ms(),
            l.robust_p99_ms,
            l.robust_jitter_ms
        ),
        LatencyFigure::RobustP99 => format!("p99 {:.1} ms ({over})", l.robust_p99_ms),
        LatencyFigure::P90 => format!("p90 {:.1} ms ({attempts} samples)", l.p90_ms),
    }
}

/// "66.7 ms", "100 ms".
pub(crate) fn fmt_ms(ms: f64) -> String {
    format!("{} ms", fmt_num(ms))
}

/// At most one decimal, none when whole.
pub(crate) fn fmt_num(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

/// "100 ms", "1 s", "2 min", as etcd and kubeadm flags are written.
pub(crate) fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1000.0 {
        fmt_ms(ms)
    } else if ms % 60_000.0 == 0.0 {
        format!("{} min", fmt_num(ms / 60_000.0))
    } else {
        format!("{} s", fmt_num(ms / 1000.0))
    }
}

fn fmt_secs(s: f64) -> String {
    if s.is_infinite() {
        "forever (no throughput)".into()
    } else {
        format!("{} s", fmt_num(s))
    }
}

fn fmt_bytes(b: f64) -> String {
    const KIB: f64 = 1024.0;
    if b >= KIB * KIB * KIB {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{b:.0} B")
    }
}

fn fmt_ids(ids: &BTreeSet<u64>) -> String {
    let v: Vec<String> = ids.iter().map(|i| format!("{i:x}")).collect();
    v.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Sample;

    fn target(kind: TargetKind, endpoint: &str, member: Option<&str>) -> Target {
        let (host, port) = endpoint.rsplit_once(':').unwrap();
        Target {
            kind,
            endpoint: endpoint.into(),
            host: host.into(),
            port: port.parse().unwrap(),
            tls: true,
            member: member.map(Into::into),
        }
    }

    fn summary(kind: TargetKind, ep: &str, probe: ProbeKind, rtts: &[f64], lost: usize) -> Summary {
        let mut samples: Vec<Sample> = rtts
            .iter()
            .map(|ms| Sample {
                result: Ok(Duration::from_secs_f64(ms / 1000.0)),
            })
            .collect();
        samples.extend((0..lost).map(|_| Sample {
            result: Err(ProbeFailure::Timeout(2000)),
        }));
        Summary::from_samples(&target(kind, ep, None), probe, &samples)
    }

    #[test]
    fn default_thresholds_match_design_table() {
        let t = Thresholds::default();
        assert!((t.etcd_peer_latency.warn - 33.333).abs() < 0.01);
        assert!((t.etcd_peer_latency.error - 66.667).abs() < 0.01);
        assert_eq!(t.etcd_client_latency.warn, 50.0);
        assert_eq!(t.etcd_client_latency.error, 100.0);
        assert_eq!(t.etcd_quorum_read_latency.warn, 50.0);
        assert_eq!(t.etcd_quorum_read_latency.error, 100.0);
        assert_eq!((t.packet_loss.warn, t.packet_loss.error), (1.0, 5.0));
        assert_eq!(
            (t.api_server_latency.warn, t.api_server_latency.error),
            (250.0, 1000.0)
        );
        assert_eq!(
            (
                t.etcd_snapshot_transfer.warn,
                t.etcd_snapshot_transfer.error
            ),
            (30.0, 60.0)
        );
        assert_eq!((t.clock_skew.warn, t.clock_skew.error), (1.0, 30.0));
        assert_eq!(
            t.etcd_peer_latency.error_basis,
            "2/3 of the 100 ms heartbeat interval"
        );
    }

    #[test]
    fn thresholds_scale_with_heartbeat_and_election() {
        // OpenShift's "Slower" profile: 500 ms / 2500 ms.
        let t =
            Thresholds::from_etcd_timing(Duration::from_millis(500), Duration::from_millis(2500));
        // 2/3 of 500 = 333 > 2500/10 = 250: the election rule wins.
        assert_eq!(t.etcd_peer_latency.error, 250.0);
        assert!(t
            .etcd_peer_latency
            .error_basis
            .contains("2.5 s election timeout"));
        assert!((t.etcd_peer_latency.warn - 500.0 / 3.0).abs() < 1e-9);
        assert_eq!(t.etcd_client_latency.error, 500.0);
        // An election timeout below 10 x the heartbeat-derived limit also caps the warning.
        let t =
            Thresholds::from_etcd_timing(Duration::from_millis(100), Duration::from_millis(300));
        assert_eq!(t.etcd_peer_latency.error, 30.0);
        assert_eq!(t.etcd_peer_latency.warn, 30.0);
    }

    #[test]
    fn check_names_parse_case_insensitively() {
        assert_eq!(
            "etcdpeerlatency".parse::<CheckName>(),
            Ok(CheckName::EtcdPeerLatency)
        );
        assert_eq!(
            "APISERVERLATENCY".parse::<CheckName>(),
            Ok(CheckName::ApiServerLatency)
        );
        for c in CheckName::ALL {
            assert_eq!(c.as_str().parse::<CheckName>(), Ok(c));
        }
        let err = "EtcdLatency".parse::<CheckName>().unwrap_err().to_string();
        assert!(err.contains("unknown check `EtcdLatency`"), "{err}");
        assert!(err.contains("EtcdPeerLatency, EtcdClientLatency"), "{err}");
        assert!(err.contains("APIServerReady"), "{err}");
    }

    #[test]
    fn ignore_list_parses_names_and_all() {
        let l = IgnoreList::parse("EtcdPeerLatency, packetloss,").unwrap();
        assert!(l.contains(CheckName::EtcdPeerLatency));
        assert!(l.contains(CheckName::PacketLoss));
        assert!(!l.contains(CheckName::EtcdHealth));
        let all = IgnoreList::parse("ALL").unwrap();
        assert!(CheckName::ALL.iter().all(|c| all.contains(*c)));
        assert!(IgnoreList::parse("").unwrap().is_empty());
        assert!(matches!(
            IgnoreList::parse("EtcdPeerLatency,Bogus"),
            Err(CheckNameError::Unknown { name, .. }) if name == "Bogus"
        ));
        assert_eq!(
            IgnoreList::parse("all,PacketLoss").unwrap_err().to_string(),
            "ignore-preflight-errors: Invalid value: \"all,packetloss\": don't specify \
             individual checks if 'all' is used"
        );
    }

    #[test]
    fn kubeadm_names_are_noted_and_both_lists_merge_as_kubeadm_merges_them() {
        let flag = vec!["NumCPU,mem".to_string(), "EtcdPeerLatency".to_string()];
        let file = vec![
            "Port-6443".to_string(),
            "dirAvailable--var-lib-etcd".to_string(),
        ];
        let l = IgnoreList::from_sources(&flag, &file).unwrap();
        assert!(l.contains(CheckName::EtcdPeerLatency));
        assert!(!l.contains(CheckName::PacketLoss));
        assert_eq!(
            l.kubeadm_checks().collect::<Vec<_>>(),
            ["DirAvailable--var-lib-etcd", "Mem", "NumCPU", "Port-6443"]
        );
        // `all` in the file and a name on the flag: kubeadm's error over the merged set.
        let e = IgnoreList::from_sources(&["Swap".into()], &["all".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ignore-preflight-errors: Invalid value: \"all,swap\": don't specify individual \
             checks if 'all' is used"
        );
        // The same `all` twice is one entry of the set.
        assert!(IgnoreList::from_sources(&["ALL".into()], &["all".into()])
            .unwrap()
            .is_all());
        let e = IgnoreList::from_sources(&["Bogus".into()], &[]).unwrap_err();
        assert!(
            e.to_string().contains("neither one of joinguard's checks"),
            "{e}"
        );
    }

    #[test]
    fn slow_peer_errors_with_an_operator_message() {
        let c = Checker::default();
        let rtts: Vec<f64> = (0..20).map(|i| 78.0 + f64::from(i % 2) * 3.0).collect();
        let s = Summary::from_samples(
            &target(TargetKind::EtcdPeer, "198.18.0.3:2380", Some("m2")),
            ProbeKind::EtcdPeerProbe,
            &rtts
                .iter()
                .map(|ms| Sample {
                    result: Ok(Duration::from_secs_f64(ms / 1000.0)),
                })
                .collect::<Vec<_>>(),
        );
        let r = c.peer_latency(&s);
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.name, CheckName::EtcdPeerLatency);
        assert_eq!(r.target, "198.18.0.3:2380");
        assert!((r.threshold.unwrap() - 66.667).abs() < 0.01);
        let m = &r.message;
        assert!(m.starts_with("etcd peer 198.18.0.3:2380 (m2) (etcd-peer-probe): effective RTT 84.0 ms (p99 81.0 + jitter 3.0;"), "{m}");
        assert!(
            m.contains("exceeds 66.7 ms (2/3 of the 100 ms heartbeat interval)"),
            "{m}"
        );
        assert!(
            m.contains("--etcd-heartbeat-interval/--etcd-election-timeout"),
            "{m}"
        );
    }

    #[test]
    fn healthy_peer_is_ok_and_mid_peer_warns() {
        let c = Checker::default();
        let ok = summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &[2.0; 20],
            0,
        );
        assert_eq!(c.peer_latency(&ok).status, Status::Ok);
        let mid = summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &[50.0; 20],
            0,
        );
        let r = c.peer_latency(&mid);
        assert_eq!(r.status, Status::Warning);
        assert!(
            r.message
                .contains("exceeds 33.3 ms (1/3 of the 100 ms heartbeat"),
            "{}",
            r.message
        );
    }

    #[test]
    fn single_spike_does_not_fail_peer_check() {
        let c = Checker::default();
        let mut rtts = vec![2.0; 20];
        rtts[4] = 500.0;
        let s = summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &rtts,
            0,
        );
        assert_eq!(c.peer_latency(&s).status, Status::Ok);
    }

    #[test]
    fn unreachable_latency_stream_is_an_error_naming_the_failure() {
        let c = Checker::default();
        let s = summary(
            TargetKind::EtcdPeer,
            "198.18.0.4:2380",
            ProbeKind::EtcdPeerProbe,
            &[],
            3,
        );
        let r = c.peer_latency(&s);
        assert_eq!(r.status, Status::Error);
        assert!(r.message.contains("198.18.0.4:2380"));
        assert!(
            r.message.contains("timed out after 2000 ms"),
            "{}",
            r.message
        );
        assert_eq!(r.measured, None);
    }

    #[test]
    fn packet_loss_bands() {
        let c = Checker::default();
        let ep = "198.18.0.2:2379";
        let k = TargetKind::EtcdClient;
        let p = ProbeKind::TcpConnect;
        let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 388], 12));
        assert_eq!(r.status, Status::Warning, "{}", r.message);
        assert_eq!(r.measured, Some(3.0));
        let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 360], 40));
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert!(
            r.message
                .contains("loss 10.0% (40 of 400 probes) exceeds 5%"),
            "{}",
            r.message
        );
        let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 200], 0));
        assert_eq!(r.status, Status::Ok);
        // Few probes: observed 10%, but not proven.
        let r = c.packet_loss(&summary(k, ep, p, &[2.0; 18], 2));
        assert_eq!(r.status, Status::Warning);
        assert!(r.message.contains("too few probes"), "{}", r.message);
    }

    #[test]
    fn loss_is_judged_on_the_echo_stream_even_when_a_latency_stream_is_longer() {
        // Measured in the lab at 10% one-way loss: the echoes settle on an error after one batch
        // of 50, while the status stream (TCP retransmits hide loss) took 60 samples.
        let c = Checker::default();
        let ep = "198.18.0.2:2379";
        let sums = vec![
            summary(
                TargetKind::EtcdClient,
                ep,
                ProbeKind::EtcdStatus,
                &[4.0; 60],
                0,
            ),
            summary(
                TargetKind::EtcdClient,
                ep,
                ProbeKind::IcmpEcho,
                &[2.0; 39],
                11,
            ),
        ];
        let loss: Vec<CheckResult> = c
            .evaluate_summaries(&sums)
            .into_iter()
            .filter(|r| r.name == CheckName::PacketLoss)
            .collect();
        assert_eq!(loss.len(), 1, "{loss:?}");
        assert_eq!(loss[0].status, Status::Error, "{loss:?}");
        assert!(loss[0].message.contains("icmp-echo"), "{}", loss[0].message);
    }

    #[test]
    fn summaries_route_to_checks_with_fallback_and_one_loss_result_per_target() {
        let c = Checker::default();
        let sums = vec![
            summary(
                TargetKind::EtcdPeer,
                "198.18.0.2:2380",
                ProbeKind::TcpConnect,
                &vec![2.0; 200],
                0,
            ),
            summary(
                TargetKind::EtcdPeer,
                "198.18.0.2:2380",
                ProbeKind::EtcdPeerProbe,
                &[2.0; 20],
                0,
            ),
            // No identity for this member: TCP connect stands in.
            summary(
                TargetKind::EtcdClient,
                "198.18.0.3:2379",
                ProbeKind::TcpConnect,
                &vec![2.0; 200],
                0,
            ),
            summary(
                TargetKind::EtcdClient,
                "198.18.0.2:2379",
                ProbeKind::EtcdStatus,
                &[2.0; 20],
                0,
            ),
            summary(
                TargetKind::EtcdClient,
                "198.18.0.2:2379",
                ProbeKind::EtcdQuorumRead,
                &[3.0; 20],
                0,
            ),
            summary(
                TargetKind::ApiServer,
                "198.18.0.9:6443",
                ProbeKind::ApiReadyz,
                &[5.0; 20],
                0,
            ),
        ];
        let rs = c.evaluate_summaries(&sums);
        let names: Vec<(CheckName, &str)> =
            rs.iter().map(|r| (r.name, r.target.as_str())).collect();
        assert_eq!(
            names,
            vec![
                (CheckName::EtcdPeerLatency, "198.18.0.2:2380"),
                (CheckName::EtcdClientLatency, "198.18.0.3:2379"),
                (CheckName::EtcdClientLatency, "198.18.0.2:2379"),
                (CheckName::EtcdQuorumReadLatency, "198.18.0.2:2379"),
                (CheckName::ApiServerReady, "198.18.0.9:6443"),
                (CheckName::ApiServerLatency, "198.18.0.9:6443"),
                (CheckName::PacketLoss, "198.18.0.2:2380"),
                (CheckName::PacketLoss, "198.18.0.3:2379"),
                (CheckName::PacketLoss, "198.18.0.2:2379"),
                (CheckName::PacketLoss, "198.18.0.9:6443"),
            ]
        );
        assert!(rs.iter().all(|r| r.status == Status::Ok), "{rs:#?}");
        // The peer check used the peer probe, not the TCP fallback.
        assert!(rs[0].message.contains("etcd-peer-probe"));
        // Loss for the peer target was judged on the long TCP stream.
        assert!(rs[6].message.contains("tcp-connect"));
    }

    #[test]
    fn ignored_errors_and_warnings_become_ignored_and_the_verdict_is_fit() {
        let c = Checker::new(
            Thresholds::default(),
            IgnoreList::parse("EtcdPeerLatency").unwrap(),
        );
        let slow = summary(
            TargetKind::EtcdPeer,
            "198.18.0.3:2380",
            ProbeKind::EtcdPeerProbe,
            &[80.0; 20],
            0,
        );
        let fast = summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &[2.0; 20],
            0,
        );
        let raw = vec![
            c.peer_latency(&slow),
            c.peer_latency(&fast),
            c.etcd_identity(false),
        ];
        assert_eq!(Verdict::from_checks(&raw), Verdict::Unfit);
        let done = c.finish(raw);
        assert_eq!(done[0].status, Status::Ignored);
        assert_eq!(done[1].status, Status::Ok);
        assert_eq!(done[2].status, Status::Warning);
        assert_eq!(Verdict::from_checks(&done), Verdict::Fit);
        assert_eq!(Verdict::from_checks(&done).exit_code(), exit::FIT);
        assert_eq!(Verdict::Unfit.exit_code(), exit::UNFIT);
    }

    fn member(ep: &str, name: &str, id: u64, leader: u64) -> EtcdMemberHealth {
        EtcdMemberHealth {
            endpoint: ep.into(),
            name: Some(name.into()),
            peer_endpoint: Some(ep.replace(":2379", ":2380")),
            member_id: Some(id),
            leader: Some(leader),
            reachable: true,
            raft_term: Some(4),
            db_size: Some(1 << 20),
            ..Default::default()
        }
    }

    #[test]
    fn etcd_health_all_good() {
        let c = Checker::default();
        let ms = vec![
            member("198.18.0.2:2379", "m1", 1, 1),
            member("198.18.0.3:2379", "m2", 2, 1),
        ];
        let rs = c.etcd_health(&ms);
        assert_eq!(rs.len(), 2);
        assert!(rs.iter().all(|r| r.status == Status::Ok));
    }

    #[test]
    fn etcd_health_unreachable_member_is_named() {
        let c = Checker::default();
        let mut dark = member("198.18.0.3:2379", "m2", 2, 0);
        dark.reachable = false;
        dark.name = None;
        dark.failure = Some(ProbeFailure::Timeout(2000));
        let rs = c.etcd_health(&[member("198.18.0.2:2379", "m1", 1, 1), dark]);
        let e: Vec<&CheckResult> = rs.iter().filter(|r| r.status == Status::Error).collect();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].target, "198.18.0.3:2379");
        assert!(e[0].message.starts_with(
            "etcd member 198.18.0.3:2379 is unreachable: timed out after 2000 ms; the join would fail at member add"
        ), "{}", e[0].message);
    }

    #[test]
    fn etcd_health_existing_learner_is_an_error() {
        let c = Checker::default();
        let mut l = member("198.18.0.5:2379", "m4", 4, 1);
        l.is_learner = true;
        let rs = c.etcd_health(&[member("198.18.0.2:2379", "m1", 1, 1), l]);
        let e = rs.iter().find(|r| r.status == Status::Error).unwrap();
        assert!(e.message.starts_with(
            "etcd member m4 (198.18.0.5:2380) is already a learner; etcd allows one learner, so the join would fail with \"etcdserver: too many learner members in cluster\""
        ), "{}", e.message);
    }

    #[test]
    fn etcd_health_no_leader_alarms_and_disagreement() {
        let c = Checker::default();
        let rs = c.etcd_health(&[
            member("198.18.0.2:2379", "m1", 1, 0),
            member("198.18.0.3:2379", "m2", 2, 0),
        ]);
        let cluster = rs.iter().find(|r| r.target == CLUSTER_TARGET).unwrap();
        assert_eq!(cluster.status, Status::Error);
        assert!(cluster.message.contains("no etcd member reports a leader"));

        let mut alarmed = member("198.18.0.2:2379", "m1", 1, 1);
        alarmed.alarms = vec!["NOSPACE".into()];
        let rs = c.etcd_health(&[alarmed, member("198.18.0.3:2379", "m2", 2, 3)]);
        assert!(rs
            .iter()
            .any(|r| r.status == Status::Error && r.message.contains("NOSPACE")));
        let dis = rs.iter().find(|r| r.target == CLUSTER_TARGET).unwrap();
        assert_eq!(dis.status, Status::Warning);
        assert!(dis.message.contains("disagree on the leader (1, 3)"));

        // One member without a leader while the others have one.
        let rs = c.etcd_health(&[
            member("198.18.0.2:2379", "m1", 1, 1),
            member("198.18.0.3:2379", "m2", 2, 0),
        ]);
        let e = rs.iter().find(|r| r.status == Status::Error).unwrap();
        assert_eq!(e.target, "198.18.0.3:2379");
    }

    #[test]
    fn snapshot_transfer_and_clock_skew() {
        let c = Checker::default();
        let t = target(TargetKind::EtcdPeer, "198.18.0.2:2380", None);
        let mib = 1024.0 * 1024.0;
        let r = c.snapshot_transfer(&t, 1 << 30, 8.0 * mib);
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.measured, Some(128.0));
        assert!(r.message.contains("1.0 GiB at the measured 8.0 MiB/s would take 128 s, more than 60 s (50% of kubeadm's 2 min etcd API call budget"), "{}", r.message);
        assert_eq!(
            c.snapshot_transfer(&t, 1 << 30, 25.0 * mib).status,
            Status::Warning
        );
        assert_eq!(
            c.snapshot_transfer(&t, 100 << 20, 100.0 * mib).status,
            Status::Ok
        );
        assert_eq!(c.snapshot_transfer(&t, 1, 0.0).status, Status::Error);

        assert_eq!(c.clock_skew(&t, -45.0).status, Status::Error);
        assert_eq!(c.clock_skew(&t, 2.0).status, Status::Warning);
        assert_eq!(c.clock_skew(&t, 0.2).status, Status::Ok);
    }

    #[test]
    fn api_server_ready() {
        let c = Checker::default();
        let ep = "198.18.0.9:6443";
        let down = summary(TargetKind::ApiServer, ep, ProbeKind::ApiReadyz, &[], 3);
        let r = c.api_server_ready(&down);
        assert_eq!(r.status, Status::Error);
        assert!(
            r.message
                .contains("API server 198.18.0.9:6443 is not ready: timed out after 2000 ms"),
            "{}",
            r.message
        );
        let up = summary(
            TargetKind::ApiServer,
            ep,
            ProbeKind::ApiReadyz,
            &[5.0; 10],
            0,
        );
        assert_eq!(c.api_server_ready(&up).status, Status::Ok);
    }

    #[test]
    fn json_names_and_statuses() {
        let r = CheckResult {
            name: CheckName::ApiServerLatency,
            target: "198.18.0.9:6443".into(),
            status: Status::Ignored,
            message: "m".into(),
            measured: None,
            threshold: Some(1.0),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["name"], "APIServerLatency");
        assert_eq!(v["status"], "ignored");
        assert!(v["measured"].is_null());
        assert_eq!(serde_json::to_value(Verdict::Unfit).unwrap(), "unfit");
    }

    #[test]
    fn durations_print_as_flags_are_written() {
        assert_eq!(fmt_duration(Duration::from_millis(100)), "100 ms");
        assert_eq!(fmt_duration(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(fmt_duration(Duration::from_secs(1)), "1 s");
        assert_eq!(fmt_duration(Duration::from_secs(120)), "2 min");
        assert_eq!(fmt_ms(200.0 / 3.0), "66.7 ms");
    }
}
