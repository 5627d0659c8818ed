//! `/probe?target=...&module=...`: one probe on request, answered in the Prometheus text format,
//! as blackbox_exporter answers its `/probe` (`probe_success`, `probe_duration_seconds`). An
//! operator who already shards probing with Prometheus (hashmod relabelling, the Prometheus
//! Operator's shards) drives joinguard's probes from there; the monitor's own targets and
//! StatefulSet sharding stay for the push-free mode.
//!
//! Modules: `tcp_connect` (`target=HOST:PORT`: the TCP connect time, the socket closed with a
//! reset as the monitor's own TCP probes close it) and `icmp` (`target=HOST`: one echo; needs
//! CAP_NET_RAW). The timeout is the scrape's (`X-Prometheus-Scrape-Timeout-Seconds`, less half a
//! second, as blackbox_exporter takes it), at most the monitor's `probeTimeout`. At most
//! [`MAX_IN_FLIGHT`] probes run at once; more get `503`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::probe::{ProbeFailure, Sample};
use crate::target::{Target, TargetKind};

/// Probes in flight at once; a scrape beyond is answered `503`, as an overloaded exporter
/// should be (Prometheus records the failed scrape).
pub const MAX_IN_FLIGHT: usize = 1024;

/// blackbox_exporter's margin: the probe ends this much before the scrape's own timeout.
const SCRAPE_MARGIN: Duration = Duration::from_millis(500);

/// The probe modules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    TcpConnect,
    Icmp,
}

impl Module {
    fn parse(name: &str) -> Option<Module> {
        match name {
            "tcp_connect" => Some(Module::TcpConnect),
            "icmp" => Some(Module::Icmp),
            _ => None,
        }
    }
}

/// A request that cannot be probed: `400` with the reason.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadProbe {
    #[error("target parameter is missing (/probe?target=HOST:PORT&module=tcp_connect)")]
    NoTarget,
    #[error("unknown module {0:?}: the modules are tcp_connect and icmp")]
    Module(String),
    #[error("target {target:?}: {reason}")]
    Target { target: String, reason: String },
}

/// What one request asks for.
#[derive(Debug, PartialEq)]
pub struct ProbeRequest {
    pub module: Module,
    pub target: Target,
}

impl ProbeRequest {
    /// From the query string (`target=10.0.0.2%3A2379&module=tcp_connect`); the module defaults
    /// to `tcp_connect`.
    pub fn parse(query: &str) -> Result<ProbeRequest, BadProbe> {
        let mut target = None;
        let mut module = None;
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "target" => target = Some(v.into_owned()),
                "module" => module = Some(v.into_owned()),
                _ => {}
            }
        }
        let target = target.filter(|t| !t.is_empty()).ok_or(BadProbe::NoTarget)?;
        let module = match module.as_deref() {
            None | Some("") => Module::TcpConnect,
            Some(m) => Module::parse(m).ok_or_else(|| BadProbe::Module(m.to_string()))?,
        };
        let bad = |reason: String| BadProbe::Target {
            target: target.clone(),
            reason,
        };
        let parsed = match module {
            Module::TcpConnect => {
                let t = Target::parse(TargetKind::ApiServer, &target, true)
                    .map_err(|e| bad(e.to_string()))?;
                if !has_port(&target) {
                    return Err(bad("tcp_connect needs HOST:PORT".into()));
                }
                t
            }
            // A host alone; the port is not used.
            Module::Icmp => {
                let with_port = if target.parse::<std::net::Ipv6Addr>().is_ok() {
                    format!("[{target}]:1")
                } else {
                    format!("{target}:1")
                };
                Target::parse(TargetKind::ApiServer, &with_port, true)
                    .map_err(|e| bad(e.to_string()))?
            }
        };
        Ok(ProbeRequest {
            module,
            target: parsed,
        })
    }
}

/// Whether `hostport` names a port (`host:port`, `[v6]:port`).
fn has_port(hostport: &str) -> bool {
    let rest = hostport.rsplit_once(']').map_or(hostport, |(_, r)| r);
    rest.rsplit_once(':')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The probe's timeout: the scrape's less [`SCRAPE_MARGIN`], at most `cap`, at least 100 ms.
pub fn timeout(scrape_timeout: Option<&str>, cap: Duration) -> Duration {
    scrape_timeout
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s).saturating_sub(SCRAPE_MARGIN))
        .map_or(cap, |t| t.min(cap))
        .max(Duration::from_millis(100))
}

/// Runs the probe.
pub async fn run(req: &ProbeRequest, timeout: Duration) -> Sample {
    match req.module {
        Module::TcpConnect => crate::probe::tcp::probe(&req.target, timeout).await,
        Module::Icmp => {
            let ip = match tokio::net::lookup_host((req.target.host.as_str(), 0)).await {
                Ok(mut it) => it.next().map(|a| a.ip()),
                Err(_) => None,
            };
            let Some(ip) = ip else {
                return Sample {
                    result: Err(ProbeFailure::Io(format!(
                        "resolve {}: no address",
                        req.target.host
                    ))),
                };
            };
            match crate::probe::icmp::Pinger::open(ip) {
                Ok(mut p) => p.ping(timeout).await,
                Err(e) => Sample {
                    result: Err(ProbeFailure::Io(format!("ICMP socket: {e}"))),
                },
            }
        }
    }
}

