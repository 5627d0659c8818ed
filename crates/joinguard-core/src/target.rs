//! Targets: the network endpoints a join depends on.
//!
//! A target is what a check judges and what a report names. Its `endpoint` is `host:port`, the
//! form scripts match on in the JSON report. This module must not do I/O.

use std::fmt;

use serde::Serialize;

/// The role a target plays in the join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// The API endpoint or load balancer (`controlPlaneEndpoint`).
    ApiServer,
    /// An etcd member's client URL (port 2379).
    EtcdClient,
    /// An etcd member's peer URL (port 2380).
    EtcdPeer,
}

/// One endpoint to probe.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Target {
    pub kind: TargetKind,
    /// `host:port`, as printed and matched in reports.
    pub endpoint: String,
    /// Host part (IP literal or DNS name), used for TLS server name and SAN checks.
    pub host: String,
    pub port: u16,
    /// Whether the endpoint speaks TLS (https URL).
    pub tls: bool,
    /// etcd member name, when known (from MemberList).
    pub member: Option<String>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TargetKind::ApiServer => write!(f, "API server {}", self.endpoint),
            TargetKind::EtcdClient => write!(f, "etcd member {}", self.endpoint),
            TargetKind::EtcdPeer => write!(f, "etcd peer {}", self.endpoint),
        }
    }
}

/// Why a value is not a usable endpoint URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlProblem {
    #[error("expected a URL like https://10.0.0.11:{0}")]
    NoScheme(u16),
    #[error(
        "not a valid URL ({reason}); expected https://HOST:PORT, e.g. https://10.0.0.11:{port}"
    )]
    Invalid { reason: String, port: u16 },
    #[error("scheme `{0}` is not supported; expected https:// (or http://)")]
    Scheme(String),
    #[error("credentials in the URL are not supported; remove user:password@")]
    Credentials,
    #[error("expected only scheme, host and port, without a path or query")]
    Path,
    #[error("the URL has no host")]
    NoHost,
    /// An IPv6 address without brackets in a URL: Go's URL parser (etcd's, kubeadm's) refuses it
    /// ("too many colons"), as kubeadm's own unbracketed etcd flags did (kubernetes/kubeadm
    /// #1212). `suggest` is the bracketed form.
    #[error("an IPv6 address in a URL needs brackets; write {suggest}")]
    Unbracketed { suggest: String },
    /// A link-local (fe80::/10) etcd URL. `zone` when the URL carries one.
    #[error(
        "{addr} is a link-local address, which etcd cannot use: {}; advertise a global or \
         unique-local (fd00::/8) address instead",
        if *zone {
            "an etcd URL cannot carry the zone (%eth0) that picks the interface \
             (etcd-io/etcd #790)"
        } else {
            "without a zone (%eth0) the kernel cannot tell which link it is on, and etcd's \
             connects fail with 'invalid argument' (etcd-io/etcd #10287)"
        }
    )]
    LinkLocal { addr: String, zone: bool },
}

/// Why a URL could not be turned into a [`Target`]. The URL is not repeated when it carries
/// credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {url:?}: {problem}")]
pub struct TargetUrlError {
    pub url: String,
    pub problem: UrlProblem,
}

impl TargetKind {
    /// The kind's well-known port: 6443, 2379, 2380.
    pub(crate) fn default_port(self) -> u16 {
        match self {
            TargetKind::ApiServer => 6443,
            TargetKind::EtcdClient => 2379,
            TargetKind::EtcdPeer => 2380,
        }
    }
}

impl Target {
    /// Parses `https://host:port` (or `http://`, or bare `host:port`, taken as https) into a
    /// target of `kind`. The port defaults to the kind's well-known port (6443, 2379, 2380).
    pub fn parse_url(kind: TargetKind, url: &str) -> Result<Target, TargetUrlError> {
        Target::parse(kind, url, true)
    }

