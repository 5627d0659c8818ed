//! The API handlers: request routing in kube-apiserver's `RequestInfo` terms, the resources the
//! stand-in serves, their verbs, discovery, `/version`, the health endpoints, and `Status`
//! bodies with kube-apiserver's exact messages.
//!
//! This module owns what a client sees on the wire. It must not hold connection state (faults and
//! the request log live in the server) or reach etcd except through the store.

// The error of a handler step is the HTTP response to send; it is built once per failed
// request, so boxing it would only add an allocation.
#![allow(clippy::result_large_err)]

use std::fmt::Write as _;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tracing::debug;

use super::auth::{self, Attributes, AuthnError, ResourceAttrs, UserInfo};
use super::faults::FaultKind;
use super::store::{StoreError, Stored};
use super::time::now_rfc3339;
use super::{Shared, BODY_TIMEOUT};

type Resp = Response<Full<Bytes>>;

/// How a resource's names are validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameRule {
    /// RFC 1123 subdomain (ConfigMaps, Secrets, Nodes).
    Subdomain,
    /// A path segment (RBAC objects: `kubeadm:nodes-kubeadm-config` is valid).
    PathSegment,
}

/// A resource the stand-in serves.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    /// The etcd key segment (kube-apiserver stores Nodes under `minions`).
    etcd: &'static str,
    short_names: &'static [&'static str],
    names: NameRule,
}

const RBAC: &str = "rbac.authorization.k8s.io";

const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        etcd: "configmaps",
        short_names: &["cm"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        etcd: "minions",
        short_names: &["no"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        etcd: "pods",
        short_names: &["po"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        etcd: "secrets",
        short_names: &[],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        etcd: "clusterrolebindings",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        etcd: "clusterroles",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        etcd: "rolebindings",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        etcd: "roles",
        short_names: &[],
        names: NameRule::PathSegment,
    },
];

const VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update"];

impl ResourceDef {
    fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// `schema.GroupResource.String()`: `configmaps`, `roles.rbac.authorization.k8s.io`.
    fn qualified_resource(&self) -> String {
        qualify(self.resource, self.group)
    }
    /// `schema.GroupKind.String()`: `ConfigMap`, `Role.rbac.authorization.k8s.io`.
    fn qualified_kind(&self) -> String {
        qualify(self.kind, self.group)
    }
    fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("/registry/{}/{namespace}/{name}", self.etcd)
        } else {
            format!("/registry/{}/{name}", self.etcd)
        }
    }
    fn prefix(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("/registry/{}/{namespace}/", self.etcd)
        } else {
            format!("/registry/{}/", self.etcd)
        }
    }
}

fn qualify(what: &str, group: &str) -> String {
    if group.is_empty() {
        what.to_string()
    } else {
        format!("{what}.{group}")
    }
}

fn find_resource(group: &str, version: &str, resource: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.group == group && d.version == version && d.resource == resource)
}

/// A resource request, parsed like kube-apiserver's `RequestInfoFactory`.
#[derive(Debug)]
struct ResourceRequest {
    group: String,
    version: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    verb: &'static str,
}

fn parse_resource_request(
    method: &Method,
    path: &str,
    query: &[(String, String)],
) -> Option<ResourceRequest> {
    // Go's net/http hands kube-apiserver the decoded path: `kubeadm%3Anodes` is `kubeadm:nodes`.
    let decoded: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|seg| percent_decode(&seg.replace('+', "%2B")))
        .collect();
    let segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, resource, name, subresource) = match rest {
        ["namespaces", ns, res, tail @ ..] => (
            *ns,
            *res,
            tail.first().copied().unwrap_or(""),
            tail.get(1).copied().unwrap_or(""),
        ),
        // `/api/v1/namespaces/<ns>` is the Namespace object itself.
        ["namespaces", ns] => ("", "namespaces", *ns, ""),
        [res, tail @ ..] => (
            "",
            *res,
            tail.first().copied().unwrap_or(""),
            tail.get(1).copied().unwrap_or(""),
        ),
        [] => return None,
    };
    let watch = query
        .iter()
        .any(|(k, v)| k == "watch" && (v == "true" || v == "1"));
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", false) => "get",
        ("GET" | "HEAD", true) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", false) => "delete",
        ("DELETE", true) => "deletecollection",
        _ => "",
    };
    Some(ResourceRequest {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
        verb,
    })
}

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

