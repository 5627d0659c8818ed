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
        let with_scheme = if value.contains("://") {
            value.to_string()
        } else if allow_bare {
            format!("https://{value}")
        } else {
            return Err(err(UrlProblem::NoScheme(default_port)));
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

    /// The target as an URL, e.g. `https://10.0.0.11:2379` (what etcd-client is given).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
