//! The attempt record: every attempt the retry layer makes, for logs, the JSON report's
//! `retries` array and (later) metrics.
//!
//! This file owns the shared list and the per-(operation, class) counters. It never formats a
//! report (the report layer serialises what [`Recorder::records`] returns) and never stores a
//! secret: error text is bounded and passed through [`redact`] first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::classify::{bounded, ClassLabel, Reason};

/// How many records one [`Recorder`] keeps. Later attempts are still counted, not stored: a
/// report must stay bounded even if a caller misuses the layer in a loop.
pub const MAX_RECORDS: usize = 4096;

/// One attempt. JSON keys are camelCase (`delayBeforeNextMs`, `elapsedMs`, `gaveUp`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    /// The call, e.g. `kube-system/kubeadm-config update`.
    pub op: String,
    /// The policy it ran on (`write`, `read`, `connect`, `etcd`).
    pub policy: String,
    /// 1-based attempt number within the operation.
    pub attempt: u32,
    pub class: ClassLabel,
    pub reason: Option<Reason>,
    /// The error, bounded and redacted; `None` for a success.
    pub error: Option<String>,
    /// The sleep before the next attempt; `None` when there is none (success or give-up).
    #[serde(rename = "delayBeforeNextMs", serialize_with = "opt_ms")]
    pub delay_before_next: Option<Duration>,
    /// Time since the operation started, at the end of this attempt.
    #[serde(rename = "elapsedMs", serialize_with = "ms")]
    pub elapsed: Duration,
    /// True on the attempt after which the layer gave up.
    pub gave_up: bool,
}

fn ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn opt_ms<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ms(d, s),
        None => s.serialize_none(),
    }
}

/// A count of attempts for one (operation, class) pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttemptCount {
    pub op: String,
    pub class: ClassLabel,
    pub count: u64,
}

#[derive(Debug, Default)]
struct Inner {
    records: Vec<AttemptRecord>,
    dropped: u64,
    counters: BTreeMap<(String, ClassLabel), u64>,
}

/// The shared, thread-safe attempt list. Clones share one list.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves complete records behind; keep using them.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds one attempt. The error text is bounded and redacted here, whoever built the record.
    pub fn record(&self, mut rec: AttemptRecord) {
        rec.error = rec.error.map(|e| redact(&bounded(&e)));
        let mut inner = self.lock();
        *inner
            .counters
            .entry((rec.op.clone(), rec.class))
            .or_insert(0) += 1;
        if inner.records.len() < MAX_RECORDS {
            inner.records.push(rec);
        } else {
            inner.dropped += 1;
        }
    }

    /// Every stored attempt, in order.
    pub fn records(&self) -> Vec<AttemptRecord> {
        self.lock().records.clone()
    }

    /// Attempts counted but not stored because the list was full.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// Attempts per (operation, class), sorted by operation then class: what a metrics exporter
    /// turns into `joinguard_api_attempts_total{op,class}`.
    pub fn counts(&self) -> Vec<AttemptCount> {
        self.lock()
            .counters
            .iter()
            .map(|((op, class), count)| AttemptCount {
                op: op.clone(),
                class: *class,
                count: *count,
            })
            .collect()
    }

    /// The count for one pair (0 when none).
    pub fn count(&self, op: &str, class: ClassLabel) -> u64 {
        self.lock()
            .counters
            .get(&(op.to_string(), class))
            .copied()
            .unwrap_or(0)
    }
}

/// Serialises as the report's `retries` array.
impl Serialize for Recorder {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.lock().records.serialize(s)
    }
}

/// Hides what looks like a credential: the word after `Bearer`/`token=`, and anything shaped like
/// a bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`). Error text from the apiserver does not carry
/// credentials, but a URL or a proxy's page might.
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut hide_next = false;
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let core = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '.');
        let lower = word.to_ascii_lowercase();
        if hide_next && !core.is_empty() {
            out.push_str("[redacted]");
            hide_next = false;
            continue;
        }
        if let Some(pos) = lower.find("token=") {
            out.push_str(&word[..pos + "token=".len()]);
            out.push_str("[redacted]");
            continue;
        }
        if is_bootstrap_token(core) {
            out.push_str(&word.replace(core, "[redacted]"));
            continue;
        }
        hide_next = lower == "bearer";
        out.push_str(word);
    }
    out
}

fn is_bootstrap_token(s: &str) -> bool {
    let ok = |p: &str, n: usize| {
        p.len() == n
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    match s.split_once('.') {
        Some((id, secret)) => ok(id, 6) && ok(secret, 16),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(op: &str, attempt: u32, class: ClassLabel) -> AttemptRecord {
        AttemptRecord {
            op: op.into(),
            policy: "write".into(),
            attempt,
            class,
            reason: Some(Reason::ServiceUnavailable),
            error: Some("503 Service Unavailable".into()),
            delay_before_next: Some(Duration::from_millis(500)),
            elapsed: Duration::from_millis(12),
            gave_up: false,
        }
    }

    #[test]
    fn counts_and_json() {
        let r = Recorder::new();
        let shared = r.clone();
        r.record(rec("a", 1, ClassLabel::Transient));
        shared.record(rec("a", 2, ClassLabel::Transient));
        r.record(rec("a", 3, ClassLabel::Ok));
        r.record(rec("b", 1, ClassLabel::Permanent));
        assert_eq!(r.count("a", ClassLabel::Transient), 2);
        assert_eq!(r.count("a", ClassLabel::Ok), 1);
        assert_eq!(r.count("b", ClassLabel::Trust), 0);
        assert_eq!(r.counts().len(), 3);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 4);
        assert_eq!(json[0]["class"], "transient");
        assert_eq!(json[0]["reason"], "service-unavailable");
        assert_eq!(json[0]["delayBeforeNextMs"], 500);
        assert_eq!(json[0]["elapsedMs"], 12);
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(
            redact("Authorization: Bearer abc.def.ghi failed"),
            "Authorization: Bearer [redacted] failed"
        );
        assert_eq!(
            redact("GET /x?token=s3cr3t&y=1 refused"),
            "GET /x?token=[redacted] refused"
        );
        assert_eq!(
            redact("token abcdef.0123456789abcdef rejected"),
            "token [redacted] rejected"
        );
        let r = Recorder::new();
        let mut a = rec("a", 1, ClassLabel::Permanent);
        a.error = Some("bad token 'abcdef.0123456789abcdef'".into());
        r.record(a);
        assert_eq!(
            r.records()[0].error.as_deref(),
            Some("bad token '[redacted]'")
        );
    }

    #[test]
    fn list_is_bounded() {
        let r = Recorder::new();
        for i in 0..(MAX_RECORDS as u32 + 5) {
            r.record(rec("loop", i, ClassLabel::Transient));
        }
        assert_eq!(r.records().len(), MAX_RECORDS);
        assert_eq!(r.dropped(), 5);
        assert_eq!(
            r.count("loop", ClassLabel::Transient),
            MAX_RECORDS as u64 + 5
        );
    }
}