fn status_response(code: u16, reason: &str, message: &str, details: Option<Details>) -> Resp {
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
struct Details {
    #[serde(skip_serializing_if = "String::is_empty")]
    name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    causes: Vec<Cause>,
    #[serde(rename = "retryAfterSeconds", skip_serializing_if = "Option::is_none")]
    retry_after_seconds: Option<u32>,
}

/// `StatusCause`.
#[derive(Serialize)]
struct Cause {
    reason: &'static str,
    message: String,
    field: &'static str,
}

fn details(group: &str, kind: &str, name: &str) -> Details {
    Details {
        name: name.into(),
        group: group.into(),
        kind: kind.into(),
        ..Details::default()
    }
}

fn not_found(def: &ResourceDef, name: &str) -> Resp {
    status_response(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", def.qualified_resource()),
        Some(details(def.group, def.resource, name)),
    )
}

fn already_exists(def: &ResourceDef, name: &str) -> Resp {
    status_response(
        409,
        "AlreadyExists",
        &format!("{} \"{name}\" already exists", def.qualified_resource()),
        Some(details(def.group, def.resource, name)),
    )
}

/// `apierrors.NewConflict(..., storage.NewResourceVersionConflictsError)` as an update with a
/// stale resourceVersion gets it.
fn conflict(def: &ResourceDef, name: &str) -> Resp {
    status_response(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            def.qualified_resource()
        ),
        Some(details(def.group, def.resource, name)),
    )
}

fn bad_request(message: &str) -> Resp {
    status_response(400, "BadRequest", message, None)
}

