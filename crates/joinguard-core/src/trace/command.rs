//! `joinguard trace`'s inputs: validates the request (its errors name the flag, exit 2) and
//! resolves the target into a [`TraceSpec`]. The binary runs the tracer and prints.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::spec::TraceRequest;

use super::{packet, TraceError, TraceProtocol, TraceSpec};

/// Validated flags. Every error names the flag or argument it is about.
pub async fn spec_from_request(a: &TraceRequest) -> Result<TraceSpec, String> {
    let (host, port_in_target) = split_target(&a.target)?;
    let port = match (a.port, port_in_target) {
        (Some(p), Some(q)) if p != q => {
            return Err(format!(
                "--port {p} and the port in TARGET `{}` ({q}) disagree; give one",
                a.target
            ))
        }
        (p, q) => p.or(q),
    };
    match (a.protocol, port) {
        (TraceProtocol::Tcp, None) => {
            return Err(
                "--protocol tcp needs --port (the service port, e.g. 2380 for etcd peers, \
                        2379 for etcd clients, 6443 for the API server)"
                    .into(),
            )
        }
        (TraceProtocol::Icmp, Some(p)) => {
            return Err(format!(
                "--port {p}: ICMP echo has no ports; use --protocol tcp or udp to probe a port"
            ))
        }
        _ => {}
    }
    for (flag, d) in [
        ("--interval", a.interval),
        ("--probe-timeout", a.probe_timeout),
        ("--timeout", a.timeout),
    ] {
        if d.is_zero() {
            return Err(format!("{flag} must be longer than 0"));
        }
    }
    let target = resolve(&host).await?;
    if let Some(size) = a.size {
        check_size(size, a.protocol, target)?;
    }
    Ok(TraceSpec {
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

/// `--size` fits the probe's headers and the interface the route to `target` leaves by (a probe
/// with DF set larger than that cannot be sent).
fn check_size(size: u16, protocol: TraceProtocol, target: Ipv4Addr) -> Result<(), String> {
    let headers = match protocol {
        TraceProtocol::Icmp => packet::ECHO_HEADERS,
        TraceProtocol::Udp => packet::UDP_HEADERS,
        TraceProtocol::Tcp => packet::SYN_HEADERS,
    };
    if size < headers {
        return Err(format!(
            "--size {size}: a {} probe takes at least {headers} bytes (its IP and {} headers)",
            protocol.as_str(),
            protocol.as_str()
        ));
    }
    let (interface, _) = crate::probe::pmtu::mtus(target);
    if size > interface {
        return Err(format!(
            "--size {size}: the interface the route to {target} leaves by has an MTU of \
             {interface} bytes, and a probe with DF set cannot be larger; give at most {interface} \
             (the trace shrinks its probes to any smaller MTU a router reports)"
        ));
    }
    Ok(())
}

/// `host`, `host:port`, `1.2.3.4:port` (IPv6 literals are refused later, when resolved).
fn split_target(t: &str) -> Result<(String, Option<u16>), String> {
    let t = t.trim();
    if t.is_empty() {
        return Err("TARGET is empty; give a host name or an IPv4 address".into());
    }
    if t.contains("://") {
        return Err(format!(
            "TARGET `{t}`: give a host or host:port, not a URL (e.g. 10.0.0.11:2380)"
        ));
    }
    match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            let port: u16 = p
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("TARGET `{t}`: `{p}` is not a port (1 to 65535)"))?;
            Ok((h.to_string(), Some(port)))
        }
        _ => Ok((t.to_string(), None)),
    }
}

/// The IPv4 address of `host` (an address or a name), with errors naming TARGET.
pub(crate) async fn resolve(host: &str) -> Result<Ipv4Addr, String> {
    if let Ok(ip) = host
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
    {
        return match ip {
            IpAddr::V4(v4) => Ok(v4),
            IpAddr::V6(_) => Err(format!("TARGET `{host}`: {}", TraceError::Unsupported(ip))),
        };
    }
    let found = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::lookup_host((host, 0u16)),
    )
    .await
    .map_err(|_| format!("TARGET `{host}`: name lookup timed out after 5s"))?
    .map_err(|e| format!("TARGET `{host}`: cannot resolve the name ({e})"))?;
    let mut any = false;
    for a in found {
        any = true;
        if let IpAddr::V4(v4) = a.ip() {
            return Ok(v4);
        }
    }
    Err(if any {
        format!(
            "TARGET `{host}`: the name has only IPv6 addresses; only IPv4 can be traced for now"
        )
    } else {
        format!("TARGET `{host}`: the name has no address")
    })
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
        assert!(split_target("h:0").unwrap_err().contains("not a port"));
        assert!(split_target("h:http").unwrap_err().contains("not a port"));
        assert!(split_target("https://h:6443")
            .unwrap_err()
            .contains("not a URL"));
    }
}
