//! What promote and cleanup report while they work, and the catch-up estimate.
//!
//! etcd accepts a promotion once the learner's raft Match is at least 90% of the leader's
//! (`readyPercent = 0.9` in `isLearnerReady`, called by `mayPromoteMember`;
//! etcd-io/etcd `server/etcdserver/server.go`, release-3.4 and release-3.5, stored copy at commit
//! 4002aa51bd7dbc50349342ff13e8095381a245c7). The leader's Match for the learner is not visible
//! through the client API; the learner's own `Status` raft index is the closest figure (it is
//! what the learner has committed, at most its Match), so the estimate is conservative and etcd
//! stays the judge: the promotion is tried when the estimate says ready, or every few seconds
//! when the learner does not answer.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::check::member::MemberRef;

/// etcd's promotion threshold (`readyPercent`), see the module docs.
pub const READY_PERCENT: f64 = 0.9;

/// One observation of the catch-up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CatchUp {
    /// The learner's raft index from its own `Status`; `None` when it does not answer (not
    /// started, still receiving the snapshot, or unreachable).
    pub learner_index: Option<u64>,
    /// The leader's raft index.
    pub leader_index: u64,
    /// The leader's backend size: what a fresh learner receives as a snapshot.
    pub leader_db_size: i64,
    /// Where `learner_index` came from: `status` (the learner's client port) or `metrics` (its
    /// metrics listener, while the client port waits for the catch-up).
    pub source: Option<&'static str>,
    /// Bytes the learner has received from its peers (metrics listener only).
    pub received_bytes: Option<u64>,
    /// The learner is receiving a snapshot (metrics listener only). Its bytes are counted
    /// nowhere until it is applied, so there is no rate and no estimate meanwhile.
    pub receiving_snapshot: bool,
    /// Raft entries per second the learner gained since the previous observation.
    pub entries_per_sec: Option<f64>,
    /// Bytes per second the learner received since the previous observation.
    pub bytes_per_sec: Option<f64>,
    /// Time left until the learner reaches 90% of the leader's index at the entry rate; while
    /// the index does not move, the leader's database size left to receive at the byte rate (an
    /// estimate: a fresh learner receives about the database, as a snapshot or as entries).
    pub eta: Option<Duration>,
}

impl CatchUp {
    /// Whether the learner's index is at least 90% of the leader's (etcd's own rule).
    pub fn ready(&self) -> bool {
        self.learner_index
            .is_some_and(|l| l as f64 >= self.leader_index as f64 * READY_PERCENT)
    }
}

impl fmt::Display for CatchUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.learner_index {
            Some(0) | None if self.receiving_snapshot => write!(
                f,
                "receiving the leader's snapshot (its database is {}; etcd shows no progress \
                 within a snapshot, the index moves when it is applied); leader raft index {}",
                bytes(self.leader_db_size),
                self.leader_index
            )?,
            Some(l) => write!(
                f,
                "learner raft index {l} of leader's {} ({:.0}%)",
                self.leader_index,
                if self.leader_index == 0 {
                    100.0
                } else {
                    l as f64 * 100.0 / self.leader_index as f64
                }
            )?,
            None => write!(
                f,
                "learner not answering yet (receiving the leader's {} snapshot?); leader raft index {}",
                bytes(self.leader_db_size),
                self.leader_index
            )?,
        }
        if let Some(b) = self.received_bytes {
            write!(f, ", received {}", bytes(b as i64))?;
        }
        if let Some(r) = self.entries_per_sec {
            write!(f, ", {r:.0} entries/s")?;
        }
        if let Some(r) = self.bytes_per_sec {
            write!(f, ", {}/s", bytes(r as i64))?;
        }
        if let Some(eta) = self.eta {
            write!(f, ", about {}s left", eta.as_secs())?;
        }
        Ok(())
    }
}

fn bytes(n: i64) -> String {
    let n = n.max(0) as f64;
    if n >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", n / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KiB", n / 1024.0)
    }
}

