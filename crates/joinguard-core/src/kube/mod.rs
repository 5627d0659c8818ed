//! A small Kubernetes API client for the join's own calls: JSON over HTTPS/1.1, one fresh
//! connection per request.
//!
//! This module owns speaking to the API server: the kubeconfig ([`kubeconfig`]), TLS with the
//! cluster CA and the client certificate or token, and turning every answer into a value or an
//! [`ApiCallError`] that the retry layer can classify (status, `Status` body, `Retry-After`). It
//! does not retry: every call site wraps its calls in [`crate::retry`].
//!
//! Why not kube-rs: the retry layer must see the raw status, the `Status` body and the
//! `Retry-After` header of every answer, and each attempt must go out on a fresh connection so that
//! after a blackout the next attempt is not stuck behind a pooled connection that the kernel is
//! still retransmitting on. The dozen requests of a join need neither watches nor typed objects,
//! and the TLS stack (rustls, the CA and identity loading) is the one preflight already uses.

pub(crate) mod error;
pub(crate) mod kubeconfig;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{
    HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST, RETRY_AFTER, USER_AGENT,
};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use url::Url;
use zeroize::Zeroizing;

use crate::input::Named;
use crate::probe::identity::{CaBundle, ClientIdentity, IdentityError, ALPN_HTTP1};
use crate::probe::tls::{self, TlsClient, TlsFailure};
use crate::sample::ProbeFailure;

pub use error::{ApiCallError, ApiError, TransportError};
pub use kubeconfig::{Credentials, Kubeconfig, KubeconfigError};

