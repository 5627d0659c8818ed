//! The judges' and the model's unit tests: verdicts, messages and limits as a user sees them.

use std::time::Duration;

use super::wording::{fmt_duration, fmt_ms};
use super::*;
use crate::probe::ProbeFailure;
use crate::probe::Sample;
use crate::target::Target;

fn target(kind: TargetKind, endpoint: &str, member: Option<&str>) -> Target {
    let mut t = Target::parse(kind, endpoint, true).unwrap();
    t.member = member.map(Into::into);
    t
}

fn summary(kind: TargetKind, ep: &str, probe: ProbeKind, rtts: &[f64], lost: usize) -> Summary {
    let mut samples: Vec<Sample> = rtts
        .iter()
        .map(|ms| Sample {
            result: Ok(Duration::from_secs_f64(ms / 1000.0)),
        })
        .collect();
    samples.extend((0..lost).map(|_| Sample {
        result: Err(ProbeFailure::Timeout(2000)),
    }));
    Summary::from_samples(&target(kind, ep, None), probe, &samples)
}

#[test]
fn default_thresholds_match_design_table() {
    let t = Thresholds::default();
    assert_eq!(
        (t.etcd_peer_latency.warn, t.etcd_peer_latency.error),
        (100.0, 250.0)
    );
    assert_eq!(
        (t.etcd_client_latency.warn, t.etcd_client_latency.error),
        (100.0, 500.0)
    );
    assert_eq!(
        (
            t.etcd_quorum_read_latency.warn,
            t.etcd_quorum_read_latency.error
        ),
        (100.0, 500.0)
    );
    assert_eq!((t.packet_loss.warn, t.packet_loss.error), (1.0, 12.0));
    assert_eq!(
        (t.api_server_latency.warn, t.api_server_latency.error),
        (250.0, 1000.0)
    );
    assert_eq!(
        (
            t.etcd_snapshot_transfer.warn,
            t.etcd_snapshot_transfer.error
        ),
        (30.0, 60.0)
    );
    assert_eq!((t.clock_skew.warn, t.clock_skew.error), (1.0, 30.0));
    assert_eq!(
        (t.etcd_dial_time.warn, t.etcd_dial_time.error),
        (1000.0, 1500.0)
    );
    assert_eq!(
        t.etcd_peer_latency.warn_basis,
        "1/10 of the 1 s election timeout; etcd's tuning guide wants it to be at least 10 x RTT"
    );
    assert_eq!(
        t.etcd_peer_latency.error_basis,
        "1/4 of the 1 s election timeout; joins held up to 0.3 x in joinguard's join sweep"
    );
}

#[test]
fn thresholds_scale_with_heartbeat_and_election() {
    // OpenShift's "Slower" profile: 500 ms / 2500 ms.
    let t = Thresholds::from_etcd_timing(Duration::from_millis(500), Duration::from_millis(2500));
    assert_eq!(t.etcd_peer_latency.error, 625.0);
    assert!(t
        .etcd_peer_latency
        .error_basis
        .contains("2.5 s election timeout"));
    assert_eq!(t.etcd_peer_latency.warn, 250.0);
    // kubeadm's 2 s per-call cap does not scale: the client error stays, the warning is capped.
    assert_eq!(
        (t.etcd_client_latency.warn, t.etcd_client_latency.error),
        (500.0, 500.0)
    );
    // A short heartbeat: the guide's heartbeat >= 0.5 x RTT is the tighter rule.
    let t = Thresholds::from_etcd_timing(Duration::from_millis(20), Duration::from_millis(1000));
    assert_eq!(t.etcd_peer_latency.warn, 40.0);
    assert!(t.etcd_peer_latency.warn_basis.contains("20 ms heartbeat"));
    assert_eq!(t.etcd_peer_latency.error, 250.0);
    // A short election timeout lowers both.
    let t = Thresholds::from_etcd_timing(Duration::from_millis(100), Duration::from_millis(300));
    assert_eq!(t.etcd_peer_latency.error, 75.0);
    assert_eq!(t.etcd_peer_latency.warn, 30.0);
}