/// Turns successive (time, learner index, leader index) samples into rates and an estimate.
/// Rates are taken over this window (against the oldest sample in it), so that one quiet
/// quarter second does not read as "stalled" and swing the estimate.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub(crate) struct Estimator {
    window: std::collections::VecDeque<(Instant, Option<u64>, Option<u64>)>,
}

impl Estimator {
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        learner: Sample,
        leader_index: u64,
        leader_db_size: i64,
    ) -> CatchUp {
        let mut out = CatchUp {
            learner_index: learner.index,
            leader_index,
            leader_db_size,
            source: learner.source,
            received_bytes: learner.received_bytes,
            receiving_snapshot: learner.receiving_snapshot,
            entries_per_sec: None,
            bytes_per_sec: None,
            eta: None,
        };
        while self.window.len() > 1
            && self
                .window
                .get(1)
                .is_some_and(|(t, _, _)| now.saturating_duration_since(*t) >= RATE_WINDOW)
        {
            self.window.pop_front();
        }
        if let Some(&(t0, i0, b0)) = self.window.front() {
            let dt = now.saturating_duration_since(t0).as_secs_f64();
            if dt > 0.0 {
                if let (Some(l), Some(l0)) = (learner.index, i0) {
                    if l >= l0 {
                        out.entries_per_sec = Some((l - l0) as f64 / dt);
                    }
                }
                if let (Some(b), Some(b0)) = (learner.received_bytes, b0) {
                    if b >= b0 {
                        out.bytes_per_sec = Some((b - b0) as f64 / dt);
                    }
                }
            }
        }
        let target = leader_index as f64 * READY_PERCENT;
        if learner.receiving_snapshot && learner.index.unwrap_or(0) == 0 {
            // The peer byte rate is the heartbeats', not the snapshot's: no estimate.
            out.entries_per_sec = None;
            out.bytes_per_sec = None;
        }
        match (learner.index, out.entries_per_sec, out.bytes_per_sec) {
            (Some(l), _, _) if l as f64 >= target => out.eta = Some(Duration::ZERO),
            (Some(l), Some(r), _) if r > 0.0 => {
                out.eta = Some(Duration::from_secs_f64(
                    ((target - l as f64) / r).min(86_400.0),
                ))
            }
            (_, _, Some(r)) if r > 0.0 => {
                let left = (leader_db_size.max(0) as f64
                    - learner.received_bytes.unwrap_or(0) as f64)
                    .max(0.0);
                out.eta = Some(Duration::from_secs_f64((left / r).min(86_400.0)));
            }
            _ => {}
        }
        self.window
            .push_back((now, learner.index, learner.received_bytes));
        out
    }
}

/// The learner's side of one observation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    pub index: Option<u64>,
    pub received_bytes: Option<u64>,
    pub receiving_snapshot: bool,
    pub source: Option<&'static str>,
}

/// etcd's read timeout on a peer connection (`DefaultConnReadTimeout`,
/// `server/etcdserver/api/rafthttp/peer.go`, the same in 3.4, 3.5 and 3.6): a snapshot whose next
/// in-order byte waits longer than this in a queue on the path fails, and raft starts a new one.
pub const PEER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The sentence for a leader whose snapshots to this learner failed: the figures, why a snapshot
/// fails this way, and what to do.
pub(crate) fn snapshot_failures(failed: u64, here: u64, sent: u64) -> String {
    let times = |n: u64| {
        if n == 1 {
            "once".to_string()
        } else {
            format!("{n} times")
        }
    };
    format!(
        "the leader's database snapshot to this learner failed {} ({} during this run; {} \
         delivered; etcd_network_snapshot_send_failures): each failure starts a new snapshot from \
         byte 0. A path from the members to this node that holds a byte for more than {}s under \
         the transfer (a deep queue on a router or a shaped link) never delivers one: shorten \
         that queue or give the transfer its own rate",
        times(failed),
        here,
        sent,
        PEER_READ_TIMEOUT.as_secs()
    )
}

