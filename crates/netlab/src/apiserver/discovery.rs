//! The non-resource endpoints, answered as kube-apiserver answers what `kubectl` and kubeadm
//! ask before they touch an object: `/api`, `/apis` and the group/version resource lists
//! (discovery), `/openapi/v3` (just enough for `kubectl`'s server-side field validation check),
//! `/version`, and `/livez`, `/readyz`, `/healthz` with `?verbose` (readyz and healthz include an
//! etcd check).
//!
//! This module owns those documents. It must not serve objects (the verbs do) or invent
//! resources: discovery lists exactly the table in `resources`.

use std::fmt::Write as _;
use std::time::Duration;

use hyper::{Method, StatusCode};
use serde_json::{json, Map, Value};

use super::resources::{RBAC, RESOURCES, VERBS};
use super::status::{json_response, method_not_allowed, text_response, Resp};
use super::Shared;

/// A request that names no resource: discovery, OpenAPI, `/version`, the health endpoints, or a
/// path nobody serves.
pub(super) async fn non_resource(
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