fn invalid(def: &ResourceDef, name: &str, field: &'static str, value: &str, why: &str) -> Resp {
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

fn resource_not_found() -> Resp {
    status_response(
        404,
        "NotFound",
        "the server could not find the requested resource",
        Some(Details::default()),
    )
}

fn method_not_allowed() -> Resp {
    status_response(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        Some(Details::default()),
    )
}

fn unauthorized() -> Resp {
    status_response(401, "Unauthorized", "Unauthorized", None)
}

/// `responsewriters.Forbidden` with `forbiddenMessage`.
fn forbidden(user: &UserInfo, attrs: &Attributes) -> Resp {
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
fn storage_error(e: &StoreError) -> Resp {
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

/// The answer a fault gives instead of the real one.
pub(crate) fn fault_response(kind: &FaultKind) -> Resp {
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

fn json_response(code: StatusCode, v: &Value) -> Resp {
    respond(
        code,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    )
}

fn text_response(code: StatusCode, body: &str) -> Resp {
    respond(code, "text/plain; charset=utf-8", body.as_bytes().to_vec())
}

/// A random UUID v4, as kube-apiserver gives each object.
pub(crate) fn uuid() -> String {
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

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(s.get(i + 1..i + 3).unwrap_or("zz"), 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// Authenticates, authorizes and serves one request. Returns the response and the user name.
pub(crate) async fn dispatch(
    shared: &Shared,
    cert_user: Option<UserInfo>,
    req: Request<Incoming>,
) -> (Resp, Option<String>) {
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // kube-apiserver's union authenticator tries x509 before bearer tokens.
    let authenticated = match cert_user {
        Some(u) => Ok(u),
        None => auth::authenticate(&shared.store, &shared.admin_token, header.as_deref()).await,
    };
    let user = match authenticated {
        Ok(u) => u,
        Err(AuthnError::Invalid(reason)) => {
            debug!(%reason, "API server stand-in: bearer token rejected");
            return (unauthorized(), None);
        }
        Err(AuthnError::Store(e)) => {
            debug!(error = ?e, "API server stand-in: reading the token secret failed");
            return (unauthorized(), None);
        }
    };
    let name = Some(user.name.clone());
    (serve(shared, &user, req).await, name)
}

async fn serve(shared: &Shared, user: &UserInfo, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = parse_query(req.uri().query());
    let rr = parse_resource_request(&method, &path, &query);
    let attrs = match &rr {
        Some(r) => Attributes {
            verb: r.verb.to_string(),
            resource: Some(ResourceAttrs {
                group: r.group.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
            }),
            path: path.clone(),
        },
        None => Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            resource: None,
            path: path.clone(),
        },
    };
    match auth::authorize(&shared.store, user, &attrs).await {
        Ok(true) => {}
        Ok(false) => return forbidden(user, &attrs),
        Err(e) => return storage_error(&e),
    }
    let Some(rr) = rr else {
        return non_resource(shared, &method, &path, &query).await;
    };
    let Some(def) = find_resource(&rr.group, &rr.version, &rr.resource) else {
        return resource_not_found();
    };
    if !rr.subresource.is_empty()
        || (def.namespaced && rr.namespace.is_empty() && rr.verb != "list")
    {
        return resource_not_found();
    }
    if !def.namespaced && !rr.namespace.is_empty() {
        return resource_not_found();
    }
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let table = accept.contains("as=Table");
    match rr.verb {
        "get" => get(shared, def, &rr, table).await,
        "list" => list(shared, def, &rr, &query, table).await,
        "create" | "update" | "patch" => {
            let content_type = req
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_string();
            let body = match read_body(shared, req).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            match rr.verb {
                "create" => create(shared, def, &rr, &body).await,
                "update" => update(shared, def, &rr, &body).await,
                _ => patch(shared, def, &rr, &content_type, &body).await,
            }
        }
        "delete" => delete(shared, def, &rr).await,
        _ => method_not_allowed(),
    }
}

async fn read_body(shared: &Shared, req: Request<Incoming>) -> Result<Bytes, Resp> {
    let too_large = || {
        status_response(
            413,
            "RequestEntityTooLarge",
            &format!("Request entity too large: limit is {}", shared.body_limit),
            None,
        )
    };
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > shared.body_limit) {
        return Err(too_large());
    }
    let body = Limited::new(req.into_body(), shared.body_limit);
    match tokio::time::timeout(BODY_TIMEOUT, body.collect()).await {
        Err(_) => Err(status_response(
            408,
            "Timeout",
            "request body was not received in time",
            None,
        )),
        Ok(Err(e)) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(too_large())
            } else {
                Err(bad_request(&format!("reading the request body: {e}")))
            }
        }
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

async fn non_resource(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &[(String, String)],
) -> Resp {
    if method != Method::GET && method != Method::HEAD {
        return method_not_allowed();
    }
    let addr = shared.addr.to_string();
    match path {
        "/version" | "/version/" => json_response(StatusCode::OK, &version_info(&shared.version)),
        "/livez" | "/healthz" | "/readyz" => {
            health(shared, path.trim_start_matches('/'), query).await
        }
        "/api" | "/api/" => json_response(
            StatusCode::OK,
            &json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
            }),
        ),
        "/apis" | "/apis/" => json_response(
            StatusCode::OK,
            &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [rbac_group()]}),
        ),
        "/api/v1" | "/api/v1/" => json_response(StatusCode::OK, &resource_list("", "v1")),
        p if p.trim_end_matches('/') == format!("/apis/{RBAC}") => {
            let mut g = rbac_group();
            g["kind"] = "APIGroup".into();
            g["apiVersion"] = "v1".into();
            json_response(StatusCode::OK, &g)
        }
        p if p.trim_end_matches('/') == format!("/apis/{RBAC}/v1") => {
            json_response(StatusCode::OK, &resource_list(RBAC, "v1"))
        }
        "/openapi/v3" | "/openapi/v3/" => json_response(StatusCode::OK, &openapi_root(shared)),
        "/openapi/v3/api/v1" => json_response(StatusCode::OK, &openapi_doc(shared, "")),
        p if p == format!("/openapi/v3/apis/{RBAC}/v1") => {
            json_response(StatusCode::OK, &openapi_doc(shared, RBAC))
        }
        // What Go's ServeMux answers for a path nobody serves.
        _ => text_response(StatusCode::NOT_FOUND, "404 page not found\n"),
    }
}

