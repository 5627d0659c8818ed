//! Checks: named judgements of the figures against thresholds, the ignore list and the verdict.
//!
//! This module owns check names (kubeadm style, so `--ignore-preflight-errors` feels native), the
//! default thresholds and where each comes from, the wording of every check message, and the exit
//! codes. It takes summaries and health facts as data: it must not probe, sample or print
//! (`preflight::report` formats results). It does no I/O.
//!
//! Its rooms: `model` (names, statuses, results, verdict, ignore list), `thresholds` (the limits
//! and their bases), one file per judge (`latency`, `loss`, `etcd_health`, `api`, `clock`,
//! `snapshot`, `identity`, `dial`), `member` (which etcd member is this node's, its state, quorum:
//! shared with the `learner` command), and `wording` (formatting helpers shared by the messages).
//! [`Checker`] is the facade: it holds the limits and the ignore list, and its judges are
//! `impl Checker` blocks in the judges' files.

use std::collections::BTreeMap;

use crate::probe::ProbeKind;
use crate::sampling::SamplingPolicy;
use crate::stats::{LossEstimate, Summary};
use crate::target::{Target, TargetKind};

mod agreement;
mod api;
mod clock;
mod cluster;
mod connectivity;
mod dial;
mod etcd_health;
mod family;
mod identity;
mod latency;
mod loss;
pub mod member;
mod model;
mod pmtu;
mod proxy;
mod reach;
mod snapshot;
mod thresholds;
mod wording;

pub use etcd_health::EtcdMemberHealth;
pub use family::FamilyProbe;
pub use model::{
    CheckName, CheckNameError, CheckResult, IgnoreList, Status, Verdict, CLUSTER_TARGET,
};
pub use proxy::ProxiedPath;
pub(crate) use reach::unreachable_endpoints;
pub use thresholds::{Threshold, Thresholds};

/// Judges figures and facts. Holds the limits, the sampling policy (the loss verdict depends on
/// how much evidence there is) and the ignore list.
#[derive(Clone, Debug)]
pub struct Checker {
    pub thresholds: Thresholds,
    pub sampling: SamplingPolicy,
    pub ignore: IgnoreList,
    /// Whether a passing latency or loss check carries its sentence ("... is within ...").
    /// The monitor, which judges every window each second and shows only the failing
    /// checks' messages, turns it off ([`Checker::terse`]): formatting 20,000 passing
    /// sentences was a third of its evaluation.
    pub ok_messages: bool,
    /// How the caller spells its inputs, for a message that names one (`--timeout` on the
    /// command line, a YAML key in the monitor); `None`: the input is described in words.
    pub spelling: Option<crate::input::Spelling>,
}

impl Default for Checker {
    fn default() -> Checker {
        Checker::new(Thresholds::default(), IgnoreList::default())
    }
}

impl Checker {
    pub fn new(thresholds: Thresholds, ignore: IgnoreList) -> Checker {
        Checker {
            thresholds,
            sampling: SamplingPolicy::default(),
            ignore,
            ok_messages: true,
            spelling: None,
        }
    }

    /// Names inputs in its messages as `spelling` spells them.
    pub fn spelled(mut self, spelling: crate::input::Spelling) -> Checker {
        self.spelling = Some(spelling);
        self
    }