#[test]
fn check_names_parse_case_insensitively() {
    assert_eq!(
        "etcdpeerlatency".parse::<CheckName>(),
        Ok(CheckName::EtcdPeerLatency)
    );
    assert_eq!(
        "APISERVERLATENCY".parse::<CheckName>(),
        Ok(CheckName::ApiServerLatency)
    );
    for c in CheckName::ALL {
        assert_eq!(c.as_str().parse::<CheckName>(), Ok(c));
    }
    let err = "EtcdLatency".parse::<CheckName>().unwrap_err().to_string();
    assert!(err.contains("unknown check `EtcdLatency`"), "{err}");
    assert!(err.contains("EtcdPeerLatency, EtcdClientLatency"), "{err}");
    assert!(err.contains("APIServerReady"), "{err}");
}

#[test]
fn ignore_list_parses_names_and_all() {
    let l = IgnoreList::parse("EtcdPeerLatency, packetloss,").unwrap();
    assert!(l.contains(CheckName::EtcdPeerLatency));
    assert!(l.contains(CheckName::PacketLoss));
    assert!(!l.contains(CheckName::EtcdHealth));
    let all = IgnoreList::parse("ALL").unwrap();
    assert!(CheckName::ALL.iter().all(|c| all.contains(*c)));
    assert!(IgnoreList::parse("").unwrap().is_empty());
    // kubeadm takes any name (IsDockerSystemdCheck, RequiredIPVSKernelModulesAvailable,
    // ContainerRuntimeVersion ...): so does joinguard, and notes it.
    let l = IgnoreList::parse("EtcdPeerLatency,Bogus,IsDockerSystemdCheck").unwrap();
    assert!(l.contains(CheckName::EtcdPeerLatency));
    assert_eq!(
        l.unknown_names().collect::<Vec<_>>(),
        ["Bogus", "IsDockerSystemdCheck"]
    );
    assert_eq!(
        IgnoreList::parse("all,PacketLoss").unwrap_err().to_string(),
        "ignore-preflight-errors: Invalid value: \"all,packetloss\": don't specify \
         individual checks if 'all' is used"
    );
}

#[test]
fn kubeadm_names_are_noted_and_both_lists_merge_as_kubeadm_merges_them() {
    let flag = vec!["NumCPU,mem".to_string(), "EtcdPeerLatency".to_string()];
    let file = vec![
        "Port-6443".to_string(),
        "dirAvailable--var-lib-etcd".to_string(),
    ];
    let l = IgnoreList::from_sources(&flag, &file).unwrap();
    assert!(l.contains(CheckName::EtcdPeerLatency));
    assert!(!l.contains(CheckName::PacketLoss));
    assert_eq!(
        l.kubeadm_checks().collect::<Vec<_>>(),
        ["DirAvailable--var-lib-etcd", "Mem", "NumCPU", "Port-6443"]
    );
    // `all` on the flag beside a name in the file: kubeadm's error over the merged set.
    let e = IgnoreList::from_sources(&["all".into()], &["Swap".into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ignore-preflight-errors: Invalid value: \"all,swap\": don't specify individual \
         checks if 'all' is used"
    );
    // The same `all` twice on the flag is one entry of the set.
    assert!(IgnoreList::from_sources(&["ALL".into(), "all".into()], &[])
        .unwrap()
        .is_all());
    // `all` in the file is kubeadm's error, even alone.
    assert_eq!(
        IgnoreList::from_sources(&[], &["all".into()])
            .unwrap_err()
            .to_string(),
        "ignorePreflightErrors: Invalid value: \"all\": 'all' cannot be used in configuration \
         file"
    );
}

#[test]
fn slow_peer_errors_with_an_operator_message() {
    let c = Checker::default();
    let rtts: Vec<f64> = (0..20).map(|i| 278.0 + f64::from(i % 2) * 3.0).collect();
    let s = Summary::from_samples(
        &target(TargetKind::EtcdPeer, "198.18.0.3:2380", Some("m2")),
        ProbeKind::EtcdPeerProbe,
        &rtts
            .iter()
            .map(|ms| Sample {
                result: Ok(Duration::from_secs_f64(ms / 1000.0)),
            })
            .collect::<Vec<_>>(),
    );
    let r = c.peer_latency(&s);
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.name, CheckName::EtcdPeerLatency);
    assert_eq!(r.target, "198.18.0.3:2380");
    assert_eq!(r.threshold, Some(250.0));
    let m = &r.message;
    assert!(m.starts_with("etcd peer 198.18.0.3:2380 (m2) (etcd-peer-probe): effective RTT 284.0 ms (p99 281.0 + jitter 3.0;"), "{m}");
    assert!(
        m.contains("exceeds 250 ms (1/4 of the 1 s election timeout; joins held up to 0.3 x in joinguard's join sweep)"),
        "{m}"
    );
    assert!(
        m.contains("raise etcd's heartbeat-interval and election-timeout on all members"),
        "{m}"
    );
}

