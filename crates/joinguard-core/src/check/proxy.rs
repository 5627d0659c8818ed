//! `HTTPProxy`: a call of the join that goes through an egress proxy (Go's proxy-from-environment
//! rules, `crate::proxy`), with what the proxy answered a CONNECT to the target. kubeadm has a
//! check of this name that only warns (`cmd/kubeadm/app/preflight/checks.go`, `HTTPProxyCheck`);
//! joinguard words the warning as kubeadm does and adds an error where the proxy refuses the
//! tunnel, for the API endpoint and the etcd members alike (kubeadm's etcd calls go through
//! gRPC's proxy handling: docs/proxy.md).

use super::model::{CheckName, CheckResult, Status};
use super::wording::fmt_ms;
use super::Checker;
use crate::probe::Sample;
use crate::proxy::ProxyUrl;
use crate::target::{Target, TargetKind};

/// What the proxy answered for one target the join would reach through it.
#[derive(Clone, Debug)]
pub struct ProxiedPath {
    pub target: Target,
    pub proxy: ProxyUrl,
    /// CONNECT probes through the proxy.
    pub samples: Vec<Sample>,
    /// TCP connects to the target direct, beside them: what the proxy adds to each new
    /// connection, or that the proxy is the only way there.
    pub direct: Vec<Sample>,
    /// joinguard's own probes of the target went through the proxy too (the API endpoint: its
    /// latency and /readyz are the tunnel's), rather than the direct path.
    pub probed_through: bool,
    /// kubeadm 1.34's etcd client: the endpoint whose route decides every member's.
    pub decided_by: Option<Target>,
    /// The `NO_PROXY` setting that sends the join's calls to the target direct.
    pub no_proxy_fix: String,
}

impl Checker {
    /// A warning (as kubeadm's) when the proxy opens the tunnel, an error when it does not.
    pub(crate) fn http_proxy(&self, p: &ProxiedPath) -> CheckResult {
        let t = &p.target;
        let rule;
        let calls = match (t.kind, &p.decided_by) {
            (TargetKind::ApiServer, _) => "token discovery and the join's API calls (client-go)",
            (_, Some(first)) => {
                rule = format!(
                    "kubeadm's etcd calls (member list, add, promote; gRPC; kubeadm 1.34's \
                     grpc-go 1.72.1 tunnels every member once its first endpoint, {}, is \
                     proxied, whatever NO_PROXY says of the others: grpc/grpc-go #8329)",
                    first.endpoint
                );
                rule.as_str()
            }
            _ => "kubeadm's etcd calls (member list, add, promote; gRPC)",
        };
        let purl = format!("{}://{}", p.proxy.scheme, p.proxy.authority);
        let var = &p.proxy.variable;
        let opened: Vec<f64> = p
            .samples
            .iter()
            .filter_map(|s| s.result.as_ref().ok())
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        // A proxy joinguard does not open tunnels through (https://, socks5://), or one that asks
        // for the credentials its URL carries (joinguard does not send them): not verified, so
        // kubeadm's warning, with why.
        let unverified = if p.samples.is_empty() {
            Some(format!(
                "a {} proxy is not probed: joinguard opens tunnels through http:// proxies only",
                p.proxy.scheme
            ))
        } else if opened.is_empty()
            && p.proxy.has_credentials
            && p.samples.iter().all(|s| {
                matches!(&s.result, Err(crate::probe::ProbeFailure::Protocol(m)) if m.contains(" 407"))
            })
        {
            Some(
                "the proxy asks for credentials (407), which its URL carries and joinguard does \
                 not send, so the tunnel is not verified"
                    .to_string(),
            )
        } else {
            None
        };
        let (status, message) = if let Some(why) = unverified {
            (
                Status::Warning,
                format!(
                    "Connection to \"https://{}\" uses proxy \"{purl}\". If that is not \
                     intended, adjust your proxy settings ({calls} go through it, from {var}; \
                     {why}; to send the join's calls direct: {})",
                    t.endpoint, p.no_proxy_fix
                ),
            )
        } else if opened.is_empty() {
            let why = p
                .samples
                .iter()
                .rev()
                .find_map(|s| s.result.as_ref().err())
                .map_or_else(|| "no CONNECT was tried".to_string(), |e| e.to_string());
            let source = match t.kind {
                TargetKind::ApiServer => "kubernetes/kubeadm #2145",
                _ => "k3s-io/k3s #9227",
            };
            (
                Status::Error,
                format!(
                    "{calls} to {} go through the proxy {purl} ({var}), and it does not open a \
                     tunnel there: {why}; the join would fail at that call ({source}). Let the \
                     proxy allow CONNECT to {}, or send the join's calls direct: {}",
                    t.endpoint, t.endpoint, p.no_proxy_fix
                ),
            )
        } else {
            let best = opened.iter().copied().fold(f64::INFINITY, f64::min);
            let direct: Vec<f64> = p
                .direct
                .iter()
                .filter_map(|s| s.result.as_ref().ok())
                .map(|d| d.as_secs_f64() * 1000.0)
                .collect();
            let beside = if p.direct.is_empty() {
                String::new()
            } else if direct.is_empty() {
                format!(
                    "; direct, {} does not answer ({} of {} TCP connects failed): the proxy is \
                     the join's only way there, keep it",
                    t.endpoint,
                    p.direct.len(),
                    p.direct.len()
                )
            } else {
                let d = direct.iter().copied().fold(f64::INFINITY, f64::min);
                format!(
                    "; a direct TCP connect takes {} at best, so the proxy adds {} to each new \
                     connection",
                    fmt_ms(d),
                    fmt_ms((best - d).max(0.0))
                )
            };
            let own = if p.probed_through {
                "joinguard's own probes of it go through the proxy too"
            } else {
                "joinguard's own probes of it measure the direct path"
            };
            (
                Status::Warning,
                format!(
                    "Connection to \"https://{}\" uses proxy \"{purl}\". If that is not \
                     intended, adjust your proxy settings ({calls} go through it, from {var}; it \
                     opened a tunnel in {} at best, {} of {} tries{beside}; {own}; to send the \
                     join's calls direct: {})",
                    t.endpoint,
                    fmt_ms(best),
                    opened.len(),
                    p.samples.len(),
                    p.no_proxy_fix
                ),
            )
        };
        CheckResult {
            name: CheckName::HttpProxy,
            target: t.endpoint.clone(),
            status,
            message,
            measured: None,
            threshold: None,
        }
    }
}

