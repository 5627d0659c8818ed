//! `EtcdMemberAgreement`: whether the members answer for one cluster and list the same members,
//! as Cluster API's KubeadmControlPlane checks before it scales
//! (`controlplane/internal/workload_cluster_conditions.go`: a member whose list differs from the
//! others', or which reports another cluster ID, marks etcd unhealthy and scale-up waits).
//!
//! - Another cluster ID: the endpoint is a member of another etcd cluster (an address reused, a
//!   rollback of a failed scale-up that re-created a member: kubernetes-sigs/cluster-api
//!   #11772). kubeadm gives its etcd client every endpoint, so its calls land in either cluster.
//! - Different lists: members that disagree on who is a member or who is a learner. A
//!   reconfiguration is applied by every member within moments, so a difference that lasts
//!   points at a member that is cut off, or at etcd's v3 store out of step with its v2 store
//!   after an upgrade (etcd-io/etcd #19557: a promoted member listed as a learner again).

use std::collections::BTreeMap;

use super::etcd_health::EtcdMemberHealth;
use super::model::{CheckName, CheckResult, Status};
use super::Checker;
use crate::probe::etcd::MemberInfo;

const TARGET: &str = "etcd-cluster";

/// One member as a member lists it: `(id, learner, peer URLs sorted)`.
type Entry = (u64, bool, Vec<String>);

/// One member's view, comparable: its entries sorted.
type View = Vec<Entry>;

fn view(list: &[MemberInfo]) -> View {
    let mut v: View = list
        .iter()
        .map(|m| {
            let mut urls = m.peer_urls.clone();
            urls.sort();
            (m.id, m.is_learner, urls)
        })
        .collect();
    v.sort();
    v
}

/// `m2 (learner)`, by the name the list gives, else the id.
fn describe(entry: &Entry, names: &BTreeMap<u64, String>) -> String {
    let name = names
        .get(&entry.0)
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| format!("{:x}", entry.0));
    if entry.1 {
        format!("{name} (learner)")
    } else {
        name
    }
}