#[test]
fn healthy_peer_is_ok_and_mid_peer_warns() {
    let c = Checker::default();
    let ok = summary(
        TargetKind::EtcdPeer,
        "198.18.0.2:2380",
        ProbeKind::EtcdPeerProbe,
        &[2.0; 20],
        0,
    );
    assert_eq!(c.peer_latency(&ok).status, Status::Ok);
    let mid = summary(
        TargetKind::EtcdPeer,
        "198.18.0.2:2380",
        ProbeKind::EtcdPeerProbe,
        &[150.0; 20],
        0,
    );
    let r = c.peer_latency(&mid);
    assert_eq!(r.status, Status::Warning);
    assert!(
        r.message
            .contains("exceeds 100 ms (1/10 of the 1 s election timeout"),
        "{}",
        r.message
    );
}

#[test]
fn single_spike_does_not_fail_peer_check() {
    let c = Checker::default();
    let mut rtts = vec![2.0; 20];
    rtts[4] = 500.0;
    let s = summary(
        TargetKind::EtcdPeer,
        "198.18.0.2:2380",
        ProbeKind::EtcdPeerProbe,
        &rtts,
        0,
    );
    assert_eq!(c.peer_latency(&s).status, Status::Ok);
}

#[test]
fn unreachable_latency_stream_is_an_error_naming_the_failure() {
    let c = Checker::default();
    let s = summary(
        TargetKind::EtcdPeer,
        "198.18.0.4:2380",
        ProbeKind::EtcdPeerProbe,
        &[],
        3,
    );
    let r = c.peer_latency(&s);
    assert_eq!(r.status, Status::Error);
    assert!(r.message.contains("198.18.0.4:2380"));
    assert!(
        r.message.contains("timed out after 2000 ms"),
        "{}",
        r.message
    );
    assert_eq!(r.measured, None);
}

#[test]
fn packet_loss_bands() {
    let c = Checker::default();
    let ep = "198.18.0.2:2379";
    let k = TargetKind::EtcdClient;
    let p = ProbeKind::TcpConnect;
    let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 388], 12));
    assert_eq!(r.status, Status::Warning, "{}", r.message);
    assert_eq!(r.measured, Some(3.0));
    let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 320], 80));
    assert_eq!(r.status, Status::Error, "{}", r.message);
    assert!(
        r.message
            .contains("loss 20.0% (80 of 400 probes) exceeds 12% (joins held at 10% and broke at 13.5% round-trip loss in joinguard's join sweep)"),
        "{}",
        r.message
    );
    let r = c.packet_loss(&summary(k, ep, p, &vec![2.0; 200], 0));
    assert_eq!(r.status, Status::Ok);
    // Few probes: observed 20%, but not proven.
    let r = c.packet_loss(&summary(k, ep, p, &[2.0; 16], 4));
    assert_eq!(r.status, Status::Warning);
    assert!(r.message.contains("too few probes"), "{}", r.message);
}

/// The monitor's checker leaves the sentence of a passing latency or loss check out (it shows
/// failing checks only, and formatting 20,000 passing sentences a second was a third of its
/// evaluation); status, figure and limit stay, and a failing check keeps its whole message.
#[test]
fn a_terse_checker_leaves_out_only_the_passing_sentences() {
    let slow: Vec<f64> = (0..30).map(|i| 300.0 + f64::from(i)).collect();
    let sums = vec![
        summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &[20.0; 30],
            0,
        ),
        summary(
            TargetKind::EtcdPeer,
            "198.18.0.3:2380",
            ProbeKind::EtcdPeerProbe,
            &slow,
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            "198.18.0.4:2379",
            ProbeKind::IcmpEcho,
            &[20.0; 100],
            100,
        ),
    ];
    let full = Checker::default().evaluate_summaries(&sums);
    let terse = Checker::default().terse().evaluate_summaries(&sums);
    assert_eq!(full.len(), terse.len());
    let mut passing = 0;
    for (f, t) in full.iter().zip(&terse) {
        assert_eq!(
            (f.name, &f.target, f.status, f.measured, f.threshold),
            (t.name, &t.target, t.status, t.measured, t.threshold)
        );
        if f.status == Status::Ok {
            passing += 1;
            assert!(f.message.contains("is within"), "{}", f.message);
            assert_eq!(t.message, "");
        } else {
            assert_eq!(f.message, t.message);
        }
    }
    assert!(passing >= 2, "{full:#?}");
    assert!(
        terse
            .iter()
            .any(|r| r.status == Status::Error && r.message.contains("exceeds")),
        "{terse:#?}"
    );
}

