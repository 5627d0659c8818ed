//! A Kubernetes API server stand-in, backed by a real etcd cluster of the lab.
//!
//! No kube-apiserver can be installed on the build machine, so this module serves the part of the
//! Kubernetes API that `kubeadm join` (and joinguard) talk to, as faithfully as it can: HTTPS with a
//! serving certificate from a cluster CA, objects stored as JSON in the real etcd under
//! `/registry/...` with `resourceVersion` taken from the etcd mod revision (so optimistic
//! concurrency gives real 409s), x509 client-certificate authentication against the cluster CA,
//! bearer-token authentication (an admin token and bootstrap tokens read from
//! `bootstrap-token-<id>` Secrets), RBAC evaluated from the stored Roles and Bindings,
//! real `Status` error bodies, discovery good enough for the real `kubectl`, and programmable
//! faults ([`faults`]). [`fixture::kubeadm_init`] writes what `kubeadm init` leaves behind.
//!
//! It runs in process, on its own thread that has entered a lab host's network namespace, so its
//! listener and its etcd connections belong to that host and cross the impairing forwarder. It must
//! not grow into a general API server: no watch, no admission beyond what kubeadm relies on, no
//! protobuf. Every read is bounded (TLS handshake, header and body timeouts, a body size limit, a
//! connection limit, and a timeout on each etcd call).
//!
//! Where things are: this module owns the listener, TLS, connections, faults and the request log;
//! `router` takes a request from authentication to its handler (and owns the URL parsing and
//! percent-decoding); `verbs` serves objects, with `patch` and `selectors` beside it;
//! `discovery` answers `/api`, `/apis`, `/openapi/v3`, `/version` and the health endpoints;
//! `status` words every `Status` body; `resources` is the table of what is served; `store`,
//! `auth`, [`fixture`], [`faults`] and `time` are what their names say.

mod auth;
mod discovery;
pub mod faults;
pub mod fixture;
mod patch;
mod resources;
mod router;
mod selectors;
mod status;
mod store;
mod time;
mod verbs;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify, Semaphore};
use tracing::{debug, warn};

use crate::etcd::EtcdCluster;
use crate::host::Host;
use crate::pki::{CertSpec, KubeadmPki, TestCa};

pub use auth::UserInfo;
pub use faults::{FaultKind, FaultRule, Faults};
pub use fixture::{kubeadm_init, Fixture, FixtureOptions};
pub use hyper::Method;
pub use verbs::ObjectError;

/// kube-apiserver's secure port, as kubeadm configures it.
pub const DEFAULT_PORT: u16 = 6443;
/// What `/version` reports as `gitVersion`.
pub const DEFAULT_VERSION: &str = "v1.32.0-standin";
/// kube-apiserver's default `--max-request-body-bytes` is 3 MiB
/// (`k8s.io/apiserver/pkg/server/config.go`, `MaxRequestBodyBytes`).
pub const DEFAULT_BODY_LIMIT: usize = 3 * 1024 * 1024;

/// Bound on the TLS handshake of one connection.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on reading a request's headers (HTTP/1.1).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on reading a request body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one etcd call. kube-apiserver's `--request-timeout` is 60 s; etcd calls in a lab are
/// fast unless the link is impaired, and a test wants to see the failure sooner.
const ETCD_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on connecting to etcd at start.
const ETCD_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent connections; more are closed at accept.
const MAX_CONNECTIONS: usize = 256;
/// Largest request header block.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Request log entries kept; older ones are dropped first.
const MAX_LOG: usize = 100_000;
/// Bound on start-up and shut-down of the server thread.
const THREAD_TIMEOUT: Duration = Duration::from_secs(20);

