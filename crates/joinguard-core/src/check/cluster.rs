//! `EtcdUnstartedMember`, `EtcdMemberRegistered`, `EtcdVersionSkew`: the cluster states that
//! break a join, read from etcd's own MemberList and Status answers.
//!
//! An unstarted member (added, never started: etcd fills in the name and client URLs when a
//! member first publishes itself) is what a failed join leaves behind (Cluster API #13221,
//! #13667, #14197; canonical/k8s-snap #2813). A member that already holds this node's name or
//! peer URL is what kubeadm meets when a node is re-created; what kubeadm does then is taken from
//! its `addMember` in `cmd/kubeadm/app/util/etcd/etcd.go` (kubernetes/kubernetes after PR
//! #127491; read at the upstream snapshot Nordix/kubernetes cd70e54c566279d2a94aa8e86ac4e6300920d4b8,
//! lines 474-535): before adding, kubeadm lists the members and, when one has `PeerURLs[0]` equal
//! to this node's peer URL, skips the add and reuses that member under this node's name; it
//! never compares names. Judgement only: no I/O.

use std::collections::BTreeMap;

use super::member::{MemberState, NodeRef, Quorum};
use super::model::{CheckName, CheckResult, Status};
use super::Checker;
use crate::probe::etcd::MemberInfo;

/// Added and never started: no name and no client URLs, learner or not.
fn unstarted(m: &MemberInfo) -> bool {
    m.name.is_empty() && m.client_urls.is_empty()
}