/// The answer, in the Prometheus text format: blackbox_exporter's two series, and joinguard's
/// reason when the probe failed.
pub fn exposition(sample: &Sample, took: Duration) -> String {
    let mut out = String::new();
    let success = u8::from(sample.result.is_ok());
    let _ = writeln!(
        out,
        "# HELP probe_success Whether the probe succeeded (1) or not (0).\n\
         # TYPE probe_success gauge\n\
         probe_success {success}\n\
         # HELP probe_duration_seconds How long the probe took, in seconds.\n\
         # TYPE probe_duration_seconds gauge\n\
         probe_duration_seconds {}",
        took.as_secs_f64()
    );
    match &sample.result {
        Ok(rtt) => {
            let _ = writeln!(
                out,
                "# HELP joinguard_probe_round_trip_seconds The probe's round trip (TCP: connect(); \
                 ICMP: the echo), without name resolution.\n\
                 # TYPE joinguard_probe_round_trip_seconds gauge\n\
                 joinguard_probe_round_trip_seconds {}",
                rtt.as_secs_f64()
            );
        }
        Err(e) => {
            let reason = match e {
                ProbeFailure::Timeout(_) => "timeout",
                ProbeFailure::Refused => "refused",
                ProbeFailure::Io(_) => "io",
                ProbeFailure::Tls(_) => "tls",
                ProbeFailure::Protocol(_) => "protocol",
            };
            let _ = writeln!(
                out,
                "# HELP joinguard_probe_failed Why the probe failed (the label), always 1.\n\
                 # TYPE joinguard_probe_failed gauge\n\
                 joinguard_probe_failed{{reason=\"{reason}\"}} 1"
            );
        }
    }
    out
}

/// One request, start to answer: `(status, body)`.
pub async fn answer(
    query: &str,
    scrape_timeout: Option<&str>,
    cap: Duration,
    slots: &tokio::sync::Semaphore,
) -> (u16, String) {
    let req = match ProbeRequest::parse(query) {
        Ok(r) => r,
        Err(e) => return (400, format!("{e}\n")),
    };
    let Ok(_slot) = slots.try_acquire() else {
        return (
            503,
            format!("more than {MAX_IN_FLIGHT} probes in flight; try again\n"),
        );
    };
    let t0 = Instant::now();
    let sample = run(&req, timeout(scrape_timeout, cap)).await;
    (200, exposition(&sample, t0.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_as_prometheus_sends_them() {
        let r = ProbeRequest::parse("target=10.0.0.2%3A2379&module=tcp_connect").unwrap();
        assert_eq!(
            (r.module, r.target.host.as_str(), r.target.port),
            (Module::TcpConnect, "10.0.0.2", 2379)
        );
        let r = ProbeRequest::parse("target=%5Bfd00%3A%3A2%5D%3A2380").unwrap();
        assert_eq!((r.module, r.target.port), (Module::TcpConnect, 2380));
        let r = ProbeRequest::parse("module=icmp&target=fd00::2").unwrap();
        assert_eq!(r.module, Module::Icmp);
        assert_eq!(ProbeRequest::parse("module=icmp"), Err(BadProbe::NoTarget));
        assert!(matches!(
            ProbeRequest::parse("target=10.0.0.2:1&module=http_2xx"),
            Err(BadProbe::Module(m)) if m == "http_2xx"
        ));
        assert!(matches!(
            ProbeRequest::parse("target=10.0.0.2"),
            Err(BadProbe::Target { .. })
        ));
    }

    #[test]
    fn the_scrape_timeout_less_half_a_second_at_most_the_cap() {
        let cap = Duration::from_secs(5);
        assert_eq!(timeout(Some("10"), cap), cap);
        assert_eq!(timeout(Some("2.5"), cap), Duration::from_secs(2));
        assert_eq!(timeout(Some("0.2"), cap), Duration::from_millis(100));
        assert_eq!(timeout(None, cap), cap);
        assert_eq!(timeout(Some("x"), cap), cap);
    }

    #[tokio::test]
    async fn a_listening_port_succeeds_and_a_closed_one_says_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let slots = tokio::sync::Semaphore::new(MAX_IN_FLIGHT);
        let cap = Duration::from_secs(2);
        let (code, body) = answer(&format!("target=127.0.0.1:{port}"), None, cap, &slots).await;
        assert_eq!(code, 200);
        assert!(body.contains("\nprobe_success 1\n"), "{body}");
        assert!(
            body.contains("joinguard_probe_round_trip_seconds "),
            "{body}"
        );
        drop(l);
        let (code, body) = answer(&format!("target=127.0.0.1:{port}"), None, cap, &slots).await;
        assert_eq!(code, 200);
        assert!(body.contains("\nprobe_success 0\n"), "{body}");
        assert!(
            body.contains("joinguard_probe_failed{reason=\"refused\"} 1"),
            "{body}"
        );
        let (code, body) = answer("target=127.0.0.1:1&module=dns", None, cap, &slots).await;
        assert_eq!(code, 400, "{body}");
    }
}