    /// The one endpoint parser: `https://host:port` or `http://host:port`, and a bare
    /// `host:port` (taken as https) when `allow_bare`. A URL with credentials, a path or a query
    /// is refused; an explicit `:443` is kept (the `url` crate elides it); the port defaults to
    /// the kind's well-known port.
    pub fn parse(
        kind: TargetKind,
        value: &str,
        allow_bare: bool,
    ) -> Result<Target, TargetUrlError> {
        let default_port = kind.default_port();
        let err = |problem: UrlProblem| TargetUrlError {
            url: if problem == UrlProblem::Credentials {
                "<redacted>".into()
            } else {
                value.to_string()
            },
            problem,
        };
        let bare = !value.contains("://");
        let with_scheme = if !bare {
            value.to_string()
        } else if allow_bare {
            format!("https://{value}")
        } else {
            return Err(err(UrlProblem::NoScheme(default_port)));
        };
        let with_scheme = match ipv6_authority(kind, &with_scheme, bare) {
            Ok(Some(rewritten)) => rewritten,
            Ok(None) => with_scheme,
            Err(problem) => return Err(err(problem)),
        };
        let parsed = url::Url::parse(&with_scheme).map_err(|e| {
            if with_scheme.contains('@') {
                // The parser's message may quote the authority; do not repeat a password.
                err(UrlProblem::Credentials)
            } else {
                err(UrlProblem::Invalid {
                    reason: e.to_string(),
                    port: default_port,
                })
            }
        })?;
        let tls = match parsed.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(err(UrlProblem::Scheme(other.to_string()))),
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(err(UrlProblem::Credentials));
        }
        if !matches!(parsed.path(), "" | "/") || parsed.query().is_some() {
            return Err(err(UrlProblem::Path));
        }
        let host = match parsed.host() {
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            // An IPv4-mapped address is the IPv4 address, as Go reads it (`net.IP.To4`): probed,
            // printed and matched as such.
            Some(url::Host::Ipv6(ip)) if ip.to_ipv4_mapped().is_some() => ip
                .to_ipv4_mapped()
                .map(|v4| v4.to_string())
                .unwrap_or_default(),
            Some(url::Host::Ipv6(ip)) if is_link_local(ip) && kind != TargetKind::ApiServer => {
                return Err(err(UrlProblem::LinkLocal {
                    addr: ip.to_string(),
                    zone: false,
                }))
            }
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(url::Host::Domain(d)) if !d.is_empty() => d.to_string(),
            _ => return Err(err(UrlProblem::NoHost)),
        };
        // `url` elides a port equal to the scheme's default (443 for https), so look for it.
        let explicit_443 = parsed.port().is_none()
            && (parsed.authority().ends_with(":443")
                || with_scheme.trim_end_matches('/').ends_with(":443"));
        let port = match parsed.port() {
            Some(p) => p,
            None if explicit_443 => 443,
            None => default_port,
        };
        let endpoint = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(Target {
            kind,
            endpoint,
            host,
            port,
            tls,
            member: None,
        })
    }

    /// The host as an IP address, when it is one.
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        self.host.parse().ok()
    }

    /// The target as an URL, e.g. `https://10.0.0.11:2379` (what etcd-client is given).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.endpoint)
    }
}

/// Whether `ip` is link-local unicast (fe80::/10, RFC 4291).
fn is_link_local(ip: std::net::Ipv6Addr) -> bool {
    ip.segments()[0] & 0xffc0 == 0xfe80
}

/// IPv6 forms the `url` crate does not take as a kubeadm user means them. `Ok(Some(url))` is the
/// URL to parse instead, `Ok(None)` leaves `url` as it is.
/// - A zone in brackets (`[fe80::1%eth0]`, `%25eth0`): refused with the reason for an etcd URL.
/// - An unbracketed address (`https://fd00::2:2379`): a bare value is all host, with the
///   kind's port, as kubeadm's `ParseHostPort` reads `controlPlaneEndpoint: fd00::5`
///   (cmd/kubeadm/app/util/endpoint.go: `net.SplitHostPort` fails, the whole value is the
///   host); in a URL it is refused with the bracketed form to write, as etcd refuses it.
fn ipv6_authority(kind: TargetKind, url: &str, bare: bool) -> Result<Option<String>, UrlProblem> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Ok(None);
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if authority.contains('@') {
        return Ok(None); // refused as credentials by the caller
    }
    if let Some(inner) = authority.strip_prefix('[') {
        let Some((addr, zone)) = inner.split_once(']').and_then(|(a, _)| a.split_once('%')) else {
            return Ok(None);
        };
        let zoned = addr.parse::<std::net::Ipv6Addr>().ok();
        return match zoned {
            Some(ip) if kind != TargetKind::ApiServer => Err(UrlProblem::LinkLocal {
                addr: format!("{ip}%{}", zone.trim_start_matches("25")),
                zone: true,
            }),
            _ => Ok(None),
        };
    }
    if authority.matches(':').count() < 2 {
        return Ok(None);
    }
    if let Ok(ip) = authority.parse::<std::net::Ipv6Addr>() {
        // `::1:6443` is an address, but one typed by someone who meant port 6443: a bare value
        // whose last group reads as a well-known port is refused as ambiguous.
        if let (true, Some(suggest)) = (bare, port_like_ipv6(authority)) {
            return Err(UrlProblem::Unbracketed { suggest });
        }
        if bare {
            return Ok(Some(format!(
                "{scheme}://[{ip}]:{}{tail}",
                kind.default_port()
            )));
        }
        // kubeadm's unbracketed etcd flags ended in the port: suggest that reading when the
        // last group is a decimal port and the rest an address.
        let suggest = match authority.rsplit_once(':') {
            Some((a, p)) if p.parse::<u16>().is_ok() && a.parse::<std::net::Ipv6Addr>().is_ok() => {
                format!("{scheme}://[{a}]:{p}")
            }
            _ => format!("{scheme}://[{ip}]:{}", kind.default_port()),
        };
        return Err(UrlProblem::Unbracketed { suggest });
    }
    if let Some((a, p)) = authority.rsplit_once(':') {
        if a.parse::<std::net::Ipv6Addr>().is_ok() && p.parse::<u16>().is_ok() {
            return Err(UrlProblem::Unbracketed {
                suggest: format!("{scheme}://[{a}]:{p}"),
            });
        }
    }
    Ok(None)
}

