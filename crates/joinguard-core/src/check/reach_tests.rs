//! Every target is judged: the reachability examples a user meets (a closed API port, a dark
//! host, a refused peer identity) and the invariant over generated measurements.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::probe::{ProbeFailure, Sample};

fn target(kind: TargetKind, endpoint: &str) -> Target {
    Target::parse(kind, endpoint, true).unwrap()
}

fn stream(
    t: &Target,
    probe: ProbeKind,
    ok: usize,
    failure: Option<ProbeFailure>,
    n: usize,
) -> Summary {
    let mut samples: Vec<Sample> = (0..ok)
        .map(|i| Sample {
            result: Ok(Duration::from_micros(500 + 10 * i as u64)),
        })
        .collect();
    if let Some(f) = failure {
        samples.extend((0..n).map(|_| Sample {
            result: Err(f.clone()),
        }));
    }
    Summary::from_samples(t, probe, &samples)
}

fn errors(results: &[CheckResult]) -> Vec<(CheckName, &str)> {
    results
        .iter()
        .filter(|r| r.status == Status::Error)
        .map(|r| (r.name, r.target.as_str()))
        .collect()
}

#[test]
fn a_closed_api_port_is_unreachable_though_the_host_answers_pings() {
    // `joinguard preflight 127.0.0.1:6443` with nothing on 6443: 3 refused connects, pings fine.
    let api = target(TargetKind::ApiServer, "127.0.0.1:6443");
    let summaries = vec![
        stream(
            &api,
            ProbeKind::TcpConnect,
            0,
            Some(ProbeFailure::Refused),
            3,
        ),
        stream(&api, ProbeKind::IcmpEcho, 40, None, 0),
    ];
    let c = Checker::default();
    let results = c.finish(c.judge(&[api], &summaries));
    assert_eq!(
        errors(&results),
        vec![(CheckName::ApiServerReachable, "127.0.0.1:6443")]
    );
    let r = &results[0];
    assert_eq!(
        r.message,
        "API server 127.0.0.1:6443: unreachable: 3 of 3 tcp-connect probes failed (last: \
         connection refused); the host is up but nothing listens on the port (connection \
         refused). kubeadm join would fail at discovery (its first API call); check that \
         kube-apiserver or the load balancer listens on this address and port"
    );
    assert_eq!(Verdict::from_checks(&results), Verdict::Unfit);
}

#[test]
fn a_dark_host_says_nothing_came_back() {
    let m = target(TargetKind::EtcdClient, "198.18.0.3:2379");
    let summaries = vec![stream(
        &m,
        ProbeKind::EtcdStatus,
        0,
        Some(ProbeFailure::Timeout(2000)),
        1,
    )];
    let results = Checker::default().judge(&[m], &summaries);
    let r = results
        .iter()
        .find(|r| r.name == CheckName::EtcdClientReachable)
        .unwrap();
    assert_eq!(r.status, Status::Error);
    assert!(
        r.message
            .contains("1 of 1 etcd-status probes failed (last: timed out after 2000 ms)"),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("a firewall drops the traffic"),
        "{}",
        r.message
    );
    // Not judged twice: no latency error repeats it.
    assert_eq!(errors(&results).len(), 1, "{results:#?}");
}

#[test]
fn a_target_never_probed_is_an_error_not_a_blank() {
    let p = target(TargetKind::EtcdPeer, "198.18.0.4:2380");
    let results = Checker::default().judge(&[p], &[]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].name, CheckName::EtcdPeerReachable);
    assert_eq!(results[0].status, Status::Error);
    assert!(
        results[0].message.contains("not probed"),
        "{}",
        results[0].message
    );
}

