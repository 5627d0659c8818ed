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

/// Why a URL could not be turned into a [`Target`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL {url:?}: {reason}; expected https://HOST:PORT")]
pub struct TargetUrlError {
    pub url: String,
    pub reason: String,
}

impl Target {
    /// Parses `https://host:port` (or `http://`, or bare `host:port`, taken as https) into a
    /// target of `kind`. The port defaults to the kind's well-known port (6443, 2379, 2380).
    pub fn parse_url(kind: TargetKind, url: &str) -> Result<Target, TargetUrlError> {
        let err = |reason: &str| TargetUrlError {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let with_scheme = if url.contains("://") {
            url.to_string()
        } else {
            format!("https://{url}")
        };
        let parsed = url::Url::parse(&with_scheme).map_err(|e| err(&e.to_string()))?;
        let tls = match parsed.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(err(&format!("unsupported scheme {other:?}"))),
        };
        let host = match parsed.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(h) => h.to_string(),
            None => return Err(err("no host")),
        };
        if !matches!(parsed.path(), "" | "/") || parsed.query().is_some() {
            return Err(err("a path or query is not allowed"));
        }
        let default_port = match kind {
            TargetKind::ApiServer => 6443,
            TargetKind::EtcdClient => 2379,
            TargetKind::EtcdPeer => 2380,
        };
        let port = parsed.port().unwrap_or(default_port);
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
}
