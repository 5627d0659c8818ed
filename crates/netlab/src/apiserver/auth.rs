//! Authentication and authorization, as kube-apiserver does them for the identities kubeadm uses.
//!
//! Authentication: a bearer token is either the admin token (`kubernetes-admin`, group
//! `system:masters`) or a bootstrap token checked against its `kube-system/bootstrap-token-<id>`
//! Secret exactly as `plugin/pkg/auth/authenticator/token/bootstrap` does (type, secret, id,
//! expiration, `usage-bootstrap-authentication`, `auth-extra-groups`). A request without a
//! bearer token is `system:anonymous`; a bearer token that is not valid is a 401, never
//! anonymous (`bearertoken.Authenticator` turns "not ok" into an error).
//!
//! Authorization: `system:masters` may do anything; the default policy's non-resource rules
//! (`system:public-info-viewer`, `system:discovery`) are built in; everything else is RBAC
//! evaluated from the Roles, RoleBindings, ClusterRoles and ClusterRoleBindings stored in etcd,
//! read on every request (kube-apiserver uses an informer cache). This module must not answer
//! HTTP; it returns decisions.

use std::time::SystemTime;

use base64::Engine as _;
use serde_json::Value;

use super::store::{Store, StoreError};
use super::time::parse_rfc3339;

/// kube-apiserver adds this group to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// ... and this one to the anonymous user.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The anonymous user's name.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group that may do anything.
pub const MASTERS: &str = "system:masters";
/// The admin token's user, as in kubeadm's admin.conf.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// Every bootstrap token user is in this group (`bootstrapapi.BootstrapDefaultGroup`).
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `system:bootstrap:abcdef`.
    pub name: String,
    /// Groups, including `system:authenticated` or `system:unauthenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    pub(crate) fn anonymous() -> UserInfo {
        UserInfo {
            name: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
        }
    }
}

/// Why a request is not authenticated (always a 401 to the client).
#[derive(Debug)]
pub(crate) enum AuthnError {
    /// The token is not valid; the reason is for the log only, as kube-apiserver logs it.
    Invalid(TokenRejected),
    /// Reading the token Secret failed.
    Store(StoreError),
}

/// Why a bearer token is not valid, in the words of kube-apiserver's bootstrap token
/// authenticator (`plugin/pkg/auth/authenticator/token/bootstrap`), which logs them and answers
/// 401. `name` is the Secret's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenRejected {
    #[error("not a bootstrap token")]
    NotBootstrap,
    #[error("no secret bootstrap-token-{id} to match the bearer token")]
    NoSecret { id: String },
    #[error("secret {name} is deleted and awaiting removal")]
    Deleted { name: String },
    #[error("secret {name} has invalid type, expected bootstrap.kubernetes.io/token")]
    WrongType { name: String },
    #[error("secret {name} has invalid value for key token-secret")]
    WrongSecret { name: String },
    #[error("secret {name} has invalid value for key token-id")]
    WrongId { name: String },
    #[error("secret {name} has expired ({expiration})")]
    Expired { name: String, expiration: String },
    #[error("secret {name} not marked usage-bootstrap-authentication=true")]
    NotForAuthentication { name: String },
    #[error("secret {name} has invalid value for key auth-extra-groups: {group:?}")]
    BadGroup { name: String, group: String },
}

/// The user a verified client certificate names: CN is the user, each O a group, plus
/// `system:authenticated` (kube-apiserver's `x509.CommonNameUserConversion`).
pub(crate) fn user_of_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    groups.push(AUTHENTICATED.into());
    Some(UserInfo { name, groups })
}