    /// `input` as the caller spells it, or `words` when no spelling was given.
    pub(crate) fn input(&self, input: crate::input::Input, words: &'static str) -> &'static str {
        self.spelling.map_or(words, |s| s.spell(input))
    }

    /// The same checker with empty messages on passing latency and loss checks.
    pub fn terse(self) -> Checker {
        Checker {
            ok_messages: false,
            ..self
        }
    }

    /// Every check the measurements decide, the ignore list not yet applied: the reachability
    /// of every target the run was given (`targets`), then latency and loss. The streams of a
    /// target that never answered are not judged again for latency (the reachability error
    /// says it all); its ICMP loss stream still is, as a dark host shows there.
    pub fn judge(&self, targets: &[Target], summaries: &[Summary]) -> Vec<CheckResult> {
        let silent = unreachable_endpoints(targets, summaries);
        let mut out = self.reachability(targets, summaries);
        let answered: Vec<Summary> = summaries
            .iter()
            .filter(|s| s.probe == ProbeKind::IcmpEcho || !silent.contains(&s.target.endpoint))
            .cloned()
            .collect();
        out.extend(self.evaluate_summaries(&answered));
        out
    }

    /// Every check that summaries alone can decide: latency per target and probe, and packet
    /// loss per target. Without an etcd identity the etcd latency checks use TCP connect times.
    /// The ignore list is not applied yet; see [`Checker::finish`].
    pub(crate) fn evaluate_summaries(&self, summaries: &[Summary]) -> Vec<CheckResult> {
        // A set, not a scan per summary: a monitor of 10,000 etcd targets judged every
        // interval made this 10^8 comparisons.
        let streams: std::collections::HashSet<(&str, ProbeKind)> = summaries
            .iter()
            .map(|s| (s.target.endpoint.as_str(), s.probe))
            .collect();
        let has = |endpoint: &str, probe: ProbeKind| streams.contains(&(endpoint, probe));
        // The etcd latency streams are judged net of the host's loss: PacketLoss judges the loss,
        // and the samples it delayed by a retransmission are not counted again as latency
        // (stats::loss_trim_count).
        let host_loss = host_loss(summaries);
        let net = |s| net_of_loss(&host_loss, s);
        let mut out = Vec::new();
        for s in summaries {
            let ep = s.target.endpoint.as_str();
            match (s.target.kind, s.probe) {
                (TargetKind::EtcdPeer, ProbeKind::EtcdPeerProbe) => {
                    out.push(self.peer_latency(&net(s)))
                }
                (TargetKind::EtcdPeer, ProbeKind::TcpConnect)
                    if !has(ep, ProbeKind::EtcdPeerProbe) =>
                {
                    out.push(self.peer_latency(&net(s)))
                }
                (TargetKind::EtcdClient, ProbeKind::EtcdStatus) => {
                    out.push(self.client_latency(&net(s)))
                }
                (TargetKind::EtcdClient, ProbeKind::TcpConnect)
                    if !has(ep, ProbeKind::EtcdStatus) =>
                {
                    out.push(self.client_latency(&net(s)))
                }
                (TargetKind::EtcdClient, ProbeKind::EtcdQuorumRead) => {
                    out.push(self.quorum_read_latency(&net(s)))
                }
                (TargetKind::ApiServer, ProbeKind::ApiReadyz) => {
                    out.push(self.api_server_ready(s));
                    out.push(self.api_server_latency(s));
                }
                _ => {}
            }
        }
        // Loss per target, judged on the loss probe (ICMP echo) where there is one, else on the
        // stream with the most attempts. The echo stream stops as soon as its confidence bound
        // settles, so a clearly lossy path may have fewer echoes than a latency stream has
        // samples; the latency streams ride on retransmitting TCP and hide loss.
        let rank = |s: &Summary| {
            (
                s.probe == ProbeKind::IcmpEcho,
                s.samples,
                s.probe == ProbeKind::TcpConnect,
            )
        };
        let mut loss_stream: BTreeMap<&str, &Summary> = BTreeMap::new();
        for s in summaries {
            let e = loss_stream.entry(s.target.endpoint.as_str()).or_insert(s);
            let better = rank(s) > rank(e);
            if better {
                *e = s;
            }
        }
        // Keep the targets' order as given.
        for s in summaries {
            if loss_stream
                .get(s.target.endpoint.as_str())
                .is_some_and(|l| std::ptr::eq(*l, s))
            {
                out.push(self.packet_loss(s));
            }
        }
        out
    }

    /// Applies the ignore list.
    pub fn finish(&self, results: Vec<CheckResult>) -> Vec<CheckResult> {
        self.ignore.apply(results)
    }
}

/// A summary judged net of its host's measured loss; itself, not a copy, when the host has
/// no echo stream.
fn net_of_loss<'a>(
    host_loss: &BTreeMap<&str, LossEstimate>,
    s: &'a Summary,
) -> std::borrow::Cow<'a, Summary> {
    match host_loss.get(s.target.host.as_str()) {
        Some(loss) => std::borrow::Cow::Owned(s.with_loss(loss)),
        None => std::borrow::Cow::Borrowed(s),
    }
}

/// The measured round-trip loss per host, from its ICMP echo stream (the one with the most
/// echoes): the one stream that sees loss as loss (TCP-based streams retransmit and show it as
/// delay). Hosts without an echo stream (no raw socket, ICMP filtered) are absent, and their
/// latency is trimmed as usual.
fn host_loss(summaries: &[Summary]) -> BTreeMap<&str, LossEstimate> {
    let mut out: BTreeMap<&str, LossEstimate> = BTreeMap::new();
    for s in summaries
        .iter()
        .filter(|s| s.probe == ProbeKind::IcmpEcho && s.samples > 0)
    {
        let e = out.entry(s.target.host.as_str()).or_insert(s.loss());
        if s.samples > e.attempts {
            *e = s.loss();
        }
    }
    out
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod reach_tests;