/// A 20 ms path: 60 peer samples and 60 Status samples, `delayed` of each waiting for a 200 ms
/// RTO; 400 echoes to the member's host, `echo_lost` of them lost.
fn lossy_member(delayed: usize, echo_lost: usize) -> Vec<CheckResult> {
    let mut rtts = vec![20.0; 60];
    for i in 0..delayed {
        rtts[i * 60 / delayed] = 245.0;
    }
    let sums = vec![
        summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &rtts,
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            "198.18.0.2:2379",
            ProbeKind::EtcdStatus,
            &rtts,
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            "198.18.0.2:2379",
            ProbeKind::IcmpEcho,
            &vec![20.0; 400 - echo_lost],
            echo_lost,
        ),
    ];
    Checker::default().evaluate_summaries(&sums)
}

#[test]
fn retransmission_delays_the_hosts_loss_explains_are_judged_once_as_loss() {
    // 8 of 60 samples delayed, 39 of 400 echoes lost (5% each way, where joins held): the
    // peer and client latency pass, and PacketLoss warns.
    let r = lossy_member(8, 39);
    let get = |name, ep: &str| r.iter().find(|r| r.name == name && r.target == ep).unwrap();
    let peer = get(CheckName::EtcdPeerLatency, "198.18.0.2:2380");
    assert_eq!(peer.status, Status::Ok, "{}", peer.message);
    assert!(
        peer.message
            .contains("60 samples, top 14 discarded, 8 of them for the host's packet loss"),
        "{}",
        peer.message
    );
    let client = get(CheckName::EtcdClientLatency, "198.18.0.2:2379");
    assert_eq!(client.status, Status::Ok, "{}", client.message);
    let loss = get(CheckName::PacketLoss, "198.18.0.2:2379");
    assert_eq!(loss.status, Status::Warning, "{}", loss.message);
    // The same delays with no echo lost are latency, not loss: the peer check fails.
    let r = lossy_member(8, 0);
    let peer = r
        .iter()
        .find(|r| r.name == CheckName::EtcdPeerLatency)
        .unwrap();
    assert_eq!(peer.status, Status::Error, "{}", peer.message);
    assert!(
        peer.message.contains("top 6 discarded)"),
        "{}",
        peer.message
    );
    // More delays than the loss explains: still an error.
    let r = lossy_member(18, 39);
    let peer = r
        .iter()
        .find(|r| r.name == CheckName::EtcdPeerLatency)
        .unwrap();
    assert_eq!(peer.status, Status::Error, "{}", peer.message);
}

#[test]
fn loss_is_judged_on_the_echo_stream_even_when_a_latency_stream_is_longer() {
    // As in the lab at a heavy one-way loss: the echoes settle on an error after one batch of
    // 50 (15 lost), while the status stream (TCP retransmits hide loss) took 60 samples.
    let c = Checker::default();
    let ep = "198.18.0.2:2379";
    let sums = vec![
        summary(
            TargetKind::EtcdClient,
            ep,
            ProbeKind::EtcdStatus,
            &[4.0; 60],
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            ep,
            ProbeKind::IcmpEcho,
            &[2.0; 35],
            15,
        ),
    ];
    let loss: Vec<CheckResult> = c
        .evaluate_summaries(&sums)
        .into_iter()
        .filter(|r| r.name == CheckName::PacketLoss)
        .collect();
    assert_eq!(loss.len(), 1, "{loss:?}");
    assert_eq!(loss[0].status, Status::Error, "{loss:?}");
    assert!(loss[0].message.contains("icmp-echo"), "{}", loss[0].message);
}

