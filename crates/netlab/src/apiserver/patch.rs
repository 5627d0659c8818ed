//! The patch types kube-apiserver accepts, applied to a JSON object: RFC 6902 JSON patch
//! (`add`, `remove`, `replace`, `test`, `copy`, `move`), RFC 7386 JSON merge patch, and
//! strategic merge patch as far as the stand-in implements it (applied as a merge patch: it knows
//! no patch strategies, so lists are replaced, never merged by key).
//!
//! This module owns the document transformation and why it failed ([`PatchError`]). It must not
//! answer HTTP (the Status bodies turn a [`PatchError`] into kube-apiserver's answer) or know
//! about stored objects, resourceVersions or preconditions (the verbs do).

use serde_json::{json, Value};

/// A patch's media type, as the request's `Content-Type` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
}

impl PatchType {
    /// The media types kube-apiserver lists in its 415 answer, in its order.
    pub(super) const ACCEPTED: &'static str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

    /// The patch type of a media type (without parameters); `None` for anything else.
    pub(super) fn from_media_type(media: &str) -> Option<PatchType> {
        match media {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            _ => None,
        }
    }

    /// Applies `patch` to `doc`. A merge patch always applies; a JSON patch stops at the first
    /// operation that does not, leaving `doc` partly patched (the caller works on a copy).
    pub(super) fn apply(self, doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
        match self {
            PatchType::Json => apply_json_patch(doc, patch),
            PatchType::Merge | PatchType::StrategicMerge => {
                merge_patch(doc, patch);
                Ok(())
            }
        }
    }
}

/// Why a JSON patch was not applied. The messages are the stand-in's (kube-apiserver's come from
/// the `evanphx/json-patch` library and differ in detail); the split between a malformed patch
/// and one that does not apply is kube-apiserver's: 400 BadRequest and 422 Invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PatchError {
    /// The document is not a list of operations.
    #[error("a JSON patch must be an array of operations")]
    NotAnArray,
    /// An operation that RFC 6902 does not define.
    #[error("unknown JSON patch operation {0:?}")]
    UnknownOp(String),
    /// `add` or `replace` without a `value`.
    #[error("{op} operation needs a value")]
    MissingValue { op: String },
    /// `replace` of a key that does not exist.
    #[error("replace operation does not apply: doc is missing key: {path}")]
    ReplaceMissing { path: String },
    /// `test` found another value.
    #[error("testing value {path} failed")]
    TestFailed { path: String },
    /// `copy` or `move` from a path that does not exist.
    #[error("{op} operation: missing from {from}")]
    MissingFrom { op: String, from: String },
    /// A path that is not a JSON pointer.
    #[error("invalid JSON pointer {path:?}")]
    BadPointer { path: String },
    /// An array index that is not a number.
    #[error("bad index in {path}")]
    BadIndex { path: String },
    /// An array index past the end.
    #[error("index out of range in {path}")]
    IndexOutOfRange { path: String },
    /// The parent of the target does not exist.
    #[error("doc is missing path: {path}")]
    MissingPath { path: String },
    /// `remove` (or the source of `move`) of something that does not exist.
    #[error("remove operation does not apply: doc is missing path: {path}")]
    RemoveMissing { path: String },
}

impl PatchError {
    /// The patch document itself is wrong (400), rather than an operation not applying (422).
    pub(super) fn is_malformed(&self) -> bool {
        matches!(self, PatchError::NotAnArray | PatchError::UnknownOp(_))
    }
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// RFC 6902 JSON patch: add, remove, replace, test, copy and move.
fn apply_json_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = patch.as_array().ok_or(PatchError::NotAnArray)?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let value = op.get("value").cloned();
        match kind {
            "add" | "replace" => {
                let v = value.ok_or_else(|| PatchError::MissingValue { op: kind.into() })?;
                if kind == "replace" && doc.pointer(path).is_none() {
                    return Err(PatchError::ReplaceMissing { path: path.into() });
                }
                pointer_set(doc, path, v)?;
            }
            "remove" => pointer_remove(doc, path)?,
            "test" => {
                if doc.pointer(path) != value.as_ref() {
                    return Err(PatchError::TestFailed { path: path.into() });
                }
            }
            "copy" | "move" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or("");
                let v = doc
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| PatchError::MissingFrom {
                        op: kind.into(),
                        from: from.into(),
                    })?;
                if kind == "move" {
                    pointer_remove(doc, from)?;
                }
                pointer_set(doc, path, v)?;
            }
            other => return Err(PatchError::UnknownOp(other.into())),
        }
    }
    Ok(())
}