/// Largest response body read (kube-apiserver's request limit is 3 MiB; a kubeadm-config
/// ConfigMap is a few KiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Why a client could not be built from a kubeconfig. Exit 2.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{input} {source}")]
    Kubeconfig {
        input: Named,
        #[source]
        source: KubeconfigError,
    },
    #[error("{input} {}: server {server:?} is not a usable URL ({source})", path.display())]
    Server {
        input: Named,
        path: std::path::PathBuf,
        server: String,
        #[source]
        source: UrlError,
    },
    #[error(transparent)]
    Tls(#[from] IdentityError),
    /// A server URL that did not come from a kubeconfig (discovery's, a minted identity's).
    #[error(transparent)]
    Url(#[from] UrlError),
}

/// Why a server URL cannot be used for an API client.
#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("{0}")]
    Parse(#[from] url::ParseError),
    /// An IPv6 address without brackets (`https://::1:6443`), which the URL parser reads as an
    /// empty host.
    #[error("an IPv6 address in a URL needs brackets; write {suggest}")]
    Unbracketed { suggest: String },
    #[error("not an https:// URL")]
    NotHttps,
    #[error("no host")]
    NoHost,
}

/// A client for one API server, as a kubeconfig describes it.
#[derive(Clone)]
pub struct ApiClient {
    host: String,
    port: u16,
    /// The TLS server name, when it differs from `host` (`tls-server-name`).
    server_name: String,
    base_path: String,
    tls: TlsClient,
    bearer: Option<Zeroizing<String>>,
    user_agent: String,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("server", &self.server())
            .field("tls", &self.tls)
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ApiClient {
    /// Reads a kubeconfig and builds a client for its current (or the given) context.
    /// `input` names the kubeconfig in errors, as the user gave it.
    pub(crate) fn from_kubeconfig(
        input: &Named,
        path: &Path,
        context: Option<&str>,
    ) -> Result<ApiClient, ClientError> {
        let k = Kubeconfig::load(path, context).map_err(|source| ClientError::Kubeconfig {
            input: input.clone(),
            source,
        })?;
        Self::new(input, &k)
    }

    /// A client as the kubeconfig `k` describes it; `input` names it in errors.
    pub fn new(input: &Named, k: &Kubeconfig) -> Result<ApiClient, ClientError> {
        let ca = CaBundle::from_pem(input.clone(), &k.path, k.ca_pem.clone())?;
        let (identity, bearer) = match &k.credentials {
            Credentials::ClientCert {
                cert_pem,
                key_pem,
                source,
            } => (
                Some(ClientIdentity::from_pem(
                    (input.clone(), source, cert_pem.clone()),
                    (input.clone(), source, key_pem.clone()),
                )?),
                None,
            ),
            Credentials::Token(t) => (None, Some(t.as_str())),
            Credentials::Anonymous => (None, None),
        };
        let tls = TlsClient::new(&ca, identity.as_ref(), &[ALPN_HTTP1])?;
        let mut client =
            ApiClient::with_tls(&k.server, tls, bearer).map_err(|source| ClientError::Server {
                input: input.clone(),
                path: k.path.clone(),
                server: k.server.clone(),
                source,
            })?;
        if let Some(name) = &k.tls_server_name {
            client.server_name = name.clone();
        }
        Ok(client)
    }

    /// A client for `server` (`https://host:port`) with the given TLS set-up and, optionally, a
    /// bearer token. Discovery uses it with an unverified `TlsClient` for its first fetch.
    pub fn with_tls(
        server: &str,
        tls: TlsClient,
        token: Option<&str>,
    ) -> Result<ApiClient, UrlError> {
        let url = Url::parse(server).map_err(|e| match crate::target::bracketed_ipv6(server) {
            Some(suggest) => UrlError::Unbracketed { suggest },
            None => UrlError::Parse(e),
        })?;
        if url.scheme() != "https" {
            return Err(UrlError::NotHttps);
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(h) => h.to_string(),
            None => return Err(UrlError::NoHost),
        };
        let port = url.port_or_known_default().unwrap_or(443);
        Ok(ApiClient {
            server_name: host.clone(),
            host,
            port,
            base_path: url.path().trim_end_matches('/').to_string(),
            tls,
            bearer: token.map(|t| Zeroizing::new(format!("Bearer {t}"))),
            user_agent: format!("joinguard/{}", env!("CARGO_PKG_VERSION")),
        })
    }

    /// The same client, its connections tunnelled through the `http://` proxy `env` names for
    /// the server (Go's rules, as client-go applies them), or direct.
    pub fn through_env(mut self, env: &crate::proxy::ProxyEnv) -> Self {
        let proxy = match env.route("https", &self.host, self.port) {
            crate::proxy::Route::Proxy(p) => Some(p),
            crate::proxy::Route::Direct(_) => None,
        };
        self.tls = self.tls.through(proxy);
        self
    }

    /// `https://host:port` of the server.
    pub fn server(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }

    /// The server's socket address, when its host is an IP literal (for wake-on-connect).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.host
            .parse()
            .ok()
            .map(|ip| SocketAddr::new(ip, self.port))
    }

    /// `GET path`.
    pub async fn get(&self, path: &str, timeout: Duration) -> Result<Value, ApiCallError> {
        self.request(Method::GET, path, None, timeout).await
    }

    /// `POST path` with `body`.
    pub async fn create(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, ApiCallError> {
        self.request(Method::POST, path, Some(body), timeout).await
    }

    /// `PUT path` with `body` (which carries its `resourceVersion`: a precondition).
    pub async fn update(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, ApiCallError> {
        self.request(Method::PUT, path, Some(body), timeout).await
    }

    /// One request on a fresh connection, all of it within `timeout`.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiCallError> {
        match tokio::time::timeout(timeout, self.request_inner(method, path, body, timeout)).await {
            Ok(r) => r,
            Err(_) => Err(TransportError::Timeout.into()),
        }
    }

    async fn request_inner(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, ApiCallError> {
        let (stream, _) =
            tls::handshake_named(&self.host, &self.server_name, self.port, &self.tls, timeout)
                .await
                .map_err(transport_of_tls)?;
        let (mut sender, conn) = crate::limits::http1_client()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| TransportError::from_error(&e))?;
        // The connection task ends when the request is answered (no keep-alive use) or dropped.
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let _abort = AbortOnDrop(conn);
        let payload = match body {
            Some(v) => Bytes::from(serde_json::to_vec(v).map_err(|e| {
                ApiCallError::Transport(TransportError::Other(format!("encoding the body: {e}")))
            })?),
            None => Bytes::new(),
        };
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base_path, path))
            .header(HOST, format!("{}:{}", self.server_name, self.port))
            .header(ACCEPT, "application/json")
            .header(USER_AGENT, &self.user_agent);
        if body.is_some() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        if let Some(b) = &self.bearer {
            let mut v = HeaderValue::from_str(b.as_str()).map_err(|_| {
                ApiCallError::Transport(TransportError::Other(
                    "the kubeconfig token has characters not allowed in a header".into(),
                ))
            })?;
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
        let req = req
            .body(Full::new(payload))
            .map_err(|e| ApiCallError::Transport(TransportError::Other(e.to_string())))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| TransportError::from_error(&e))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(h) => TransportError::from_error(&*h),
                Err(other) => TransportError::Other(format!("reading the body: {other}")),
            })?
            .to_bytes();
        if (200..300).contains(&status) {
            serde_json::from_slice(&bytes).map_err(|e| {
                ApiCallError::Transport(TransportError::Other(format!(
                    "the server answered {status} with a body that is not JSON ({e})"
                )))
            })
        } else {
            Err(ApiError::from_response(status, retry_after.as_deref(), &bytes).into())
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn transport_of_tls(f: TlsFailure) -> ApiCallError {
    let t = match &f {
        TlsFailure::Tcp(ProbeFailure::Refused) => TransportError::Refused,
        TlsFailure::Tcp(ProbeFailure::Timeout(_)) | TlsFailure::Timeout(_) => {
            TransportError::Timeout
        }
        TlsFailure::Tcp(ProbeFailure::Io(text)) => {
            let l = text.to_ascii_lowercase();
            if l.contains("unreachable") {
                TransportError::Unreachable
            } else if l.contains("reset") {
                TransportError::Reset
            } else {
                TransportError::Other(text.clone())
            }
        }
        TlsFailure::Tcp(other) => TransportError::Other(other.to_string()),
        TlsFailure::Untrusted(t) => TransportError::Untrusted(Box::new(t.clone())),
        TlsFailure::NotTls(_) => TransportError::NotTls(f.to_string()),
        // A reset or EOF during the handshake is a load balancer dropping us, not a certificate
        // problem; an alert is the server refusing our certificate (permanent).
        TlsFailure::Handshake(text) => {
            let l = text.to_ascii_lowercase();
            if l.contains("reset") {
                TransportError::Reset
            } else if l.contains("eof") || l.contains("closed") {
                TransportError::Eof
            } else {
                TransportError::Tls(text.clone())
            }
        }
    };
    ApiCallError::Transport(t)
}

/// Percent-encodes one path segment, leaving RFC 3986 `pchar`s as they are (so
/// `kubeadm:nodes-kubeadm-config` goes out as kubectl sends it). Object names are DNS subdomains
/// or, for RBAC, may hold `:`; this is a guard against anything else.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:@!$&'()*+,;=".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
