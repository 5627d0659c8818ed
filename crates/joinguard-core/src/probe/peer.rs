//! etcd peer-port probe: `GET /raft/probing` on one kept-alive connection, the way etcd's own
//! prober measures peer RTT (`rafthttp/probing_status.go`, etcd-latency-facts section 3).
//!
//! This module owns the peer probe's session life cycle: open one mutual-TLS HTTP/1.1 connection
//! (the identity must be signed by the etcd CA, since kubeadm runs etcd with
//! `--peer-client-cert-auth`), warm it up, then time requests on it. Set-up is reported apart
//! from the steady-state samples. Without an identity it falls back to TCP connect timing and says
//! so. It does not pace beyond a fixed interval; adaptive sampling is `sampling`'s job.

use std::time::Duration;

use tokio::time::Instant;

use super::http::{HttpFailure, HttpSession};
use super::identity::ALPN_HTTP1;
use super::tcp;
use super::tls::{TlsClient, TlsHandshake};
use super::{ProbeFailure, ProbeKind, Sample};
use crate::target::Target;

/// The peer listener's health endpoint, mounted without cluster-ID checks.
pub const PROBING_PATH: &str = "/raft/probing";

/// One `/raft/probing` answer.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerProbe {
    /// Request written to the last body byte read, on the established connection.
    pub rtt: Duration,
    /// The member's clock as it reported it (`Now`, RFC 3339 in the member's zone), unparsed.
    pub server_now: Option<String>,
}

/// A kept-alive connection to one peer URL.
#[derive(Debug)]
pub struct PeerSession {
    session: HttpSession,
}

impl PeerSession {
    /// Opens the connection with `tls` (offering HTTP/1.1) within `timeout`. The handshake
    /// succeeding does not prove the identity was accepted (TLS 1.3 reports a rejected client
    /// certificate after the handshake); the first [`PeerSession::probe`] does.
    pub async fn open(
        host: &str,
        port: u16,
        tls: &TlsClient,
        timeout: Duration,
    ) -> Result<Self, HttpFailure> {
        let tls = tls.with_alpn(&[ALPN_HTTP1]);
        Ok(PeerSession {
            session: HttpSession::open(host, port, &tls, timeout).await?,
        })
    }

    /// How the connection was set up.
    pub fn setup(&self) -> &TlsHandshake {
        &self.session.tls
    }

    /// One timed `GET /raft/probing` on this connection.
    pub async fn probe(&mut self, timeout: Duration) -> Result<PeerProbe, HttpFailure> {
        let ex = self.session.get(PROBING_PATH, timeout).await?;
        if ex.status != 200 {
            return Err(HttpFailure::Protocol(format!(
                "GET {PROBING_PATH} answered status {}; expected 200 from an etcd peer listener",
                ex.status
            )));
        }
        #[derive(serde::Deserialize)]
        struct Health {
            #[serde(rename = "OK")]
            ok: bool,
            #[serde(rename = "Now")]
            now: Option<String>,
        }
        let health: Health = serde_json::from_slice(&ex.body).map_err(|e| {
            HttpFailure::Protocol(format!(
                "GET {PROBING_PATH}: body is not etcd's probing JSON ({e})"
            ))
        })?;
        if !health.ok {
            return Err(HttpFailure::Protocol(format!(
                "GET {PROBING_PATH}: the member reported OK=false"
            )));
        }
        Ok(PeerProbe {
            rtt: ex.total,
            server_now: health.now,
        })
    }
}

/// What a peer probe run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerReport {
    /// [`ProbeKind::EtcdPeerProbe`], or [`ProbeKind::TcpConnect`] in the fallback.
    pub kind: ProbeKind,
    /// Connection set-up (TCP + TLS), when a session was opened.
    pub setup: Option<TlsHandshake>,
    /// The warm-up request's time (includes nothing but one request; HTTP/1.1 has no extra set-up,
    /// but the first request pays for cold caches on both sides).
    pub warmup: Option<Duration>,
    /// The timed samples, in order.
    pub samples: Vec<Sample>,
    /// Why the probe fell back to TCP connect timing, if it did.
    pub fallback: Option<String>,
}

/// Probes `target` (an etcd peer URL): with an identity, opens one session, warms it up and times
/// `samples` requests `interval` apart; a failed request is a lost sample and the session is
/// reopened (untimed) for the next one. Without an identity, times `samples` fresh TCP connects.
///
/// Errors only when the session cannot be opened or the warm-up fails: that is a finding about
/// the path (e.g. the peer rejects the identity), not a sample.
pub async fn probe(
    target: &Target,
    tls: Option<&TlsClient>,
    samples: usize,
    interval: Duration,
    timeout: Duration,
) -> Result<PeerReport, HttpFailure> {
    let tls = match tls {
        Some(t) if t.has_identity() => t,
        other => {
            let reason = if other.is_some() {
                "no etcd client identity: the peer port needs a certificate signed by the etcd CA"
            } else {
                "no TLS configuration for the peer port"
            };
            let mut out = Vec::with_capacity(samples);
            for i in 0..samples {
                if i > 0 {
                    tokio::time::sleep(interval).await;
                }
                out.push(tcp::probe(target, timeout).await);
            }
            return Ok(PeerReport {
                kind: ProbeKind::TcpConnect,
                setup: None,
                warmup: None,
                samples: out,
                fallback: Some(format!("{reason}; measured TCP connect time instead")),
            });
        }
    };
    let mut session = PeerSession::open(&target.host, target.port, tls, timeout).await?;
    let setup = session.setup().clone();
    let warmup = session.probe(timeout).await?.rtt;
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let next = Instant::now() + interval;
        let result = session.probe(timeout).await;
        let failed = result.is_err();
        out.push(Sample {
            result: result.map(|p| p.rtt).map_err(ProbeFailure::from),
        });
        if failed {
            // A timed-out or broken HTTP/1.1 connection cannot carry the next request.
            match PeerSession::open(&target.host, target.port, tls, timeout).await {
                Ok(s) => session = s,
                Err(e) => {
                    let failure = ProbeFailure::from(e);
                    while out.len() < samples {
                        out.push(Sample {
                            result: Err(failure.clone()),
                        });
                    }
                    break;
                }
            }
        }
        if i + 1 < samples {
            tokio::time::sleep_until(next).await;
        }
    }
    Ok(PeerReport {
        kind: ProbeKind::EtcdPeerProbe,
        setup: Some(setup),
        warmup: Some(warmup),
        samples: out,
        fallback: None,
    })
}