/// What can go wrong when starting the stand-in.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listener could not be bound in the host.
    #[error("API server stand-in on {host}: bind {addr}: {source}")]
    Bind {
        /// The lab host.
        host: String,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The etcd cluster could not be reached with the cluster's client identity.
    #[error("API server stand-in on {host}: etcd {endpoints:?}: {reason}; is the cluster healthy (EtcdCluster::wait_healthy)?")]
    Etcd {
        /// The lab host.
        host: String,
        /// The endpoints tried.
        endpoints: Vec<String>,
        /// Why.
        reason: String,
    },
    /// Certificates or TLS configuration.
    #[error("API server stand-in: TLS: {0}")]
    Tls(String),
    /// The lab (namespace, thread) failed.
    #[error("API server stand-in: {0}")]
    Lab(#[from] crate::Error),
    /// A fixture could not be written; the message names the object.
    #[error("API server fixture: {0}")]
    Fixture(String),
    /// Reading or writing an object directly (not over HTTP) failed.
    #[error("API server stand-in: {0}")]
    Object(#[from] ObjectError),
    /// A task on the server's runtime panicked or was cancelled (the server is shutting down).
    #[error("API server stand-in: server task failed: {0}")]
    Task(String),
}

/// How to run the stand-in. Start from `ApiServerOptions::default()`.
#[derive(Debug)]
pub struct ApiServerOptions {
    /// Port on the host's lab address (only that address is bound). Default 6443.
    pub port: u16,
    /// The admin bearer token (user `kubernetes-admin`, group `system:masters`). Default: random.
    pub admin_token: Option<String>,
    /// The cluster CA that signs the serving certificate. Default: the etcd cluster's kubeadm PKI
    /// (its `ca`, CN `kubernetes`), so that one lab has one PKI, as a kubeadm cluster does.
    pub ca: Option<TestCa>,
    /// `gitVersion` in `/version`, e.g. `v1.32.0-standin`.
    pub version: String,
    /// Request body limit in bytes; larger bodies get 413.
    pub body_limit: usize,
}

impl Default for ApiServerOptions {
    fn default() -> Self {
        ApiServerOptions {
            port: DEFAULT_PORT,
            admin_token: None,
            ca: None,
            version: DEFAULT_VERSION.to_string(),
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// One request as the stand-in saw it, in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method.
    pub method: Method,
    /// URL path, without the query.
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// The authenticated user; `None` when authentication failed (401) or a fault answered
    /// before authentication.
    pub user: Option<String>,
    /// The status sent; `None` when a fault dropped the connection without a response.
    pub status: Option<u16>,
    /// When the request arrived.
    pub at: Instant,
}

/// State shared by every connection.
pub(crate) struct Shared {
    pub(crate) store: store::Store,
    pub(crate) faults: Faults,
    pub(crate) log: Mutex<Vec<RequestRecord>>,
    pub(crate) admin_token: String,
    pub(crate) version: String,
    pub(crate) addr: SocketAddr,
    pub(crate) body_limit: usize,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("addr", &self.addr)
            .field("admin_token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn record(&self, rec: RequestRecord) {
        let mut log = self
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.len() >= MAX_LOG {
            // Drop the oldest tenth at once, so trimming stays cheap.
            log.drain(..MAX_LOG / 10);
        }
        log.push(rec);
    }
}

/// A running stand-in. Dropping it stops the server; objects stay in etcd.
pub struct ApiServer {
    shared: Arc<Shared>,
    ca: ServingCa,
    url: String,
    host: Host,
    rt: tokio::runtime::Handle,
    shutdown: Option<watch::Sender<bool>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where the serving certificate comes from.
enum ServingCa {
    /// The lab's kubeadm PKI: its `ca` and kubeadm's `apiserver` certificate.
    Lab(Arc<KubeadmPki>),
    /// A CA of the test's own (for example an attacker's).
    Own(Box<TestCa>),
}

impl fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiServer")
            .field("url", &self.url)
            .field("host", &self.host.name())
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// Starts the stand-in in `host`, listening on `https://<host ip>:<port>`, storing objects in
    /// `cluster` through the cluster's client identity. Returns once it accepts connections and
    /// has reached etcd.
    pub fn start(
        host: &Host,
        cluster: &EtcdCluster,
        opts: ApiServerOptions,
    ) -> Result<ApiServer, Error> {
        let addr = SocketAddr::new(host.ip(), opts.port);
        // A dual-stack host serves on its IPv6 address too, so a name with A and AAAA records
        // reaches it by either family.
        let addr6 = host
            .addr6()
            .filter(|_| addr.is_ipv4())
            .map(|a| SocketAddr::new(a.into(), opts.port));
        let lo = if host.ip().is_ipv6() {
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        let tls_err = |e: crate::Error| Error::Tls(e.to_string());
        let (ca, serving) = match opts.ca {
            Some(ca) => {
                let serving = ca
                    .issue(&CertSpec::server(
                        "kube-apiserver",
                        &[
                            host.ip(),
                            lo,
                            // The first address of kubeadm's default service subnet 10.96.0.0/12.
                            IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
                        ],
                        &[
                            "kubernetes",
                            "kubernetes.default",
                            "kubernetes.default.svc",
                            "kubernetes.default.svc.cluster.local",
                        ],
                    ))
                    .map_err(tls_err)?;
                (ServingCa::Own(Box::new(ca)), serving)
            }
            None => {
                // kubeadm's `apiserver` certificate for this host, next to the cluster's PKI.
                let pki = cluster.pki().clone();
                let serving = pki
                    .apiserver(host.name(), host.ip(), None)
                    .map_err(tls_err)?;
                serving
                    .write(&cluster.pki_dir(), "apiserver")
                    .map_err(tls_err)?;
                (ServingCa::Lab(pki), serving)
            }
        };
        let ca_cert_pem = match &ca {
            ServingCa::Lab(p) => p.ca().cert_pem().to_string(),
            ServingCa::Own(c) => c.cert_pem().to_string(),
        };
        let tls = tls_config(&serving.cert_pem, &serving.key_pem, &ca_cert_pem)?;
        let admin_token = opts
            .admin_token
            .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
        let identity = cluster.client_identity();
        let endpoints = cluster.client_endpoints();
        let read = |p: &std::path::Path| {
            std::fs::read(p).map_err(|e| Error::Etcd {
                host: host.name().to_string(),
                endpoints: endpoints.clone(),
                reason: format!("read client identity {}: {e}", p.display()),
            })
        };
        let (ca_pem, cert_pem, key_pem) = (
            read(&identity.ca)?,
            read(&identity.cert)?,
            read(&identity.key)?,
        );

        let (ready_tx, ready_rx) =
            std::sync::mpsc::channel::<Result<(Arc<Shared>, tokio::runtime::Handle), Error>>();
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let host_name = host.name().to_string();
        let version = opts.version.clone();
        let body_limit = opts.body_limit;
        // `host.run` joins its thread, so it only spawns the long-lived server thread: threads
        // inherit the network namespace of the thread that creates them.
        let thread = host.run(move || {
            std::thread::Builder::new()
                .name(format!("apiserver-{host_name}"))
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = ready_tx.send(Err(Error::Lab(crate::Error::Netns(format!(
                                "tokio runtime: {e}"
                            )))));
                            return;
                        }
                    };
                    rt.block_on(async move {
                        let bind = |at: SocketAddr| {
                            std::net::TcpListener::bind(at)
                                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                                .and_then(tokio::net::TcpListener::from_std)
                        };
                        let mut listeners = Vec::new();
                        for at in std::iter::once(addr).chain(addr6) {
                            match bind(at) {
                                Ok(l) => listeners.push(l),
                                Err(source) => {
                                    let _ = ready_tx.send(Err(Error::Bind {
                                        host: host_name,
                                        addr: at,
                                        source,
                                    }));
                                    return;
                                }
                            }
                        }
                        let listener = listeners.remove(0);
                        let store = match store::Store::connect(
                            &endpoints,
                            &ca_pem,
                            &cert_pem,
                            &key_pem,
                            ETCD_CONNECT_TIMEOUT,
                            ETCD_TIMEOUT,
                        )
                        .await
                        {
                            Ok(s) => s,
                            Err(e) => {
                                let _ = ready_tx.send(Err(Error::Etcd {
                                    host: host_name,
                                    endpoints,
                                    reason: e.to_string(),
                                }));
                                return;
                            }
                        };
                        let shared = Arc::new(Shared {
                            store,
                            faults: Faults::default(),
                            log: Mutex::new(Vec::new()),
                            admin_token,
                            version,
                            addr,
                            body_limit,
                        });
                        let _ =
                            ready_tx.send(Ok((shared.clone(), tokio::runtime::Handle::current())));
                        for l in listeners {
                            tokio::spawn(accept_loop(
                                l,
                                tls.clone(),
                                shared.clone(),
                                shutdown_rx.clone(),
                            ));
                        }
                        accept_loop(listener, tls, shared, shutdown_rx).await;
                    });
                    rt.shutdown_timeout(Duration::from_secs(2));
                })
        })?;
        let thread = thread.map_err(|e| Error::Lab(crate::Error::Spawn(format!("thread: {e}"))))?;
        let (shared, rt) = match ready_rx.recv_timeout(THREAD_TIMEOUT) {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = shutdown_tx.send(true);
                return Err(Error::Lab(crate::Error::Spawn(format!(
                    "API server thread did not start within {THREAD_TIMEOUT:?}"
                ))));
            }
        };
        let url = format!("https://{addr}");
        tracing::info!(%url, host = host.name(), "API server stand-in up");
        Ok(ApiServer {
            shared,
            ca,
            url,
            host: host.clone(),
            rt,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }

    /// `https://<host ip>:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The host it runs in.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The cluster CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        self.ca().cert_pem()
    }

    /// The cluster CA (for fixtures: kubeadm-certs carries `ca.crt` and `ca.key`).
    pub fn ca(&self) -> &TestCa {
        match &self.ca {
            ServingCa::Lab(p) => p.ca(),
            ServingCa::Own(c) => c,
        }
    }

    /// The kubeadm PKI the serving certificate comes from; `None` when the test gave its own CA.
    pub fn pki(&self) -> Option<&Arc<KubeadmPki>> {
        match &self.ca {
            ServingCa::Lab(p) => Some(p),
            ServingCa::Own(_) => None,
        }
    }

    /// The admin bearer token: user `kubernetes-admin`, group `system:masters`.
    pub fn admin_token(&self) -> &str {
        &self.shared.admin_token
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        self.shared
            .log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// The programmable faults.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Creates `obj` (JSON with apiVersion, kind, metadata.name and, for namespaced kinds,
    /// metadata.namespace), or replaces the stored object of that name, bypassing
    /// authentication and authorization. Returns the stored object with its resourceVersion.
    pub fn upsert(&self, obj: serde_json::Value) -> Result<serde_json::Value, Error> {
        let shared = self.shared.clone();
        self.run(async move { verbs::upsert(&shared, obj).await })?
            .map_err(Error::from)
    }

    /// Reads an object directly, bypassing authentication and authorization.
    pub fn get_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, Error> {
        let shared = self.shared.clone();
        let (a, k, ns, n) = (
            api_version.to_string(),
            kind.to_string(),
            namespace.to_string(),
            name.to_string(),
        );
        self.run(async move { verbs::get_object(&shared, &a, &k, &ns, &n).await })?
            .map_err(Error::from)
    }

    /// Runs `fut` on the server's runtime (inside the host) and waits for it.
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, Error> {
        let task = self.rt.spawn(fut);
        futures_block_on(&self.rt, task)
    }

    /// A kubeconfig (YAML) for this server: the CA as `certificate-authority-data`, and `token`
    /// as bearer token when given. Without a token the user has only a basic-auth user name, which
    /// keeps kubectl from prompting and is ignored by the server: the requests are anonymous.
    pub fn kubeconfig(&self, token: Option<&str>) -> String {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem());
        let user = match token {
            Some(t) => format!("  user:\n    token: {t}\n"),
            // kubectl prompts for a user name when a kubeconfig has no credentials at all. A
            // basic-auth user name stops that; kube-apiserver (since 1.19) and the stand-in
            // ignore a non-bearer Authorization header, so the request is anonymous.
            None => "  user:\n    username: anonymous\n".to_string(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {}\n  name: kubernetes\ncontexts:\n- context:\n    cluster: kubernetes\n    user: user\n  name: ctx\ncurrent-context: ctx\npreferences: {{}}\nusers:\n- name: user\n{user}",
            self.url
        )
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(true);
        }
        if let Some(t) = self.thread.take() {
            // The runtime shuts down with a 2 s bound, so this join is bounded too.
            let _ = t.join();
        }
        tracing::info!(url = %self.url, "API server stand-in down");
    }
}

/// Waits for a task of the server runtime from a thread outside it.
fn futures_block_on<T: Send>(
    rt: &tokio::runtime::Handle,
    task: tokio::task::JoinHandle<T>,
) -> Result<T, Error> {
    let failed = |e: tokio::task::JoinError| Error::Task(e.to_string());
    // Handle::block_on panics on a runtime thread, so a caller that is itself async (a test
    // driving the server from its own runtime) waits on a helper thread instead.
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(|| rt.block_on(task)).join())
            .map_err(|_| Error::Task("waiting thread panicked".into()))?
            .map_err(failed)
    } else {
        rt.block_on(task).map_err(failed)
    }
}

