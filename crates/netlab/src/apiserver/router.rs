//! Request dispatch: authentication (x509 before bearer tokens, as kube-apiserver's union
//! authenticator), authorization, then the route, with the URL parsed as kube-apiserver's
//! `RequestInfoFactory` parses it (group, version, namespace, resource, name, subresource, verb)
//! after Go's percent-decoding of the path and the query. It also reads request bodies within the
//! body limit and timeout.
//!
//! This module owns the way from a request to the handler that answers it. It must not build
//! answers itself (the verbs, discovery and the Status bodies do), hold connection state (faults
//! and the request log live in the server) or reach etcd except through auth and the handlers.

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request};
use tracing::debug;

use super::auth::{self, Attributes, AuthnError, ResourceAttrs, UserInfo};
use super::resources::{find_resource, ResourceRequest};
use super::status::{
    bad_request, forbidden, method_not_allowed, resource_not_found, status_response, storage_error,
    unauthorized, Resp,
};
use super::{discovery, verbs};
use super::{Shared, BODY_TIMEOUT};

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

/// Decodes `%XX` escapes and `+` (as a space), as Go's `url.QueryUnescape` does; an escape that
/// is not two hex digits is kept as it is.
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

/// The query string as decoded `(key, value)` pairs, in order.
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

/// A request header as text; `None` when absent or not visible ASCII.
fn header(req: &Request<Incoming>, name: HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Authenticates, authorizes and serves one request. Returns the response and the user name.
pub(super) async fn dispatch(
    shared: &Shared,
    cert_user: Option<UserInfo>,
    req: Request<Incoming>,
) -> (Resp, Option<String>) {
    let header = header(&req, AUTHORIZATION).map(str::to_string);
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
        return discovery::non_resource(shared, &method, &path, &query).await;
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
    let table = header(&req, ACCEPT).unwrap_or("").contains("as=Table");
    match rr.verb {
        "get" => verbs::get(shared, def, &rr, table).await,
        "list" => verbs::list(shared, def, &rr, &query, table).await,
        "create" | "update" | "patch" => {
            let content_type = header(&req, CONTENT_TYPE)
                .unwrap_or("application/json")
                .to_string();
            let body = match read_body(shared, req).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            match rr.verb {
                "create" => verbs::create(shared, def, &rr, &body).await,
                "update" => verbs::update(shared, def, &rr, &body).await,
                _ => verbs::patch(shared, def, &rr, &content_type, &body).await,
            }
        }
        "delete" => verbs::delete(shared, def, &rr).await,
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
    let declared = header(&req, CONTENT_LENGTH).and_then(|v| v.parse::<usize>().ok());
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

#[cfg(test)]
mod tests {
    use super::super::resources::RBAC;
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
    fn paths_and_queries_are_percent_decoded_like_go() {
        assert_eq!(percent_decode("a%3Db%2Cc"), "a=b,c");
        // A path segment keeps a literal `+`; a query turns it into a space.
        let r = parse_resource_request(
            &Method::GET,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/kubeadm%3Anodes+x",
            &[],
        )
        .unwrap();
        assert_eq!(r.name, "kubeadm:nodes+x");
        assert_eq!(
            parse_query(Some("labelSelector=a%3Db+c&watch")),
            [
                ("labelSelector".to_string(), "a=b c".to_string()),
                ("watch".to_string(), String::new())
            ]
        );
    }
}
