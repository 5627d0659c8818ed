//! What the stand-in answers with: kube-apiserver's `metav1.Status` error bodies, with their
//! exact reasons, messages and details (NotFound, AlreadyExists, Conflict, Invalid, Forbidden,
//! storage errors, the answers of faults), and the response envelope every answer shares
//! (content type, `cache-control`, `audit-id`).
//!
//! This module owns the wording a client sees when a request fails, so that a test of joinguard
//! reads the same text it would read from kube-apiserver. It must not decide *whether* a request
//! fails (the router, the verbs and the patch code do) and must not reach etcd or read requests.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde_json::{Map, Value};

use super::auth::{Attributes, UserInfo};
use super::faults::FaultKind;
use super::patch::PatchError;
use super::resources::{qualify, ResourceDef};
use super::store::StoreError;

/// Every answer: a body already in memory.
pub(super) type Resp = Response<Full<Bytes>>;

/// A `metav1.Status`, with its fields in kube-apiserver's order.
#[derive(Serialize)]
struct Status<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: Map<String, Value>,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    code: u16,
}

pub(super) fn status_response(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Details>,
) -> Resp {
    let body = Status {
        kind: "Status",
        api_version: "v1",
        metadata: Map::new(),
        status: if code < 400 { "Success" } else { "Failure" },
        message,
        reason,
        details,
        code,
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    respond(
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        "application/json",
        bytes,
    )
}

/// `StatusDetails`, fields in kube-apiserver's order; empty ones are left out, as `omitempty`
/// does.
#[derive(Serialize, Default)]
pub(super) struct Details {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(super) uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) causes: Vec<Cause>,
    #[serde(rename = "retryAfterSeconds", skip_serializing_if = "Option::is_none")]
    pub(super) retry_after_seconds: Option<u32>,
}

/// `StatusCause`.
#[derive(Serialize)]
pub(super) struct Cause {
    pub(super) reason: &'static str,
    pub(super) message: String,
    pub(super) field: &'static str,
}

pub(super) fn details(group: &str, kind: &str, name: &str) -> Details {
    Details {
        name: name.into(),
        group: group.into(),
        kind: kind.into(),
        ..Details::default()
    }
}

/// A failure about one object, with kube-apiserver's `StatusDetails` (name, group, resource).
fn about(def: &ResourceDef, name: &str, code: u16, reason: &str, message: &str) -> Resp {
    status_response(
        code,
        reason,
        message,
        Some(details(def.group, def.resource, name)),
    )
}

pub(super) fn not_found(def: &ResourceDef, name: &str) -> Resp {
    let message = format!("{} \"{name}\" not found", def.qualified_resource());
    about(def, name, 404, "NotFound", &message)
}

pub(super) fn already_exists(def: &ResourceDef, name: &str) -> Resp {
    let message = format!("{} \"{name}\" already exists", def.qualified_resource());
    about(def, name, 409, "AlreadyExists", &message)
}

/// `apierrors.NewConflict(..., storage.NewResourceVersionConflictsError)` as an update with a
/// stale resourceVersion gets it.
pub(super) fn conflict(def: &ResourceDef, name: &str) -> Resp {
    let message = format!(
        "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
        def.qualified_resource()
    );
    about(def, name, 409, "Conflict", &message)
}

pub(super) fn bad_request(message: &str) -> Resp {
    status_response(400, "BadRequest", message, None)
}

pub(super) fn invalid(
    def: &ResourceDef,
    name: &str,
    field: &'static str,
    value: &str,
    why: &str,
) -> Resp {
    let detail = format!("Invalid value: \"{value}\": {why}");
    let mut d = details(def.group, def.kind, name);
    d.causes = vec![Cause {
        reason: "FieldValueInvalid",
        message: detail.clone(),
        field,
    }];
    status_response(
        422,
        "Invalid",
        &format!(
            "{} \"{name}\" is invalid: {field}: {detail}",
            def.qualified_kind()
        ),
        Some(d),
    )
}

pub(super) fn resource_not_found() -> Resp {
    status_response(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(Details::default()),
    )
}

pub(super) fn method_not_allowed() -> Resp {
    status_response(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        Some(Details::default()),
    )
}

pub(super) fn unauthorized() -> Resp {
    status_response(401, "Unauthorized", "Unauthorized", None)
}

/// `responsewriters.Forbidden` with `forbiddenMessage`.
pub(super) fn forbidden(user: &UserInfo, attrs: &Attributes) -> Resp {
    match &attrs.resource {
        None => status_response(
            403,
            "Forbidden",
            &format!(
                "forbidden: User \"{}\" cannot {} path \"{}\"",
                user.name, attrs.verb, attrs.path
            ),
            Some(Details::default()),
        ),
        Some(r) => {
            let resource = if r.subresource.is_empty() {
                r.resource.clone()
            } else {
                format!("{}/{}", r.resource, r.subresource)
            };
            let scope = if r.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace \"{}\"", r.namespace)
            };
            let why = format!(
                "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                user.name, attrs.verb, r.group
            );
            let qualified = qualify(&r.resource, &r.group);
            let message = if r.name.is_empty() {
                format!("{qualified} is forbidden: {why}")
            } else {
                format!("{qualified} \"{}\" is forbidden: {why}", r.name)
            };
            status_response(
                403,
                "Forbidden",
                &message,
                Some(details(&r.group, &r.resource, &r.name)),
            )
        }
    }
}