/// The serving configuration: the serving certificate, and client certificates verified against
/// the cluster CA but not required (kube-apiserver's `--client-ca-file`: a request without one
/// goes on to the token authenticators).
fn tls_config(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &str,
) -> Result<Arc<rustls::ServerConfig>, Error> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("serving certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| Error::Tls(format!("serving key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let c = c.map_err(|e| Error::Tls(format!("client CA: {e}")))?;
        roots
            .add(c)
            .map_err(|e| Error::Tls(format!("client CA: {e}")))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| Error::Tls(format!("client verifier: {e}")))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| Error::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            r = listener.accept() => {
                let (tcp, peer) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        warn!(error = %e, "API server stand-in: accept");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    warn!(%peer, "API server stand-in: too many connections, closing");
                    continue;
                };
                let acceptor = acceptor.clone();
                let shared = shared.clone();
                tokio::spawn(async move {
                    serve_connection(tcp, peer, acceptor, shared).await;
                    drop(permit);
                });
            }
        }
    }
}

/// Lets a request handler drop its connection without a response (the `Reset` fault).
#[derive(Debug, Default)]
pub(crate) struct ConnReset {
    flag: AtomicBool,
    notify: Notify,
}

impl ConnReset {
    pub(crate) fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// A TCP stream that, once its connection is reset by a fault, fails every read and write and
/// closes with an RST (SO_LINGER 0) instead of a FIN.
struct ResettableStream {
    inner: TcpStream,
    reset: Arc<ConnReset>,
}

impl ResettableStream {
    fn check(&self) -> io::Result<()> {
        if self.reset.flag.load(Ordering::SeqCst) {
            Err(io::Error::from(io::ErrorKind::ConnectionReset))
        } else {
            Ok(())
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check()?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.flag.load(Ordering::SeqCst) {
            // Zero linger: close() sends an RST at once and does not block.
            let _ = self.inner.set_zero_linger();
        }
    }
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    shared: Arc<Shared>,
) {
    let _ = tcp.set_nodelay(true);
    let reset = Arc::new(ConnReset::default());
    let stream = ResettableStream {
        inner: tcp,
        reset: reset.clone(),
    };
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "API server stand-in: TLS handshake failed");
            return;
        }
        Err(_) => {
            debug!(%peer, "API server stand-in: TLS handshake timed out");
            return;
        }
    };
    // x509 authentication: a verified client certificate names the user (CN) and its groups
    // (O), as kube-apiserver's x509 authenticator does.
    let cert_user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| auth::user_of_certificate(c.as_ref()));
    let svc_reset = reset.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = shared.clone();
        let reset = svc_reset.clone();
        let cert_user = cert_user.clone();
        async move {
            Ok::<Response<Full<Bytes>>, Infallible>(handle(shared, reset, cert_user, req).await)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .max_concurrent_streams(250)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                debug!(%peer, error = %e, "API server stand-in: connection ended");
            }
        }
        _ = reset.notify.notified() => {
            debug!(%peer, "API server stand-in: fault reset the connection");
        }
    }
}

