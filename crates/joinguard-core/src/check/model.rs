//! The checks' shared model: check names (and [`CheckNameError`]), the ignore list, statuses, one
//! check's result and the verdict. Data only: it must not judge figures or word messages.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::failure::Ending;

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
    /// The API endpoint answered on its port (`reach`).
    ApiServerReachable,
    /// An etcd member's client URL answered.
    EtcdClientReachable,
    /// An etcd member's peer URL answered.
    EtcdPeerReachable,
    /// A member was added and never started (`cluster`).
    EtcdUnstartedMember,
    /// A member already holds this node's name or peer URL.
    EtcdMemberRegistered,
    /// Members run different etcd minor versions.
    EtcdVersionSkew,
    /// The time to connect to a member and read its Status, against kubeadm's 2 s etcd dial.
    EtcdDialTime,
    /// Whether full-size packets cross to a host (`pmtu`).
    PathMtu,
    /// Whether this node's advertise address is of the family the etcd members advertise.
    EtcdAddressFamily,
    /// Whether both families of a dual-stack API endpoint name answer (`family`).
    ApiServerAddressFamily,
    /// A call of the join that goes through an egress proxy, and what the proxy answered
    /// (`proxy`; kubeadm's `HTTPProxy`).
    HttpProxy,
    /// The first address of the cluster's service or pod subnet goes through an egress proxy
    /// (kubeadm's `HTTPProxyCIDR`).
    HttpProxyCidr,
    /// Whether the members that may take the join's MemberAdd are connected to the voters as
    /// etcd requires (`connectivity`).
    EtcdPeerConnectivity,
    /// Each member's database against its quota (`etcd_health`).
    EtcdDatabaseSize,
    /// How far each voter's raft log and apply are behind (`etcd_health`).
    EtcdMemberLag,
    /// Whether the members answer for one cluster and list the same members (`agreement`).
    EtcdMemberAgreement,
}

impl CheckName {
    pub const ALL: [CheckName; 26] = [
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
        CheckName::ApiServerReachable,
        CheckName::EtcdClientReachable,
        CheckName::EtcdPeerReachable,
        CheckName::EtcdUnstartedMember,
        CheckName::EtcdMemberRegistered,
        CheckName::EtcdVersionSkew,
        CheckName::EtcdDialTime,
        CheckName::PathMtu,
        CheckName::EtcdAddressFamily,
        CheckName::ApiServerAddressFamily,
        CheckName::HttpProxy,
        CheckName::HttpProxyCidr,
        CheckName::EtcdPeerConnectivity,
        CheckName::EtcdDatabaseSize,
        CheckName::EtcdMemberLag,
        CheckName::EtcdMemberAgreement,
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
            CheckName::ApiServerReachable => "APIServerReachable",
            CheckName::EtcdClientReachable => "EtcdClientReachable",
            CheckName::EtcdPeerReachable => "EtcdPeerReachable",
            CheckName::EtcdUnstartedMember => "EtcdUnstartedMember",
            CheckName::EtcdMemberRegistered => "EtcdMemberRegistered",
            CheckName::EtcdVersionSkew => "EtcdVersionSkew",
            CheckName::EtcdDialTime => "EtcdDialTime",
            CheckName::PathMtu => "PathMTU",
            CheckName::EtcdAddressFamily => "EtcdAddressFamily",
            CheckName::ApiServerAddressFamily => "APIServerAddressFamily",
            CheckName::HttpProxy => "HTTPProxy",
            CheckName::HttpProxyCidr => "HTTPProxyCIDR",
            CheckName::EtcdPeerConnectivity => "EtcdPeerConnectivity",
            CheckName::EtcdDatabaseSize => "EtcdDatabaseSize",
            CheckName::EtcdMemberLag => "EtcdMemberLag",
            CheckName::EtcdMemberAgreement => "EtcdMemberAgreement",
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
    /// kubeadm's own message: `all` is refused in a configuration file.
    #[error(
        "ignorePreflightErrors: Invalid value: \"all\": 'all' cannot be used in configuration \
         file"
    )]
    AllInConfig,
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
    /// Names neither joinguard nor the kubeadm list it carries knows, as given: kubeadm accepts
    /// any name (checks come and go between versions), and so does joinguard, with a note.
    unknown: BTreeSet<String>,
}

impl IgnoreList {
    /// Parses one comma-separated list (`--ignore-preflight-errors`).
    pub fn parse(s: &str) -> Result<IgnoreList, CheckNameError> {
        let entries: Vec<String> = s.split(',').map(str::to_string).collect();
        IgnoreList::from_sources(&entries, &[])
    }

    /// Merges the flag's entries and the config file's `nodeRegistration.ignorePreflightErrors`
    /// as kubeadm's `ValidateIgnorePreflightErrors` does
    /// (`cmd/kubeadm/app/apis/kubeadm/validation/validation.go`): one lower-cased set, `all`
    /// alone or not at all, and never in the file. Entries may themselves hold commas (pflag
    /// splits the flag, not the file). Any name is taken, as kubeadm takes it: joinguard's check
    /// names ignore its checks, kubeadm's ([`crate::kubeadm::checks`]) and unknown ones are
    /// noted.
    pub(crate) fn from_sources(
        flag: &[String],
        config: &[String],
    ) -> Result<IgnoreList, CheckNameError> {
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
                list.unknown.insert(entry.to_string());
            }
        }
        if config
            .iter()
            .flat_map(|e| e.split(','))
            .any(|e| e.trim().eq_ignore_ascii_case("all"))
        {
            return Err(CheckNameError::AllInConfig);
        }
        if list.all && set.len() > 1 {
            let set: Vec<String> = set.into_iter().collect();
            return Err(CheckNameError::AllWithOthers { set: set.join(",") });
        }
        Ok(list)
    }

    /// `all`: every joinguard error becomes a warning.
    pub(crate) fn is_all(&self) -> bool {
        self.all
    }

    /// kubeadm's check names in the list, in kubeadm's spelling.
    pub(crate) fn kubeadm_checks(&self) -> impl Iterator<Item = &str> {
        self.kubeadm.iter().map(String::as_str)
    }

    /// The names neither joinguard nor its kubeadm list knows, as given.
    pub(crate) fn unknown_names(&self) -> impl Iterator<Item = &str> {
        self.unknown.iter().map(String::as_str)
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
    pub(crate) fn from_checks(checks: &[CheckResult]) -> Verdict {
        if checks.iter().any(|c| c.status == Status::Error) {
            Verdict::Unfit
        } else {
            Verdict::Fit
        }
    }

    pub fn ending(self) -> Ending {
        match self {
            Verdict::Fit => Ending::Done,
            Verdict::Unfit => Ending::Failed,
        }
    }
}
