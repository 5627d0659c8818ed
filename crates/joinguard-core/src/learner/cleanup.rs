//! `cleanup`: remove this node's leftover learner or unstarted member after a failed join, so
//! that a fresh `kubeadm join` can add it again.
//!
//! Rules: a started voter is never removed; another node's member only when the caller names it
//! by id and it is a learner or unstarted; a removal that would leave the remaining voters
//! without a quorum of members that answer is refused. A lost `MemberRemove` answer is resolved
//! by re-reading `MemberList`. Nothing left to remove is success, and a second run sends no
//! write.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::progress::Progress;
use super::promote::MEMBER_NOT_FOUND;
use super::{grpc_message, Conn, EtcdAccess, EtcdCallError, LearnerError};
use crate::check::member::{find_mine, MemberRef, MemberState, NodeRef, Quorum};
use crate::probe::etcd::MemberInfo;
use crate::retry::{self, Recorder};

/// What to remove.
#[derive(Debug)]
pub struct CleanupSpec {
    pub access: EtcdAccess,
    /// This node: its member name and/or peer URL.
    pub node: NodeRef,
    /// Remove this member instead of this node's (`--member-id`); it must be a learner or
    /// unstarted.
    pub member_id: Option<u64>,
    /// Decide and report, write nothing.
    pub dry_run: bool,
    /// The whole operation's budget.
    pub timeout: Duration,
    /// Each etcd call's timeout; [`super::DEFAULT_PER_ATTEMPT`] when `None`.
    pub per_attempt: Option<Duration>,
}

/// How a cleanup run ended (errors aside).
#[derive(Clone, Debug, PartialEq)]
pub enum CleanupOutcome {
    /// The member was removed. `quorum` is the arithmetic for a voter (unstarted), `None` for a
    /// learner, which never counts toward quorum.
    Removed {
        member: MemberRef,
        quorum: Option<Quorum>,
        confirmed_by_reread: bool,
    },
    /// Dry run: this member would be removed.
    WouldRemove {
        member: MemberRef,
        quorum: Option<Quorum>,
    },
    /// Nothing to remove; the text says what was looked for.
    NothingToDo(String),
    /// Not removed, on purpose; the text says why and what to do instead.
    Refused(String),
}

