//! The object verbs, as kube-apiserver's generic registry serves them over etcd: get and list
//! (with selectors, and as a `Table` for `kubectl get`), create (with `generateName`, name
//! validation, uid and creationTimestamp), update and patch (read, transform, compare-and-swap
//! with resourceVersion preconditions, as `GuaranteedUpdate`), delete, and the Secret conversion
//! (`stringData`, base64 `data`, type Opaque). [`upsert`] and [`get_object`] are the server's own
//! way in, without authentication, for fixtures and tests.
//!
//! This module owns what a verb does to the stored object. It must not parse URLs or authenticate
//! (the router does), word failures itself (the Status bodies do) or hold connection state; it
//! reaches etcd only through the store.

// The error of a handler step is the HTTP response to send; it is built once per failed
// request, so boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use base64::Engine as _;
use hyper::StatusCode;
use serde_json::{json, Map, Value};

use super::patch::PatchType;
use super::resources::{find_kind, NameRule, ResourceDef, ResourceRequest};
use super::selectors::{FieldSelector, LabelSelector};
use super::status::{
    already_exists, bad_request, conflict, details, invalid, json_response, not_found, patch_error,
    status_response, storage_error, uuid, Cause, Resp,
};
use super::store::{StoreError, Stored};
use super::time::now_rfc3339;
use super::Shared;

/// Why the server's own (unauthenticated) object access failed: [`super::ApiServer::upsert`]
/// and [`super::ApiServer::get_object`]. `object` names the object as `Kind namespace/name`.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The stand-in has no resource of this apiVersion and kind.
    #[error("the stand-in does not serve {kind} in {api_version}")]
    NotServed {
        /// The object's `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
    /// `metadata.name`, or for a namespaced kind `metadata.namespace`, is missing.
    #[error("{object}: name and (for namespaced kinds) namespace are required")]
    Unnamed {
        /// The object.
        object: String,
    },
    /// The object is not a JSON object.
    #[error("{object}: not a JSON object")]
    NotAnObject {
        /// The object.
        object: String,
    },
    /// A Secret's `data` value is not base64.
    #[error("{object}: data is not base64")]
    NotBase64 {
        /// The object.
        object: String,
    },
    /// `metadata` is not a JSON object.
    #[error("{object}: metadata")]
    Metadata {
        /// The object.
        object: String,
    },
    /// etcd failed or timed out.
    #[error("{object}: {reason}")]
    Store {
        /// The object.
        object: String,
        /// The storage error.
        reason: String,
    },
    /// Every attempt lost its compare-and-swap to another writer.
    #[error("{object}: kept losing races with other writers")]
    Races {
        /// The object.
        object: String,
    },
}