/// What promote and cleanup report as they go. The CLI prints these on stderr.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Progress {
    /// This node's member, as found in `MemberList`.
    Found { member: MemberRef },
    /// One catch-up observation while waiting.
    CatchingUp { member: u64, catch_up: CatchUp },
    /// A `MemberPromote` is being sent.
    Promoting { member: u64, attempt: u32 },
    /// etcd refused the promotion for now ("can only promote a learner member which is in sync
    /// with leader", or not enough started members): keep waiting.
    NotReadyYet { member: u64, message: String },
    /// The leader counted failed database snapshots to this learner (its `/metrics`): `failed`
    /// since the leader started, `failed_here` during this run, `sent` delivered.
    SnapshotFailed {
        member: u64,
        failed: u64,
        failed_here: u64,
        sent: u64,
    },
    /// A call's answer was lost (timeout, Unavailable, reset): re-reading `MemberList`.
    AnswerLost { op: String, error: String },
    /// A `MemberRemove` is being sent.
    Removing { member: MemberRef },
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Found { member } => write!(f, "this node's member: {member}"),
            Progress::CatchingUp { member, catch_up } => {
                write!(f, "learner {member:x} catching up: {catch_up}")
            }
            Progress::Promoting { member, attempt } => {
                write!(f, "promoting learner {member:x} (attempt {attempt})")
            }
            Progress::NotReadyYet { member, message } => {
                write!(f, "etcd will not promote {member:x} yet: {message}")
            }
            Progress::SnapshotFailed {
                member,
                failed,
                failed_here,
                sent,
            } => write!(
                f,
                "learner {member:x}: {}",
                snapshot_failures(*failed, *failed_here, *sent)
            ),
            Progress::AnswerLost { op, error } => write!(
                f,
                "{op}: answer lost ({error}); re-reading the member list to see whether it was applied"
            ),
            Progress::Removing { member } => write!(f, "removing {member}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_at_ninety_percent_and_eta_from_rate() {
        let t0 = Instant::now();
        let mut e = Estimator::default();
        let s = |i| Sample {
            index: Some(i),
            ..Sample::default()
        };
        let first = e.observe(t0, s(100), 1000, 0);
        assert!(!first.ready());
        assert_eq!(first.entries_per_sec, None);
        let next = e.observe(t0 + Duration::from_secs(2), s(500), 1000, 0);
        assert_eq!(next.entries_per_sec, Some(200.0));
        // 900 needed, 500 there, 200/s: 2 s.
        assert_eq!(next.eta, Some(Duration::from_secs(2)));
        assert!(e
            .observe(t0 + Duration::from_secs(3), s(900), 1000, 0)
            .ready());
        // Bytes only: 10 MB database, 4 MB received, 2 MB/s: 3 s.
        let mut e = Estimator::default();
        let b = |n| Sample {
            received_bytes: Some(n),
            ..Sample::default()
        };
        e.observe(t0, b(2_000_000), 10, 10_000_000);
        let by_bytes = e.observe(t0 + Duration::from_secs(1), b(4_000_000), 10, 10_000_000);
        assert_eq!(by_bytes.bytes_per_sec, Some(2_000_000.0));
        assert_eq!(by_bytes.eta, Some(Duration::from_secs(3)));
        // A snapshot in flight: heartbeat bytes only, so no rate and no estimate, and it says so.
        let mut e = Estimator::default();
        let snap = |n| Sample {
            index: Some(0),
            received_bytes: Some(n),
            receiving_snapshot: true,
            source: Some("metrics"),
        };
        e.observe(t0, snap(12_000), 7690, 47_000_000);
        let during = e.observe(t0 + Duration::from_secs(5), snap(15_000), 7691, 47_000_000);
        assert_eq!(during.eta, None);
        assert_eq!(during.bytes_per_sec, None);
        let text = during.to_string();
        assert!(
            text.starts_with("receiving the leader's snapshot (its database is 44.8 MiB"),
            "{text}"
        );
        assert!(!text.contains("left"), "{text}");
        assert!(!CatchUp {
            learner_index: None,
            leader_index: 5,
            leader_db_size: 0,
            source: None,
            received_bytes: None,
            receiving_snapshot: false,
            entries_per_sec: None,
            bytes_per_sec: None,
            eta: None
        }
        .ready());
    }
}
