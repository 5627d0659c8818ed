//! The proxy environment as a Go program on this node sees it: `HTTPS_PROXY`, `HTTP_PROXY` and
//! `NO_PROXY` with Go's precedence and matching rules, so joinguard can say which of the join's
//! calls go through a proxy and which go direct.
//!
//! Implemented from the documented semantics of `golang.org/x/net/http/httpproxy` (what
//! `net/http.ProxyFromEnvironment` uses, and so client-go and kubeadm):
//! - each variable is read upper case first, then lower case (`HTTPS_PROXY`, then `https_proxy`);
//!   an empty value counts as unset; `HTTP_PROXY` is ignored when `REQUEST_METHOD` is set (CGI);
//! - a proxy value without a scheme is taken as `http://`;
//! - `https` URLs use the HTTPS proxy, `http` URLs the HTTP proxy;
//! - never proxied: `localhost` and loopback addresses, and hosts `NO_PROXY` matches:
//!   - `*` matches every host;
//!   - an IP address, `IP:port` or `[IPv6]:port` matches that address (and port);
//!   - a CIDR (`10.0.0.0/8`, `fd00::/8`) matches addresses in it (not names);
//!   - a domain `foo.com` matches `foo.com` and its subdomains; `.foo.com` and `*.foo.com` only
//!     the subdomains; `foo.com:8443` only on that port;
//!   - entries are trimmed and lower-cased, empty ones skipped.
//!
//! client-go wraps the same function with its own CIDR check first
//! (`k8s.io/apimachinery/pkg/util/net.NewProxierWithNoProxyCIDR`), which gives the same answer
//! for the Go versions kubeadm 1.28+ is built with. This module does no I/O: the environment is
//! passed in as a lookup.

use std::fmt;
use std::net::IpAddr;

/// One `NO_PROXY` entry, parsed as Go parses it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Bypass {
    All,
    Cidr {
        net: IpAddr,
        bits: u8,
    },
    Ip {
        ip: IpAddr,
        port: Option<u16>,
    },
    /// `host` starts with a dot; `exact` also matches the name without it.
    Domain {
        host: String,
        port: Option<u16>,
        exact: bool,
    },
}

/// The proxy settings of an environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyEnv {
    /// The HTTPS proxy (for `https` URLs), as given, and as a URL.
    pub https_proxy: Option<ProxyUrl>,
    /// The HTTP proxy (for `http` URLs); `None` under CGI (`REQUEST_METHOD` set).
    pub http_proxy: Option<ProxyUrl>,
    /// `NO_PROXY` as given (which variable, and its value).
    pub no_proxy: Option<(String, String)>,
    /// Each entry as written (trimmed), and what it matches.
    bypass: Vec<(String, Bypass)>,
}

/// A proxy: the variable it came from and where it points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyUrl {
    /// `HTTPS_PROXY`, `https_proxy`, `HTTP_PROXY` or `http_proxy`.
    pub variable: String,
    /// The proxy's host and port (`proxy.example:3128`), without credentials.
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// The scheme to the proxy: `http` (CONNECT over plain TCP), `https` or `socks5`.
    pub scheme: String,
    /// Whether the URL carries user:password (never printed).
    pub has_credentials: bool,
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{} ({})",
            self.scheme, self.authority, self.variable
        )
    }
}

/// Why a proxy variable cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {reason}")]
pub struct ProxyEnvError {
    pub variable: String,
    pub reason: String,
}

/// Where one call goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Direct(DirectWhy),
    Proxy(&'a ProxyUrl),
}

/// Why a call goes direct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DirectWhy {
    /// No proxy variable for the scheme.
    NoProxySet,
    /// `localhost` or a loopback address: Go never proxies them.
    Loopback,
    /// The `NO_PROXY` entry that matched.
    NoProxy(String),
}