/// Authenticates from the `Authorization` header value.
pub(crate) async fn authenticate(
    store: &Store,
    admin_token: &str,
    header: Option<&str>,
) -> Result<UserInfo, AuthnError> {
    let Some(header) = header.map(str::trim).filter(|h| !h.is_empty()) else {
        return Ok(UserInfo::anonymous());
    };
    let mut parts = header.splitn(3, ' ');
    let scheme = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("");
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        // Not a bearer token: no authenticator has an opinion, so the request is anonymous.
        return Ok(UserInfo::anonymous());
    }
    if constant_time_eq(token.as_bytes(), admin_token.as_bytes()) {
        return Ok(UserInfo {
            name: ADMIN_USER.into(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        });
    }
    let Some((id, secret)) = parse_bootstrap_token(token) else {
        return Err(AuthnError::Invalid(TokenRejected::NotBootstrap));
    };
    let key = format!("/registry/secrets/kube-system/bootstrap-token-{id}");
    let Some(stored) = store.get(&key).await.map_err(AuthnError::Store)? else {
        return Err(AuthnError::Invalid(TokenRejected::NoSecret {
            id: id.into(),
        }));
    };
    let mut user =
        bootstrap_user(&stored.obj, id, secret, SystemTime::now()).map_err(AuthnError::Invalid)?;
    user.groups.push(AUTHENTICATED.into());
    Ok(user)
}

/// `\A([a-z0-9]{6})\.([a-z0-9]{16})\z` (`bootstraputil.BootstrapTokenRegexp`).
pub(crate) fn parse_bootstrap_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// The checks of the bootstrap token authenticator, in its order.
fn bootstrap_user(
    secret: &Value,
    id: &str,
    token_secret: &str,
    now: SystemTime,
) -> Result<UserInfo, TokenRejected> {
    let name = format!("bootstrap-token-{id}");
    if secret.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(TokenRejected::Deleted { name });
    }
    if secret.get("type").and_then(Value::as_str) != Some("bootstrap.kubernetes.io/token") {
        return Err(TokenRejected::WrongType { name });
    }
    let data = |k: &str| -> String {
        secret
            .get("data")
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
            .map(|v| String::from_utf8_lossy(&v).into_owned())
            .unwrap_or_default()
    };
    if !constant_time_eq(data("token-secret").as_bytes(), token_secret.as_bytes()) {
        return Err(TokenRejected::WrongSecret { name });
    }
    if data("token-id") != id {
        return Err(TokenRejected::WrongId { name });
    }
    let expiration = data("expiration");
    if !expiration.is_empty() {
        // An expiration that does not parse counts as expired (`bootstrapsecretutil.HasExpired`).
        match parse_rfc3339(&expiration) {
            Some(t) if now <= t => {}
            _ => return Err(TokenRejected::Expired { name, expiration }),
        }
    }
    if data("usage-bootstrap-authentication") != "true" {
        return Err(TokenRejected::NotForAuthentication { name });
    }
    let mut groups = vec![BOOTSTRAPPERS.to_string()];
    for g in data("auth-extra-groups").split(',') {
        let g = g.trim();
        if g.is_empty() {
            continue;
        }
        if !valid_bootstrap_group(g) {
            return Err(TokenRejected::BadGroup {
                name,
                group: g.into(),
            });
        }
        if !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    groups.sort();
    Ok(UserInfo {
        name: format!("system:bootstrap:{id}"),
        groups,
    })
}

/// `\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`.
fn valid_bootstrap_group(g: &str) -> bool {
    let Some(rest) = g.strip_prefix("system:bootstrappers:") else {
        return false;
    };
    !rest.is_empty()
        && rest.len() <= 256
        && rest
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b':' || c == b'-')
        && rest
            .bytes()
            .last()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What is being done, in kube-apiserver's `authorizer.Attributes` terms.
#[derive(Clone, Debug)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    /// `Some` for resource requests.
    pub(crate) resource: Option<ResourceAttrs>,
    /// The URL path, for non-resource requests.
    pub(crate) path: String,
}