/// `/livez`, `/readyz`, `/healthz`, with `?verbose`. readyz and healthz include an etcd check,
/// as kube-apiserver's do.
async fn health(shared: &Shared, which: &str, query: &[(String, String)]) -> Resp {
    let mut checks: Vec<(&str, bool)> = vec![("ping", true), ("log", true)];
    if which != "livez" {
        let ok = tokio::time::timeout(Duration::from_secs(2), shared.store.get("/registry/health"))
            .await
            .is_ok_and(|r| r.is_ok());
        checks.push(("etcd", ok));
    }
    checks.push(("poststarthook/start-apiserver-admission-initializer", true));
    checks.push(("poststarthook/rbac/bootstrap-roles", true));
    let healthy = checks.iter().all(|(_, ok)| *ok);
    let verbose = query.iter().any(|(k, _)| k == "verbose");
    if healthy && !verbose {
        return text_response(StatusCode::OK, "ok");
    }
    let mut body = String::new();
    for (name, ok) in &checks {
        if *ok {
            let _ = writeln!(body, "[+]{name} ok");
        } else {
            let _ = writeln!(body, "[-]{name} failed: reason withheld");
        }
    }
    if healthy {
        let _ = writeln!(body, "{which} check passed");
        text_response(StatusCode::OK, &body)
    } else {
        let _ = writeln!(body, "{which} check failed");
        text_response(StatusCode::INTERNAL_SERVER_ERROR, &body)
    }
}

fn version_info(git_version: &str) -> Value {
    let mut parts = git_version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or("1").to_string();
    let minor = parts.next().unwrap_or("0").to_string();
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": "go1.23.3",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn rbac_group() -> Value {
    let gv = json!({"groupVersion": format!("{RBAC}/v1"), "version": "v1"});
    json!({"name": RBAC, "versions": [gv.clone()], "preferredVersion": gv})
}

fn resource_list(group: &str, version: &str) -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .map(|d| {
            let mut r = json!({
                "name": d.resource,
                "singularName": d.singular,
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": VERBS,
            });
            if !d.short_names.is_empty() {
                r["shortNames"] = json!(d.short_names);
            }
            r
        })
        .collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut list =
        json!({"kind": "APIResourceList", "groupVersion": group_version, "resources": resources});
    if !group.is_empty() {
        list["apiVersion"] = "v1".into();
    }
    list
}

fn openapi_hash(shared: &Shared, group: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{}/{group}", shared.version).as_bytes(),
    );
    d.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect()
}

/// The OpenAPI v3 root. kubectl reads it to learn that the server does field validation
/// (otherwise `kubectl create` falls back to client-side validation and needs `/openapi/v2`).
fn openapi_root(shared: &Shared) -> Value {
    json!({"paths": {
        "api/v1": {"serverRelativeURL": format!("/openapi/v3/api/v1?hash={}", openapi_hash(shared, ""))},
        format!("apis/{RBAC}/v1"): {"serverRelativeURL": format!("/openapi/v3/apis/{RBAC}/v1?hash={}", openapi_hash(shared, RBAC))},
    }})
}

/// A minimal OpenAPI v3 document for one group version: a PATCH operation per kind that
/// declares the `fieldValidation` parameter, which is what kubectl's `QueryParamVerifierV3`
/// looks for. There are no schemas.
fn openapi_doc(shared: &Shared, group: &str) -> Value {
    let mut paths = Map::new();
    for d in RESOURCES.iter().filter(|d| d.group == group) {
        let base = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/{}", d.version)
        };
        let path = if d.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", d.resource)
        } else {
            format!("{base}/{}/{{name}}", d.resource)
        };
        paths.insert(
            path,
            json!({"patch": {
                "operationId": format!("patch{}", d.kind),
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {"group": d.group, "version": d.version, "kind": d.kind},
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"description": "OK"}},
            }}),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": shared.version},
        "paths": paths,
        "components": {"schemas": {}},
    })
}

fn find_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.kind == kind && d.api_version() == api_version)
}

