//! `EtcdPeerConnectivity`: whether the members that may take the join's `MemberAdd` are
//! connected to the other voters as etcd requires, from each member's own raft transport state
//! (`/metrics`, `etcd_network_active_peers`).
//!
//! etcd's rule (strict reconfiguration, on by default in every version: `--strict-reconfig-check`):
//! `EtcdServer.mayAddMember` (`server/etcdserver/server.go`) refuses a new member, learner or
//! voter, with "etcdserver: unhealthy cluster" unless the member that received the request
//! - is connected to **every** voter for at least 5 s (`isConnectedFullySince`,
//!   `server/etcdserver/util.go`, `HealthInterval`): etcd 3.4, 3.5.0 to 3.5.29, 3.6.0 to 3.6.10;
//! - from 3.5.30 (etcd-io/etcd #21669) and 3.6.11 (#21667): is connected (itself included) to a
//!   quorum of the cluster as it would be with the new member, which counts as not connected
//!   (`isConnectedToQuorumAfterAddingNewMemberSince`): 2 of 2 voters, 3 of 3, 3 of 4, 4 of 5; a
//!   single voter always passes.
//!
//! kubeadm's client sends MemberAdd to one endpoint and retries any error every 500 ms until
//! `timeouts.etcdAPICall` (2 min): when every member refuses, the join waits that long and fails;
//! when some accept, a retry on another endpoint may go through.

use std::collections::BTreeSet;

use super::etcd_health::EtcdMemberHealth;
use super::model::{CheckName, CheckResult, Status};
use super::Checker;
use crate::probe::etcd::MemberInfo;

/// The target of the cluster-wide result.
const TARGET: &str = "etcd-cluster";

/// Whether etcd `version` needs the member taking a MemberAdd to be connected to every voter
/// (before 3.5.30 and 3.6.11), rather than to a quorum of the grown cluster. An unparsable
/// version is taken as the strict rule.
pub(crate) fn needs_every_voter(version: &str) -> bool {
    let mut parts = version
        .trim()
        .trim_start_matches('v')
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor)), Some(Some(patch))) =
        (parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    match (major, minor) {
        (3, ..=4) => true,
        (3, 5) => patch < 30,
        (3, 6) => patch < 11,
        _ => false,
    }
}

/// How many voters (itself included) a member must be connected to for a MemberAdd, under the
/// rule of its version, in a cluster of `voters`.
pub(crate) fn needed(version: &str, voters: usize) -> usize {
    if needs_every_voter(version) {
        voters
    } else if voters <= 1 {
        1
    } else {
        // A quorum of the cluster with the new member: (voters + 1) / 2 + 1.
        let grown = voters + 1;
        grown / 2 + 1
    }
}

/// "voter m2 (...) is" or "voters m2 (...), m3 (...) are".
fn voters_are(names: &[String]) -> String {
    match names {
        [one] => format!("voter {one} is"),
        many => format!("voters {} are", many.join(", ")),
    }
}

