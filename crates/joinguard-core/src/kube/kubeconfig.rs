//! Reading a kubeconfig: the current context's server, its CA and the user's credentials.
//!
//! This file owns the kubeconfig format (clientcmd's `Config` v1) as far as a control-plane node
//! needs it: kubeadm's `admin.conf` and `super-admin.conf` (client certificate and key, embedded),
//! the kubeconfigs Cluster API writes, and token kubeconfigs. Paths in the file are relative to the
//! file's directory, as clientcmd resolves them. Credential plugins (`exec`, `auth-provider`) and
//! `insecure-skip-tls-verify` are refused with an error that says so: a join's status writes must
//! not run against an unverified server. Secrets are held in [`Zeroizing`] buffers and never
//! appear in errors.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use zeroize::Zeroizing;

/// What to authenticate with.
pub enum Credentials {
    /// `user.token` or `user.tokenFile`.
    Token(Zeroizing<String>),
    /// `user.client-certificate(-data)` and `user.client-key(-data)`.
    ClientCert {
        cert_pem: Vec<u8>,
        key_pem: Zeroizing<Vec<u8>>,
        /// Where the certificate came from, for error messages.
        source: PathBuf,
    },
    /// No credentials: requests are anonymous.
    Anonymous,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Credentials::Token(_) => "Token(<redacted>)",
            Credentials::ClientCert { .. } => "ClientCert(<redacted>)",
            Credentials::Anonymous => "Anonymous",
        })
    }
}

/// The parts of a kubeconfig a client needs, for its current context.
#[derive(Debug)]
pub struct Kubeconfig {
    pub path: PathBuf,
    /// The context used.
    pub context: String,
    /// `cluster.server`, e.g. `https://10.0.0.10:6443`.
    pub server: String,
    /// PEM of the CA that signs the server's certificate.
    pub ca_pem: Vec<u8>,
    /// `cluster.tls-server-name`, when set.
    pub tls_server_name: Option<String>,
    pub credentials: Credentials,
}

/// Why a kubeconfig cannot be used. It names the file; the caller names the input the file came
/// from (a flag, a config key) before it. The CLI maps every variant to exit 2.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("{}: cannot read the file ({source}); expected a kubeconfig such as /etc/kubernetes/admin.conf", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a kubeconfig ({reason})", path.display())]
    Parse { path: PathBuf, reason: String },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("{}: {what} is not supported by joinguard; use a kubeconfig with a client certificate or a token (kubeadm's admin.conf has one)", path.display())]
    Unsupported { path: PathBuf, what: String },
}

/// clientcmd writes `contexts: null` and `users: null` (cluster-info's kubeconfig does), so every
/// list may be null.
#[derive(Deserialize)]
struct RawConfig {
    #[serde(rename = "current-context", default)]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Option<Vec<Named<RawCluster>>>,
    #[serde(default)]
    contexts: Option<Vec<Named<RawContext>>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "context")]
    item: T,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: RawUser,
}

#[derive(Deserialize)]
struct RawCluster {
    server: Option<String>,
    #[serde(rename = "certificate-authority-data")]
    ca_data: Option<String>,
    #[serde(rename = "certificate-authority")]
    ca_file: Option<PathBuf>,
    #[serde(rename = "insecure-skip-tls-verify", default)]
    insecure: bool,
    #[serde(rename = "tls-server-name")]
    tls_server_name: Option<String>,
}

#[derive(Deserialize)]
struct RawContext {
    cluster: String,
    #[serde(default)]
    user: String,
}

#[derive(Deserialize, Default)]
struct RawUser {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    #[serde(rename = "client-certificate-data")]
    cert_data: Option<String>,
    #[serde(rename = "client-certificate")]
    cert_file: Option<PathBuf>,
    #[serde(rename = "client-key-data")]
    key_data: Option<String>,
    #[serde(rename = "client-key")]
    key_file: Option<PathBuf>,
    exec: Option<serde_json::Value>,
    #[serde(rename = "auth-provider")]
    auth_provider: Option<serde_json::Value>,
    username: Option<String>,
    password: Option<String>,
}

impl Kubeconfig {
    /// Reads and resolves `path`, using `context` or the file's `current-context`.
    pub fn load(path: &Path, context: Option<&str>) -> Result<Kubeconfig, KubeconfigError> {
        let text =
            crate::limits::read_file(path).map_err(|source| KubeconfigError::Unreadable {
                path: path.to_owned(),
                source,
            })?;
        Self::parse(path, &text, context)
    }