#[test]
fn summaries_route_to_checks_with_fallback_and_one_loss_result_per_target() {
    let c = Checker::default();
    let sums = vec![
        summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::TcpConnect,
            &vec![2.0; 200],
            0,
        ),
        summary(
            TargetKind::EtcdPeer,
            "198.18.0.2:2380",
            ProbeKind::EtcdPeerProbe,
            &[2.0; 20],
            0,
        ),
        // No identity for this member: TCP connect stands in.
        summary(
            TargetKind::EtcdClient,
            "198.18.0.3:2379",
            ProbeKind::TcpConnect,
            &vec![2.0; 200],
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            "198.18.0.2:2379",
            ProbeKind::EtcdStatus,
            &[2.0; 20],
            0,
        ),
        summary(
            TargetKind::EtcdClient,
            "198.18.0.2:2379",
            ProbeKind::EtcdQuorumRead,
            &[3.0; 20],
            0,
        ),
        summary(
            TargetKind::ApiServer,
            "198.18.0.9:6443",
            ProbeKind::ApiReadyz,
            &[5.0; 20],
            0,
        ),
    ];
    let rs = c.evaluate_summaries(&sums);
    let names: Vec<(CheckName, &str)> = rs.iter().map(|r| (r.name, r.target.as_str())).collect();
    assert_eq!(
        names,
        vec![
            (CheckName::EtcdPeerLatency, "198.18.0.2:2380"),
            (CheckName::EtcdClientLatency, "198.18.0.3:2379"),
            (CheckName::EtcdClientLatency, "198.18.0.2:2379"),
            (CheckName::EtcdQuorumReadLatency, "198.18.0.2:2379"),
            (CheckName::ApiServerReady, "198.18.0.9:6443"),
            (CheckName::ApiServerLatency, "198.18.0.9:6443"),
            (CheckName::PacketLoss, "198.18.0.2:2380"),
            (CheckName::PacketLoss, "198.18.0.3:2379"),
            (CheckName::PacketLoss, "198.18.0.2:2379"),
            (CheckName::PacketLoss, "198.18.0.9:6443"),
        ]
    );
    assert!(rs.iter().all(|r| r.status == Status::Ok), "{rs:#?}");
    // The peer check used the peer probe, not the TCP fallback.
    assert!(rs[0].message.contains("etcd-peer-probe"));
    // Loss for the peer target was judged on the long TCP stream.
    assert!(rs[6].message.contains("tcp-connect"));
}

#[test]
fn ignored_errors_and_warnings_become_ignored_and_the_verdict_is_fit() {
    let c = Checker::new(
        Thresholds::default(),
        IgnoreList::parse("EtcdPeerLatency").unwrap(),
    );
    let slow = summary(
        TargetKind::EtcdPeer,
        "198.18.0.3:2380",
        ProbeKind::EtcdPeerProbe,
        &[300.0; 20],
        0,
    );
    let fast = summary(
        TargetKind::EtcdPeer,
        "198.18.0.2:2380",
        ProbeKind::EtcdPeerProbe,
        &[2.0; 20],
        0,
    );
    let raw = vec![
        c.peer_latency(&slow),
        c.peer_latency(&fast),
        c.etcd_identity(false),
    ];
    assert_eq!(Verdict::from_checks(&raw), Verdict::Unfit);
    let done = c.finish(raw);
    assert_eq!(done[0].status, Status::Ignored);
    assert_eq!(done[1].status, Status::Ok);
    assert_eq!(done[2].status, Status::Warning);
    assert_eq!(Verdict::from_checks(&done), Verdict::Fit);
    assert_eq!(Verdict::from_checks(&done).ending().code(), 0);
    assert_eq!(Verdict::Unfit.ending().code(), 1);
}

fn member(ep: &str, name: &str, id: u64, leader: u64) -> EtcdMemberHealth {
    EtcdMemberHealth {
        endpoint: ep.into(),
        name: Some(name.into()),
        peer_endpoint: Some(ep.replace(":2379", ":2380")),
        member_id: Some(id),
        leader: Some(leader),
        reachable: true,
        raft_term: Some(4),
        db_size: Some(1 << 20),
        ..Default::default()
    }
}

#[test]
fn etcd_health_all_good() {
    let c = Checker::default();
    let ms = vec![
        member("198.18.0.2:2379", "m1", 1, 1),
        member("198.18.0.3:2379", "m2", 2, 1),
    ];
    let rs = c.etcd_health(&ms);
    assert_eq!(rs.len(), 2);
    assert!(rs.iter().all(|r| r.status == Status::Ok));
}

