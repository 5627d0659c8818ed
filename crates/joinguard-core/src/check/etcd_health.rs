//! `EtcdHealth`: what the members say about themselves and the cluster (alarms, learners,
//! leaders, errors), as [`EtcdMemberHealth`] facts the etcd probe filled.

use std::collections::BTreeSet;

use serde::Serialize;

use super::model::{CheckName, CheckResult, Status, CLUSTER_TARGET};
use super::wording::{fmt_bytes, fmt_ids};
use super::Checker;
use crate::probe::ProbeFailure;

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
    /// The part of the backend in use (Status `dbSizeInUse`); the rest a defragmentation frees.
    pub db_size_in_use: Option<u64>,
    /// The quota etcd 3.6 reports in Status (`dbSizeQuota`); `None` before 3.6.
    pub db_size_quota: Option<u64>,
    /// The cluster the member answers for (the response header's `cluster_id`).
    pub cluster_id: Option<u64>,
    /// The member list as this member sees it (`MemberList`, serializable).
    #[serde(skip)]
    pub member_list: Option<Vec<crate::probe::etcd::MemberInfo>>,
    /// The server's version, e.g. "3.5.1" (Status).
    pub version: Option<String>,
    /// The raft index this member has applied (Status), to show a learner's catch-up.
    pub applied_index: Option<u64>,
    /// The raft index this member knows committed (Status `raftIndex`).
    pub raft_index: Option<u64>,
    /// The time to connect (TCP, TLS, HTTP/2) and read the first Status: kubeadm's blocking dial
    /// and sync, which it allows 2 s (`EtcdDialTime`).
    pub dial: Option<std::time::Duration>,
    /// How many dials `dial` is the fastest of (a slow first dial is repeated).
    pub dials: u32,
    /// When that connection did not complete in time: how long a plain TCP connect to the same
    /// port took (the port answers; the etcd connection over it is too slow).
    pub dial_tcp: Option<std::time::Duration>,
    /// The member's `/metrics`: its raft transport's peers and its quota (`EtcdPeerConnectivity`);
    /// why not, when it could not be read. `None` when it was not asked.
    #[serde(skip)]
    pub metrics:
        Option<Result<crate::probe::etcd_metrics::EtcdMetrics, crate::probe::http::HttpFailure>>,
}

impl EtcdMemberHealth {
    /// "m4 (198.18.0.5:2380)", or the client endpoint when the name is unknown.
    pub(super) fn label(&self) -> String {
        match (&self.name, &self.peer_endpoint) {
            (Some(n), Some(p)) => format!("{n} ({p})"),
            (Some(n), None) => format!("{n} ({})", self.endpoint),
            (None, _) => self.endpoint.clone(),
        }
    }

    /// The member by its name and the client URL that was dialled: `m2 (198.18.0.3:2379)`.
    pub(super) fn client_label(&self) -> String {
        match &self.name {
            Some(n) => format!("{n} ({})", self.endpoint),
            None => self.endpoint.clone(),
        }
    }

    pub(super) fn leader(&self) -> Option<u64> {
        self.leader.filter(|&l| l != 0)
    }
}