    /// Resolves kubeconfig text; `path` names the file in errors and anchors relative paths.
    pub fn parse(
        path: &Path,
        text: &[u8],
        context: Option<&str>,
    ) -> Result<Kubeconfig, KubeconfigError> {
        let invalid = |reason: String| KubeconfigError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let raw: RawConfig = crate::yaml::from_slice(text).map_err(|e| KubeconfigError::Parse {
            path: path.to_owned(),
            // The YAML error names a line and column, never the secret values themselves.
            reason: e.to_string(),
        })?;
        let clusters = raw.clusters.unwrap_or_default();
        let contexts = raw.contexts.unwrap_or_default();
        let current = raw.current_context.unwrap_or_default();
        // A kubeconfig with one cluster and no contexts at all (kubeadm's cluster-info, file
        // discovery) names that cluster, with no user.
        let implicit;
        let (context, ctx) = match context {
            None if contexts.is_empty() && current.is_empty() && clusters.len() == 1 => {
                implicit = RawContext {
                    cluster: clusters[0].name.clone(),
                    user: String::new(),
                };
                (String::new(), &implicit)
            }
            _ => {
                let context = match context {
                    Some(c) => c.to_string(),
                    None if !current.is_empty() => current.clone(),
                    None if contexts.len() == 1 => contexts[0].name.clone(),
                    None => {
                        return Err(invalid(
                            "no current-context is set; name a context or set current-context in the file"
                                .into(),
                        ))
                    }
                };
                let ctx = contexts
                    .iter()
                    .find(|c| c.name == context)
                    .map(|c| &c.item)
                    .ok_or_else(|| {
                        invalid(format!("context {context:?} is not defined in the file"))
                    })?;
                (context, ctx)
            }
        };
        let cluster = clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .ok_or_else(|| {
                invalid(format!(
                    "context {context:?} names cluster {:?}, which is not defined",
                    ctx.cluster
                ))
            })?;
        let cluster = &cluster.item;
        let server = cluster
            .server
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(format!("cluster {:?} has no server", ctx.cluster)))?;
        if !server.starts_with("https://") {
            return Err(invalid(format!(
                "server {server:?} is not an https:// URL; the API server is only reached over TLS"
            )));
        }
        if cluster.insecure {
            return Err(KubeconfigError::Unsupported {
                path: path.to_owned(),
                what: "insecure-skip-tls-verify".into(),
            });
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let ca_pem = match (&cluster.ca_data, &cluster.ca_file) {
            (Some(d), _) => decode(path, "certificate-authority-data", d)?,
            (None, Some(f)) => read_rel(path, dir, f, "certificate-authority")?,
            (None, None) => {
                return Err(invalid(format!(
                    "cluster {:?} has no certificate-authority(-data); joinguard does not trust \
                     the system roots for an API server",
                    ctx.cluster
                )))
            }
        };
        let user = if ctx.user.is_empty() {
            RawUser::default()
        } else {
            raw.users
                .unwrap_or_default()
                .into_iter()
                .find(|u| u.name == ctx.user)
                .ok_or_else(|| {
                    invalid(format!(
                        "context {context:?} names user {:?}, which is not defined",
                        ctx.user
                    ))
                })?
                .user
        };
        if user.exec.is_some() {
            return Err(KubeconfigError::Unsupported {
                path: path.to_owned(),
                what: "an exec credential plugin".into(),
            });
        }
        if user.auth_provider.is_some() {
            return Err(KubeconfigError::Unsupported {
                path: path.to_owned(),
                what: "an auth-provider".into(),
            });
        }
        if user.password.is_some() {
            return Err(KubeconfigError::Unsupported {
                path: path.to_owned(),
                what: "basic authentication (username and password)".into(),
            });
        }
        let _ = user.username;
        let cert = match (&user.cert_data, &user.cert_file) {
            (Some(d), _) => Some((decode(path, "client-certificate-data", d)?, path.to_owned())),
            (None, Some(f)) => Some((read_rel(path, dir, f, "client-certificate")?, dir.join(f))),
            (None, None) => None,
        };
        let key = match (&user.key_data, &user.key_file) {
            (Some(d), _) => Some(Zeroizing::new(decode(path, "client-key-data", d)?)),
            (None, Some(f)) => Some(Zeroizing::new(read_rel(path, dir, f, "client-key")?)),
            (None, None) => None,
        };
        let credentials = match (cert, key, user.token, user.token_file) {
            (Some((cert_pem, source)), Some(key_pem), _, _) => Credentials::ClientCert {
                cert_pem,
                key_pem,
                source,
            },
            (Some(_), None, _, _) | (None, Some(_), _, _) => {
                return Err(invalid(
                    "the user has a client certificate without a key, or a key without a \
                     certificate"
                        .into(),
                ))
            }
            (None, None, Some(t), _) => Credentials::Token(Zeroizing::new(t)),
            (None, None, None, Some(f)) => {
                let t = read_rel(path, dir, &f, "tokenFile")?;
                let t = String::from_utf8(t)
                    .map_err(|_| invalid("tokenFile is not UTF-8 text".into()))?;
                Credentials::Token(Zeroizing::new(t.trim().to_string()))
            }
            (None, None, None, None) => Credentials::Anonymous,
        };
        Ok(Kubeconfig {
            path: path.to_owned(),
            context,
            server,
            ca_pem,
            tls_server_name: cluster.tls_server_name.clone(),
            credentials,
        })
    }
}