/// `::1:6443` is an IPv6 address, but one typed by someone who meant port 6443 of `::1`: when the
/// last group of an unbracketed address is a port the join uses (443, 6443, 2379, 2380) and the
/// rest is an address too, the bracketed host and port (`[::1]:6443`) it was likely meant as.
pub(crate) fn port_like_ipv6(value: &str) -> Option<String> {
    value
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .and(value.rsplit_once(':'))
        .filter(|(a, p)| {
            matches!(*p, "443" | "6443" | "2379" | "2380")
                && a.parse::<std::net::Ipv6Addr>().is_ok()
        })
        .map(|(a, p)| format!("[{a}]:{p}"))
}

/// The bracketed form of a URL (or a bare `host:port`) whose host is an unbracketed IPv6
/// address, for the message of a parser that refused it (the `url` crate says "empty host" or
/// "invalid port"): `https://::1:6443` -> `https://[::1]:6443`, `::1:3128` -> `[::1]:3128`.
/// The last group is read as the port when it is a decimal port and the rest an address, as
/// kubeadm's unbracketed flags meant it. `None` when the host is not an unbracketed address.
pub fn bracketed_ipv6(value: &str) -> Option<String> {
    let (scheme, rest) = match value.split_once("://") {
        Some((s, r)) => (format!("{s}://"), r),
        None => (String::new(), value),
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if authority.contains(['[', '@']) || authority.matches(':').count() < 2 {
        return None;
    }
    let host_port = match authority.rsplit_once(':') {
        Some((a, p)) if p.parse::<u16>().is_ok() && a.parse::<std::net::Ipv6Addr>().is_ok() => {
            format!("[{a}]:{p}")
        }
        _ => format!("[{}]", authority.parse::<std::net::Ipv6Addr>().ok()?),
    };
    Some(format!("{scheme}{host_port}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unbracketed_ipv6_hosts_get_their_bracketed_form() {
        for (given, want) in [
            ("https://::1:6443", Some("https://[::1]:6443")),
            ("::1:3128", Some("[::1]:3128")),
            ("http://fd00::2:3128/", Some("http://[fd00::2]:3128/")),
            ("https://fd00::2", Some("https://[fd00::2]")),
            ("https://[::1]:6443", None),
            ("https://10.0.0.1:6443", None),
            ("https://user:pw@::1:6443", None),
        ] {
            assert_eq!(bracketed_ipv6(given).as_deref(), want, "{given}");
        }
    }

    #[test]
    fn parses_urls_and_defaults_ports() {
        let t = Target::parse_url(TargetKind::EtcdClient, "https://10.0.0.11:2379").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.tls), ("10.0.0.11", 2379, true));
        assert_eq!(t.endpoint, "10.0.0.11:2379");
        let t = Target::parse_url(TargetKind::EtcdPeer, "[fd00::1]").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("fd00::1", 2380));
        assert_eq!(t.url(), "https://[fd00::1]:2380");
        assert!(Target::parse_url(TargetKind::ApiServer, "https://:6443").is_err());
        assert!(Target::parse_url(TargetKind::ApiServer, "ftp://a:1").is_err());
    }

    /// The two parsers that were merged disagreed on these: an explicit :443 fell back to the
    /// kind's port, a query was accepted, credentials were accepted by one.
    #[test]
    fn explicit_443_credentials_and_queries() {
        let t = Target::parse_url(TargetKind::EtcdClient, "https://lb.example:443").unwrap();
        assert_eq!(t.port, 443);
        let t = Target::parse(TargetKind::ApiServer, "lb.example:443", true).unwrap();
        assert_eq!(t.endpoint, "lb.example:443");
        let e = Target::parse_url(TargetKind::EtcdClient, "https://u:s3cr3t@h:2379").unwrap_err();
        assert_eq!(e.problem, UrlProblem::Credentials);
        assert!(!e.to_string().contains("s3cr3t"), "{e}");
        let e = Target::parse(TargetKind::EtcdClient, "https://h:2379/?x=1", false).unwrap_err();
        assert_eq!(e.problem, UrlProblem::Path);
        let e = Target::parse(TargetKind::EtcdPeer, "h:2380", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid URL \"h:2380\": expected a URL like https://10.0.0.11:2380"
        );
    }

    /// IPv6 as kubeadm and etcd write it, and the forms they refuse, with what the user sees.
    #[test]
    fn ipv6_forms_as_kubeadm_writes_and_refuses_them() {
        let t = Target::parse_url(TargetKind::EtcdClient, "https://[fd00:198:18::2]:2379").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("fd00:198:18::2", 2379));
        assert_eq!(t.endpoint, "[fd00:198:18::2]:2379");
        assert_eq!(t.ip(), Some("fd00:198:18::2".parse().unwrap()));
        // kubeadm's ParseHostPort: a bare unbracketed address is all host.
        let t = Target::parse(TargetKind::ApiServer, "fd00::5", true).unwrap();
        assert_eq!(t.endpoint, "[fd00::5]:6443");
        // Uppercase and long forms print in the canonical (RFC 5952) form etcd matches on.
        let t = Target::parse(TargetKind::ApiServer, "[FD00:0:0::5]:6443", true).unwrap();
        assert_eq!(t.endpoint, "[fd00::5]:6443");
        // An IPv4-mapped address is the IPv4 address.
        let t =
            Target::parse_url(TargetKind::EtcdPeer, "https://[::ffff:198.18.0.2]:2380").unwrap();
        assert_eq!(t.endpoint, "198.18.0.2:2380");
        assert_eq!(t.ip(), Some("198.18.0.2".parse().unwrap()));
        // kubernetes/kubeadm #1212's flag: refused with the form to write.
        let e = Target::parse_url(TargetKind::EtcdClient, "https://fd00::2:2379").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid URL \"https://fd00::2:2379\": an IPv6 address in a URL needs brackets; \
             write https://[fd00::2]:2379"
        );
        let e = Target::parse_url(TargetKind::EtcdPeer, "https://2001:db8::7").unwrap_err();
        assert_eq!(
            e.problem,
            UrlProblem::Unbracketed {
                suggest: "https://[2001:db8::7]:2380".into()
            }
        );
        // Link-local etcd URLs, with and without a zone (escaped or not).
        for url in [
            "https://[fe80::1%25eth0]:2380",
            "https://[fe80::1%eth0]:2380",
        ] {
            let e = Target::parse_url(TargetKind::EtcdPeer, url).unwrap_err();
            assert_eq!(
                e.problem,
                UrlProblem::LinkLocal {
                    addr: "fe80::1%eth0".into(),
                    zone: true
                },
                "{url}"
            );
            assert!(e.to_string().contains("etcd-io/etcd #790"), "{e}");
        }
        let e = Target::parse_url(TargetKind::EtcdClient, "https://[fe80::1]:2379").unwrap_err();
        assert!(
            e.to_string()
                .contains("fe80::1 is a link-local address, which etcd cannot use"),
            "{e}"
        );
        assert!(e.to_string().contains("invalid argument"), "{e}");
        // A bare value ending in a well-known port is ambiguous: refused with brackets to add.
        let e = Target::parse(TargetKind::ApiServer, "::1:6443", true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid URL \"::1:6443\": an IPv6 address in a URL needs brackets; write [::1]:6443"
        );
        // An IPv4 literal with a port is not mistaken for IPv6.
        let t = Target::parse_url(TargetKind::EtcdClient, "198.18.0.2:2379").unwrap();
        assert_eq!(t.endpoint, "198.18.0.2:2379");
    }
}