#[test]
fn a_peer_that_refuses_this_identity_is_unreachable_though_tcp_connects() {
    let p = target(TargetKind::EtcdPeer, "198.18.0.4:2380");
    let summaries = vec![
        stream(&p, ProbeKind::TcpConnect, 20, None, 0),
        stream(
            &p,
            ProbeKind::EtcdPeerProbe,
            0,
            Some(ProbeFailure::Tls(
                "received fatal alert: BadCertificate".into(),
            )),
            1,
        ),
    ];
    let results = Checker::default().judge(std::slice::from_ref(&p), &summaries);
    let r = results
        .iter()
        .find(|r| r.name == CheckName::EtcdPeerReachable)
        .unwrap();
    assert_eq!(r.status, Status::Error);
    assert!(
        r.message.contains("the TLS handshake failed"),
        "{}",
        r.message
    );
}

#[test]
fn a_tls_handshake_that_timed_out_is_not_blamed_on_the_ca() {
    let p = target(TargetKind::EtcdPeer, "198.18.0.4:2380");
    let summaries = vec![
        stream(&p, ProbeKind::TcpConnect, 20, None, 0),
        stream(
            &p,
            ProbeKind::EtcdPeerProbe,
            0,
            Some(ProbeFailure::Tls(
                "TLS handshake timed out after 2000 ms".into(),
            )),
            1,
        ),
    ];
    let results = Checker::default().judge(std::slice::from_ref(&p), &summaries);
    let r = results
        .iter()
        .find(|r| r.name == CheckName::EtcdPeerReachable)
        .unwrap();
    assert_eq!(r.status, Status::Error);
    assert!(
        r.message.contains("the TLS handshake timed out") && !r.message.contains("check the CA"),
        "{}",
        r.message
    );
}

#[test]
fn a_not_ready_api_is_reachable_and_judged_by_apiserverready() {
    let api = target(TargetKind::ApiServer, "198.18.0.9:6443");
    let summaries = vec![stream(
        &api,
        ProbeKind::ApiReadyz,
        0,
        Some(ProbeFailure::Protocol("HTTP 503".into())),
        5,
    )];
    let results = Checker::default().judge(&[api], &summaries);
    let status = |n: CheckName| results.iter().find(|r| r.name == n).map(|r| r.status);
    assert_eq!(status(CheckName::ApiServerReachable), Some(Status::Ok));
    assert_eq!(status(CheckName::ApiServerReady), Some(Status::Error));
}

#[test]
fn reachability_is_ignored_by_name() {
    let api = target(TargetKind::ApiServer, "127.0.0.1:6443");
    let summaries = vec![stream(
        &api,
        ProbeKind::TcpConnect,
        0,
        Some(ProbeFailure::Refused),
        3,
    )];
    let c = Checker::new(
        Thresholds::default(),
        IgnoreList::parse("apiserverreachable").unwrap(),
    );
    let results = c.finish(c.judge(&[api], &summaries));
    assert_eq!(Verdict::from_checks(&results), Verdict::Fit);
    assert_eq!(results[0].status, Status::Ignored);
}

// The invariant: whatever was measured, a target without a successful sample on its ports is
// never called fit, and its problem is never silent, unless the user ignored it by name.

const PROBES: [ProbeKind; 9] = [
    ProbeKind::TcpConnect,
    ProbeKind::TlsHandshake,
    ProbeKind::ApiReadyz,
    ProbeKind::EtcdStatus,
    ProbeKind::EtcdQuorumRead,
    ProbeKind::EtcdPeerProbe,
    ProbeKind::EtcdWrite,
    ProbeKind::EtcdSnapshot,
    ProbeKind::IcmpEcho,
];
const KINDS: [TargetKind; 3] = [
    TargetKind::ApiServer,
    TargetKind::EtcdClient,
    TargetKind::EtcdPeer,
];

fn failure() -> impl Strategy<Value = ProbeFailure> {
    prop_oneof![
        (1u64..5000).prop_map(ProbeFailure::Timeout),
        Just(ProbeFailure::Refused),
        Just(ProbeFailure::Io("connection reset by peer".into())),
        Just(ProbeFailure::Tls("handshake failure".into())),
        Just(ProbeFailure::Protocol("HTTP 503".into())),
    ]
}

/// One stream: an index into [`PROBES`] and its samples (RTT in ms, or a failure), in order.
type GenStream = (usize, Vec<Result<f64, ProbeFailure>>);
/// One target: an index into [`KINDS`] and its streams.
type GenTarget = (usize, Vec<GenStream>);