/// The parent pointer and the unescaped last token (`~1` is `/`, `~0` is `~`).
fn split_pointer(path: &str) -> Result<(String, String), PatchError> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| PatchError::BadPointer { path: path.into() })?;
    Ok((
        parent.to_string(),
        last.replace("~1", "/").replace("~0", "~"),
    ))
}

fn pointer_set(doc: &mut Value, path: &str, v: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *doc = v;
        return Ok(());
    }
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => {
            m.insert(last, v);
            Ok(())
        }
        Some(Value::Array(a)) => {
            if last == "-" {
                a.push(v);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| PatchError::BadIndex { path: path.into() })?;
            if i > a.len() {
                return Err(PatchError::IndexOutOfRange { path: path.into() });
            }
            a.insert(i, v);
            Ok(())
        }
        _ => Err(PatchError::MissingPath { path: path.into() }),
    }
}

fn pointer_remove(doc: &mut Value, path: &str) -> Result<(), PatchError> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => m
            .remove(&last)
            .map(|_| ())
            .ok_or_else(|| PatchError::RemoveMissing { path: path.into() }),
        Some(Value::Array(a)) => {
            let i: usize = last
                .parse()
                .map_err(|_| PatchError::BadIndex { path: path.into() })?;
            if i >= a.len() {
                return Err(PatchError::IndexOutOfRange { path: path.into() });
            }
            a.remove(i);
            Ok(())
        }
        _ => Err(PatchError::RemoveMissing { path: path.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_json_patches() {
        let mut doc = json!({"data": {"a": "1", "b": "2"}, "metadata": {"name": "x"}});
        merge_patch(&mut doc, &json!({"data": {"a": null, "c": "3"}}));
        assert_eq!(doc["data"], json!({"b": "2", "c": "3"}));
        apply_json_patch(
            &mut doc,
            &json!([{"op": "add", "path": "/data/d", "value": "4"}, {"op": "remove", "path": "/data/b"}, {"op": "test", "path": "/data/c", "value": "3"}]),
        )
        .unwrap();
        assert_eq!(doc["data"], json!({"c": "3", "d": "4"}));
        assert!(apply_json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/data/c", "value": "9"}])
        )
        .is_err());
    }

    #[test]
    fn media_types_pick_the_patch_and_strategic_merge_replaces_lists() {
        assert_eq!(
            PatchType::from_media_type("application/json-patch+json"),
            Some(PatchType::Json)
        );
        assert_eq!(PatchType::from_media_type("application/json"), None);
        let mut doc = json!({"spec": {"taints": [{"key": "a"}, {"key": "b"}]}});
        PatchType::StrategicMerge
            .apply(&mut doc, &json!({"spec": {"taints": [{"key": "c"}]}}))
            .unwrap();
        assert_eq!(doc["spec"]["taints"], json!([{"key": "c"}]));
    }

    #[test]
    fn json_patch_failures_say_which_operation_and_path() {
        let doc = json!({"data": {"a": "1"}, "list": ["x"]});
        let fail = |patch: Value| {
            let mut d = doc.clone();
            PatchType::Json.apply(&mut d, &patch).unwrap_err()
        };
        assert_eq!(
            fail(json!({"op": "add"})).to_string(),
            "a JSON patch must be an array of operations"
        );
        assert_eq!(
            fail(json!([{"op": "frob", "path": "/data"}])).to_string(),
            "unknown JSON patch operation \"frob\""
        );
        assert_eq!(
            fail(json!([{"op": "add", "path": "/data/b"}])).to_string(),
            "add operation needs a value"
        );
        assert_eq!(
            fail(json!([{"op": "remove", "path": "/data/zz"}])).to_string(),
            "remove operation does not apply: doc is missing path: /data/zz"
        );
        assert_eq!(
            fail(json!([{"op": "add", "path": "/list/5", "value": "y"}])).to_string(),
            "index out of range in /list/5"
        );
        assert_eq!(
            fail(json!([{"op": "move", "from": "/nope", "path": "/data/c"}])).to_string(),
            "move operation: missing from /nope"
        );
        assert!(fail(json!({"op": "add"})).is_malformed());
        assert!(!fail(json!([{"op": "test", "path": "/data/a", "value": "2"}])).is_malformed());
    }
}