/// The first non-empty value of `names`, with its name.
fn first(env: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Option<(String, String)> {
    names.iter().find_map(|n| {
        env(n)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (n.to_string(), v))
    })
}

fn parse_proxy(variable: &str, value: &str) -> Result<ProxyUrl, ProxyEnvError> {
    let err = |reason: String| ProxyEnvError {
        variable: variable.to_string(),
        reason,
    };
    let value = value.trim();
    // Go: a value that does not parse as a URL with a scheme is retried as http://value.
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|e| {
        err(match crate::target::bracketed_ipv6(value) {
            Some(suggest) => {
                format!("an IPv6 address in a URL needs brackets; write {suggest}")
            }
            None => format!("not a proxy URL ({e}); expected e.g. http://proxy:3128"),
        })
    })?;
    let scheme = url.scheme().to_string();
    if !matches!(scheme.as_str(), "http" | "https" | "socks5" | "socks5h") {
        return Err(err(format!(
            "proxy scheme `{scheme}` is not one Go supports (http, https, socks5)"
        )));
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(h) => h.to_string(),
        None => return Err(err("the proxy URL has no host".into())),
    };
    let port = url
        .port_or_known_default()
        .unwrap_or(match scheme.as_str() {
            "socks5" | "socks5h" => 1080,
            _ => 80,
        });
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    Ok(ProxyUrl {
        variable: variable.to_string(),
        authority,
        host,
        port,
        scheme,
        has_credentials: !url.username().is_empty() || url.password().is_some(),
    })
}

/// Parses `NO_PROXY` as Go's httpproxy does (see the module's docs).
fn parse_no_proxy(value: &str) -> Vec<(String, Bypass)> {
    let mut out = Vec::new();
    for written in value.split(',') {
        let written = written.trim();
        let p = written.to_ascii_lowercase();
        let mut push = |b: Bypass| out.push((written.to_string(), b));
        if p.is_empty() {
            continue;
        }
        if p == "*" {
            return vec![(written.to_string(), Bypass::All)];
        }
        if let Some((net, bits)) = p.split_once('/') {
            if let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u8>()) {
                let max = if net.is_ipv4() { 32 } else { 128 };
                if bits <= max {
                    push(Bypass::Cidr { net, bits });
                }
            }
            continue;
        }
        // host:port, [v6]:port, or a bare host.
        let (host, port) = split_host_port(&p);
        if let Ok(ip) = host.parse::<IpAddr>() {
            push(Bypass::Ip { ip, port });
            continue;
        }
        if host.is_empty() {
            continue;
        }
        // Go strips `*.` (not a lone `*`): `*.foo.com` is `.foo.com`.
        let host = if host.starts_with("*.") {
            &host[1..]
        } else {
            host
        };
        let (host, exact) = match host.strip_prefix('.') {
            Some(_) => (host.to_string(), false),
            None => (format!(".{host}"), true),
        };
        push(Bypass::Domain { host, port, exact });
    }
    out
}

/// `host:port` split as Go's `net.SplitHostPort` accepts it; otherwise the whole is the host.
fn split_host_port(p: &str) -> (&str, Option<u16>) {
    if let Some(rest) = p.strip_prefix('[') {
        if let Some((h, after)) = rest.split_once(']') {
            if let Some(port) = after.strip_prefix(':').and_then(|s| s.parse().ok()) {
                return (h, Some(port));
            }
        }
        return (p, None);
    }
    match p.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') => match port.parse() {
            Ok(port) => (h, Some(port)),
            Err(_) => (p, None),
        },
        _ => (p, None),
    }
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits))
            };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits))
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        // Go's IPNet.Contains: an IPv4 network holds an IPv4-mapped address; an IPv6 network
        // never holds an IPv4 one.
        (IpAddr::V4(_), IpAddr::V6(_)) => false,
        (IpAddr::V6(a), IpAddr::V4(_)) => a
            .to_ipv4_mapped()
            .is_some_and(|v4| in_cidr(IpAddr::V4(v4), net, bits)),
    }
}