/// Creates `obj`, or replaces the stored object of that name, without authorization: the
/// fixture's way in. Returns the stored object with its resourceVersion.
pub(crate) async fn upsert(shared: &Shared, obj: Value) -> Result<Value, String> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let def = find_kind(api_version, kind)
        .ok_or_else(|| format!("the stand-in does not serve {kind} in {api_version}"))?;
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let what = format!("{} {ns}/{name}", def.kind);
    if name.is_empty() || (def.namespaced && ns.is_empty()) {
        return Err(format!(
            "{what}: name and (for namespaced kinds) namespace are required"
        ));
    }
    let Value::Object(mut map) = obj.clone() else {
        return Err(format!("{what}: not a JSON object"));
    };
    if def.kind == "Secret" {
        normalize_secret(def, &mut map).map_err(|_| format!("{what}: data is not base64"))?;
    }
    let key = def.key(ns, name);
    for _ in 0..UPDATE_ATTEMPTS {
        let existing = shared
            .store
            .get(&key)
            .await
            .map_err(|e| format!("{what}: {e:?}"))?;
        let mut new = Value::Object(map.clone());
        let meta = new["metadata"]
            .as_object_mut()
            .ok_or_else(|| format!("{what}: metadata"))?;
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
        .map_err(|e| format!("{what}: {e:?}"))?;
        if let Some(rev) = written {
            new["metadata"]["resourceVersion"] = rev.to_string().into();
            return Ok(new);
        }
    }
    Err(format!("{what}: kept losing races with other writers"))
}

/// Reads an object without authorization.
pub(crate) async fn get_object(
    shared: &Shared,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Value>, String> {
    let def = find_kind(api_version, kind)
        .ok_or_else(|| format!("the stand-in does not serve {kind} in {api_version}"))?;
    Ok(shared
        .store
        .get(&def.key(namespace, name))
        .await
        .map_err(|e| format!("{kind} {namespace}/{name}: {e:?}"))?
        .map(|s| s.obj))
}

// ---------------------------------------------------------------------------------------------
// Object verbs.

async fn get(shared: &Shared, def: &ResourceDef, rr: &ResourceRequest, table: bool) -> Resp {
    match shared.store.get(&def.key(&rr.namespace, &rr.name)).await {
        Ok(Some(s)) if table => json_response(StatusCode::OK, &to_table(def, &[s.obj], None)),
        Ok(Some(s)) => json_response(StatusCode::OK, &s.obj),
        Ok(None) => not_found(def, &rr.name),
        Err(e) => storage_error(&e),
    }
}

async fn list(
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

async fn create(shared: &Shared, def: &ResourceDef, rr: &ResourceRequest, body: &[u8]) -> Resp {
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

async fn update(shared: &Shared, def: &ResourceDef, rr: &ResourceRequest, body: &[u8]) -> Resp {
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

async fn patch(
    shared: &Shared,
    def: &ResourceDef,
    rr: &ResourceRequest,
    content_type: &str,
    body: &[u8],
) -> Resp {
    let media = content_type.split(';').next().unwrap_or("").trim();
    let json_patch = match media {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => false,
        "application/json-patch+json" => true,
        _ => {
            return status_response(
                415,
                "UnsupportedMediaType",
                &format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {media:?})"),
                None,
            )
        }
    };
    let patch: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(&format!("error decoding patch: {e}")),
    };
    if !json_patch && !patch.is_object() {
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
        if json_patch {
            apply_json_patch(&mut new, &patch)?;
        } else {
            merge_patch(&mut new, &patch);
        }
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

async fn delete(shared: &Shared, def: &ResourceDef, rr: &ResourceRequest) -> Resp {
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

/// RFC 7386 JSON merge patch. Strategic merge patches are applied the same way (the stand-in
/// knows no patch strategies: lists are replaced, never merged by key).
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
fn apply_json_patch(doc: &mut Value, patch: &Value) -> Result<(), Resp> {
    let fail = |m: String| status_response(422, "Invalid", &m, None);
    let ops = patch
        .as_array()
        .ok_or_else(|| bad_request("a JSON patch must be an array of operations"))?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str).unwrap_or("");
        let value = op.get("value").cloned();
        match kind {
            "add" | "replace" => {
                let v = value.ok_or_else(|| fail(format!("{kind} operation needs a value")))?;
                if kind == "replace" && doc.pointer(path).is_none() {
                    return Err(fail(format!(
                        "replace operation does not apply: doc is missing key: {path}"
                    )));
                }
                pointer_set(doc, path, v).map_err(fail)?;
            }
            "remove" => {
                pointer_remove(doc, path).map_err(fail)?;
            }
            "test" => {
                if doc.pointer(path) != value.as_ref() {
                    return Err(fail(format!("testing value {path} failed")));
                }
            }
            "copy" | "move" => {
                let from = op.get("from").and_then(Value::as_str).unwrap_or("");
                let v = doc
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| fail(format!("{kind} operation: missing from {from}")))?;
                if kind == "move" {
                    pointer_remove(doc, from).map_err(fail)?;
                }
                pointer_set(doc, path, v).map_err(fail)?;
            }
            other => {
                return Err(bad_request(&format!(
                    "unknown JSON patch operation {other:?}"
                )))
            }
        }
    }
    Ok(())
}

fn split_pointer(path: &str) -> Result<(String, String), String> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok((
        parent.to_string(),
        last.replace("~1", "/").replace("~0", "~"),
    ))
}

fn pointer_set(doc: &mut Value, path: &str, v: Value) -> Result<(), String> {
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
            let i: usize = last.parse().map_err(|_| format!("bad index in {path}"))?;
            if i > a.len() {
                return Err(format!("index out of range in {path}"));
            }
            a.insert(i, v);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path}")),
    }
}