impl Checker {
    /// `EtcdHealth`: what the members say about the cluster. One result per problem, or one ok
    /// result per member without problems; cluster-wide results have target [`CLUSTER_TARGET`].
    pub(crate) fn etcd_health(&self, members: &[EtcdMemberHealth]) -> Vec<CheckResult> {
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
            if !m.reachable && m.dial_tcp.is_some() {
                // The port answered and the etcd connection was too slow: EtcdDialTime says so.
                continue;
            }
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
                // Its state, as etcd tells it: how far it has applied the leader's log.
                let leader_index = reachable
                    .iter()
                    .find(|o| o.member_id.is_some() && o.member_id == m.leader())
                    .and_then(|l| l.applied_index);
                let state = match (m.applied_index, leader_index) {
                    (Some(a), Some(l)) if l > 0 => format!(
                        " (started; it has applied {a} of the leader's {l} log entries, {:.0}%{})",
                        (a as f64 / l as f64 * 100.0).min(100.0),
                        if a as f64 >= 0.9 * l as f64 {
                            ": in sync, promotable"
                        } else {
                            ": still catching up"
                        }
                    ),
                    _ => " (started)".to_string(),
                };
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} is already a learner{state}; etcd allows one learner, \
                         so the join would fail with \"etcdserver: too many learner members in \
                         cluster\". Wait for it to be promoted (joinguard etcd promote on its \
                         node), or remove it if its join failed (joinguard etcd cleanup)",
                        m.label()
                    ),
                ));
            }
            if !m.alarms.is_empty() {
                out.push(result(
                    &m.endpoint,
                    Status::Error,
                    format!(
                        "etcd member {} has active alarms: {}; while one is raised etcd refuses \
                         the API server's writes (NOSPACE: puts, transactions and leases; \
                         CORRUPT: every key and lease request), so the join's API writes fail \
                         (member add itself is not refused: server/etcdserver/apply.go). Fix \
                         the cause, then `etcdctl alarm disarm`",
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
}

/// The share of the quota at which `EtcdDatabaseSize` warns: etcd's own alert
/// `etcdDatabaseQuotaLowSpace` (etcd-io/etcd `contrib/mixin/alerts/alerts.libsonnet`, 3.4 to
/// 3.6) fires when `etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes` passes
/// 95%.
pub(crate) const QUOTA_LOW_SPACE: f64 = 0.95;

impl Checker {
    /// `EtcdDatabaseSize`: each member's backend (Status `dbSize`, what etcd's quota counts)
    /// against its quota (`etcd_server_quota_backend_bytes` from its `/metrics`). A warning from
    /// [`QUOTA_LOW_SPACE`]: once a write would pass the quota, etcd raises NOSPACE and refuses
    /// the API server's writes, the join's among them. Members whose quota was not read get no
    /// result (EtcdPeerConnectivity says the page could not be read).
    pub(crate) fn etcd_database_size(&self, members: &[EtcdMemberHealth]) -> Vec<CheckResult> {
        members
            .iter()
            .filter(|m| m.reachable)
            .filter_map(|m| {
                // etcd 3.6 says it in Status; earlier versions only on /metrics.
                let quota = match (m.db_size_quota, &m.metrics) {
                    (Some(q), _) => q,
                    (None, Some(Ok(p))) => p.quota_bytes.filter(|&q| q > 0)?,
                    _ => return None,
                };
                let size = m.db_size?;
                let share = size as f64 / quota as f64;
                let in_use = m
                    .db_size_in_use
                    .filter(|&u| u < size)
                    .map(|u| {
                        format!(
                            ", {} in use (a defragmentation would free {})",
                            fmt_bytes(u as f64),
                            fmt_bytes((size - u) as f64)
                        )
                    })
                    .unwrap_or_default();
                let figure = format!(
                    "{} of its {} quota ({:.1}%{in_use})",
                    fmt_bytes(size as f64),
                    fmt_bytes(quota as f64),
                    share * 100.0
                );
                let (status, message) = if share >= QUOTA_LOW_SPACE {
                    (
                        Status::Warning,
                        format!(
                            "etcd member {}'s database is {figure}, past the {:.0}% at which \
                             etcd's own alert etcdDatabaseQuotaLowSpace fires: a write that \
                             passes the quota raises NOSPACE, and etcd then refuses the API \
                             server's writes, the join's among them. Compact and defragment \
                             (etcdctl compact, etcdctl defrag), or raise --quota-backend-bytes",
                            m.label(),
                            QUOTA_LOW_SPACE * 100.0
                        ),
                    )
                } else {
                    (
                        Status::Ok,
                        format!("etcd member {}'s database is {figure}", m.label()),
                    )
                };
                Some(CheckResult {
                    name: CheckName::EtcdDatabaseSize,
                    target: m.endpoint.clone(),
                    status,
                    message,
                    measured: Some((share * 1000.0).round() / 10.0),
                    threshold: Some(QUOTA_LOW_SPACE * 100.0),
                })
            })
            .collect()
    }
}

/// etcd's `DefaultSnapshotCatchUpEntries` (`server/etcdserver/server.go`, 5000 in 3.4, 3.5 and
/// 3.6): the entries a leader keeps after a snapshot for a slow follower. A member further
/// behind than that is caught up from a whole snapshot, and until it is it counts for nothing.
/// The same 5000 is `maxGapBetweenApplyAndCommitIndex` (`v3_server.go`): a member that has
/// that many committed entries left to apply answers every proposal with "etcdserver: too many
/// requests".
pub(crate) const CATCH_UP_ENTRIES: u64 = 5000;

impl Checker {
    /// `EtcdMemberLag`: per voter, how far its raft log is behind the leader's (the leader's
    /// Status `raftIndex` minus its own) and how much it has committed but not applied
    /// (`raftIndex - raftAppliedIndex`). A warning past [`CATCH_UP_ENTRIES`] on either; ok with
    /// the figures otherwise, so a lag shows while it lasts. Nothing without a leader's answer.
    pub(crate) fn etcd_member_lag(&self, members: &[EtcdMemberHealth]) -> Vec<CheckResult> {
        let answered: Vec<&EtcdMemberHealth> = members
            .iter()
            .filter(|m| m.reachable && m.raft_index.is_some())
            .collect();
        let Some(leader) = answered
            .iter()
            .find(|m| m.member_id.is_some() && m.member_id == m.leader())
        else {
            return Vec::new();
        };
        let top = leader.raft_index.unwrap_or(0);
        answered
            .iter()
            .filter(|m| !m.is_learner)
            .map(|m| {
                let index = m.raft_index.unwrap_or(0);
                let behind = top.saturating_sub(index);
                let to_apply = index.saturating_sub(m.applied_index.unwrap_or(index));
                let figure = format!(
                    "{behind} entries behind the leader's log ({top}), {to_apply} committed \
                     entries not yet applied"
                );
                let (status, message) = if behind > CATCH_UP_ENTRIES {
                    (
                        Status::Warning,
                        format!(
                            "etcd member {} is {figure}: past the {CATCH_UP_ENTRIES} entries a \
                             leader keeps for a slow follower when it compacts its log \
                             (DefaultSnapshotCatchUpEntries). Until it has caught up it does not \
                             count toward committing new entries, so joined now, the grown \
                             cluster has one member fewer to lose; once the leader compacts, it \
                             must send it a whole snapshot. Wait until it has caught up (etcdctl \
                             endpoint status: RAFT INDEX), or find why it fell behind (its disk, \
                             its path to the leader)",
                            m.label()
                        ),
                    )
                } else if to_apply >= CATCH_UP_ENTRIES {
                    (
                        Status::Warning,
                        format!(
                            "etcd member {} is {figure}: at {CATCH_UP_ENTRIES} it answers every \
                             proposal with \"etcdserver: too many requests\" \
                             (maxGapBetweenApplyAndCommitIndex), so the API server writing \
                             through it fails the join's writes until it has applied them. Look \
                             at its disk (etcd_disk_backend_commit_duration_seconds)",
                            m.label()
                        ),
                    )
                } else {
                    (Status::Ok, format!("etcd member {} is {figure}", m.label()))
                };
                CheckResult {
                    name: CheckName::EtcdMemberLag,
                    target: m.endpoint.clone(),
                    status,
                    message,
                    measured: Some(behind.max(to_apply) as f64),
                    threshold: Some(CATCH_UP_ENTRIES as f64),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod member_lag_tests {
    use super::*;

    fn member(id: u64, index: u64, applied: u64) -> EtcdMemberHealth {
        EtcdMemberHealth {
            endpoint: format!("10.0.0.{id}:2379"),
            name: Some(format!("m{id}")),
            member_id: Some(id),
            leader: Some(1),
            reachable: true,
            raft_index: Some(index),
            applied_index: Some(applied),
            ..Default::default()
        }
    }

    #[test]
    fn a_member_behind_the_leader_or_behind_on_applying() {
        let c = Checker::default();
        let r = c.etcd_member_lag(&[
            member(1, 20_000, 20_000),
            member(2, 12_000, 12_000),
            member(3, 19_990, 14_000),
        ]);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].status, Status::Ok, "{}", r[0].message);
        assert_eq!(r[1].status, Status::Warning, "{}", r[1].message);
        assert!(
            r[1].message.starts_with(
                "etcd member m2 (10.0.0.2:2379) is 8000 entries behind the leader's log \
                 (20000), 0 committed entries not yet applied: past the 5000"
            ),
            "{}",
            r[1].message
        );
        assert_eq!(r[2].status, Status::Warning, "{}", r[2].message);
        assert!(
            r[2].message.contains("too many requests"),
            "{}",
            r[2].message
        );
        // No leader's answer: nothing to compare with.
        assert!(c.etcd_member_lag(&[member(2, 12_000, 12_000)]).is_empty());
    }
}

#[cfg(test)]
mod database_size_tests {
    use super::*;
    use crate::probe::etcd_metrics::EtcdMetrics;

    fn member(size: u64, in_use: u64, quota: Option<u64>) -> EtcdMemberHealth {
        EtcdMemberHealth {
            endpoint: "10.0.0.2:2379".into(),
            name: Some("m1".into()),
            reachable: true,
            db_size: Some(size),
            db_size_in_use: Some(in_use),
            metrics: Some(Ok(EtcdMetrics {
                quota_bytes: quota,
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    /// etcd's own 95% line: 96% of a 16 MiB quota warns with the figures and the fix; 90% is
    /// ok with the figures; an unknown quota gives no result.
    #[test]
    fn the_database_against_the_quota() {
        const MIB: u64 = 1024 * 1024;
        let c = Checker::default();
        let r = c.etcd_database_size(&[member(16 * MIB * 96 / 100, 12 * MIB, Some(16 * MIB))]);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].status, Status::Warning, "{}", r[0].message);
        assert!(
            r[0].message.starts_with(
                "etcd member m1 (10.0.0.2:2379)'s database is 15.4 MiB of its 16.0 MiB quota \
                 (96.0%, 12.0 MiB in use (a defragmentation would free 3.4 MiB)), past the 95%"
            ),
            "{}",
            r[0].message
        );
        let r =
            c.etcd_database_size(&[member(16 * MIB * 9 / 10, 16 * MIB * 9 / 10, Some(16 * MIB))]);
        assert_eq!(r[0].status, Status::Ok, "{}", r[0].message);
        assert_eq!(r[0].measured, Some(90.0));
        assert!(c.etcd_database_size(&[member(MIB, MIB, None)]).is_empty());
        // etcd 3.6 reports its quota in Status: no /metrics needed.
        let mut m = member(16 * MIB * 96 / 100, 12 * MIB, None);
        m.metrics = None;
        m.db_size_quota = Some(16 * MIB);
        assert_eq!(c.etcd_database_size(&[m])[0].status, Status::Warning);
    }
}