/// The address kubeadm's `HTTPProxyCIDRCheck` asks about for `cidr`: its first host address
/// (`netutils.GetIndexedIP(cidr, 1)`), with the port of the URL kubeadm builds (`https://IP/`, or
/// `https://[IP]:1234/` for IPv6). `None` when `cidr` is not a CIDR.
fn first_address(cidr: &str) -> Option<(std::net::IpAddr, u16)> {
    use std::net::IpAddr;
    let (addr, bits) = cidr.trim().split_once('/')?;
    let bits: u32 = bits.parse().ok()?;
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(a) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            let first = (u32::from(a) & mask).checked_add(1)?;
            Some((IpAddr::V4(first.into()), 443))
        }
        IpAddr::V6(a) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            let first = (u128::from(a) & mask).checked_add(1)?;
            Some((IpAddr::V6(first.into()), 1234))
        }
        _ => None,
    }
}

impl Checker {
    /// kubeadm's `HTTPProxyCIDR` for the service or pod subnet `cidr`: a warning, in kubeadm's
    /// words, when the environment sends `https://` to its first address through a proxy (the
    /// API server's and the kubelet's calls into the cluster network would go there), with the
    /// `NO_PROXY` entry that fixes it; `None` when it goes direct.
    pub(crate) fn http_proxy_cidr(
        &self,
        cidr: &str,
        env: &crate::proxy::ProxyEnv,
    ) -> Option<CheckResult> {
        let message = match first_address(cidr) {
            None => format!(
                "kubeadm-config's networking has {cidr:?}, which is not a CIDR: kubeadm's \
                 HTTPProxyCIDR check cannot read it either (\"error parsing CIDR\")"
            ),
            Some((ip, port)) => {
                let crate::proxy::Route::Proxy(p) = env.route("https", &ip.to_string(), port)
                else {
                    return None;
                };
                format!(
                    "connection to \"{cidr}\" uses proxy \"{}://{}\". This may lead to \
                     malfunctional cluster setup. Make sure that Pod and Services IP ranges \
                     specified correctly as exceptions in proxy configuration (its first \
                     address, {ip}, goes through the proxy from {}; to send the range direct: \
                     {})",
                    p.scheme,
                    p.authority,
                    p.variable,
                    env.no_proxy_with(cidr.trim())
                )
            }
        };
        Some(CheckResult {
            name: CheckName::HttpProxyCidr,
            target: cidr.trim().to_string(),
            status: Status::Warning,
            message,
            measured: None,
            threshold: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ProbeFailure;
    use std::time::Duration;

    fn path(kind: TargetKind, endpoint: &str, ok: bool) -> ProxiedPath {
        let env = crate::proxy::ProxyEnv::from_env(&|k| {
            (k == "HTTPS_PROXY").then(|| "http://10.0.0.9:3128".to_string())
        })
        .unwrap();
        let result = if ok {
            Ok(Duration::from_micros(6400))
        } else {
            Err(ProbeFailure::Protocol(
                "the proxy 10.0.0.9:3128 answered CONNECT 10.0.0.5:6443 with `HTTP/1.1 403 Filtered`"
                    .into(),
            ))
        };
        ProxiedPath {
            target: Target::parse(kind, endpoint, true).unwrap(),
            proxy: env.https_proxy.clone().unwrap(),
            samples: vec![Sample { result }; 3],
            direct: Vec::new(),
            probed_through: kind == TargetKind::ApiServer,
            decided_by: None,
            no_proxy_fix: env.no_proxy_with("10.0.0.5"),
        }
    }

    #[test]
    fn an_unprobed_or_authenticating_proxy_is_a_warning() {
        let c = Checker::default();
        let mut p = path(TargetKind::ApiServer, "10.0.0.5:6443", true);
        p.samples.clear();
        p.proxy.scheme = "socks5".into();
        let w = c.http_proxy(&p);
        assert_eq!(w.status, Status::Warning);
        assert!(
            w.message.contains("a socks5 proxy is not probed"),
            "{}",
            w.message
        );
        let mut p = path(TargetKind::ApiServer, "10.0.0.5:6443", false);
        p.proxy.has_credentials = true;
        let answer = "the proxy answered CONNECT 10.0.0.5:6443 with `HTTP/1.1 407 Proxy \
                      Authentication Required`";
        p.samples = vec![
            Sample {
                result: Err(ProbeFailure::Protocol(answer.into()))
            };
            3
        ];
        let w = c.http_proxy(&p);
        assert_eq!(w.status, Status::Warning, "{}", w.message);
        assert!(
            w.message.contains("asks for credentials (407)"),
            "{}",
            w.message
        );
        p.proxy.has_credentials = false;
        assert_eq!(
            c.http_proxy(&p).status,
            Status::Error,
            "407 without credentials"
        );
    }

    /// kubeadm's HTTPProxyCIDR: the range's first address asked of the environment, kubeadm's
    /// wording (with the CIDR, as kubeadm prints it), and nothing when NO_PROXY covers it.
    #[test]
    fn a_proxied_subnet_is_kubeadms_http_proxy_cidr_warning() {
        assert_eq!(
            first_address("10.96.0.0/12"),
            Some(("10.96.0.1".parse().unwrap(), 443))
        );
        assert_eq!(
            first_address("fd00:10:96::/112"),
            Some(("fd00:10:96::1".parse().unwrap(), 1234))
        );
        assert_eq!(first_address("10.96.0.0"), None);
        let c = Checker::default();
        let env = |no: &str| {
            crate::proxy::ProxyEnv::from_env(&|k| match k {
                "HTTPS_PROXY" => Some("http://10.0.0.9:3128".to_string()),
                "NO_PROXY" => Some(no.to_string()),
                _ => None,
            })
            .unwrap()
        };
        let w = c.http_proxy_cidr("10.96.0.0/12", &env("10.0.0.5")).unwrap();
        assert_eq!(
            (w.name, w.status),
            (CheckName::HttpProxyCidr, Status::Warning)
        );
        assert!(
            w.message.starts_with(
                "connection to \"10.96.0.0/12\" uses proxy \"http://10.0.0.9:3128\". This may \
                 lead to malfunctional cluster setup. Make sure that Pod and Services IP ranges \
                 specified correctly as exceptions in proxy configuration (its first address, \
                 10.96.0.1, goes through the proxy from HTTPS_PROXY"
            ) && w.message.ends_with("NO_PROXY=10.0.0.5,10.96.0.0/12)"),
            "{}",
            w.message
        );
        // A range that NO_PROXY covers, or one whose first address it lists, goes direct.
        assert!(c
            .http_proxy_cidr("10.96.0.0/12", &env("10.96.0.0/12"))
            .is_none());
        assert!(c
            .http_proxy_cidr("10.96.0.0/12", &env("10.96.0.1"))
            .is_none());
        assert!(c
            .http_proxy_cidr("fd00:10:96::/112", &env("fd00:10:96::/64"))
            .is_none());
        let bad = c.http_proxy_cidr("10.96.0.0", &env("")).unwrap();
        assert!(bad.message.contains("not a CIDR"), "{}", bad.message);
    }

    /// kubeadm 1.34: a member's calls follow the first endpoint's route, and the message says so
    /// with the fix that covers every member (the first endpoint in NO_PROXY).
    #[test]
    fn kubeadm_1_34s_rule_is_named_with_the_first_endpoint() {
        let c = Checker::default();
        let mut p = path(TargetKind::EtcdClient, "10.0.0.7:2379", true);
        p.decided_by = Some(Target::parse(TargetKind::EtcdClient, "10.0.0.5:2379", true).unwrap());
        let w = c.http_proxy(&p).message;
        assert!(
            w.contains(
                "kubeadm 1.34's grpc-go 1.72.1 tunnels every member once its first endpoint, \
                 10.0.0.5:2379, is proxied, whatever NO_PROXY says of the others"
            ),
            "{w}"
        );
    }

    /// Beside the CONNECTs, direct connects say what the proxy adds, or that it is the only way.
    #[test]
    fn the_direct_path_beside_the_tunnel() {
        let c = Checker::default();
        let mut p = path(TargetKind::ApiServer, "10.0.0.5:6443", true);
        p.direct = vec![
            Sample {
                result: Ok(Duration::from_micros(1200))
            };
            3
        ];
        let w = c.http_proxy(&p).message;
        assert!(
            w.contains(
                "a direct TCP connect takes 1.2 ms at best, so the proxy adds 5.2 ms to each new \
                 connection; joinguard's own probes of it go through the proxy too"
            ),
            "{w}"
        );
        p.direct = vec![
            Sample {
                result: Err(ProbeFailure::Timeout(1000))
            };
            3
        ];
        let w = c.http_proxy(&p).message;
        assert!(
            w.contains(
                "direct, 10.0.0.5:6443 does not answer (3 of 3 TCP connects failed): the proxy \
                 is the join's only way there, keep it"
            ),
            "{w}"
        );
    }

    #[test]
    fn a_tunnel_is_kubeadms_warning_and_a_refusal_an_error_with_the_fix() {
        let c = Checker::default();
        let w = c.http_proxy(&path(TargetKind::EtcdClient, "10.0.0.5:2379", true));
        assert_eq!((w.name, w.status), (CheckName::HttpProxy, Status::Warning));
        assert!(
            w.message.starts_with(
                "Connection to \"https://10.0.0.5:2379\" uses proxy \"http://10.0.0.9:3128\". If \
                 that is not intended, adjust your proxy settings (kubeadm's etcd calls"
            ) && w
                .message
                .contains("opened a tunnel in 6.4 ms at best, 3 of 3 tries"),
            "{}",
            w.message
        );
        let e = c.http_proxy(&path(TargetKind::ApiServer, "10.0.0.5:6443", false));
        assert_eq!(e.status, Status::Error);
        assert!(
            e.message.starts_with(
                "token discovery and the join's API calls (client-go) to 10.0.0.5:6443 go \
                 through the proxy http://10.0.0.9:3128 (HTTPS_PROXY), and it does not open a \
                 tunnel there"
            ) && e.message.contains("403 Filtered")
                && e.message
                    .ends_with("send the join's calls direct: NO_PROXY=10.0.0.5"),
            "{}",
            e.message
        );
    }
}