#[derive(Clone, Debug)]
pub(crate) struct ResourceAttrs {
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

/// `system:public-info-viewer` (bound to authenticated and unauthenticated users).
const PUBLIC_INFO: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];
/// `system:discovery` (bound to authenticated users).
const DISCOVERY: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// Whether `user` may do `attrs`.
pub(crate) async fn authorize(
    store: &Store,
    user: &UserInfo,
    attrs: &Attributes,
) -> Result<bool, StoreError> {
    if user.groups.iter().any(|g| g == MASTERS) {
        return Ok(true);
    }
    let Some(res) = &attrs.resource else {
        if attrs.verb == "get" {
            let authenticated = user.groups.iter().any(|g| g == AUTHENTICATED);
            let unauthenticated = user.groups.iter().any(|g| g == UNAUTHENTICATED);
            if (authenticated || unauthenticated)
                && PUBLIC_INFO.iter().any(|p| url_matches(p, &attrs.path))
            {
                return Ok(true);
            }
            if authenticated && DISCOVERY.iter().any(|p| url_matches(p, &attrs.path)) {
                return Ok(true);
            }
        }
        return cluster_bindings_allow(store, user, attrs).await;
    };
    if !res.namespace.is_empty() {
        let (bindings, _) = store
            .list(&format!("/registry/rolebindings/{}/", res.namespace))
            .await?;
        for b in bindings {
            if !binds(&b.obj, user) {
                continue;
            }
            let kind = b.obj.pointer("/roleRef/kind").and_then(Value::as_str);
            let name = b
                .obj
                .pointer("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let key = match kind {
                Some("Role") => format!("/registry/roles/{}/{name}", res.namespace),
                Some("ClusterRole") => format!("/registry/clusterroles/{name}"),
                _ => continue,
            };
            if let Some(role) = store.get(&key).await? {
                if role_allows(&role.obj, attrs) {
                    return Ok(true);
                }
            }
        }
    }
    cluster_bindings_allow(store, user, attrs).await
}