fn pointer_remove(doc: &mut Value, path: &str) -> Result<(), String> {
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(&parent) {
        Some(Value::Object(m)) => m
            .remove(&last)
            .map(|_| ())
            .ok_or_else(|| format!("remove operation does not apply: doc is missing path: {path}")),
        Some(Value::Array(a)) => {
            let i: usize = last.parse().map_err(|_| format!("bad index in {path}"))?;
            if i >= a.len() {
                return Err(format!("index out of range in {path}"));
            }
            a.remove(i);
            Ok(())
        }
        _ => Err(format!(
            "remove operation does not apply: doc is missing path: {path}"
        )),
    }
}

/// Equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`), comma-separated.
#[derive(Debug)]
struct LabelSelector(Vec<(String, Op, String)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Exists,
    NotExists,
}

impl LabelSelector {
    fn parse(s: &str) -> Option<LabelSelector> {
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

    fn matches(&self, obj: &Value) -> bool {
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
struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    fn parse(s: &str) -> Option<FieldSelector> {
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

    fn matches(&self, obj: &Value) -> bool {
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
    use super::*;

    #[test]
    fn request_info_like_kube_apiserver() {
        let r = parse_resource_request(
            &Method::GET,
            "/api/v1/namespaces/kube-system/configmaps/kubeadm-config",
            &[],
        )
        .unwrap();
        assert_eq!(
            (
                r.group.as_str(),
                r.resource.as_str(),
                r.namespace.as_str(),
                r.name.as_str(),
                r.verb
            ),
            ("", "configmaps", "kube-system", "kubeadm-config", "get")
        );
        let r = parse_resource_request(
            &Method::GET,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            &[],
        )
        .unwrap();
        assert_eq!(
            (r.group.as_str(), r.resource.as_str(), r.verb),
            (RBAC, "clusterroles", "list")
        );
        let r = parse_resource_request(&Method::POST, "/api/v1/namespaces/default/secrets", &[])
            .unwrap();
        assert_eq!(r.verb, "create");
        assert!(parse_resource_request(&Method::GET, "/api/v1", &[]).is_none());
        assert!(parse_resource_request(&Method::GET, "/readyz", &[]).is_none());
    }

    #[test]
    fn status_bodies_match_kube_apiserver() {
        let def = find_resource("", "v1", "configmaps").unwrap();
        let body = |r: Resp| {
            let b = futures_body(r);
            String::from_utf8(b).unwrap()
        };
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

    fn futures_body(r: Resp) -> Vec<u8> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async { r.into_body().collect().await.unwrap().to_bytes().to_vec() })
    }

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
    fn selectors() {
        let o = json!({"metadata": {"name": "n", "namespace": "kube-system", "labels": {"component": "etcd", "tier": "control-plane"}}});
        assert!(LabelSelector::parse("component=etcd,tier=control-plane")
            .unwrap()
            .matches(&o));
        assert!(!LabelSelector::parse("component!=etcd").unwrap().matches(&o));
        assert!(LabelSelector::parse("tier,!missing").unwrap().matches(&o));
        assert!(FieldSelector::parse("metadata.name=n").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.x=1").is_none());
        assert_eq!(percent_decode("a%3Db%2Cc"), "a=b,c");
    }

    #[test]
    fn uuids_are_v4() {
        let u = uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }
}
