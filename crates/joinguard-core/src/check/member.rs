//! Which member is this node's: by etcd member name (kubeadm names the member after the node)
//! or by peer URL (`https://<advertise-address>:2380`, kubeadm `GetPeerURL`). Pure functions
//! over a `MemberList` answer, so the rules are unit-tested without a cluster.

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use crate::probe::etcd::MemberInfo;

/// etcd's peer port, as kubeadm uses it (`constants.EtcdListenPeerPort`).
pub const PEER_PORT: u16 = 2380;

/// How this node is known to etcd. At least one of the two must be set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRef {
    /// The etcd member name: kubeadm's node name (`--node-name`, `nodeRegistration.name`).
    pub name: Option<String>,
    /// The member's peer URL, `https://<advertise-address>:2380`.
    pub peer_url: Option<String>,
}

impl NodeRef {
    /// The peer URL kubeadm registers for an advertise address: `https://IP:2380`, with IPv6
    /// in brackets.
    pub(crate) fn peer_url_for(addr: IpAddr) -> String {
        match addr {
            IpAddr::V4(a) => format!("https://{a}:{PEER_PORT}"),
            IpAddr::V6(a) => format!("https://[{a}]:{PEER_PORT}"),
        }
    }

    /// A node known by name and/or advertise address.
    pub fn new(name: Option<&str>, advertise: Option<IpAddr>) -> Self {
        NodeRef {
            name: name.filter(|n| !n.is_empty()).map(str::to_string),
            peer_url: advertise.map(Self::peer_url_for),
        }
    }

    /// Whether `m` is this node's member: same name, or one of its peer URLs is ours.
    pub fn matches(&self, m: &MemberInfo) -> bool {
        let by_name = matches!(&self.name, Some(n) if !m.name.is_empty() && m.name == *n);
        let by_url = matches!(&self.peer_url, Some(u)
            if m.peer_urls.iter().any(|p| same_url(p, u)));
        by_name || by_url
    }
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, &self.peer_url) {
            (Some(n), Some(u)) => write!(f, "name {n:?} or peer URL {u}"),
            (Some(n), None) => write!(f, "name {n:?}"),
            (None, Some(u)) => write!(f, "peer URL {u}"),
            (None, None) => f.write_str("(no name, no peer URL)"),
        }
    }
}

/// URLs compared as etcd prints them, ignoring case and a trailing slash.
fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

/// What a member is, for the rules of promote and cleanup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberState {
    /// A learner (started or not): never counts toward quorum.
    Learner,
    /// A voter that was added but never started: no name, no client URLs (etcd fills both in
    /// when the member publishes itself on its first start). It counts toward quorum and never
    /// answers.
    Unstarted,
    /// A voter that has started at least once.
    Voter,
}

impl MemberState {
    pub fn of(m: &MemberInfo) -> Self {
        if m.is_learner {
            MemberState::Learner
        } else if m.name.is_empty() && m.client_urls.is_empty() {
            MemberState::Unstarted
        } else {
            MemberState::Voter
        }
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberState::Learner => "learner",
            MemberState::Unstarted => "unstarted member",
            MemberState::Voter => "started voter",
        })
    }
}

/// A member as the outcomes name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberRef {
    pub id: u64,
    /// Empty for a member that never started.
    pub name: String,
    pub peer_urls: Vec<String>,
    pub state: MemberState,
}

impl MemberRef {
    pub fn of(m: &MemberInfo) -> Self {
        MemberRef {
            id: m.id,
            name: m.name.clone(),
            peer_urls: m.peer_urls.clone(),
            state: MemberState::of(m),
        }
    }
}

impl fmt::Display for MemberRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // etcdctl prints member ids in hex; so do we, so that the ids can be pasted.
        write!(f, "{} {:x}", self.state, self.id)?;
        if !self.name.is_empty() {
            write!(f, " ({})", self.name)?;
        }
        if let Some(u) = self.peer_urls.first() {
            write!(f, " at {u}")?;
        }
        Ok(())
    }
}