/// Creates `obj`, or replaces the stored object of that name, without authorization: the
/// fixture's way in. Returns the stored object with its resourceVersion.
pub(super) async fn upsert(shared: &Shared, obj: Value) -> Result<Value, ObjectError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let def = find_kind(api_version, kind).ok_or_else(|| ObjectError::NotServed {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let object = format!("{} {ns}/{name}", def.kind);
    if name.is_empty() || (def.namespaced && ns.is_empty()) {
        return Err(ObjectError::Unnamed { object });
    }
    let Value::Object(mut map) = obj.clone() else {
        return Err(ObjectError::NotAnObject { object });
    };
    if def.kind == "Secret" && normalize_secret(def, &mut map).is_err() {
        return Err(ObjectError::NotBase64 { object });
    }
    let store_err = |object: &str, e: StoreError| ObjectError::Store {
        object: object.to_string(),
        reason: format!("{e:?}"),
    };
    let key = def.key(ns, name);
    for _ in 0..UPDATE_ATTEMPTS {
        let existing = shared
            .store
            .get(&key)
            .await
            .map_err(|e| store_err(&object, e))?;
        let mut new = Value::Object(map.clone());
        let Some(meta) = new["metadata"].as_object_mut() else {
            return Err(ObjectError::Metadata { object });
        };
        meta.remove("resourceVersion");
        let written = match &existing {
            None => {
                meta.insert("uid".into(), uuid().into());
                meta.insert("creationTimestamp".into(), now_rfc3339().into());
                shared.store.create(&key, &new).await
            }
            Some(e) => {
                carry_identity(&mut new, &e.obj);
                shared.store.update(&key, &new, e.mod_revision).await
            }
        }
        .map_err(|e| store_err(&object, e))?;
        if let Some(rev) = written {
            new["metadata"]["resourceVersion"] = rev.to_string().into();
            return Ok(new);
        }
    }
    Err(ObjectError::Races { object })
}

/// Reads an object without authorization.
pub(super) async fn get_object(
    shared: &Shared,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, ObjectError> {
    let def = find_kind(api_version, kind).ok_or_else(|| ObjectError::NotServed {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    Ok(shared
        .store
        .get(&def.key(namespace, name))
        .await
        .map_err(|e| ObjectError::Store {
            object: format!("{kind} {namespace}/{name}"),
            reason: format!("{e:?}"),
        })?
        .map(|s| s.obj))
}

pub(super) async fn get(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    table: bool,
) -> Resp {
    match shared.store.get(&def.key(&rr.namespace, &rr.name)).await {
        Ok(Some(s)) if table => json_response(StatusCode::OK, &to_table(def, &[s.obj], None)),
        Ok(Some(s)) => json_response(StatusCode::OK, &s.obj),
        Ok(None) => not_found(def, &rr.name),
        Err(e) => storage_error(&e),
    }
}

pub(super) async fn list(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    query: &[(String, String)],
    table: bool,
) -> Resp {
    let selector = query
        .iter()
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let fields = query
        .iter()
        .find(|(k, _)| k == "fieldSelector")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let Some(selector) = LabelSelector::parse(selector) else {
        return bad_request(&format!("unable to parse requirement: {selector:?}"));
    };
    let Some(fields) = FieldSelector::parse(fields) else {
        return bad_request(&format!("invalid field selector: {fields:?}"));
    };
    let (items, rev) = match shared.store.list(&def.prefix(&rr.namespace)).await {
        Ok(x) => x,
        Err(e) => return storage_error(&e),
    };
    let items: Vec<Value> = items
        .into_iter()
        .map(|s| s.obj)
        .filter(|o| selector.matches(o) && fields.matches(o))
        .map(|mut o| {
            // Items of a typed list carry no TypeMeta on the wire.
            if let Some(m) = o.as_object_mut() {
                m.remove("kind");
                m.remove("apiVersion");
            }
            o
        })
        .collect();
    if table {
        return json_response(StatusCode::OK, &to_table(def, &items, Some(rev)));
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(),
            "metadata": {"resourceVersion": rev.to_string()},
            "items": items,
        }),
    )
}

/// A `meta.k8s.io/v1` Table, as kube-apiserver's default table convertor makes it (Name and
/// Created At), so `kubectl get` prints something sensible.
fn to_table(def: &ResourceDef, items: &[Value], rev: Option<i64>) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let meta = o.get("metadata").cloned().unwrap_or_else(|| json!({}));
            json!({
                "cells": [
                    meta.get("name").cloned().unwrap_or(Value::Null),
                    meta.get("creationTimestamp").cloned().unwrap_or(Value::Null),
                ],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                },
            })
        })
        .collect();
    let mut t = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": rows,
    });
    if let Some(rev) = rev {
        t["metadata"]["resourceVersion"] = rev.to_string().into();
    }
    let _ = def;
    t
}

/// Parses a JSON request body into an object of `def`'s kind, or the error kube-apiserver gives.
fn decode_body(def: &ResourceDef, body: &[u8]) -> Result<Map<String, Value>, Resp> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        bad_request(&format!(
            "{} in version \"{}\" cannot be handled as a {}: {e}",
            def.kind, def.version, def.kind
        ))
    })?;
    let Value::Object(mut obj) = v else {
        return Err(bad_request(&format!(
            "{} in version \"{}\" cannot be handled as a {}: the body is not a JSON object",
            def.kind, def.version, def.kind
        )));
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or(def.kind);
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| def.api_version());
    if kind != def.kind || api_version != def.api_version() {
        return Err(bad_request(&format!(
            "{kind} in version \"{api_version}\" cannot be handled as a {}: no kind \"{kind}\" is registered for version \"{api_version}\"",
            def.kind
        )));
    }
    obj.insert("kind".into(), def.kind.into());
    obj.insert("apiVersion".into(), def.api_version().into());
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj.insert("metadata".into(), json!({}));
    }
    if def.kind == "Secret" {
        normalize_secret(def, &mut obj)?;
    }
    Ok(obj)
}

/// What the Secret's internal conversion does: `stringData` is merged into `data`, the type
/// defaults to Opaque, and `data` must be base64.
fn normalize_secret(def: &ResourceDef, obj: &mut Map<String, Value>) -> Result<(), Resp> {
    let b64 = base64::engine::general_purpose::STANDARD;
    if let Some(Value::Object(sd)) = obj.remove("stringData") {
        let data = obj.entry("data").or_insert_with(|| json!({}));
        if let Some(data) = data.as_object_mut() {
            for (k, v) in sd {
                data.insert(k, b64.encode(v.as_str().unwrap_or("")).into());
            }
        }
    }
    if let Some(Value::Object(data)) = obj.get("data") {
        for (k, v) in data {
            let ok = v.as_str().is_some_and(|s| b64.decode(s).is_ok());
            if !ok {
                return Err(bad_request(&format!(
                    "{} in version \"v1\" cannot be handled as a {}: illegal base64 data in key {k:?}",
                    def.kind, def.kind
                )));
            }
        }
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        obj.insert("type".into(), "Opaque".into());
    }
    Ok(())
}