impl Checker {
    /// Errors when members answer for different clusters; a warning when their member lists
    /// differ (with what differs); ok when every member that answered agrees. `None` when fewer
    /// than two members gave a list.
    pub(crate) fn etcd_member_agreement(
        &self,
        members: &[EtcdMemberHealth],
    ) -> Option<CheckResult> {
        let result = |status, message| {
            Some(CheckResult {
                name: CheckName::EtcdMemberAgreement,
                target: TARGET.to_string(),
                status,
                message,
                measured: None,
                threshold: None,
            })
        };
        // Cluster IDs first: a member of another cluster makes its list meaningless here.
        let mut clusters: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for m in members.iter().filter(|m| m.reachable) {
            if let Some(c) = m.cluster_id {
                clusters.entry(c).or_default().push(m.client_label());
            }
        }
        if clusters.len() > 1 {
            let mut groups: Vec<(u64, Vec<String>)> = clusters.into_iter().collect();
            // The largest group first: the cluster the join means.
            groups.sort_by_key(|(_, who)| std::cmp::Reverse(who.len()));
            let text: Vec<String> = groups
                .iter()
                .map(|(id, who)| format!("{} in cluster {id:x}", who.join(", ")))
                .collect();
            return result(
                Status::Error,
                format!(
                    "the etcd endpoints answer for more than one cluster: {}. kubeadm gives its \
                     etcd client every endpoint, so its member add can land in either. Remove the \
                     endpoints of the other cluster (or that member, if it was re-created by a \
                     failed scale-up or rollback) before the join",
                    text.join("; ")
                ),
            );
        }
        let lists: Vec<(&EtcdMemberHealth, &Vec<MemberInfo>)> = members
            .iter()
            .filter_map(|m| m.member_list.as_ref().map(|l| (m, l)))
            .collect();
        if lists.len() < 2 {
            return None;
        }
        let names: BTreeMap<u64, String> = lists
            .iter()
            .flat_map(|(_, l)| l.iter().map(|m| (m.id, m.name.clone())))
            .collect();
        let mut views: BTreeMap<View, Vec<String>> = BTreeMap::new();
        for (m, l) in &lists {
            views.entry(view(l)).or_default().push(m.client_label());
        }
        if views.len() == 1 {
            let (v, who) = views.into_iter().next()?;
            let listed: Vec<String> = v.iter().map(|e| describe(e, &names)).collect();
            return result(
                Status::Ok,
                format!(
                    "the {} members asked list the same members: {}",
                    who.len(),
                    listed.join(", ")
                ),
            );
        }
        let mut groups: Vec<(View, Vec<String>)> = views.into_iter().collect();
        groups.sort_by_key(|(_, who)| std::cmp::Reverse(who.len()));
        let (base, base_who) = &groups[0];
        let diffs: Vec<String> = groups[1..]
            .iter()
            .map(|(v, who)| {
                let missing: Vec<String> = base
                    .iter()
                    .filter(|e| !v.iter().any(|o| o.0 == e.0))
                    .map(|e| describe(e, &names))
                    .collect();
                let extra: Vec<String> = v
                    .iter()
                    .filter(|e| !base.iter().any(|o| o.0 == e.0))
                    .map(|e| describe(e, &names))
                    .collect();
                let changed: Vec<String> = v
                    .iter()
                    .filter(|e| base.iter().any(|o| o.0 == e.0 && o != *e))
                    .map(|e| describe(e, &names))
                    .collect();
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!("without {}", missing.join(", ")));
                }
                if !extra.is_empty() {
                    parts.push(format!("with {} as well", extra.join(", ")));
                }
                if !changed.is_empty() {
                    parts.push(format!("with {} listed otherwise", changed.join(", ")));
                }
                format!(
                    "{} list{} {}",
                    who.join(", "),
                    if who.len() == 1 { "s it" } else { " it" },
                    parts.join(" and ")
                )
            })
            .collect();
        result(
            Status::Warning,
            format!(
                "etcd members disagree on the member list: {} list {}; {}. A reconfiguration \
                 reaches every member within moments, so run again; a difference that stays is a \
                 member cut off from the others, or a v3 store out of step after an upgrade \
                 (etcd-io/etcd #19557: a voter listed as a learner). Cluster API's \
                 KubeadmControlPlane does not scale up while members disagree",
                base_who.join(", "),
                base.iter()
                    .map(|e| describe(e, &names))
                    .collect::<Vec<_>>()
                    .join(", "),
                diffs.join("; ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: u64, learner: bool) -> MemberInfo {
        MemberInfo {
            id,
            name: format!("m{id}"),
            client_urls: vec![format!("https://10.0.0.{id}:2379")],
            peer_urls: vec![format!("https://10.0.0.{id}:2380")],
            is_learner: learner,
        }
    }

    fn member(id: u64, cluster: u64, list: Vec<MemberInfo>) -> EtcdMemberHealth {
        EtcdMemberHealth {
            endpoint: format!("10.0.0.{id}:2379"),
            name: Some(format!("m{id}")),
            member_id: Some(id),
            reachable: true,
            cluster_id: Some(cluster),
            member_list: Some(list),
            ..Default::default()
        }
    }

    #[test]
    fn one_cluster_one_list_is_ok() {
        let all = || vec![info(1, false), info(2, false), info(3, false)];
        let r = Checker::default()
            .etcd_member_agreement(&[
                member(1, 7, all()),
                member(2, 7, all()),
                member(3, 7, all()),
            ])
            .unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message);
        assert!(
            r.message
                .contains("the 3 members asked list the same members: m1, m2, m3"),
            "{}",
            r.message
        );
    }

    #[test]
    fn another_cluster_id_is_an_error_naming_the_member() {
        let all = || vec![info(1, false), info(2, false)];
        let r = Checker::default()
            .etcd_member_agreement(&[
                member(1, 7, all()),
                member(2, 7, all()),
                member(9, 0xbeef, vec![info(9, false)]),
            ])
            .unwrap();
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert!(
            r.message.contains("m1 (10.0.0.1:2379), m2 (10.0.0.2:2379) in cluster 7; m9 (10.0.0.9:2379) in cluster beef"),
            "{}",
            r.message
        );
    }

    /// etcd-io/etcd #19557: one member lists a promoted voter as a learner.
    #[test]
    fn a_voter_listed_as_a_learner_by_one_member_is_named() {
        let good = || vec![info(1, false), info(2, false), info(3, false)];
        let r = Checker::default()
            .etcd_member_agreement(&[
                member(1, 7, good()),
                member(2, 7, good()),
                member(3, 7, vec![info(1, false), info(2, false), info(3, true)]),
            ])
            .unwrap();
        assert_eq!(r.status, Status::Warning, "{}", r.message);
        assert!(
            r.message
                .contains("m3 (10.0.0.3:2379) lists it with m3 (learner) listed otherwise"),
            "{}",
            r.message
        );
    }
}
