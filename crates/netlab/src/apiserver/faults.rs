//! Programmable faults of the API server stand-in.
//!
//! This module owns the fault table: rules matched per verb and/or path substring, each firing a
//! given number of times or until cleared, and changeable while requests flow. It decides which
//! fault a request gets; the server applies it (the answer bodies are in `status`). It must
//! not touch etcd: a fault stands in for trouble the client would see, without causing it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hyper::Method;

/// What a matching request gets instead of (or before) its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// 429 with `Retry-After: <retry_after_s>` and a `TooManyRequests` Status, as API Priority
    /// and Fairness (or the max-in-flight filter) rejects a request.
    TooManyRequests {
        /// Seconds in the Retry-After header.
        retry_after_s: u32,
    },
    /// 500 with the Status message `etcdserver: leader changed`, as kube-apiserver passes an
    /// etcd error through while etcd elects a leader.
    LeaderChanged,
    /// 503 with a `ServiceUnavailable` Status.
    Unavailable,
    /// Drop the connection without a response (TCP RST).
    Reset,
    /// Hold the request for the duration, then answer it normally.
    Stall(Duration),
    /// Hold the request for the duration, then drop the connection without a response.
    StallThenReset(Duration),
}

/// One fault rule. A request matches when every given condition holds.
#[derive(Clone, Debug)]
pub struct FaultRule {
    /// Only this method (verb), if given.
    pub method: Option<Method>,
    /// Only requests whose path-and-query contains this, if given.
    pub path_contains: Option<String>,
    /// What happens.
    pub kind: FaultKind,
    /// How many matching requests get the fault; `None` until removed or cleared.
    pub times: Option<u32>,
}

impl FaultRule {
    /// A rule for every request, until cleared.
    pub fn always(kind: FaultKind) -> FaultRule {
        FaultRule {
            method: None,
            path_contains: None,
            kind,
            times: None,
        }
    }

    /// Restricts the rule to paths containing `s`.
    pub fn path(mut self, s: impl Into<String>) -> FaultRule {
        self.path_contains = Some(s.into());
        self
    }

    /// Restricts the rule to `method`.
    pub fn method(mut self, m: Method) -> FaultRule {
        self.method = Some(m);
        self
    }

    /// Fires `n` times, then removes itself.
    pub fn times(mut self, n: u32) -> FaultRule {
        self.times = Some(n);
        self
    }

    fn matches(&self, method: &Method, target: &str) -> bool {
        self.method.as_ref().is_none_or(|m| m == method)
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| target.contains(p))
    }
}

/// Identifies a rule added with [`Faults::add`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FaultId(u64);

/// The fault table. Rules are tried in the order they were added; the first match fires.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<(FaultId, FaultRule)>>,
    next: AtomicU64,
    fired: AtomicU64,
}

impl Faults {
    /// Adds a rule; it applies from the next request on.
    pub fn add(&self, rule: FaultRule) -> FaultId {
        let id = FaultId(self.next.fetch_add(1, Ordering::Relaxed));
        if rule.times != Some(0) {
            self.lock().push((id, rule));
        }
        id
    }

    /// Removes one rule. Returns whether it was still there.
    pub fn remove(&self, id: FaultId) -> bool {
        let mut rules = self.lock();
        let before = rules.len();
        rules.retain(|(i, _)| *i != id);
        rules.len() != before
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Rules still active.
    pub fn active(&self) -> usize {
        self.lock().len()
    }

    /// How many faults have fired since start.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// The fault for this request, if any; counts it against the rule.
    pub(crate) fn take(&self, method: &Method, target: &str) -> Option<FaultKind> {
        let mut rules = self.lock();
        let i = rules.iter().position(|(_, r)| r.matches(method, target))?;
        let kind = rules[i].1.kind.clone();
        if let Some(n) = rules[i].1.times.as_mut() {
            *n -= 1;
            if *n == 0 {
                rules.remove(i);
            }
        }
        self.fired.fetch_add(1, Ordering::Relaxed);
        Some(kind)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(FaultId, FaultRule)>> {
        self.rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_by_method_and_path_and_count_down() {
        let f = Faults::default();
        f.add(
            FaultRule::always(FaultKind::LeaderChanged)
                .method(Method::PUT)
                .path("kubeadm-config")
                .times(2),
        );
        let id = f.add(FaultRule::always(FaultKind::Unavailable).path("/readyz"));
        let put = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
        assert_eq!(f.take(&Method::GET, put), None);
        assert_eq!(f.take(&Method::PUT, put), Some(FaultKind::LeaderChanged));
        assert_eq!(f.take(&Method::PUT, put), Some(FaultKind::LeaderChanged));
        assert_eq!(f.take(&Method::PUT, put), None, "count used up");
        for _ in 0..5 {
            assert_eq!(
                f.take(&Method::GET, "/readyz"),
                Some(FaultKind::Unavailable)
            );
        }
        assert_eq!(f.fired(), 7);
        assert!(f.remove(id));
        assert_eq!(f.take(&Method::GET, "/readyz"), None);
        f.add(FaultRule::always(FaultKind::Reset));
        f.clear();
        assert_eq!(f.active(), 0);
        f.add(FaultRule::always(FaultKind::Reset).times(0));
        assert_eq!(f.active(), 0, "a rule for 0 requests never fires");
    }
}
