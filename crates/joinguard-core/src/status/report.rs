//! What `update-status` tells the operator: per operation, whether it changed something or found
//! it already in place, and how many API calls it took; on failure, the call, the cause and every
//! attempt. Text for humans, JSON (`schemaVersion` 2, camelCase keys) for Cluster API and scripts.

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use super::{OpOutcome, Run};
use crate::failure::Ending;
use crate::retry::{AttemptRecord, ErrorClass, Recorder};

/// One operation of the run.
#[derive(Debug)]
pub struct OpResult {
    /// The retry layer's operation name, e.g. `kube-system/kubeadm-config update`.
    pub op: String,
    /// What it sets, in words.
    pub what: String,
    pub elapsed: Duration,
    /// API calls made (successful or not).
    pub calls: u32,
    pub outcome: OpOutcome,
}

impl OpResult {
    pub fn new(op: &str, what: &str, t0: Instant, calls: u32, outcome: OpOutcome) -> Self {
        OpResult {
            op: op.to_string(),
            what: what.to_string(),
            elapsed: t0.elapsed(),
            calls,
            outcome,
        }
    }

    fn word(&self) -> &'static str {
        match self.outcome {
            OpOutcome::Changed => "changed",
            OpOutcome::AlreadyInPlace => "unchanged",
            OpOutcome::Failed(_) => "failed",
        }
    }
}

/// The report of one run, with what it needs to be printed.
#[derive(Debug)]
pub struct StatusReport<'a> {
    pub server: String,
    pub node: String,
    pub run: &'a Run,
    pub attempts: Vec<AttemptRecord>,
}

impl<'a> StatusReport<'a> {
    pub fn new(server: String, node: String, run: &'a Run, recorder: &Recorder) -> Self {
        StatusReport {
            server,
            node,
            run,
            attempts: recorder.records(),
        }
    }

    /// Why the run failed, as its closing line says it (`kube-system/kubeadm-config get: ...`);
    /// `None` when nothing failed.
    pub fn failure(&self) -> Option<String> {
        self.run.ops.iter().find_map(|op| match &op.outcome {
            OpOutcome::Failed(e) => Some(e.to_string()),
            _ => None,
        })
    }

    /// Done (or nothing to do), Failed, or Untrusted when the failed operation met a
    /// certificate that did not verify.
    pub fn ending(&self) -> Ending {
        for op in &self.run.ops {
            if let OpOutcome::Failed(e) = &op.outcome {
                return if e.is_trust() {
                    Ending::Untrusted
                } else {
                    Ending::Failed
                };
            }
        }
        Ending::Done
    }

    fn retries(&self) -> usize {
        self.attempts.iter().filter(|a| a.error.is_some()).count()
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

fn calls_word(n: u32) -> String {
    if n == 1 {
        "1 call".into()
    } else {
        format!("{n} calls")
    }
}

impl crate::render::Render for StatusReport<'_> {
    fn render(
        &self,
        output: crate::spec::Output,
        w: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        w.write_all(
            match output {
                crate::spec::Output::Text => render_text(self),
                crate::spec::Output::Json => render_json(self),
            }
            .as_bytes(),
        )
    }
}

/// kubeadm-style `[update-status]` lines.
fn render_text(r: &StatusReport<'_>) -> String {
    let mut out = String::new();
    let mut line = |s: &str| {
        out.push_str(s);
        out.push('\n');
    };
    line(&format!(
        "[update-status] API server {}, node {}",
        r.server, r.node
    ));
    let (mut changed, mut kept) = (0, 0);
    for (i, op) in r.run.ops.iter().enumerate() {
        let when = format!("{}, {}", calls_word(op.calls), secs(op.elapsed));
        match &op.outcome {
            // The first operation reads the layout; it only informs.
            _ if i == 0 && !matches!(op.outcome, OpOutcome::Failed(_)) => line(&format!(
                "[update-status] kubeadm-config: {} ({when})",
                op.what
            )),
            OpOutcome::Changed => {
                changed += 1;
                line(&format!("[update-status] changed:   {} ({when})", op.what))
            }
            OpOutcome::AlreadyInPlace => {
                kept += 1;
                line(&format!("[update-status] in place:  {} ({when})", op.what))
            }
            OpOutcome::Failed(e) => {
                line(&format!("error execution phase update-status: {e}"));
                let mine: Vec<&AttemptRecord> =
                    r.attempts.iter().filter(|a| a.op == op.op).collect();
                if !mine.is_empty() {
                    line(&format!("[update-status] attempts of `{}`:", op.op));
                }
                for a in mine {
                    let next = a
                        .delay_before_next
                        .map(|d| format!(", next in {}", secs(d)))
                        .unwrap_or_default();
                    let reason = a.reason.map(|r| format!("/{r}")).unwrap_or_default();
                    line(&format!(
                        "  #{:<2} at {:>6}  {}{reason}: {}{next}",
                        a.attempt,
                        secs(a.elapsed),
                        a.class,
                        a.error.as_deref().unwrap_or("ok"),
                    ));
                }
            }
        }
    }
    let total: u32 = r.run.ops.iter().map(|o| o.calls).sum();
    if r.ending() == Ending::Done {
        let summary = if changed == 0 {
            "nothing to do, everything was already in place".to_string()
        } else {
            format!("{changed} changed, {kept} already in place")
        };
        line(&format!(
            "[update-status] Done in {}: {summary}; {} API calls, {} retried",
            secs(r.run.elapsed),
            total,
            r.retries()
        ));
    } else {
        line(&format!(
            "[update-status] Failed after {}: {changed} changed before the failure; {} API calls",
            secs(r.run.elapsed),
            total
        ));
    }
    out
}

/// The JSON document's version (docs/schema/update-status.schema.json).
pub const SCHEMA_VERSION: u32 = 2;

/// `update-status -o json`, as docs/schema/update-status.schema.json describes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusDocument<'a> {
    schema_version: u32,
    command: &'static str,
    server: &'a str,
    node: &'a str,
    era: Option<&'static str>,
    ok: bool,
    exit_code: u8,
    elapsed_ms: u64,
    operations: Vec<OperationDocument<'a>>,
    attempts: &'a [AttemptRecord],
}

/// One operation; a failed one says why, its class and whether its budget ran out.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OperationDocument<'a> {
    op: &'a str,
    what: &'a str,
    result: &'static str,
    calls: u32,
    elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    class: Option<ErrorClass>,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_exhausted: Option<bool>,
}

/// One JSON object.
fn render_json(r: &StatusReport<'_>) -> String {
    let operations = r
        .run
        .ops
        .iter()
        .map(|o| {
            let failed = match &o.outcome {
                OpOutcome::Failed(e) => Some(e),
                _ => None,
            };
            OperationDocument {
                op: &o.op,
                what: &o.what,
                result: o.word(),
                calls: o.calls,
                elapsed_ms: o.elapsed.as_millis() as u64,
                error: failed.map(|e| e.to_string()),
                class: failed.map(|e| e.class),
                budget_exhausted: failed.map(|e| e.budget_exhausted()),
            }
        })
        .collect();
    let doc = StatusDocument {
        schema_version: SCHEMA_VERSION,
        command: "update-status",
        server: &r.server,
        node: &r.node,
        era: r.run.era.map(|e| e.as_str()),
        ok: r.ending() == Ending::Done,
        exit_code: r.ending().code(),
        elapsed_ms: r.run.elapsed.as_millis() as u64,
        operations,
        attempts: &r.attempts,
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