impl ProxyEnv {
    /// The proxy settings of the environment `env` gives (e.g. `|k| std::env::var(k).ok()`).
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<ProxyEnv, ProxyEnvError> {
        let https_proxy = first(env, &["HTTPS_PROXY", "https_proxy"])
            .map(|(k, v)| parse_proxy(&k, &v))
            .transpose()?;
        let cgi = env("REQUEST_METHOD").is_some_and(|v| !v.is_empty());
        // The join's calls are all https: an HTTP proxy the join never uses is no input error.
        let http_proxy = if cgi {
            None
        } else {
            first(env, &["HTTP_PROXY", "http_proxy"]).and_then(|(k, v)| parse_proxy(&k, &v).ok())
        };
        let no_proxy = first(env, &["NO_PROXY", "no_proxy"]);
        let bypass = no_proxy
            .as_ref()
            .map(|(_, v)| parse_no_proxy(v))
            .unwrap_or_default();
        Ok(ProxyEnv {
            https_proxy,
            http_proxy,
            no_proxy,
            bypass,
        })
    }

    /// Whether any proxy is set.
    pub fn any(&self) -> bool {
        self.https_proxy.is_some() || self.http_proxy.is_some()
    }

    /// Where a call to `scheme://host:port` goes (`host` without brackets).
    pub fn route(&self, scheme: &str, host: &str, port: u16) -> Route<'_> {
        let proxy = match scheme {
            "https" => self.https_proxy.as_ref(),
            "http" => self.http_proxy.as_ref(),
            _ => None,
        };
        let Some(proxy) = proxy else {
            return Route::Direct(DirectWhy::NoProxySet);
        };
        let host = host
            .trim_matches(|c| c == '[' || c == ']')
            .to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        if host == "localhost" || ip.is_some_and(|i| i.is_loopback()) {
            return Route::Direct(DirectWhy::Loopback);
        }
        for (written, b) in &self.bypass {
            let hit = match b {
                Bypass::All => true,
                Bypass::Cidr { net, bits } => ip.is_some_and(|a| in_cidr(a, *net, *bits)),
                Bypass::Ip { ip: e, port: p } => {
                    ip.is_some_and(|a| a == e.to_canonical()) && p.is_none_or(|p| p == port)
                }
                Bypass::Domain {
                    host: h,
                    port: p,
                    exact,
                } => {
                    (host.ends_with(h.as_str()) || (*exact && host == h[1..]))
                        && p.is_none_or(|p| p == port)
                }
            };
            if hit {
                return Route::Direct(DirectWhy::NoProxy(written.clone()));
            }
        }
        Route::Proxy(proxy)
    }

    /// The `http://` proxy a Go client tunnels an `https://` call to `target` through, if the
    /// environment sends it to one (a proxy of another scheme is not tunnelled by joinguard:
    /// `None`, and `HTTPProxy` reports the path unverified).
    pub fn tunnel_for(&self, target: &crate::target::Target) -> Option<&ProxyUrl> {
        match self.route("https", &target.host, target.port) {
            Route::Proxy(p) if p.scheme == "http" => Some(p),
            _ => None,
        }
    }

    /// The `NO_PROXY` setting that also bypasses `host`: the present value with `host` appended
    /// (an IPv6 address without brackets, as Go reads it).
    pub fn no_proxy_with(&self, host: &str) -> String {
        let host = host.trim_matches(|c| c == '[' || c == ']');
        let var = self
            .no_proxy
            .as_ref()
            .map_or("NO_PROXY", |(k, _)| k.as_str());
        match &self.no_proxy {
            Some((_, v)) if !v.trim().is_empty() => format!("{var}={},{host}", v.trim()),
            _ => format!("{var}={host}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> ProxyEnv {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ProxyEnv::from_env(&|k| m.get(k).cloned()).unwrap()
    }

    /// What `route` says: the proxy's authority, or "direct".
    fn via(e: &ProxyEnv, url: &str) -> String {
        let u = url::Url::parse(url).unwrap();
        let host = match u.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(h) => h.to_string(),
            None => String::new(),
        };
        let port = u.port_or_known_default().unwrap();
        match e.route(u.scheme(), &host, port) {
            Route::Direct(_) => "direct".into(),
            Route::Proxy(p) => p.authority.clone(),
        }
    }

    /// Go's precedence and the proxy URL forms (golang.org/x/net/http/httpproxy's
    /// `proxyForURLTests`): upper case first, a bare host:port taken as http://, HTTP_PROXY
    /// only for http URLs and never under CGI.
    #[test]
    fn proxies_are_taken_as_go_takes_them() {
        let e = env(&[("HTTP_PROXY", "cache.corp.example.com:1234")]);
        assert_eq!(via(&e, "http://example.com"), "cache.corp.example.com:1234");
        assert_eq!(via(&e, "https://example.com"), "direct", "no HTTPS_PROXY");
        let e = env(&[("HTTPS_PROXY", "https://secure.proxy.tld")]);
        assert_eq!(via(&e, "https://example.com"), "secure.proxy.tld:443");
        let e = env(&[("HTTPS_PROXY", "socks5://127.0.0.1")]);
        assert_eq!(via(&e, "https://example.com"), "127.0.0.1:1080");
        let e = env(&[
            ("HTTPS_PROXY", "http://upper:3128"),
            ("https_proxy", "http://lower:3128"),
        ]);
        assert_eq!(
            via(&e, "https://example.com"),
            "upper:3128",
            "upper case first"
        );
        let e = env(&[("HTTPS_PROXY", ""), ("https_proxy", "http://lower:3128")]);
        assert_eq!(
            via(&e, "https://example.com"),
            "lower:3128",
            "an empty value is unset"
        );
        let e = env(&[("HTTP_PROXY", "http://cgi:3128"), ("REQUEST_METHOD", "GET")]);
        assert_eq!(
            via(&e, "http://example.com"),
            "direct",
            "CGI ignores HTTP_PROXY"
        );
        let e = env(&[("HTTPS_PROXY", "http://u:secret@proxy:3128")]);
        let p = e.https_proxy.as_ref().unwrap();
        assert!(
            p.has_credentials && !p.to_string().contains("secret"),
            "{p}"
        );
        assert!(
            ProxyEnv::from_env(&|k| (k == "HTTPS_PROXY").then(|| "ftp://x".to_string())).is_err()
        );
    }

    /// `NO_PROXY` as Go matches it: the cases of httpproxy's `UseProxyTests` (each host on port
    /// 80, `true` = through the proxy), verbatim, and of `proxyForURLTests`.
    #[test]
    fn no_proxy_matches_as_go_matches_it() {
        let e = env(&[
            ("HTTP_PROXY", "http://proxy:3128"),
            (
                "NO_PROXY",
                "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, 192.168.1.2:81, \
                 192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, \
                 [2001:db8::52:0:3]:80, 2002:db8:a::45/64",
            ),
        ]);
        let use_proxy = [
            ("localhost", false),
            ("127.0.0.1", false),
            ("127.0.0.2", false),
            ("[::1]", false),
            ("[::2]", true),
            ("192.168.1.1", false),
            ("192.168.1.2", true),
            ("192.168.1.3", false),
            ("192.168.1.4", true),
            ("10.0.0.2", false),
            ("[2001:db8::52:0:1]", false),
            ("[2001:db8::52:0:2]", true),
            ("[2001:db8::52:0:3]", false),
            ("[2002:db8:a::123]", false),
            ("[fe80::424b:c8be:1643:a1b6]", true),
            ("barbaz.net", true),
            ("www.barbaz.net", false),
            ("foobar.com", false),
            ("www.foobar.com", false),
            ("foofoobar.com", true),
            ("baz.com", true),
            ("localhost.net", true),
            ("local.localhost", true),
            ("barbarbaz.net", true),
            ("wildcard.io", true),
            ("nested.wildcard.io", false),
            ("awildcard.io", true),
        ];
        for (host, proxied) in use_proxy {
            let want = if proxied { "proxy:3128" } else { "direct" };
            assert_eq!(via(&e, &format!("http://{host}:80")), want, "{host}");
        }
        // proxyForURLTests with NO_PROXY, HTTP_PROXY=proxy.
        for (no_proxy, url, want) in [
            ("example.com", "http://example.com/", "direct"),
            (".example.com", "http://example.com/", "proxy:80"),
            ("ample.com", "http://example.com/", "proxy:80"),
            ("example.com", "http://foo.example.com/", "direct"),
            (".foo.com", "http://example.com/", "proxy:80"),
            (":1", "http://example.com/", "proxy:80"),
        ] {
            let e = env(&[("HTTP_PROXY", "proxy"), ("NO_PROXY", no_proxy)]);
            assert_eq!(via(&e, url), want, "NO_PROXY={no_proxy} {url}");
        }
        // Go's corners: a lone `*` prefix is part of the name; an IPv6 range holds no IPv4 host;
        // an IPv4-mapped address is its IPv4 address (for loopback too).
        let e = env(&[
            ("HTTPS_PROXY", "proxy:3128"),
            ("NO_PROXY", "*foo.com, ::/0, 10.0.0.7"),
        ]);
        assert_eq!(
            via(&e, "https://foo.com"),
            "proxy:3128",
            "`*foo.com` is no wildcard"
        );
        assert_eq!(
            via(&e, "https://10.0.0.8"),
            "proxy:3128",
            "::/0 holds no IPv4 host"
        );
        assert_eq!(
            via(&e, "https://[fd00::1]"),
            "direct",
            "::/0 holds IPv6 hosts"
        );
        assert_eq!(via(&e, "https://[::ffff:10.0.0.7]"), "direct");
        assert_eq!(via(&e, "https://[::ffff:127.0.0.1]"), "direct", "loopback");
        // A port on a name: only that port (https is 443).
        let e = env(&[("HTTPS_PROXY", "proxy:3128"), ("NO_PROXY", "bar.com:80")]);
        assert_eq!(via(&e, "https://bar.com"), "proxy:3128");
        assert_eq!(via(&e, "https://bar.com:80"), "direct");
        let all = env(&[("HTTPS_PROXY", "http://proxy:3128"), ("no_proxy", "*")]);
        assert_eq!(via(&all, "https://example.com"), "direct");
        match all.route("https", "10.0.0.5", 6443) {
            Route::Direct(DirectWhy::NoProxy(e)) => assert_eq!(e, "*"),
            other => panic!("{other:?}"),
        }
        // The entry that matched is named, as written; the fix for a miss adds the host.
        let e = env(&[
            ("HTTPS_PROXY", "proxy:3128"),
            ("NO_PROXY", " .Example.com , 10.0.0.0/30"),
        ]);
        match e.route("https", "10.0.0.2", 6443) {
            Route::Direct(DirectWhy::NoProxy(entry)) => assert_eq!(entry, "10.0.0.0/30"),
            other => panic!("{other:?}"),
        }
        match e.route("https", "api.example.com", 6443) {
            Route::Direct(DirectWhy::NoProxy(entry)) => assert_eq!(entry, ".Example.com"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            env(&[("HTTPS_PROXY", "p:1"), ("no_proxy", "a.example")]).no_proxy_with("10.0.0.9"),
            "no_proxy=a.example,10.0.0.9"
        );
        assert_eq!(env(&[]).no_proxy_with("[fd00::5]"), "NO_PROXY=fd00::5");
    }
}
