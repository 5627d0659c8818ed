//! `APIServerAddressFamily`: an API endpoint name with addresses of both families, each family
//! probed on its own, judged by what a Go client (kubeadm, the kubelet, Cluster API) does with
//! them (`probe::dial`): it dials the first family of the RFC 6724 order, and the other one
//! 300 ms later or as soon as the first fails. So a dark family costs every new connection that
//! delay, or nothing, depending on which it is; the name still joins while one family answers.
//! Both dark is `APIServerReachable`'s.

use std::net::SocketAddr;

use super::model::{CheckName, CheckResult, Status};
use super::Checker;
use crate::probe::{ProbeFailure, Sample};
use crate::target::Target;

/// What the two families of one API endpoint name answered.
#[derive(Clone, Debug)]
pub struct FamilyProbe {
    /// The endpoint, by name.
    pub target: Target,
    /// The first address of the family a Go client dials first, and its connects.
    pub primary: (SocketAddr, Vec<Sample>),
    /// The first address of the other family, and its connects.
    pub fallback: (SocketAddr, Vec<Sample>),
}

fn family(a: &SocketAddr) -> &'static str {
    if a.is_ipv6() {
        "IPv6"
    } else {
        "IPv4"
    }
}

/// Whether any connect answered, and the last failure otherwise.
fn outcome(samples: &[Sample]) -> Result<(), Option<&ProbeFailure>> {
    if samples.iter().any(|s| s.result.is_ok()) {
        return Ok(());
    }
    Err(samples.iter().rev().find_map(|s| s.result.as_ref().err()))
}

fn why(f: Option<&ProbeFailure>) -> String {
    match f {
        Some(ProbeFailure::Timeout(ms)) => format!("connects timed out after {ms} ms"),
        Some(ProbeFailure::Refused) => "connects were refused".to_string(),
        Some(other) => format!("connects failed ({other})"),
        None => "no connect was tried".to_string(),
    }
}

impl Checker {
    /// One result for the name: ok when both families answer; a warning naming the dark family
    /// and what a Go client does about it; `None` when neither answers (the reachability check
    /// judges that).
    pub(crate) fn api_families(&self, p: &FamilyProbe) -> Option<CheckResult> {
        let (pa, fa) = (p.primary.0, p.fallback.0);
        let name = &p.target.host;
        let head = format!(
            "API server {}: {name} has {} {} (a Go client such as kubeadm dials it first) and \
             {} {}",
            p.target.endpoint,
            family(&pa),
            pa.ip(),
            family(&fa),
            fa.ip()
        );
        let (status, message) = match (outcome(&p.primary.1), outcome(&p.fallback.1)) {
            (Ok(()), Ok(())) => (Status::Ok, format!("{head}; both answer")),
            (Err(e), Ok(())) => {
                let delay = if matches!(e, Some(ProbeFailure::Timeout(_))) {
                    format!(
                        "so every new connection of a Go client waits {} ms before it tries \
                         {} {} (RFC 6555 fallback), and a client that dials only {} fails",
                        crate::probe::dial::FALLBACK_DELAY.as_millis(),
                        family(&fa),
                        fa.ip(),
                        family(&pa)
                    )
                } else {
                    format!(
                        "so a Go client falls back to {} {} at once, and a client that dials only \
                         {} fails",
                        family(&fa),
                        fa.ip(),
                        family(&pa)
                    )
                };
                (
                    Status::Warning,
                    format!(
                        "{head}; {} {} does not answer ({}), {delay}. The join works over {}; \
                         fix the {} path or remove the name's {} record",
                        family(&pa),
                        pa.ip(),
                        why(e),
                        family(&fa),
                        family(&pa),
                        if pa.is_ipv6() { "AAAA" } else { "A" }
                    ),
                )
            }
            (Ok(()), Err(e)) => (
                Status::Warning,
                format!(
                    "{head}; {} {} does not answer ({}). Go clients dial {} first and are not \
                     slowed, but a client that orders the addresses otherwise (glibc's \
                     getaddrinfo can put a unique-local IPv6 address first) or dials only {} \
                     waits or fails; fix the {} path or remove the name's {} record",
                    family(&fa),
                    fa.ip(),
                    why(e),
                    family(&pa),
                    family(&fa),
                    family(&fa),
                    if fa.is_ipv6() { "AAAA" } else { "A" }
                ),
            ),
            (Err(_), Err(_)) => return None,
        };
        Some(CheckResult {
            name: CheckName::ApiServerAddressFamily,
            target: p.target.endpoint.clone(),
            status,
            message,
            measured: None,
            threshold: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::TargetKind;

    fn probe(primary: Result<(), ProbeFailure>, fallback: Result<(), ProbeFailure>) -> FamilyProbe {
        let samples = |r: &Result<(), ProbeFailure>| {
            vec![
                Sample {
                    result: r.clone().map(|()| std::time::Duration::from_millis(1)),
                };
                3
            ]
        };
        FamilyProbe {
            target: Target::parse(TargetKind::ApiServer, "api.example:6443", true).unwrap(),
            primary: ("198.18.0.1:6443".parse().unwrap(), samples(&primary)),
            fallback: ("[fd00:198:18::1]:6443".parse().unwrap(), samples(&fallback)),
        }
    }

    #[test]
    fn a_dark_family_is_named_with_what_a_go_client_does() {
        let c = Checker::default();
        let ok = c.api_families(&probe(Ok(()), Ok(()))).unwrap();
        assert_eq!(
            (ok.name, ok.status),
            (CheckName::ApiServerAddressFamily, Status::Ok)
        );
        let dark_primary = c
            .api_families(&probe(Err(ProbeFailure::Timeout(1000)), Ok(())))
            .unwrap();
        assert_eq!(dark_primary.status, Status::Warning);
        assert!(
            dark_primary.message.contains(
                "IPv4 198.18.0.1 does not answer (connects timed out after 1000 ms), so every \
                 new connection of a Go client waits 300 ms before it tries IPv6 fd00:198:18::1"
            ),
            "{}",
            dark_primary.message
        );
        let refused = c
            .api_families(&probe(Err(ProbeFailure::Refused), Ok(())))
            .unwrap();
        assert!(refused
            .message
            .contains("falls back to IPv6 fd00:198:18::1 at once"));
        let dark_fallback = c
            .api_families(&probe(Ok(()), Err(ProbeFailure::Timeout(1000))))
            .unwrap();
        assert_eq!(dark_fallback.status, Status::Warning);
        assert!(
            dark_fallback.message.contains(
                "IPv6 fd00:198:18::1 does not answer (connects timed out after 1000 ms). Go \
                 clients dial IPv4 first and are not slowed"
            ) && dark_fallback
                .message
                .contains("remove the name's AAAA record"),
            "{}",
            dark_fallback.message
        );
        assert!(c
            .api_families(&probe(
                Err(ProbeFailure::Refused),
                Err(ProbeFailure::Refused)
            ))
            .is_none());
    }
}
