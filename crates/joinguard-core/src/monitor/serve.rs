//! The monitor's HTTP endpoints (hyper, HTTP/1.1, plain text):
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

/// Accepts connections until the task is aborted.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = match listener.accept().await {
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
        let shared = shared.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let path = req.uri().path().to_string();
                let accept = req
                    .headers()
                    .get(hyper::header::ACCEPT)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                async move {
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
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(MAX_CONNECTION_AGE, conn).await;
        });
    }
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
            shared.metrics.sync_retries(&shared.recorder);
            if wants_openmetrics(accept) {
                text(StatusCode::OK, OPENMETRICS, shared.metrics.openmetrics())
            } else {
                text(
                    StatusCode::OK,
                    PROMETHEUS_TEXT,
                    shared.metrics.prometheus_text(),
                )
            }
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
}
