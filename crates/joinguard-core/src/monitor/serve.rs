//! The monitor's HTTP endpoints (hyper, HTTP/1.1; HTTPS with `tls:` in monitor.yaml, and mutual
//! TLS with its `clientCAFile`):
//! - `/metrics`: OpenMetrics text when the scraper's `Accept` asks for
//!   `application/openmetrics-text` (Prometheus does), else Prometheus text 0.0.4;
//! - `/healthz`: 200 while the process serves (liveness);
//! - `/readyz`: 200 when no preflight check is in error, else 503 with one line per error.
//!
//! This module only renders what the rest of the monitor computed; it never probes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::Shared;

pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Longest `/readyz` body: the first errors are enough to act on.
const MAX_READYZ_LINES: usize = 20;

/// How long a client may take to send a request's head; a slow (slowloris) client is closed
/// then. A scraper sends its head in one packet.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a connection lives, requests and idle keep-alive together; a scraper reconnects.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(120);
/// The most connections served at once; one more is closed at once (a scraper, the kubelet's
/// probes and a person with curl need a handful).
pub const MAX_CONNECTIONS: usize = 256;
/// The most of those one source address may hold: one host that opens connections without end
/// (a slowloris, a runaway client) takes at most a quarter of them, so a scraper from another
/// host still finds a slot. Measured beside a real Prometheus (docs/hardening.md): 500 slow
/// connections from one host filled all 256 slots, 255 of them the attacker's.
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 64;

/// Connections held per source address.
#[derive(Debug, Default)]
struct PerSource(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

/// One connection counted against its source; uncounted when dropped.
struct SourceSlot(Arc<PerSource>, std::net::IpAddr);

impl PerSource {
    fn take(self: &Arc<Self>, ip: std::net::IpAddr) -> Option<SourceSlot> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= MAX_CONNECTIONS_PER_SOURCE {
            return None;
        }
        *n += 1;
        Some(SourceSlot(self.clone(), ip))
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut m = self.0 .0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.1);
            }
        }
    }
}

/// How long a rendered exposition is served again instead of rendering anew. A scrape flood (or
/// several Prometheus replicas) then costs at most four renders a second, however many scrapes
/// come, and a change still shows within a quarter second of the probe that made it.
pub const EXPOSITION_MAX_AGE: Duration = Duration::from_millis(250);

/// The rendered `/metrics` body per format, shared by concurrent scrapes: single-flight (a scrape
/// that finds a render in progress waits for it and takes its result) and at most
/// [`EXPOSITION_MAX_AGE`] old.
#[derive(Debug)]
pub(crate) struct ExpositionCache {
    max_age: Duration,
    /// Index 0: Prometheus text, 1: OpenMetrics.
    slots: std::sync::Mutex<[Option<(std::time::Instant, Bytes)>; 2]>,
    renders: std::sync::atomic::AtomicU64,
}

impl ExpositionCache {
    pub(crate) fn new(max_age: Duration) -> ExpositionCache {
        ExpositionCache {
            max_age,
            slots: std::sync::Mutex::new([None, None]),
            renders: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The body for `openmetrics` or Prometheus text, rendered by `render` only when the last one
    /// is older than the cache's age. Blocking (it holds the lock while rendering): call it from
    /// `spawn_blocking`, as `respond` runs.
    pub(crate) fn get(&self, openmetrics: bool, render: impl FnOnce() -> String) -> Bytes {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut slots[usize::from(openmetrics)];
        if let Some((at, body)) = slot {
            if at.elapsed() < self.max_age {
                return body.clone();
            }
        }
        let body = Bytes::from(render());
        self.renders
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *slot = Some((std::time::Instant::now(), body.clone()));
        body
    }

    /// Renders so far.
    #[cfg(test)]
    pub(crate) fn renders(&self) -> u64 {
        self.renders.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Why `tls:` in monitor.yaml cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    /// The certificate, its key or the client CA file (the message names the key and file).
    #[error(transparent)]
    Files(#[from] crate::probe::identity::IdentityError),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("tls.clientCAFile {}: {source}", path.display())]
    ClientCa {
        path: std::path::PathBuf,
        source: rustls::server::VerifierBuilderError,
    },
}

/// The TLS server configuration of `tls:` in monitor.yaml: the serving certificate chain and its
/// key (RSA PKCS#1, SEC1 ECDSA or PKCS#8, as kubeadm and cert-manager write them), and, with a
/// client CA, a scraper must present a certificate that CA signed. HTTP/1.1 only, TLS 1.2 and
/// 1.3 (rustls' safe defaults). The files are read once, at start.
pub(crate) fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
    client_ca: Option<&std::path::Path>,
) -> Result<Arc<rustls::ServerConfig>, TlsConfigError> {
    use crate::input::{Input, Named};
    use crate::probe::identity::{crypto_provider, CaBundle, ClientIdentity};
    // `Input::Config`: these are keys of the monitor's own file; the name is what errors say.
    let id = ClientIdentity::load(
        (Named::new(Input::Config, "tls.certFile"), cert),
        (Named::new(Input::Config, "tls.keyFile"), key),
    )?;
    let provider = crypto_provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(path) => {
            let ca = CaBundle::load(Named::new(Input::Config, "tls.clientCAFile"), path)?;
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(ca.roots(), provider)
                    .build()
                    .map_err(|source| TlsConfigError::ClientCa {
                        path: path.to_owned(),
                        source,
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(
        id.certified_key(),
    )));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts connections until the task is aborted.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let per_source = Arc::new(PerSource::default());
    let acceptor = shared
        .config
        .tls
        .clone()
        .map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off a little instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(
                max = MAX_CONNECTIONS,
                "too many connections; closing a new one"
            );
            drop(stream);
            continue;
        };
        let Some(source_slot) = per_source.take(peer.ip()) else {
            tracing::debug!(
                source = %peer.ip(),
                max = MAX_CONNECTIONS_PER_SOURCE,
                "too many connections from one source; closing a new one"
            );
            drop(stream);
            continue;
        };
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _slot = (slot, source_slot);
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let path = req.uri().path().to_string();
                let query = req.uri().query().unwrap_or("").to_string();
                let scrape_timeout = req
                    .headers()
                    .get("x-prometheus-scrape-timeout-seconds")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                let accept = req
                    .headers()
                    .get(hyper::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                async move {
                    if path == "/probe" {
                        return Ok::<_, Infallible>(probe(&shared, &query, scrape_timeout).await);
                    }
                    // Encoding a 10,000-target scrape takes a while: off the probes' workers,
                    // so a scrape never delays a probe's timer.
                    let r = tokio::task::spawn_blocking(move || {
                        respond(&shared, &path, accept.as_deref())
                    })
                    .await
                    .unwrap_or_else(|_| {
                        text(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "text/plain; charset=utf-8",
                            "internal error\n".into(),
                        )
                    });
                    Ok::<_, Infallible>(r)
                }
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            match acceptor {
                Some(tls) => {
                    // The handshake is bounded like a request head: a client that never
                    // finishes it (or has no certificate the client CA signed) is closed.
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream)).await
                    else {
                        return;
                    };
                    let conn = http.serve_connection(TokioIo::new(stream), svc);
                    let _ = tokio::time::timeout(MAX_CONNECTION_AGE, conn).await;
                }
                None => {
                    let conn = http.serve_connection(TokioIo::new(stream), svc);
                    let _ = tokio::time::timeout(MAX_CONNECTION_AGE, conn).await;
                }
            }
        });
    }
}