fn meta_str<'a>(obj: &'a Map<String, Value>, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn meta_mut(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let m = obj.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut().expect("metadata is an object")
}

fn validate_name(def: &ResourceDef, name: &str) -> Option<Resp> {
    match def.names {
        NameRule::Subdomain => {
            let label_ok = |l: &str| {
                !l.is_empty()
                    && l.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            };
            if name.len() > 253 {
                return Some(invalid(
                    def,
                    name,
                    "metadata.name",
                    name,
                    "must be no more than 253 characters",
                ));
            }
            if !name.split('.').all(label_ok) {
                return Some(invalid(
                    def,
                    name,
                    "metadata.name",
                    name,
                    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ));
            }
            None
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                return Some(invalid(
                    def,
                    name,
                    "metadata.name",
                    name,
                    &format!("may not be '{name}'"),
                ));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    return Some(invalid(
                        def,
                        name,
                        "metadata.name",
                        name,
                        &format!("may not contain '{bad}'"),
                    ));
                }
            }
            None
        }
    }
}

/// Checks the object's namespace against the URL's and sets it (or removes it for
/// cluster-scoped kinds).
fn check_namespace(
    def: &ResourceDef,
    rr: &ResourceRequest,
    obj: &mut Map<String, Value>,
) -> Option<Resp> {
    let ns = meta_str(obj, "namespace").to_string();
    if def.namespaced {
        if !ns.is_empty() && ns != rr.namespace {
            return Some(bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta_mut(obj).insert("namespace".into(), rr.namespace.clone().into());
    } else {
        meta_mut(obj).remove("namespace");
    }
    None
}

const GENERATE_CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

pub(super) async fn create(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    body: &[u8],
) -> Resp {
    let mut obj = match decode_body(def, body) {
        Ok(o) => o,
        Err(r) => return r,
    };
    if let Some(r) = check_namespace(def, rr, &mut obj) {
        return r;
    }
    let mut name = meta_str(&obj, "name").to_string();
    if name.is_empty() {
        let generate = meta_str(&obj, "generateName").to_string();
        if generate.is_empty() {
            let mut d = details(def.group, def.kind, "");
            d.causes = vec![Cause {
                reason: "FieldValueRequired",
                message: "Required value: name or generateName is required".into(),
                field: "metadata.name",
            }];
            return status_response(
                422,
                "Invalid",
                &format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    def.qualified_kind()
                ),
                Some(d),
            );
        }
        let suffix: String = (0..5)
            .map(|_| GENERATE_CHARS[rand::random_range(0..GENERATE_CHARS.len())] as char)
            .collect();
        name = format!("{generate}{suffix}");
        meta_mut(&mut obj).insert("name".into(), name.clone().into());
    }
    if let Some(r) = validate_name(def, &name) {
        return r;
    }
    if !meta_str(&obj, "resourceVersion").is_empty() {
        // etcd3 store's Create; kube-apiserver passes the plain error on as a 500.
        return status_response(
            500,
            "",
            "resourceVersion should not be set on objects to be created",
            None,
        );
    }
    let meta = meta_mut(&mut obj);
    meta.insert("uid".into(), uuid().into());
    meta.insert("creationTimestamp".into(), now_rfc3339().into());
    meta.remove("deletionTimestamp");
    meta.remove("selfLink");
    let mut obj = Value::Object(obj);
    match shared
        .store
        .create(&def.key(&rr.namespace, &name), &obj)
        .await
    {
        Ok(Some(rev)) => {
            obj["metadata"]["resourceVersion"] = rev.to_string().into();
            json_response(StatusCode::CREATED, &obj)
        }
        Ok(None) => already_exists(def, &name),
        Err(e) => storage_error(&e),
    }
}

/// Attempts of an update whose etcd compare lost a race with no resourceVersion given
/// (`GuaranteedUpdate` retries these too).
const UPDATE_ATTEMPTS: usize = 10;

pub(super) async fn update(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    body: &[u8],
) -> Resp {
    let mut obj = match decode_body(def, body) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let body_name = meta_str(&obj, "name").to_string();
    if body_name != rr.name {
        return bad_request(&format!(
            "the name of the object ({body_name}) does not match the name on the URL ({})",
            rr.name
        ));
    }
    if let Some(r) = check_namespace(def, rr, &mut obj) {
        return r;
    }
    let rv = meta_str(&obj, "resourceVersion").to_string();
    let precondition = match parse_rv(&rv) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let key = def.key(&rr.namespace, &rr.name);
    write_loop(shared, def, &rr.name, &key, precondition, |existing| {
        Ok(Value::Object(obj.clone())).map(|mut new| {
            carry_identity(&mut new, &existing.obj);
            new
        })
    })
    .await
}

pub(super) async fn patch(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    content_type: &str,
    body: &[u8],
) -> Resp {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let Some(patch_type) = PatchType::from_media_type(media) else {
        return status_response(
            415,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: {} (got {media:?})",
                PatchType::ACCEPTED
            ),
            None,
        );
    };
    let patch: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(&format!("error decoding patch: {e}")),
    };
    if patch_type != PatchType::Json && !patch.is_object() {
        return bad_request("error decoding patch: a merge patch must be a JSON object");
    }
    // A resourceVersion in a merge patch is a precondition.
    let rv = patch
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let precondition = match parse_rv(&rv) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let key = def.key(&rr.namespace, &rr.name);
    write_loop(shared, def, &rr.name, &key, precondition, |existing| {
        let mut new = existing.obj.clone();
        patch_type
            .apply(&mut new, &patch)
            .map_err(|e| patch_error(&e))?;
        if let Some(m) = new.as_object_mut() {
            m.insert("kind".into(), def.kind.into());
            m.insert("apiVersion".into(), def.api_version().into());
            if def.kind == "Secret" {
                normalize_secret(def, m)?;
            }
        }
        if new
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| v != existing.mod_revision.to_string())
        {
            return Err(conflict(def, &rr.name));
        }
        carry_identity(&mut new, &existing.obj);
        Ok(new)
    })
    .await
}

