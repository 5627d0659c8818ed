//! List selectors: equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`) and field
//! selectors on `metadata.name` and `metadata.namespace` (the fields every resource indexes), as
//! `kubectl get -l` and kubeadm's lists of etcd Pods send them.
//!
//! This module owns parsing and matching. It must not answer requests (the list verb turns a
//! selector that does not parse into kube-apiserver's 400) or read the store.

use serde_json::Value;

/// Equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`), comma-separated.
#[derive(Debug)]
pub(super) struct LabelSelector(Vec<(String, Op, String)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Exists,
    NotExists,
}

impl LabelSelector {
    /// `None` for a selector the stand-in cannot parse (set-based ones among them).
    pub(super) fn parse(s: &str) -> Option<LabelSelector> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let req = if let Some((k, v)) = part.split_once("!=") {
                (k.trim().to_string(), Op::Ne, v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k.trim().to_string(), Op::Eq, v.trim().to_string())
            } else if let Some(k) = part.strip_prefix('!') {
                (k.trim().to_string(), Op::NotExists, String::new())
            } else if part.contains(' ') || part.contains('(') {
                return None; // set-based selectors are not supported
            } else {
                (part.to_string(), Op::Exists, String::new())
            };
            if req.0.is_empty() {
                return None;
            }
            reqs.push(req);
        }
        Some(LabelSelector(reqs))
    }

    /// Whether `obj` meets every requirement.
    pub(super) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.0.iter().all(|(k, op, v)| {
            let got = labels.and_then(|l| l.get(k)).and_then(Value::as_str);
            match op {
                Op::Eq => got == Some(v.as_str()),
                Op::Ne => got != Some(v.as_str()),
                Op::Exists => got.is_some(),
                Op::NotExists => got.is_none(),
            }
        })
    }
}

/// Field selectors on `metadata.name` and `metadata.namespace` (what every resource supports).
#[derive(Debug)]
pub(super) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// `None` for a field the stand-in does not index, or a malformed requirement.
    pub(super) fn parse(s: &str) -> Option<FieldSelector> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (k, true, v)
            } else {
                return None;
            };
            let field = match k.trim() {
                "metadata.name" => "name",
                "metadata.namespace" => "namespace",
                _ => return None,
            };
            reqs.push((field.to_string(), eq, v.trim().to_string()));
        }
        Some(FieldSelector(reqs))
    }

    /// Whether `obj` meets every requirement.
    pub(super) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(f, eq, v)| {
            let got = obj
                .get("metadata")
                .and_then(|m| m.get(f))
                .and_then(Value::as_str)
                .unwrap_or("");
            (got == v) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn selectors() {
        let o = json!({"metadata": {"name": "n", "namespace": "kube-system", "labels": {"component": "etcd", "tier": "control-plane"}}});
        assert!(LabelSelector::parse("component=etcd,tier=control-plane")
            .unwrap()
            .matches(&o));
        assert!(!LabelSelector::parse("component!=etcd").unwrap().matches(&o));
        assert!(LabelSelector::parse("tier,!missing").unwrap().matches(&o));
        assert!(FieldSelector::parse("metadata.name=n").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.x=1").is_none());
    }

    #[test]
    fn set_based_label_selectors_are_refused_not_misread() {
        assert!(LabelSelector::parse("tier in (control-plane)").is_none());
        assert!(LabelSelector::parse("=etcd").is_none());
        assert!(LabelSelector::parse("").unwrap().matches(&json!({})));
    }
}