/// `/probe` (blackbox_exporter's interface), when the config turns it on.
async fn probe(
    shared: &Shared,
    query: &str,
    scrape_timeout: Option<String>,
) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if !shared.config.probe_endpoint {
        return text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "/probe is off: set `probeEndpoint: true` in monitor.yaml to serve it\n".into(),
        );
    }
    let (code, body) = super::probe_endpoint::answer(
        query,
        scrape_timeout.as_deref(),
        shared.config.probe_timeout,
        &shared.probe_slots,
    )
    .await;
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if code == 200 {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        PLAIN
    };
    text(status, content_type, body)
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// Whether the `Accept` header asks for OpenMetrics.
pub(crate) fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut fields = part.split(';').map(str::trim);
            let media = fields.next().unwrap_or("");
            let q_zero = fields.any(|f| f.replace(' ', "") == "q=0");
            media.eq_ignore_ascii_case("application/openmetrics-text") && !q_zero
        })
    })
}

fn respond(shared: &Shared, path: &str, accept: Option<&str>) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    match path {
        "/metrics" => {
            let om = wants_openmetrics(accept);
            let body = shared.exposition.get(om, || {
                shared.metrics.sync_retries(&shared.recorder);
                if om {
                    shared.metrics.openmetrics()
                } else {
                    shared.metrics.prometheus_text()
                }
            });
            let mut r = Response::new(Full::new(body));
            if let Ok(v) = (if om { OPENMETRICS } else { PROMETHEUS_TEXT }).parse() {
                r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
            }
            r
        }
        "/healthz" => text(StatusCode::OK, PLAIN, "ok\n".into()),
        "/readyz" => {
            let v = shared
                .verdict
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if !v.evaluated {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    PLAIN,
                    "not ready: no verdict yet (the first probe round is running)\n".into(),
                );
            }
            if v.errors.is_empty() {
                return text(StatusCode::OK, PLAIN, "ok: no check in error\n".into());
            }
            let mut body = format!("not ready: {} check(s) in error\n", v.errors.len());
            for e in v.errors.iter().take(MAX_READYZ_LINES) {
                body.push_str(e);
                body.push('\n');
            }
            if v.errors.len() > MAX_READYZ_LINES {
                body.push_str(&format!(
                    "... and {} more (see joinguard_check_status on /metrics)\n",
                    v.errors.len() - MAX_READYZ_LINES
                ));
            }
            text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, body)
        }
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text; q=0"
        )));
    }

    /// Eight scrapes at once cost one render; a later scrape, past the age, renders anew.
    #[test]
    fn concurrent_scrapes_share_one_render() {
        let cache = std::sync::Arc::new(ExpositionCache::new(Duration::from_millis(200)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    cache.get(true, || {
                        std::thread::sleep(Duration::from_millis(50));
                        "body".to_string()
                    })
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Bytes::from("body"));
        }
        assert_eq!(cache.renders(), 1);
        // The other format has its own slot.
        cache.get(false, || "text".into());
        assert_eq!(cache.renders(), 2);
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(cache.get(true, || "new".into()), Bytes::from("new"));
        assert_eq!(cache.renders(), 3);
    }
}