/// Removes this node's leftover member. See the module docs.
pub async fn cleanup(
    spec: &CleanupSpec,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<CleanupOutcome, LearnerError> {
    cleanup_recorded(spec, progress, &Recorder::new()).await
}

/// [`cleanup`], also copying every etcd attempt into `recorder` (for `-o json`).
pub async fn cleanup_recorded(
    spec: &CleanupSpec,
    progress: &(dyn Fn(&Progress) + Sync),
    recorder: &Recorder,
) -> Result<CleanupOutcome, LearnerError> {
    if spec.member_id.is_none() && spec.node.name.is_none() && spec.node.peer_url.is_none() {
        return Err(LearnerError::Invalid(
            "this node needs a name or an advertise address (or a member id) to find the member \
             to remove"
                .into(),
        ));
    }
    let deadline = Instant::now() + spec.timeout;
    let mut conn = Conn::new(&spec.access, Some(spec.timeout), spec.per_attempt, deadline).await?;
    let r = run(spec, &mut conn, progress).await;
    for rec in conn.recorder.records() {
        recorder.record(rec);
    }
    r
}

async fn run(
    spec: &CleanupSpec,
    conn: &mut Conn,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<CleanupOutcome, LearnerError> {
    let members = conn.member_list(None).await?;
    let target = match pick(spec, &members) {
        Ok(m) => m.clone(),
        Err(outcome) => return Ok(outcome),
    };
    let member = MemberRef::of(&target);
    progress(&Progress::Found {
        member: member.clone(),
    });

    let quorum = match member.state {
        MemberState::Learner => None,
        _ => {
            let q = quorum_after(conn, &members, target.id).await;
            if !q.holds_after() {
                return Ok(CleanupOutcome::Refused(format!(
                    "removing {member} would leave the cluster without quorum: {q}. Bring the \
                     stopped members back (or restore from a snapshot) before removing it"
                )));
            }
            Some(q)
        }
    };
    if spec.dry_run {
        return Ok(CleanupOutcome::WouldRemove { member, quorum });
    }

    progress(&Progress::Removing {
        member: member.clone(),
    });
    let id = target.id;
    let client = conn.balanced();
    let policy = conn.policy.clone();
    let reread = AtomicBool::new(false);
    retry::run(&policy, "etcd MemberRemove", &conn.recorder, None, |ctx| {
        let mut c = client.clone();
        let reread = &reread;
        async move {
            if ctx.attempt > 1 {
                // The previous attempt may have been applied: look before sending again.
                progress(&Progress::AnswerLost {
                    op: "MemberRemove".into(),
                    error: format!("attempt {} got no answer", ctx.attempt - 1),
                });
                let list = c.member_list().await.map_err(EtcdCallError)?;
                if !MemberInfo::from_response(&list).iter().any(|m| m.id == id) {
                    reread.store(true, Ordering::Relaxed);
                    return Ok(());
                }
            }
            match c.member_remove(id).await {
                Ok(_) => Ok(()),
                Err(e) if grpc_message(&e).is_some_and(|m| m.contains(MEMBER_NOT_FOUND)) => {
                    reread.store(ctx.attempt > 1, Ordering::Relaxed);
                    Ok(())
                }
                Err(e) => Err(EtcdCallError(e)),
            }
        }
    })
    .await?;
    Ok(CleanupOutcome::Removed {
        member: MemberRef {
            state: member.state,
            ..member
        },
        quorum,
        confirmed_by_reread: reread.load(Ordering::Relaxed),
    })
}

/// The member to remove, or the outcome that says why there is none.
fn pick<'a>(
    spec: &CleanupSpec,
    members: &'a [MemberInfo],
) -> Result<&'a MemberInfo, CleanupOutcome> {
    let never_voter = |m: &MemberRef| {
        CleanupOutcome::Refused(format!(
            "member {:x}{} is a started voter: cleanup never removes one. If this node's join failed after \
             its etcd member was promoted, finish the join with `kubeadm join phase \
             control-plane-join mark-control-plane`; to take the node out of the cluster use \
             `kubeadm reset` on it",
            m.id,
            if m.name.is_empty() {
                String::new()
            } else {
                format!(" ({})", m.name)
            }
        ))
    };
    if let Some(id) = spec.member_id {
        let Some(m) = members.iter().find(|m| m.id == id) else {
            return Err(CleanupOutcome::NothingToDo(format!(
                "member {id:x} is not in the cluster: nothing to remove"
            )));
        };
        let r = MemberRef::of(m);
        if r.state == MemberState::Voter {
            return Err(never_voter(&r));
        }
        return Ok(m);
    }
    match find_mine(&spec.node, members) {
        Ok(Some(m)) => {
            let r = MemberRef::of(m);
            if r.state == MemberState::Voter {
                return Err(never_voter(&r));
            }
            Ok(m)
        }
        Ok(None) => {
            let others: Vec<MemberRef> = members
                .iter()
                .map(MemberRef::of)
                .filter(|m| m.state != MemberState::Voter)
                .collect();
            if others.is_empty() {
                Err(CleanupOutcome::NothingToDo(format!(
                    "no etcd member has {}: nothing to remove",
                    spec.node
                )))
            } else {
                Err(CleanupOutcome::Refused(format!(
                    "no etcd member has {}, but the cluster holds {}, which is not this node's. \
                     cleanup removes another node's member only when it is named: `joinguard etcd \
                     cleanup --member-id {:x}`",
                    spec.node,
                    others
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                    others[0].id
                )))
            }
        }
        Err(many) => Err(CleanupOutcome::Refused(format!(
            "{} members match {}: {}; name the one to remove by its ID (`joinguard etcd \
             cleanup --member-id <id>`)",
            many.len(),
            spec.node,
            many.iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

/// The voters around removing `target`, counting the other voters that answer `Status`.
async fn quorum_after(conn: &mut Conn, members: &[MemberInfo], target: u64) -> Quorum {
    let voters: Vec<&MemberInfo> = members.iter().filter(|m| !m.is_learner).collect();
    let urls: Vec<String> = voters
        .iter()
        .filter(|m| m.id != target)
        .filter_map(|m| m.client_urls.first().cloned())
        .collect();
    let voter_ids: HashSet<u64> = voters.iter().map(|m| m.id).collect();
    let answering: HashSet<u64> = conn
        .statuses(&urls)
        .await
        .into_iter()
        .map(|(_, s)| s.member_id)
        .filter(|id| *id != target && voter_ids.contains(id))
        .collect();
    Quorum {
        voters: voters.len(),
        voters_after: voters.len().saturating_sub(1),
        answering: answering.len(),
    }
}