/// How kube-apiserver reports a storage failure: etcd's message as a 500 with no reason, or a
/// 504 Timeout.
pub(super) fn storage_error(e: &StoreError) -> Resp {
    match e {
        StoreError::Etcd(m) => status_response(500, "", m, None),
        StoreError::Corrupt(m) => status_response(500, "InternalError", m, None),
        StoreError::Timeout => status_response(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
            Some(Details::default()),
        ),
    }
}

/// A JSON patch that cannot be applied: a malformed patch document is a 400 BadRequest, an
/// operation that does not apply to the object a 422 Invalid, as kube-apiserver's patcher
/// answers.
pub(super) fn patch_error(e: &PatchError) -> Resp {
    let message = e.to_string();
    if e.is_malformed() {
        bad_request(&message)
    } else {
        status_response(422, "Invalid", &message, None)
    }
}

/// The answer a fault gives instead of the real one.
pub(super) fn fault_response(kind: &FaultKind) -> Resp {
    match kind {
        FaultKind::TooManyRequests { retry_after_s } => {
            let mut r = status_response(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                Some(Details {
                    retry_after_seconds: Some(*retry_after_s),
                    ..Details::default()
                }),
            );
            if let Ok(v) = HeaderValue::from_str(&retry_after_s.to_string()) {
                r.headers_mut().insert("retry-after", v);
            }
            r
        }
        FaultKind::LeaderChanged => status_response(500, "", "etcdserver: leader changed", None),
        _ => status_response(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            Some(Details::default()),
        ),
    }
}

fn respond(code: StatusCode, content_type: &str, body: Vec<u8>) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(CONTENT_TYPE, v);
    }
    h.insert(
        "cache-control",
        HeaderValue::from_static("no-cache, private"),
    );
    if let Ok(v) = HeaderValue::from_str(&uuid()) {
        h.insert("audit-id", v);
    }
    r
}

pub(super) fn json_response(code: StatusCode, v: &Value) -> Resp {
    respond(
        code,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

pub(super) fn text_response(code: StatusCode, body: &str) -> Resp {
    respond(code, "text/plain; charset=utf-8", body.as_bytes().to_vec())
}

/// A random UUID v4, as kube-apiserver gives each object.
pub(super) fn uuid() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::super::patch::{PatchError, PatchType};
    use super::super::resources::{find_resource, RBAC};
    use super::*;

    fn body(r: Resp) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let b = rt.block_on(async { r.into_body().collect().await.unwrap().to_bytes().to_vec() });
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn status_bodies_match_kube_apiserver() {
        let def = find_resource("", "v1", "configmaps").unwrap();
        assert_eq!(
            body(not_found(def, "x")),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"x\" not found","reason":"NotFound","details":{"name":"x","kind":"configmaps"},"code":404}"#
        );
        let c = body(conflict(def, "kubeadm-config"));
        assert!(c.contains(r#""message":"Operation cannot be fulfilled on configmaps \"kubeadm-config\": the object has been modified; please apply your changes to the latest version and try again""#), "{c}");
        let roles = find_resource(RBAC, "v1", "roles").unwrap();
        let nf = body(not_found(roles, "r"));
        assert!(
            nf.contains(r#"roles.rbac.authorization.k8s.io \"r\" not found"#),
            "{nf}"
        );
        assert!(
            nf.contains(
                r#""details":{"name":"r","group":"rbac.authorization.k8s.io","kind":"roles"}"#
            ),
            "{nf}"
        );
    }

    #[test]
    fn a_malformed_json_patch_is_400_and_one_that_does_not_apply_is_422() {
        let mut doc = serde_json::json!({"data": {}});
        let e: PatchError = PatchType::Json
            .apply(&mut doc, &serde_json::json!({"op": "add"}))
            .unwrap_err();
        let r = patch_error(&e);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(body(r).contains(
            r#""message":"a JSON patch must be an array of operations","reason":"BadRequest""#
        ));
        let e = PatchType::Json
            .apply(
                &mut doc,
                &serde_json::json!([{"op": "replace", "path": "/data/x", "value": "1"}]),
            )
            .unwrap_err();
        let r = patch_error(&e);
        assert_eq!(r.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(body(r).contains(r#""message":"replace operation does not apply: doc is missing key: /data/x","reason":"Invalid""#));
    }

    #[test]
    fn uuids_are_v4() {
        let u = uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
