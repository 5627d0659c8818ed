//! What `etcd promote` and `etcd cleanup` tell their user: one `[etcd promote]` line, or the JSON
//! document of docs/schema/etcd.schema.json (the result, the member, every etcd call).

use std::io::{self, Write};

use serde::Serialize;

use super::{CleanupOutcome, LearnerError, MemberRef, PromoteOutcome};
use crate::failure::Ending;
use crate::retry::{AttemptRecord, Recorder};
use crate::spec::Output;

/// The JSON document's version (docs/schema/etcd.schema.json).
pub const SCHEMA_VERSION: u32 = 2;

/// One run's result.
#[derive(Debug)]
pub struct EtcdReport {
    command: &'static str,
    /// `promoted`, `nothingToDo`, `refused`, `removed`, `wouldRemove`, `failed`.
    result: &'static str,
    message: String,
    member: Option<MemberRef>,
    attempts: Vec<AttemptRecord>,
    ending: Ending,
}

impl EtcdReport {
    /// `etcd promote`'s report of `outcome`.
    pub fn promote(
        outcome: &Result<PromoteOutcome, LearnerError>,
        recorder: &Recorder,
    ) -> EtcdReport {
        let (result, message, member, ending) = match outcome {
            Ok(PromoteOutcome::Promoted {
                member,
                waited,
                promote_calls,
                confirmed_by_reread,
            }) => {
                let how = if *confirmed_by_reread {
                    ", the answer was lost and the member list confirmed it"
                } else {
                    ""
                };
                let msg = format!(
                    "promoted {member} after {:.1}s ({promote_calls} MemberPromote call{}{how}); \
                     next: kubeadm join phase control-plane-join mark-control-plane",
                    waited.as_secs_f64(),
                    if *promote_calls == 1 { "" } else { "s" },
                );
                ("promoted", msg, Some(member.clone()), Ending::Done)
            }
            Ok(PromoteOutcome::AlreadyVoter { member }) => (
                "nothingToDo",
                format!("{member} is already a voter: nothing to do"),
                Some(member.clone()),
                Ending::Done,
            ),
            Ok(PromoteOutcome::Refused(why)) => ("refused", why.clone(), None, Ending::Failed),
            Err(e) => ("failed", e.to_string(), None, e.ending()),
        };
        EtcdReport {
            command: "etcd promote",
            result,
            message,
            member,
            attempts: recorder.records(),
            ending,
        }
    }

    /// `etcd cleanup`'s report of `outcome`.
    pub fn cleanup(
        outcome: &Result<CleanupOutcome, LearnerError>,
        recorder: &Recorder,
    ) -> EtcdReport {
        let quorum_note = |q: &Option<super::Quorum>| match q {
            Some(q) => format!(" ({q})"),
            None => String::new(),
        };
        let (result, message, member, ending) = match outcome {
            Ok(CleanupOutcome::Removed { member, quorum, .. }) => (
                "removed",
                format!(
                    "removed {member}{}; next: a fresh kubeadm join",
                    quorum_note(quorum)
                ),
                Some(member.clone()),
                Ending::Done,
            ),
            Ok(CleanupOutcome::WouldRemove { member, quorum }) => (
                "wouldRemove",
                format!(
                    "dry run: would remove {member}{}; nothing was changed",
                    quorum_note(quorum)
                ),
                Some(member.clone()),
                Ending::Done,
            ),
            Ok(CleanupOutcome::NothingToDo(why)) => {
                ("nothingToDo", why.clone(), None, Ending::Done)
            }
            Ok(CleanupOutcome::Refused(why)) => ("refused", why.clone(), None, Ending::Failed),
            Err(e) => ("failed", e.to_string(), None, e.ending()),
        };
        EtcdReport {
            command: "etcd cleanup",
            result,
            message,
            member,
            attempts: recorder.records(),
            ending,
        }
    }

    /// Done, Failed, or the failure's own ending (invalid input, trust).
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// The error that stopped the run, for its closing line on stderr; `None` when it ran to an
    /// outcome (a refusal included: that is the report's own line).
    pub fn error(&self) -> Option<&str> {
        (self.result == "failed").then_some(self.message.as_str())
    }
}

/// `etcd promote|cleanup -o json`, as docs/schema/etcd.schema.json describes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    schema_version: u32,
    command: &'a str,
    result: &'a str,
    message: &'a str,
    member: Option<MemberDocument>,
    attempts: &'a [AttemptRecord],
}

/// The member the command acted on.
#[derive(Serialize)]
struct MemberDocument {
    /// Hexadecimal, as etcdctl prints member IDs.
    id: String,
    name: String,
    #[serde(rename = "peerURLs")]
    peer_urls: Vec<String>,
    state: String,
}

impl crate::render::Render for EtcdReport {
    /// Text: the outcome's one line (a failure has none: its reason goes to stderr). JSON: the
    /// document, failures included.
    fn render(&self, output: Output, w: &mut dyn Write) -> io::Result<()> {
        match output {
            Output::Text if self.error().is_some() => Ok(()),
            Output::Text => writeln!(w, "[{}] {}", self.command, self.message),
            Output::Json => {
                let doc = Document {
                    schema_version: SCHEMA_VERSION,
                    command: self.command,
                    result: self.result,
                    message: &self.message,
                    member: self.member.as_ref().map(|m| MemberDocument {
                        id: format!("{:x}", m.id),
                        name: m.name.clone(),
                        peer_urls: m.peer_urls.clone(),
                        state: m.state.to_string(),
                    }),
                    attempts: &self.attempts,
                };
                serde_json::to_writer_pretty(&mut *w, &doc)?;
                writeln!(w)
            }
        }
    }
}