#[test]
fn etcd_health_unreachable_member_is_named() {
    let c = Checker::default();
    let mut dark = member("198.18.0.3:2379", "m2", 2, 0);
    dark.reachable = false;
    dark.name = None;
    dark.failure = Some(ProbeFailure::Timeout(2000));
    let rs = c.etcd_health(&[member("198.18.0.2:2379", "m1", 1, 1), dark]);
    let e: Vec<&CheckResult> = rs.iter().filter(|r| r.status == Status::Error).collect();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].target, "198.18.0.3:2379");
    assert!(e[0].message.starts_with(
        "etcd member 198.18.0.3:2379 is unreachable: timed out after 2000 ms; the join would fail at member add"
    ), "{}", e[0].message);
}

#[test]
fn etcd_dial_time_judges_each_dial_against_kubeadms_2s() {
    let c = Checker::default();
    let dialled = |ep: &str, name: &str, ms: u64| {
        let mut m = member(ep, name, 1, 1);
        m.dial = Some(Duration::from_millis(ms));
        m
    };
    let mut slow = member("198.18.0.5:2379", "m4", 4, 0);
    slow.reachable = false;
    slow.failure = Some(ProbeFailure::Timeout(5000));
    slow.dial_tcp = Some(Duration::from_millis(1402));
    let mut dark = member("198.18.0.6:2379", "m5", 5, 0);
    dark.reachable = false;
    dark.failure = Some(ProbeFailure::Timeout(5000));
    let rs = c.etcd_dial_time(&[
        dialled("198.18.0.2:2379", "m1", 12),
        dialled("198.18.0.3:2379", "m2", 1200),
        {
            let mut m = dialled("198.18.0.4:2379", "m3", 1600);
            m.dials = 3;
            m
        },
        slow,
        dark,
    ]);
    let got: Vec<(&str, Status)> = rs.iter().map(|r| (r.target.as_str(), r.status)).collect();
    assert_eq!(
        got,
        [
            ("198.18.0.2:2379", Status::Ok),
            ("198.18.0.3:2379", Status::Warning),
            ("198.18.0.4:2379", Status::Error),
            ("198.18.0.5:2379", Status::Error),
        ],
        "the dark member is EtcdClientReachable's: {rs:#?}"
    );
    assert_eq!(rs[2].measured, Some(1600.0));
    assert_eq!(rs[2].threshold, Some(1500.0));
    assert!(
        rs[2].message.contains(
            "answered Status in 1600 ms (the fastest of 3 dials), above 1500 ms (3/4 of kubeadm's 2 s etcd dial timeout"
        ) && rs[2].message.contains("a dial this slow fails the join"),
        "{}",
        rs[2].message
    );
    assert!(
        rs[3].message.contains("the port answers (TCP connect in 1.4 s), but the etcd connection over it did not complete (timed out after 5000 ms)"),
        "{}",
        rs[3].message
    );
    // The slow member is not also called unreachable by EtcdHealth.
    let mut slow = member("198.18.0.5:2379", "m4", 4, 0);
    slow.reachable = false;
    slow.dial_tcp = Some(Duration::from_millis(1402));
    assert!(c.etcd_health(&[slow]).is_empty());
}

#[test]
fn etcd_health_existing_learner_is_an_error() {
    let c = Checker::default();
    let mut l = member("198.18.0.5:2379", "m4", 4, 1);
    l.is_learner = true;
    let rs = c.etcd_health(&[member("198.18.0.2:2379", "m1", 1, 1), l.clone()]);
    let e = rs.iter().find(|r| r.status == Status::Error).unwrap();
    assert!(e.message.starts_with(
        "etcd member m4 (198.18.0.5:2380) is already a learner (started); etcd allows one learner, so the join would fail with \"etcdserver: too many learner members in cluster\""
    ), "{}", e.message);

    // Its catch-up, from the applied indexes the members report.
    let mut leader = member("198.18.0.2:2379", "m1", 1, 1);
    leader.applied_index = Some(1000);
    for (applied, state) in [
        (950, "95%: in sync, promotable"),
        (400, "40%: still catching up"),
    ] {
        l.applied_index = Some(applied);
        let rs = c.etcd_health(&[leader.clone(), l.clone()]);
        let e = rs.iter().find(|r| r.status == Status::Error).unwrap();
        assert!(
            e.message.contains(&format!(
                "already a learner (started; it has applied {applied} of the leader's 1000 log entries, {state})"
            )),
            "{}",
            e.message
        );
    }
}

