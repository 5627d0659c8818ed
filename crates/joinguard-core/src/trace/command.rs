//! `joinguard trace`'s inputs: validates the request (its errors name the flag, exit 2) and
//! resolves the target into a [`TraceInput`]. The binary runs the tracer and prints.

use std::net::IpAddr;
use std::time::Duration;

use crate::input::{Input, Named};
use crate::spec::TraceSpec;

use super::{packet, TraceInput, TraceProtocol};

/// Why `joinguard trace`'s inputs cannot be used (exit 2). Each names the flag or argument.
#[derive(Debug, thiserror::Error)]
pub enum TraceInputError {
    #[error("{input} {port} and the port in TARGET `{target}` ({in_target}) disagree; give one")]
    PortsDisagree {
        input: Named,
        port: u16,
        target: String,
        in_target: u16,
    },
    #[error(
        "{protocol} tcp needs {port} (the service port, e.g. 2380 for etcd peers, 2379 for etcd \
         clients, 6443 for the API server)"
    )]
    TcpNeedsPort { protocol: Named, port: Named },
    #[error("{input} {port}: ICMP echo has no ports; use {protocol} tcp or udp to probe a port")]
    IcmpHasNoPort {
        input: Named,
        port: u16,
        protocol: Named,
    },
    #[error("{0} must be longer than 0")]
    Zero(Named),
    #[error("{input} {size}: a {protocol} probe takes at least {headers} bytes (its IP and {protocol} headers)")]
    SizeBelowHeaders {
        input: Named,
        size: u16,
        protocol: &'static str,
        headers: u16,
    },
    #[error(
        "{input} {size}: the interface the route to {target} leaves by has an MTU of {interface} \
         bytes, and a probe with DF set cannot be larger; give at most {interface} (the trace \
         shrinks its probes to any smaller MTU a router reports)"
    )]
    SizeAboveInterface {
        input: Named,
        size: u16,
        target: IpAddr,
        interface: u16,
    },
    #[error("TARGET is empty; give a host name or an IP address")]
    EmptyTarget,
    #[error("TARGET `{0}`: give a host or host:port, not a URL (e.g. 10.0.0.11:2380)")]
    TargetIsUrl(String),
    #[error("TARGET `{target}`: `{port}` is not a port (1 to 65535)")]
    BadPort { target: String, port: String },
    #[error(
        "TARGET `{target}` reads as one IPv6 address whose last group looks like a port; to \
         trace that port write {suggest}, to trace the address itself write [{target}]"
    )]
    AmbiguousIpv6 { target: String, suggest: String },
    #[error("TARGET `{host}`: {source}")]
    Resolve {
        host: String,
        #[source]
        source: ResolveError,
    },
}

/// Why a trace target has no address to trace.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "{0} is a link-local address: it names no path without the interface it is on, and \
         neither etcd nor the API server can be joined over one (etcd-io/etcd #10287); trace a \
         global or unique-local address"
    )]
    LinkLocal(std::net::Ipv6Addr),
    #[error("name lookup timed out after 5s")]
    Timeout,
    #[error("cannot resolve the name ({0})")]
    Lookup(#[source] std::io::Error),
    #[error("the name has no address")]
    NoAddress,
}

impl TraceInput {
    /// What the trace will do, in one sentence for the progress line: `tracing 198.18.0.2 with
    /// tcp probes to port 2379: 10 cycles 1s apart, up to 30 hops (ends within 30s)`.
    pub fn plan(&self) -> String {
        format!(
            "tracing {} with {} probes{}{}: {} cycles {} apart, up to {} hops (ends within {})",
            self.target,
            self.protocol.as_str(),
            self.port.map_or(String::new(), |p| format!(" to port {p}")),
            self.size
                .map_or(String::new(), |s| format!(" of {s} bytes with DF set")),
            self.cycles,
            humantime::format_duration(self.interval),
            self.max_hops,
            humantime::format_duration(self.timeout)
        )
    }

    /// `joinguard trace`'s validated input, the target resolved. Every error names the input it is
    /// about, as the user gave it.
    pub async fn from_spec(a: &TraceSpec) -> Result<TraceInput, TraceInputError> {
        let name = |i: Input| a.spelling.name(i);
        let (host, port_in_target) = split_target(&a.target)?;
        let port = match (a.port, port_in_target) {
            (Some(p), Some(q)) if p != q => {
                return Err(TraceInputError::PortsDisagree {
                    input: name(Input::Port),
                    port: p,
                    target: a.target.clone(),
                    in_target: q,
                })
            }
            (p, q) => p.or(q),
        };
        match (a.protocol, port) {
            (TraceProtocol::Tcp, None) => {
                return Err(TraceInputError::TcpNeedsPort {
                    protocol: name(Input::Protocol),
                    port: name(Input::Port),
                })
            }
            (TraceProtocol::Icmp, Some(p)) => {
                return Err(TraceInputError::IcmpHasNoPort {
                    input: name(Input::Port),
                    port: p,
                    protocol: name(Input::Protocol),
                })
            }
            _ => {}
        }
        for (input, d) in [
            (Input::Interval, a.interval),
            (Input::ProbeTimeout, a.probe_timeout),
            (Input::Timeout, a.timeout),
        ] {
            if d.is_zero() {
                return Err(TraceInputError::Zero(name(input)));
            }
        }
        let target = resolve(&host)
            .await
            .map_err(|source| TraceInputError::Resolve {
                host: host.clone(),
                source,
            })?;
        if let Some(size) = a.size {
            check_size(name(Input::Size), size, a.protocol, target)?;
        }
        Ok(TraceInput {
            label: host,
            target,
            protocol: a.protocol,
            port,
            cycles: a.cycles,
            max_hops: a.max_hops,
            interval: a.interval,
            probe_timeout: a.probe_timeout,
            timeout: a.timeout,
            dns: a.dns,
            size: a.size,
        })
    }
}