/// Applies faults, then hands the request to the router, and logs it.
async fn handle(
    shared: Arc<Shared>,
    reset: Arc<ConnReset>,
    cert_user: Option<UserInfo>,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let at = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let target = req
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |pq| pq.as_str().to_string());
    let record = |user: Option<String>, status: Option<u16>| RequestRecord {
        method: method.clone(),
        path: path.clone(),
        query: query.clone(),
        user,
        status,
        at,
    };
    if let Some(kind) = shared.faults.take(&method, &target) {
        debug!(%method, %target, ?kind, "API server stand-in: fault");
        let answer = match kind {
            FaultKind::Stall(d) => {
                tokio::time::sleep(d).await;
                None
            }
            FaultKind::StallThenReset(d) => {
                tokio::time::sleep(d).await;
                Some(FaultKind::Reset)
            }
            other => Some(other),
        };
        match answer {
            None => {}
            Some(FaultKind::Reset) => {
                shared.record(record(None, None));
                reset.trigger();
                // The connection task drops the connection; this future is dropped with it.
                return std::future::pending().await;
            }
            Some(kind) => {
                let resp = status::fault_response(&kind);
                shared.record(record(None, Some(resp.status().as_u16())));
                return resp;
            }
        }
    }
    let (resp, user) = router::dispatch(&shared, cert_user, req).await;
    debug!(%method, %target, user = user.as_deref().unwrap_or("-"), status = resp.status().as_u16(), elapsed = ?at.elapsed(), "API server stand-in: request");
    shared.record(record(user, Some(resp.status().as_u16())));
    resp
}