#[test]
fn etcd_health_no_leader_alarms_and_disagreement() {
    let c = Checker::default();
    let rs = c.etcd_health(&[
        member("198.18.0.2:2379", "m1", 1, 0),
        member("198.18.0.3:2379", "m2", 2, 0),
    ]);
    let cluster = rs.iter().find(|r| r.target == CLUSTER_TARGET).unwrap();
    assert_eq!(cluster.status, Status::Error);
    assert!(cluster.message.contains("no etcd member reports a leader"));

    let mut alarmed = member("198.18.0.2:2379", "m1", 1, 1);
    alarmed.alarms = vec!["NOSPACE".into()];
    let rs = c.etcd_health(&[alarmed, member("198.18.0.3:2379", "m2", 2, 3)]);
    assert!(rs
        .iter()
        .any(|r| r.status == Status::Error && r.message.contains("NOSPACE")));
    let dis = rs.iter().find(|r| r.target == CLUSTER_TARGET).unwrap();
    assert_eq!(dis.status, Status::Warning);
    assert!(dis.message.contains("disagree on the leader (1, 3)"));

    // One member without a leader while the others have one.
    let rs = c.etcd_health(&[
        member("198.18.0.2:2379", "m1", 1, 1),
        member("198.18.0.3:2379", "m2", 2, 0),
    ]);
    let e = rs.iter().find(|r| r.status == Status::Error).unwrap();
    assert_eq!(e.target, "198.18.0.3:2379");
}

#[test]
fn snapshot_transfer_and_clock_skew() {
    let c = Checker::default();
    let t = target(TargetKind::EtcdPeer, "198.18.0.2:2380", None);
    let mib = 1024.0 * 1024.0;
    let r = c.snapshot_transfer(&t, 1 << 30, 8.0 * mib);
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.measured, Some(128.0));
    assert!(r.message.contains("1.0 GiB at the measured 8.0 MiB/s would take 128 s, more than 60 s (50% of kubeadm's 2 min etcd API call budget"), "{}", r.message);
    assert_eq!(
        c.snapshot_transfer(&t, 1 << 30, 25.0 * mib).status,
        Status::Warning
    );
    assert_eq!(
        c.snapshot_transfer(&t, 100 << 20, 100.0 * mib).status,
        Status::Ok
    );
    assert_eq!(c.snapshot_transfer(&t, 1, 0.0).status, Status::Error);

    assert_eq!(c.clock_skew(&t, -45.0).status, Status::Error);
    assert_eq!(c.clock_skew(&t, 2.0).status, Status::Warning);
    assert_eq!(c.clock_skew(&t, 0.2).status, Status::Ok);
}

#[test]
fn api_server_ready() {
    let c = Checker::default();
    let ep = "198.18.0.9:6443";
    let down = summary(TargetKind::ApiServer, ep, ProbeKind::ApiReadyz, &[], 3);
    let r = c.api_server_ready(&down);
    assert_eq!(r.status, Status::Error);
    assert!(
        r.message
            .contains("API server 198.18.0.9:6443 is not ready: timed out after 2000 ms"),
        "{}",
        r.message
    );
    let up = summary(
        TargetKind::ApiServer,
        ep,
        ProbeKind::ApiReadyz,
        &[5.0; 10],
        0,
    );
    assert_eq!(c.api_server_ready(&up).status, Status::Ok);
}

#[test]
fn json_names_and_statuses() {
    let r = CheckResult {
        name: CheckName::ApiServerLatency,
        target: "198.18.0.9:6443".into(),
        status: Status::Ignored,
        message: "m".into(),
        measured: None,
        threshold: Some(1.0),
    };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["name"], "APIServerLatency");
    assert_eq!(v["status"], "ignored");
    assert!(v["measured"].is_null());
    assert_eq!(serde_json::to_value(Verdict::Unfit).unwrap(), "unfit");
}

#[test]
fn durations_print_as_flags_are_written() {
    assert_eq!(fmt_duration(Duration::from_millis(100)), "100 ms");
    assert_eq!(fmt_duration(Duration::from_millis(2500)), "2.5 s");
    assert_eq!(fmt_duration(Duration::from_secs(1)), "1 s");
    assert_eq!(fmt_duration(Duration::from_secs(120)), "2 min");
    assert_eq!(fmt_ms(200.0 / 3.0), "66.7 ms");
}