/// One stream: a probe kind, its successful RTTs (ms) and its failures, in a shuffled order.
fn samples() -> impl Strategy<Value = GenStream> {
    (
        0..PROBES.len(),
        proptest::collection::vec(
            prop_oneof![(0.05f64..3000.0).prop_map(Ok), failure().prop_map(Err)],
            0..12,
        ),
    )
}

/// Targets (kind, how many streams) and their streams.
fn measurements() -> impl Strategy<Value = Vec<GenTarget>> {
    proptest::collection::vec(
        (0..KINDS.len(), proptest::collection::vec(samples(), 0..4)),
        1..5,
    )
}

fn build(m: &[GenTarget]) -> (Vec<Target>, Vec<Summary>) {
    let mut targets = Vec::new();
    let mut summaries = Vec::new();
    for (i, (kind, streams)) in m.iter().enumerate() {
        let kind = KINDS[*kind];
        let port = match kind {
            TargetKind::ApiServer => 6443,
            TargetKind::EtcdClient => 2379,
            TargetKind::EtcdPeer => 2380,
        };
        let t = target(kind, &format!("198.18.0.{}:{port}", i + 2));
        for (probe, samples) in streams {
            let samples: Vec<Sample> = samples
                .iter()
                .map(|r| Sample {
                    result: r.clone().map(|ms| Duration::from_secs_f64(ms / 1000.0)),
                })
                .collect();
            if !samples.is_empty() {
                summaries.push(Summary::from_samples(&t, PROBES[*probe], &samples));
            }
        }
        targets.push(t);
    }
    (targets, summaries)
}

/// Targets with no successful sample on a service port (ICMP echo does not count).
fn silent_targets<'a>(targets: &'a [Target], summaries: &[Summary]) -> Vec<&'a Target> {
    targets
        .iter()
        .filter(|t| {
            !summaries.iter().any(|s| {
                s.target.endpoint == t.endpoint
                    && s.probe != ProbeKind::IcmpEcho
                    && s.samples > s.lost
            })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_target_without_a_successful_sample_is_never_fit(m in measurements()) {
        let (targets, summaries) = build(&m);
        let c = Checker::default();
        let results = c.finish(c.judge(&targets, &summaries));
        let silent = silent_targets(&targets, &summaries);
        if !silent.is_empty() {
            prop_assert_eq!(Verdict::from_checks(&results), Verdict::Unfit, "{:#?}", results);
        }
        for t in silent {
            prop_assert!(
                results.iter().any(|r| r.target == t.endpoint && r.status == Status::Error),
                "{} has no successful sample and no error: {:#?}", t.endpoint, results
            );
        }
        // Every target the run was given is judged.
        for t in &targets {
            prop_assert!(results.iter().any(|r| r.target == t.endpoint && r.name == CheckName::reachable(t.kind)));
        }
    }

    #[test]
    fn only_ignoring_by_name_lets_a_silent_target_pass(m in measurements(), ignored in proptest::collection::vec(0..CheckName::ALL.len(), 0..6)) {
        let (targets, summaries) = build(&m);
        let names: Vec<&str> = ignored.iter().map(|&i| CheckName::ALL[i].as_str()).collect();
        let c = Checker::new(Thresholds::default(), IgnoreList::parse(&names.join(",")).unwrap());
        let results = c.finish(c.judge(&targets, &summaries));
        for t in silent_targets(&targets, &summaries) {
            // Its problem is an error, or a warning of a check the user named.
            prop_assert!(
                results.iter().any(|r| r.target == t.endpoint
                    && (r.status == Status::Error
                        || (r.status == Status::Ignored && names.contains(&r.name.as_str())))),
                "{} is silent: {:#?}", t.endpoint, results
            );
            let ignored_here = results
                .iter()
                .any(|r| r.target == t.endpoint && r.status == Status::Ignored);
            if !ignored_here {
                prop_assert_eq!(Verdict::from_checks(&results), Verdict::Unfit);
            }
        }
    }
}