fn decode(path: &Path, field: &str, data: &str) -> Result<Vec<u8>, KubeconfigError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| KubeconfigError::Invalid {
            path: path.to_owned(),
            reason: format!("{field} is not base64 ({e})"),
        })
}

fn read_rel(path: &Path, dir: &Path, f: &Path, field: &str) -> Result<Vec<u8>, KubeconfigError> {
    let full = dir.join(f);
    crate::limits::read_file(&full).map_err(|e| KubeconfigError::Invalid {
        path: path.to_owned(),
        reason: format!("{field} {}: cannot read the file ({e})", full.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn config(user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://10.0.0.10:6443\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: admin\n  name: admin@kubernetes\ncurrent-context: admin@kubernetes\nusers:\n- name: admin\n  user:\n{user}",
            b64(CA)
        )
    }

    #[test]
    fn admin_conf_with_embedded_client_certificate() {
        let text = config(&format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64("CERT"),
            b64("KEY")
        ));
        let k = Kubeconfig::parse(
            Path::new("/etc/kubernetes/admin.conf"),
            text.as_bytes(),
            None,
        )
        .unwrap();
        assert_eq!(k.server, "https://10.0.0.10:6443");
        assert_eq!(k.ca_pem, CA.as_bytes());
        assert_eq!(k.context, "admin@kubernetes");
        match &k.credentials {
            Credentials::ClientCert {
                cert_pem, key_pem, ..
            } => {
                assert_eq!(cert_pem, b"CERT");
                assert_eq!(key_pem.as_slice(), b"KEY");
            }
            other => panic!("{other:?}"),
        }
        assert!(
            !format!("{k:?}").contains("KEY"),
            "Debug must not print secrets"
        );
    }

    #[test]
    fn cluster_info_style_kubeconfig_with_null_lists_names_its_one_cluster() {
        let text = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://10.0.0.10:6443\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
            b64(CA)
        );
        let k = Kubeconfig::parse(Path::new("cluster-info"), text.as_bytes(), None).unwrap();
        assert_eq!(k.server, "https://10.0.0.10:6443");
        assert!(matches!(k.credentials, Credentials::Anonymous));
    }

    #[test]
    fn token_and_token_file() {
        let k = Kubeconfig::parse(
            Path::new("k"),
            config("    token: abc.def\n").as_bytes(),
            None,
        )
        .unwrap();
        assert!(matches!(&k.credentials, Credentials::Token(t) if t.as_str() == "abc.def"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tok"), "s3cret\n").unwrap();
        let path = dir.path().join("kubeconfig");
        let k = Kubeconfig::parse(&path, config("    tokenFile: tok\n").as_bytes(), None).unwrap();
        assert!(matches!(&k.credentials, Credentials::Token(t) if t.as_str() == "s3cret"));
    }

    #[test]
    fn refuses_what_it_cannot_verify_or_run() {
        let exec = config("    exec:\n      command: aws\n");
        let e = Kubeconfig::parse(Path::new("k"), exec.as_bytes(), None).unwrap_err();
        assert!(e.to_string().contains("exec credential plugin"), "{e}");
        let insecure = config("    token: t\n").replace(
            "    server: https",
            "    insecure-skip-tls-verify: true\n    server: https",
        );
        let e = Kubeconfig::parse(Path::new("k"), insecure.as_bytes(), None).unwrap_err();
        assert!(e.to_string().contains("insecure-skip-tls-verify"), "{e}");
        let http = config("    token: t\n").replace("https://", "http://");
        let e = Kubeconfig::parse(Path::new("k"), http.as_bytes(), None).unwrap_err();
        assert!(e.to_string().contains("not an https:// URL"), "{e}");
    }

    #[test]
    fn errors_name_the_missing_piece_without_secrets() {
        let text = config("    token: supersecret\n").replace(
            "current-context: admin@kubernetes",
            "current-context: other",
        );
        let e = Kubeconfig::parse(Path::new("k"), text.as_bytes(), None).unwrap_err();
        assert!(
            e.to_string().contains("context \"other\" is not defined"),
            "{e}"
        );
        assert!(!e.to_string().contains("supersecret"));
        let e = Kubeconfig::parse(Path::new("k"), b"not: [valid", None).unwrap_err();
        assert!(matches!(e, KubeconfigError::Parse { .. }), "{e}");
        let half = config(&format!("    client-certificate-data: {}\n", b64("C")));
        let e = Kubeconfig::parse(Path::new("k"), half.as_bytes(), None).unwrap_err();
        assert!(e.to_string().contains("without a key"), "{e}");
    }
}