async fn cluster_bindings_allow(
    store: &Store,
    user: &UserInfo,
    attrs: &Attributes,
) -> Result<bool, StoreError> {
    let (bindings, _) = store.list("/registry/clusterrolebindings/").await?;
    for b in bindings {
        if !binds(&b.obj, user) {
            continue;
        }
        if b.obj.pointer("/roleRef/kind").and_then(Value::as_str) != Some("ClusterRole") {
            continue;
        }
        let name = b
            .obj
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if let Some(role) = store.get(&format!("/registry/clusterroles/{name}")).await? {
            if role_allows(&role.obj, attrs) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Whether a (Cluster)RoleBinding names the user or one of its groups.
fn binds(binding: &Value, user: &UserInfo) -> bool {
    let Some(subjects) = binding.get("subjects").and_then(Value::as_array) else {
        return false;
    };
    subjects.iter().any(|s| {
        let name = s.get("name").and_then(Value::as_str).unwrap_or("");
        match s.get("kind").and_then(Value::as_str) {
            Some("User") => name == user.name,
            Some("Group") => user.groups.iter().any(|g| g == name),
            Some("ServiceAccount") => {
                let ns = s.get("namespace").and_then(Value::as_str).unwrap_or("");
                user.name == format!("system:serviceaccount:{ns}:{name}")
            }
            _ => false,
        }
    })
}

fn role_allows(role: &Value, attrs: &Attributes) -> bool {
    let Some(rules) = role.get("rules").and_then(Value::as_array) else {
        return false;
    };
    let list = |rule: &Value, k: &str| -> Vec<String> {
        rule.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    rules.iter().any(|rule| {
        let verbs = list(rule, "verbs");
        if !verbs.iter().any(|v| v == "*" || *v == attrs.verb) {
            return false;
        }
        match &attrs.resource {
            None => list(rule, "nonResourceURLs")
                .iter()
                .any(|u| url_matches(u, &attrs.path)),
            Some(r) => {
                let groups = list(rule, "apiGroups");
                let resources = list(rule, "resources");
                let names = list(rule, "resourceNames");
                let combined = if r.subresource.is_empty() {
                    r.resource.clone()
                } else {
                    format!("{}/{}", r.resource, r.subresource)
                };
                groups.iter().any(|g| g == "*" || *g == r.group)
                    && resources.iter().any(|x| {
                        x == "*"
                            || *x == combined
                            || (!r.subresource.is_empty() && *x == format!("*/{}", r.subresource))
                    })
                    && (names.is_empty() || names.contains(&r.name))
            }
        }
    })
}

fn url_matches(rule: &str, path: &str) -> bool {
    rule == "*"
        || rule == path
        || rule
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn token_secret(extra: &str, expiration: Option<&str>) -> Value {
        let mut data = serde_json::json!({
            "token-id": b64("abcdef"),
            "token-secret": b64("0123456789abcdef"),
            "usage-bootstrap-authentication": b64("true"),
            "auth-extra-groups": b64(extra),
        });
        if let Some(e) = expiration {
            data["expiration"] = Value::String(b64(e));
        }
        serde_json::json!({"type": "bootstrap.kubernetes.io/token", "data": data})
    }

    #[test]
    fn bootstrap_tokens_are_checked_like_kube_apiserver() {
        assert_eq!(
            parse_bootstrap_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse_bootstrap_token("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse_bootstrap_token("abcdef.0123456789abcde"), None);
        let now = SystemTime::now();
        let s = token_secret("system:bootstrappers:kubeadm:default-node-token", None);
        let u = bootstrap_user(&s, "abcdef", "0123456789abcdef", now).unwrap();
        assert_eq!(u.name, "system:bootstrap:abcdef");
        assert_eq!(
            u.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token"
            ]
        );
        assert!(bootstrap_user(&s, "abcdef", "0123456789abcdee", now).is_err());
        let expired = token_secret("", Some("2001-01-01T00:00:00Z"));
        let e = bootstrap_user(&expired, "abcdef", "0123456789abcdef", now).unwrap_err();
        assert!(e.to_string().contains("expired"), "{e}");
        assert!(
            matches!(e, TokenRejected::Expired { ref expiration, .. } if expiration == "2001-01-01T00:00:00Z"),
            "{e:?}"
        );
        let fresh = token_secret(
            "",
            Some(&super::super::time::format_rfc3339(
                now + Duration::from_secs(60),
            )),
        );
        assert!(bootstrap_user(&fresh, "abcdef", "0123456789abcdef", now).is_ok());
        let bad_group = token_secret("system:masters", None);
        assert!(bootstrap_user(&bad_group, "abcdef", "0123456789abcdef", now).is_err());
        let mut no_usage = token_secret("", None);
        no_usage["data"]["usage-bootstrap-authentication"] = Value::String(b64("false"));
        assert!(bootstrap_user(&no_usage, "abcdef", "0123456789abcdef", now).is_err());
    }

    #[test]
    fn rules_match_verbs_groups_resources_and_names() {
        let role = serde_json::json!({"rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubeadm-config"], "verbs": ["get"]},
            {"nonResourceURLs": ["/metrics*"], "verbs": ["get"]}
        ]});
        let attrs = |verb: &str, name: &str| Attributes {
            verb: verb.into(),
            resource: Some(ResourceAttrs {
                group: String::new(),
                resource: "configmaps".into(),
                subresource: String::new(),
                namespace: "kube-system".into(),
                name: name.into(),
            }),
            path: String::new(),
        };
        assert!(role_allows(&role, &attrs("get", "kubeadm-config")));
        assert!(!role_allows(&role, &attrs("get", "other")));
        assert!(!role_allows(&role, &attrs("update", "kubeadm-config")));
        assert!(!role_allows(&role, &attrs("list", "")));
        let nr = Attributes {
            verb: "get".into(),
            resource: None,
            path: "/metrics/x".into(),
        };
        assert!(role_allows(&role, &nr));
    }
}