impl Checker {
    /// One result for the cluster: an error when every voter whose transport state was read
    /// would refuse the join's MemberAdd, a warning when some would (kubeadm's retries may reach
    /// one that accepts) or when no member's state could be read, ok otherwise. `None` without a
    /// member list or when no member was asked (no etcd identity).
    pub(crate) fn etcd_peer_connectivity(
        &self,
        members: &[EtcdMemberHealth],
        list: Option<&[MemberInfo]>,
    ) -> Option<CheckResult> {
        let list = list?;
        let voters: Vec<&MemberInfo> = list.iter().filter(|m| !m.is_learner).collect();
        let name = |id: u64| -> String {
            list.iter()
                .find(|m| m.id == id)
                .map(|m| {
                    let peer = m.peer_urls.first().map_or("", |u| u.as_str());
                    if m.name.is_empty() {
                        format!("{id:x} ({peer}, not started)")
                    } else {
                        format!("{} ({peer})", m.name)
                    }
                })
                .unwrap_or_else(|| format!("{id:x}"))
        };
        let asked: Vec<&EtcdMemberHealth> = members
            .iter()
            .filter(|m| m.reachable && !m.is_learner && m.metrics.is_some())
            .collect();
        if asked.is_empty() {
            return None;
        }
        let result = |status, message| {
            Some(CheckResult {
                name: CheckName::EtcdPeerConnectivity,
                target: TARGET.to_string(),
                status,
                message,
                measured: None,
                threshold: None,
            })
        };
        // Per member whose page was read: the voters its transport is not connected to.
        let mut refusing = Vec::new();
        let mut accepting = Vec::new();
        let mut unread = Vec::new();
        let mut dark: BTreeSet<u64> = BTreeSet::new();
        for m in &asked {
            let (Some(Ok(metrics)), Some(me)) = (&m.metrics, m.member_id) else {
                if let Some(Err(e)) = &m.metrics {
                    unread.push(format!("{}: {e}", m.client_label()));
                }
                continue;
            };
            let missing: Vec<u64> = voters
                .iter()
                .map(|v| v.id)
                .filter(|&id| id != me && metrics.active(me, id) != Some(true))
                .collect();
            let version = m.version.as_deref().unwrap_or("");
            let need = needed(version, voters.len());
            let connected = voters.len() - missing.len();
            if connected < need {
                dark.extend(&missing);
                refusing.push((m, version, need, connected, missing));
            } else {
                accepting.push(m.client_label());
            }
        }
        if refusing.is_empty() && accepting.is_empty() {
            return result(
                Status::Warning,
                format!(
                    "not measured: no member's /metrics could be read ({}), so whether etcd \
                     would take the new member (\"etcdserver: unhealthy cluster\" while a voter is \
                     not connected) is not known",
                    unread.join("; ")
                ),
            );
        }
        if refusing.is_empty() {
            return result(
                Status::Ok,
                format!(
                    "every voter asked ({}) is connected to the others: etcd takes a new member",
                    accepting.join(", ")
                ),
            );
        }
        let dark: Vec<String> = dark.into_iter().map(name).collect();
        let (_, version, need, connected, _) = &refusing[0];
        let rule = if needs_every_voter(version) {
            format!(
                "etcd {version} takes a new member only on a member connected to every voter for \
                 5 s"
            )
        } else {
            format!(
                "etcd {version} takes a new member only on a member connected, itself included, \
                 to a quorum of the cluster with the new member ({need} of {}, the new member not \
                 yet connected)",
                voters.len() + 1
            )
        };
        let who: Vec<String> = refusing.iter().map(|r| r.0.client_label()).collect();
        if accepting.is_empty() {
            result(
                Status::Error,
                format!(
                    "kubeadm's member add would be refused with \"etcdserver: unhealthy cluster\" \
                     by every member asked ({}): {} not connected to them \
                     (etcd_network_active_peers 0; {connected} of {} connected), and {rule} \
                     (server/etcdserver/util.go). kubeadm retries for its etcd API timeout (2 min) \
                     and fails. Bring the voter back, or remove it (etcdctl member remove) before \
                     the join",
                    who.join(", "),
                    voters_are(&dark),
                    voters.len()
                ),
            )
        } else {
            result(
                Status::Warning,
                format!(
                    "{} would refuse kubeadm's member add with \"etcdserver: unhealthy cluster\" \
                     (not connected to {}; {rule}); {} would take it, and kubeadm's retries may \
                     reach one of them",
                    who.join(", "),
                    dark.join(", "),
                    accepting.join(", ")
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::etcd_metrics::EtcdMetrics;

    #[test]
    fn the_rule_by_version() {
        for v in ["3.4.23", "3.5.1", "3.5.29", "3.6.0", "3.6.10", "garbage"] {
            assert!(needs_every_voter(v), "{v}");
        }
        for v in ["3.5.30", "3.5.33", "3.6.11", "3.6.14", "3.7.0"] {
            assert!(!needs_every_voter(v), "{v}");
        }
        assert_eq!(needed("3.5.30", 1), 1);
        assert_eq!(needed("3.5.30", 2), 2);
        assert_eq!(needed("3.5.30", 3), 3);
        assert_eq!(needed("3.5.30", 4), 3);
        assert_eq!(needed("3.5.30", 5), 4);
        assert_eq!(needed("3.4.23", 5), 5);
    }

    fn member(id: u64, name: &str) -> MemberInfo {
        MemberInfo {
            id,
            name: name.into(),
            client_urls: vec![format!("https://10.0.0.{id}:2379")],
            peer_urls: vec![format!("https://10.0.0.{id}:2380")],
            is_learner: false,
        }
    }

    /// Member `id` of five, version `version`, its transport active to `up`.
    fn health(id: u64, version: &str, up: &[u64]) -> EtcdMemberHealth {
        EtcdMemberHealth {
            endpoint: format!("10.0.0.{id}:2379"),
            name: Some(format!("m{id}")),
            member_id: Some(id),
            reachable: true,
            version: Some(version.into()),
            metrics: Some(Ok(EtcdMetrics {
                peers: (1..=5)
                    .filter(|&r| r != id)
                    .map(|r| (id, r, up.contains(&r)))
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    /// Five voters, m5 down: every older etcd refuses; 3.5.30 and later take the member (4 of 5
    /// connected meets quorum(6) = 4); with m4 down too, 3.5.30 refuses (3 of 5).
    #[test]
    fn one_voter_down_in_five_by_version() {
        let list: Vec<MemberInfo> = (1..=5).map(|i| member(i, &format!("m{i}"))).collect();
        let c = Checker::default();
        let up = |v: &str, dark: &[u64]| -> Vec<EtcdMemberHealth> {
            (1..=5)
                .filter(|i| !dark.contains(i))
                .map(|i| {
                    let peers: Vec<u64> = (1..=5).filter(|r| !dark.contains(r)).collect();
                    health(i, v, &peers)
                })
                .collect()
        };
        let r = c
            .etcd_peer_connectivity(&up("3.4.23", &[5]), Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert!(
            r.message.contains("\"etcdserver: unhealthy cluster\"")
                && r.message
                    .contains("voter m5 (https://10.0.0.5:2380) is not connected")
                && r.message.contains("4 of 5 connected")
                && r.message.contains("connected to every voter for 5 s"),
            "{}",
            r.message
        );
        let r = c
            .etcd_peer_connectivity(&up("3.5.30", &[5]), Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message);
        let r = c
            .etcd_peer_connectivity(&up("3.5.30", &[4, 5]), Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert!(
            r.message
                .contains("to a quorum of the cluster with the new member (4 of 6")
                && r.message.contains("voters m4 (https://10.0.0.4:2380), m5 (https://10.0.0.5:2380) are not connected"),
            "{}",
            r.message
        );
    }

    /// etcd 3.5.30, five voters, m5 cut off from the others (but answering the joiner): m5
    /// would refuse, m1 to m4 take the member (4 of 5 connected): a warning naming m5. Under the
    /// older rule every member would refuse (none is connected to every voter).
    #[test]
    fn one_member_alone_refuses_and_the_others_accept() {
        let list: Vec<MemberInfo> = (1..=5).map(|i| member(i, &format!("m{i}"))).collect();
        let mut hs: Vec<EtcdMemberHealth> = (1..=4)
            .map(|i| health(i, "3.5.30", &[1, 2, 3, 4]))
            .chain([health(5, "3.5.30", &[])])
            .collect();
        let r = Checker::default()
            .etcd_peer_connectivity(&hs, Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Warning, "{}", r.message);
        assert!(
            r.message.starts_with("m5 (10.0.0.5:2379) would refuse"),
            "{}",
            r.message
        );
        for h in &mut hs {
            h.version = Some("3.5.29".into());
        }
        let r = Checker::default()
            .etcd_peer_connectivity(&hs, Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Error, "{}", r.message);
        // Nothing could be read: a finding, not a pass.
        for h in &mut hs {
            h.metrics = Some(Err(crate::probe::http::HttpFailure::Protocol(
                "/metrics answered HTTP 403".into(),
            )));
        }
        let r = Checker::default()
            .etcd_peer_connectivity(&hs, Some(&list))
            .unwrap();
        assert_eq!(r.status, Status::Warning);
        assert!(r.message.starts_with("not measured"), "{}", r.message);
    }
}