/// `host:port` of a member's first peer URL, the target its results are filed under.
fn peer_target(m: &MemberInfo) -> String {
    m.peer_urls
        .first()
        .map(|u| {
            u.trim_start_matches("https://")
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .unwrap_or_else(|| format!("member {:x}", m.id))
}

fn result(name: CheckName, target: String, status: Status, message: String) -> CheckResult {
    CheckResult {
        name,
        target,
        status,
        message,
        measured: None,
        threshold: None,
    }
}

/// "4 voters, quorum 3, 1 not started: one more failure loses quorum".
fn quorum_sentence(members: &[MemberInfo]) -> String {
    let voters = members.iter().filter(|m| !m.is_learner).count();
    let dead = members
        .iter()
        .filter(|m| !m.is_learner && unstarted(m))
        .count();
    let q = Quorum::majority(voters);
    let spare = voters as isize - dead as isize - q as isize;
    let outlook = match spare {
        s if s < 0 => "quorum is already lost".to_string(),
        0 => "one more failure loses quorum".to_string(),
        s => format!("{} more failures lose quorum", s + 1),
    };
    format!("{voters} voters, quorum {q}, {dead} not started: {outlook}")
}

impl Checker {
    /// The member list judged for this join: unstarted members, this node's own registration.
    /// `node` is this node's name and peer URL as kubeadm would register them.
    pub(crate) fn cluster_state(&self, members: &[MemberInfo], node: &NodeRef) -> Vec<CheckResult> {
        let mut out = Vec::new();
        let by_url = |m: &MemberInfo| {
            matches!(&node.peer_url, Some(u) if m.peer_urls.first().is_some_and(|p| {
                p.trim_end_matches('/').eq_ignore_ascii_case(u)
            }))
        };
        for m in members {
            let target = peer_target(m);
            let id = format!("{:x}", m.id);
            let peer = m.peer_urls.first().cloned().unwrap_or_default();
            if by_url(m) {
                out.push(if unstarted(m) {
                    result(
                        CheckName::EtcdMemberRegistered,
                        target,
                        Status::Warning,
                        format!(
                            "etcd {} {id} already holds this node's peer URL {peer} and never \
                             started: kubeadm join reuses it instead of adding a member (its \
                             addMember skips the add when a member has this peer URL; kubernetes \
                             PR #127491, in 1.28.15, 1.29.10, 1.30.6, 1.31.2 and later), and this \
                             node's etcd starts as that member. Older kubeadm patch releases \
                             retry the add until timeouts.etcdAPICall and fail with \
                             \"etcdserver: Peer URLs already exists\"; with those, remove it \
                             first: `joinguard etcd cleanup --member-id {id}`",
                            MemberState::of(m)
                        ),
                    )
                } else {
                    result(
                        CheckName::EtcdMemberRegistered,
                        target,
                        Status::Error,
                        format!(
                            "etcd member {id} ({}) is registered with this node's peer URL {peer} \
                             and has started before: kubeadm join does not add a member then, it \
                             reuses this one (addMember: \"already exists. Skipping etcd member \
                             addition\"), and this node's etcd, started as that member with an \
                             empty data directory, cannot follow the log the cluster \
                             remembers for it (etcd stops with \"tocommit(N) is out of range \
                             [lastIndex(0)]\"). If the node it belonged to is gone, remove the \
                             member first (etcdctl member remove {id}; `joinguard etcd cleanup` \
                             never removes a started voter), then join",
                            m.name
                        ),
                    )
                });
                continue;
            }
            if matches!(&node.name, Some(n) if !m.name.is_empty() && m.name == *n) {
                out.push(result(
                    CheckName::EtcdMemberRegistered,
                    target,
                    Status::Error,
                    format!(
                        "etcd member {id} is named {:?}, this node's name, with another peer URL \
                         ({peer}): kubeadm join does not compare names, so it adds a new \
                         learner for {} beside it, and the new etcd's --initial-cluster lists \
                         {:?} twice, which etcd does not accept; the join fails at promotion and \
                         leaves the new learner behind. If it is this node's old registration, \
                         remove it first (etcdctl member remove {id}); if another node has that \
                         name, give this node its own ({})",
                        m.name,
                        node.peer_url.as_deref().unwrap_or("this node's peer URL"),
                        m.name,
                        self.input(crate::input::Input::NodeName, "another node name"),
                    ),
                ));
                continue;
            }
            if unstarted(m) {
                let why = if m.is_learner {
                    "a learner does not count toward quorum, but etcd allows one learner at a \
                     time (--experimental-max-learners, default 1), so kubeadm's learner add \
                     fails with \"etcdserver: too many learner members in cluster\""
                        .to_string()
                } else {
                    format!(
                        "it counts toward quorum and never answers: {}; kubeadm's member add \
                         may be refused (\"etcdserver: unhealthy cluster\")",
                        quorum_sentence(members)
                    )
                };
                out.push(result(
                    CheckName::EtcdUnstartedMember,
                    target,
                    Status::Error,
                    format!(
                        "etcd {} {id} ({peer}) was added but never started (no name, no client \
                         URLs), as a failed join leaves it: {why}. Remove it: `joinguard etcd \
                         cleanup --member-id {id}` (with the same etcd flags), or `etcdctl member \
                         remove {id}`",
                        if m.is_learner { "learner" } else { "member" }
                    ),
                ));
            }
        }
        out
    }

    /// `EtcdVersionSkew`: the members' versions (`host:port`, "3.5.1") at more than one minor
    /// version. A warning: a rolling upgrade is in progress or stalled.
    pub(crate) fn version_skew(&self, versions: &[(String, String)]) -> Option<CheckResult> {
        let mut minors: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for (ep, v) in versions {
            let minor: Vec<&str> = v.split('.').take(2).collect();
            minors.entry(minor.join(".")).or_default().push(ep.as_str());
        }
        if minors.len() < 2 {
            return None;
        }
        let listed: Vec<String> = minors
            .iter()
            .map(|(minor, eps)| format!("{minor} on {}", eps.join(", ")))
            .collect();
        Some(result(
            CheckName::EtcdVersionSkew,
            super::CLUSTER_TARGET.to_string(),
            Status::Warning,
            format!(
                "etcd members run different minor versions ({}): an upgrade is in progress or \
                 stalled. The joining member runs the version in kubeadm's etcd manifest; \
                 finish the upgrade before adding members (etcd supports mixed versions only \
                 for the span of a rolling upgrade)",
                listed.join("; ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Thresholds;

    fn m(id: u64, name: &str, ip: &str, started: bool, learner: bool) -> MemberInfo {
        MemberInfo {
            id,
            name: if started { name.into() } else { String::new() },
            client_urls: if started {
                vec![format!("https://{ip}:2379")]
            } else {
                vec![]
            },
            peer_urls: vec![format!("https://{ip}:2380")],
            is_learner: learner,
        }
    }

    fn three_and(extra: MemberInfo) -> Vec<MemberInfo> {
        vec![
            m(0xa1, "cp1", "10.0.0.1", true, false),
            m(0xa2, "cp2", "10.0.0.2", true, false),
            m(0xa3, "cp3", "10.0.0.3", true, false),
            extra,
        ]
    }

    #[test]
    fn an_unstarted_voter_is_an_error_with_the_quorum_arithmetic_and_the_removal() {
        let members = three_and(m(0xbeef, "", "10.0.0.9", false, false));
        let c = Checker::new(Thresholds::default(), Default::default());
        let r = c.cluster_state(&members, &NodeRef::new(Some("cp4"), None));
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].name, CheckName::EtcdUnstartedMember);
        assert_eq!(r[0].status, Status::Error);
        assert_eq!(r[0].target, "10.0.0.9:2380");
        assert!(
            r[0].message
                .contains("4 voters, quorum 3, 1 not started: one more failure loses quorum"),
            "{}",
            r[0].message
        );
        assert!(
            r[0].message
                .contains("joinguard etcd cleanup --member-id beef"),
            "{}",
            r[0].message
        );
    }

    #[test]
    fn an_unstarted_learner_blocks_the_learner_add() {
        let members = three_and(m(0xbeef, "", "10.0.0.9", false, true));
        let r = Checker::default().cluster_state(&members, &NodeRef::default());
        assert_eq!(r.len(), 1);
        assert!(
            r[0].message.contains("too many learner members"),
            "{}",
            r[0].message
        );
    }

    #[test]
    fn this_nodes_registration_by_peer_url_or_by_name() {
        let node = NodeRef::new(Some("cp4"), Some("10.0.0.4".parse().unwrap()));
        // Unstarted with this node's peer URL: kubeadm reuses it; a warning, not an unstarted error.
        let r =
            Checker::default().cluster_state(&three_and(m(7, "", "10.0.0.4", false, true)), &node);
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(
            (r[0].name, r[0].status),
            (CheckName::EtcdMemberRegistered, Status::Warning)
        );
        assert!(r[0].message.contains("reuses it"), "{}", r[0].message);
        // Started with this node's peer URL: kubeadm reuses a member whose log is gone.
        let r = Checker::default()
            .cluster_state(&three_and(m(7, "old", "10.0.0.4", true, false)), &node);
        assert_eq!(
            (r[0].name, r[0].status),
            (CheckName::EtcdMemberRegistered, Status::Error)
        );
        assert!(
            r[0].message.contains("etcdctl member remove 7"),
            "{}",
            r[0].message
        );
        // This node's name at another address.
        let r = Checker::default()
            .cluster_state(&three_and(m(7, "cp4", "10.0.0.8", true, false)), &node);
        assert_eq!(
            (r[0].name, r[0].status),
            (CheckName::EtcdMemberRegistered, Status::Error)
        );
        assert!(
            r[0].message
                .contains("--initial-cluster lists \"cp4\" twice"),
            "{}",
            r[0].message
        );
        // The input to change, as each caller spells it: the CLI's flag, the monitor's key.
        let members = three_and(m(7, "cp4", "10.0.0.8", true, false));
        let cli = Checker::default()
            .spelled(crate::input::tests::FLAGS)
            .cluster_state(&members, &node);
        assert!(
            cli[0]
                .message
                .ends_with("give this node its own (--node-name)"),
            "{}",
            cli[0].message
        );
        // Neither: nothing to say.
        let r = Checker::default()
            .cluster_state(&three_and(m(7, "cp5", "10.0.0.5", true, false)), &node);
        assert!(r.is_empty(), "{r:#?}");
    }

    #[test]
    fn minor_versions_apart_warn_naming_them() {
        let c = Checker::default();
        let v = |e: &str, v: &str| (e.to_string(), v.to_string());
        assert!(c
            .version_skew(&[v("a:2379", "3.5.1"), v("b:2379", "3.5.26")])
            .is_none());
        let r = c
            .version_skew(&[v("a:2379", "3.4.23"), v("b:2379", "3.5.1")])
            .unwrap();
        assert_eq!(r.status, Status::Warning);
        assert!(
            r.message.contains("3.4 on a:2379; 3.5 on b:2379"),
            "{}",
            r.message
        );
    }
}