/// This node's member in `members`: `Ok(None)` when there is none, `Err` with every candidate
/// when more than one member matches (a name on one member, the peer URL on another).
pub(crate) fn find_mine<'a>(
    node: &NodeRef,
    members: &'a [MemberInfo],
) -> Result<Option<&'a MemberInfo>, Vec<MemberRef>> {
    let found: Vec<&MemberInfo> = members.iter().filter(|m| node.matches(m)).collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        many => Err(many.iter().map(|m| MemberRef::of(m)).collect()),
    }
}

/// Voters and quorum around a removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Quorum {
    /// Voting members now (learners excluded).
    pub voters: usize,
    /// Voting members after the removal.
    pub voters_after: usize,
    /// Voters that answered `Status` (the member to be removed excluded).
    pub answering: usize,
}

impl Quorum {
    /// Raft's majority of `n` voters.
    pub(crate) fn majority(n: usize) -> usize {
        n / 2 + 1
    }

    /// Whether the voters left after the removal that answer make a majority of them.
    pub(crate) fn holds_after(&self) -> bool {
        self.voters_after == 0 || self.answering >= Self::majority(self.voters_after)
    }
}

impl fmt::Display for Quorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} voters now (quorum {}); after the removal {} voters need {} for quorum and {} answer",
            self.voters,
            Self::majority(self.voters),
            self.voters_after,
            Self::majority(self.voters_after),
            self.answering
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u64, name: &str, peer: &str, client: bool, learner: bool) -> MemberInfo {
        MemberInfo {
            id,
            name: name.into(),
            client_urls: if client {
                vec![peer.replace("2380", "2379")]
            } else {
                vec![]
            },
            peer_urls: vec![peer.into()],
            is_learner: learner,
        }
    }

    #[test]
    fn states_follow_name_client_urls_and_learner_flag() {
        assert_eq!(
            MemberState::of(&m(1, "", "https://10.0.0.4:2380", false, false)),
            MemberState::Unstarted
        );
        assert_eq!(
            MemberState::of(&m(1, "", "https://10.0.0.4:2380", false, true)),
            MemberState::Learner
        );
        assert_eq!(
            MemberState::of(&m(1, "cp1", "https://10.0.0.4:2380", true, false)),
            MemberState::Voter
        );
    }

    #[test]
    fn this_node_is_found_by_name_or_peer_url_and_ambiguity_is_reported() {
        let members = vec![
            m(1, "cp1", "https://10.0.0.1:2380", true, false),
            m(2, "", "https://10.0.0.4:2380", false, true),
        ];
        let by_url = NodeRef::new(None, Some("10.0.0.4".parse().unwrap()));
        assert_eq!(by_url.peer_url.as_deref(), Some("https://10.0.0.4:2380"));
        assert_eq!(find_mine(&by_url, &members).unwrap().unwrap().id, 2);
        let by_name = NodeRef::new(Some("cp1"), None);
        assert_eq!(find_mine(&by_name, &members).unwrap().unwrap().id, 1);
        // An unstarted member has no name: a name alone never matches it.
        let nobody = NodeRef::new(Some("cp4"), None);
        assert!(find_mine(&nobody, &members).unwrap().is_none());
        let both = NodeRef::new(Some("cp1"), Some("10.0.0.4".parse().unwrap()));
        assert_eq!(find_mine(&both, &members).unwrap_err().len(), 2);
        let v6 = NodeRef::new(None, Some("fd00::4".parse().unwrap()));
        assert_eq!(v6.peer_url.as_deref(), Some("https://[fd00::4]:2380"));
    }

    #[test]
    fn quorum_arithmetic() {
        // 4 voters, one unstarted, two answer after removing it: 3 need 2.
        let q = Quorum {
            voters: 4,
            voters_after: 3,
            answering: 2,
        };
        assert!(q.holds_after());
        let q = Quorum {
            voters: 4,
            voters_after: 3,
            answering: 1,
        };
        assert!(!q.holds_after());
        assert_eq!(
            q.to_string(),
            "4 voters now (quorum 3); after the removal 3 voters need 2 for quorum and 1 answer"
        );
    }
}