/// The probe size fits the probe's headers and the interface the route to `target` leaves by (a
/// probe with DF set larger than that cannot be sent).
fn check_size(
    input: Named,
    size: u16,
    protocol: TraceProtocol,
    target: IpAddr,
) -> Result<(), TraceInputError> {
    let headers = packet::headers(
        match protocol {
            TraceProtocol::Icmp => packet::ECHO_HEADERS,
            TraceProtocol::Udp => packet::UDP_HEADERS,
            TraceProtocol::Tcp => packet::SYN_HEADERS,
        },
        target,
    );
    if size < headers {
        return Err(TraceInputError::SizeBelowHeaders {
            input,
            size,
            protocol: protocol.as_str(),
            headers,
        });
    }
    let (interface, _) = crate::probe::pmtu::mtus(target);
    if size > interface {
        return Err(TraceInputError::SizeAboveInterface {
            input,
            size,
            target,
            interface,
        });
    }
    Ok(())
}

/// `host`, `host:port`, `1.2.3.4:port` (IPv6 literals are refused later, when resolved).
fn split_target(t: &str) -> Result<(String, Option<u16>), TraceInputError> {
    let t = t.trim();
    if t.is_empty() {
        return Err(TraceInputError::EmptyTarget);
    }
    if t.contains("://") {
        return Err(TraceInputError::TargetIsUrl(t.to_string()));
    }
    // `[fd00::3]:2380` or `[fd00::3]`: the host in brackets, then maybe a port.
    if let Some(rest) = t.strip_prefix('[') {
        if let Some((h, after)) = rest.split_once(']') {
            return match after.strip_prefix(':') {
                Some(p) => {
                    let port = p.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
                        TraceInputError::BadPort {
                            target: t.to_string(),
                            port: p.to_string(),
                        }
                    })?;
                    Ok((h.to_string(), Some(port)))
                }
                None if after.is_empty() => Ok((h.to_string(), None)),
                None => Err(TraceInputError::BadPort {
                    target: t.to_string(),
                    port: after.to_string(),
                }),
            };
        }
    }
    match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            let port: u16 =
                p.parse()
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| TraceInputError::BadPort {
                        target: t.to_string(),
                        port: p.to_string(),
                    })?;
            Ok((h.to_string(), Some(port)))
        }
        _ => match crate::target::port_like_ipv6(t) {
            Some(suggest) => Err(TraceInputError::AmbiguousIpv6 {
                target: t.to_string(),
                suggest,
            }),
            None => Ok((t.to_string(), None)),
        },
    }
}

/// The address of `host` (an address or a name): for a name, the first address the system's
/// resolver gives (getaddrinfo orders them by RFC 6724, as a Go client would try them), IPv4 or
/// IPv6.
pub(crate) async fn resolve(host: &str) -> Result<IpAddr, ResolveError> {
    if let Ok(ip) = host
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
    {
        return match ip {
            IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => {
                Err(ResolveError::LinkLocal(v6))
            }
            _ => Ok(ip),
        };
    }
    let found = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((host, 0u16)),
    )
    .await
    .map_err(|_| ResolveError::Timeout)?
    .map_err(ResolveError::Lookup)?;
    found.map(|a| a.ip()).next().ok_or(ResolveError::NoAddress)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_into_host_and_port() {
        assert_eq!(
            split_target("10.0.0.11:2380").unwrap(),
            ("10.0.0.11".into(), Some(2380))
        );
        assert_eq!(split_target("etcd-1").unwrap(), ("etcd-1".into(), None));
        assert_eq!(split_target("::1").unwrap(), ("::1".into(), None));
        assert_eq!(
            split_target("[::1]:6443").unwrap(),
            ("::1".into(), Some(6443))
        );
        // An address whose last group is not a join port is taken as given.
        assert_eq!(
            split_target("fd00::2:22").unwrap(),
            ("fd00::2:22".into(), None)
        );
        assert_eq!(
            split_target("::1:6443").unwrap_err().to_string(),
            "TARGET `::1:6443` reads as one IPv6 address whose last group looks like a port; to \
             trace that port write [::1]:6443, to trace the address itself write [::1:6443]"
        );
        assert!(split_target("h:0")
            .unwrap_err()
            .to_string()
            .contains("not a port"));
        assert!(split_target("h:http")
            .unwrap_err()
            .to_string()
            .contains("not a port"));
        assert!(split_target("https://h:6443")
            .unwrap_err()
            .to_string()
            .contains("not a URL"));
    }
}