fn parse_rv(rv: &str) -> Result<Option<i64>, Resp> {
    if rv.is_empty() {
        return Ok(None);
    }
    rv.parse::<i64>().map(Some).map_err(|_| {
        bad_request(&format!(
            "metadata.resourceVersion: Invalid value: {rv:?}: must be a number"
        ))
    })
}

/// Keeps what a client cannot change on update: name, namespace, uid, creationTimestamp.
fn carry_identity(new: &mut Value, existing: &Value) {
    if !new.get("metadata").is_some_and(Value::is_object) {
        new["metadata"] = json!({});
    }
    for f in ["name", "namespace", "uid", "creationTimestamp"] {
        match existing.pointer(&format!("/metadata/{f}")) {
            Some(v) => new["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = new["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
}

/// Read, transform, compare-and-swap: kube-apiserver's `GuaranteedUpdate`. A stale
/// `precondition` is a Conflict; a lost race without one is retried.
async fn write_loop<F>(
    shared: &Shared,
    def: &ResourceDef,
    name: &str,
    key: &str,
    precondition: Option<i64>,
    mut transform: F,
) -> Resp
where
    F: FnMut(&Stored) -> Result<Value, Resp>,
{
    for _ in 0..UPDATE_ATTEMPTS {
        let existing = match shared.store.get(key).await {
            Ok(Some(s)) => s,
            Ok(None) => return not_found(def, name),
            Err(e) => return storage_error(&e),
        };
        if precondition.is_some_and(|rv| rv != existing.mod_revision) {
            return conflict(def, name);
        }
        let mut new = match transform(&existing) {
            Ok(v) => v,
            Err(r) => return r,
        };
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        let mut old = existing.obj.clone();
        if let Some(m) = old.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        if new == old {
            // Nothing changed: kube-apiserver does not write, and the resourceVersion stays.
            return json_response(StatusCode::OK, &existing.obj);
        }
        match shared.store.update(key, &new, existing.mod_revision).await {
            Ok(Some(rev)) => {
                new["metadata"]["resourceVersion"] = rev.to_string().into();
                return json_response(StatusCode::OK, &new);
            }
            Ok(None) if precondition.is_some() => return conflict(def, name),
            Ok(None) => continue,
            Err(e) => return storage_error(&e),
        }
    }
    conflict(def, name)
}

pub(super) async fn delete(shared: &Shared, def: &ResourceDef, rr: &ResourceRequest) -> Resp {
    let key = def.key(&rr.namespace, &rr.name);
    for _ in 0..UPDATE_ATTEMPTS {
        let existing = match shared.store.get(&key).await {
            Ok(Some(s)) => s,
            Ok(None) => return not_found(def, &rr.name),
            Err(e) => return storage_error(&e),
        };
        match shared.store.delete(&key, existing.mod_revision).await {
            Ok(true) => {
                let uid = existing
                    .obj
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let mut d = details(def.group, def.resource, &rr.name);
                d.uid = uid.into();
                return status_response(200, "", "", Some(d));
            }
            Ok(false) => continue,
            Err(e) => return storage_error(&e),
        }
    }
    conflict(def, &rr.name)
}
