//! The monitor's metric families (prometheus-client) and their exposition in OpenMetrics or
//! Prometheus text.
//!
//! Label sets are fixed here and nowhere else: `target` (a configured or discovered target name,
//! capped by `maxTargets`), `probe` (the [`ProbeKind`] names), `check` (the [`CheckName`]s),
//! `reason` (five failure kinds) and, for retries, `op` and `class` (the retry layer's operation
//! names and its five classes). No label ever carries a measured value, an error text or a
//! timestamp, so series per instance stay below `targets x (probes x 4 + checks + 1)`. A target
//! that goes away has its series removed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

use crate::check::{CheckName, CheckResult, Status};
use crate::probe::{ProbeFailure, ProbeKind};
use crate::retry::Recorder;

/// RTT buckets, seconds: 0.1 ms (loopback, same rack) to 5 s (a probe timing out). They include
/// 100 ms and 250 ms, the EtcdPeerLatency warning and error limits at etcd's default 1 s
/// election timeout (1/10 and 1/4 of it, docs/thresholds.md), and 500 ms, the etcd client
/// error limit, so `histogram_quantile` is exact at the thresholds that matter. (33 ms and
/// 66 ms, the limits before the join sweep, stay for the continuity of stored series.)
pub const RTT_BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.033, 0.05, 0.066, 0.1, 0.25, 0.5,
    1.0, 2.0, 3.0, 5.0,
];

/// Scheduling lag buckets, seconds: tokio's timer has 1 ms resolution, so the interesting range
/// is 1 ms to 100 ms; above a second a probe round is effectively missed.
pub const LAG_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    pub target: String,
    pub probe: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub target: String,
    pub probe: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabels {
    pub check: String,
    pub target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TargetLabels {
    pub target: String,
}

/// What `joinguard_build_info` says about the binary: its version, git commit and compiler,
/// as `joinguard version` prints them (the binary fills it from its build script).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub commit: String,
    pub rustc: String,
}

impl Default for BuildLabels {
    fn default() -> Self {
        BuildLabels {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: "unknown".into(),
            rustc: "unknown".into(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    pub op: String,
    pub class: String,
}

type GaugeF = Gauge<f64, AtomicU64>;
type HistFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn rtt_histogram() -> Histogram {
    Histogram::new(RTT_BUCKETS.iter().copied())
}

/// The failure kinds of the `reason` label.
pub fn reason(f: &ProbeFailure) -> &'static str {
    match f {
        ProbeFailure::Timeout(_) => "timeout",
        ProbeFailure::Refused => "refused",
        ProbeFailure::Io(_) => "io",
        ProbeFailure::Tls(_) => "tls",
        ProbeFailure::Protocol(_) => "protocol",
    }
}

/// The check status gauge's values: 0 ok, 1 warning (or an ignored error), 2 error.
pub(crate) fn status_value(s: Status) -> i64 {
    match s {
        Status::Ok => 0,
        Status::Warning | Status::Ignored => 1,
        Status::Error => 2,
    }
}

/// One target's series, looked up once by its prober and then updated through these handles:
/// building, hashing and comparing a label set of two strings on every probe showed in the
/// monitor's profile at 10,000 targets. prometheus-client's metrics are shared handles, so a
/// handle updates the very series the families export; each series is created at its first use,
/// as before the handles, so the exposition is the same. A series [`Metrics::forget`] removed
/// while its target's prober is being aborted stays removed: the prober's last update goes to a
/// handle nobody exports. (A series it first needs in that last poll, a failure reason it never
/// had, is still created again, as every series was before the handles.)
#[derive(Debug)]
pub(crate) struct TargetSeries {
    target: String,
    up: Option<Gauge>,
    probes: Vec<ProbeSeries>,
}

#[derive(Debug)]
struct ProbeSeries {
    kind: ProbeKind,
    attempts: Counter,
    rtt: Histogram,
    last_rtt: GaugeF,
    /// Created at the first failure of each reason.
    failures: Vec<(&'static str, Counter)>,
}

impl TargetSeries {
    pub(crate) fn new(target: &str) -> TargetSeries {
        TargetSeries {
            target: target.to_string(),
            up: None,
            probes: Vec::new(),
        }
    }
}

/// Every family the monitor exports, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    rtt: HistFamily<ProbeLabels>,
    last_rtt: Family<ProbeLabels, GaugeF>,
    attempts: Family<ProbeLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    up: Family<TargetLabels, Gauge>,
    check: Family<CheckLabels, Gauge>,
    retries: Family<RetryLabels, Counter>,
    lag: Histogram,
    skipped: Counter,
    targets: Gauge,
    targets_capped: Gauge,
    targets_other_shards: Gauge,
    path_mtu: Family<TargetLabels, Gauge>,
    tcp_mss: Family<TargetLabels, Gauge>,
    identity_expiry: Gauge,
    identity_renewals: Counter,
    /// The check gauges set last round, by check and target name: set again through the
    /// handle each round, without building label strings for 20,000 series a second.
    check_gauges: Mutex<CheckGauges>,
}

/// The check gauges, and last round's results mapped onto them.
#[derive(Debug, Default)]
struct CheckGauges {
    by_check: HashMap<CheckName, HashMap<String, Gauge>>,
    /// The (check, endpoint) of each result of the last round, the names generation it was
    /// built under, and the gauge each result sets (an index into `slots`). A round whose
    /// results have the same keys in the same order under the same names sets the gauges
    /// through these, with no hashing: at 10,000 targets the hashing was a quarter of an
    /// evaluation.
    keys: Vec<(CheckName, String)>,
    generation: Option<u64>,
    slot_of: Vec<usize>,
    slots: Vec<Gauge>,
}

impl CheckGauges {
    /// Whether `results` are last round's keys, in the same order, under `generation`.
    fn same_keys(&self, results: &[CheckResult], generation: u64) -> bool {
        self.generation == Some(generation)
            && self.keys.len() == results.len()
            && self
                .keys
                .iter()
                .zip(results)
                .all(|((check, endpoint), r)| *check == r.name && *endpoint == r.target)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::with_build(BuildLabels::default())
    }

    /// The registry, with `joinguard_build_info` saying `build`.
    pub fn with_build(build: BuildLabels) -> Metrics {
        let mut registry = Registry::with_prefix("joinguard");
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&build).set(1);
        registry.register(
            "build_info",
            "Always 1; the labels say which joinguard this is (version, git commit, rustc)",
            build_info,
        );
        let rtt: HistFamily<ProbeLabels> = Family::new_with_constructor(rtt_histogram);
        let last_rtt = Family::<ProbeLabels, GaugeF>::default();
        let attempts = Family::<ProbeLabels, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        let up = Family::<TargetLabels, Gauge>::default();
        let check = Family::<CheckLabels, Gauge>::default();
        let retries = Family::<RetryLabels, Counter>::default();
        let lag = Histogram::new(LAG_BUCKETS.iter().copied());
        let skipped = Counter::default();
        let targets = Gauge::default();
        let targets_capped = Gauge::default();
        let targets_other_shards = Gauge::default();
        let path_mtu = Family::<TargetLabels, Gauge>::default();
        let tcp_mss = Family::<TargetLabels, Gauge>::default();
        registry.register_with_unit(
            "probe_rtt",
            "Round-trip time of successful probes, per target and probe",
            Unit::Seconds,
            rtt.clone(),
        );
        registry.register_with_unit(
            "probe_last_rtt",
            "RTT of the most recent successful probe (NaN after a failure)",
            Unit::Seconds,
            last_rtt.clone(),
        );
        registry.register(
            "probe_attempts",
            "Probes attempted, per target and probe",
            attempts.clone(),
        );
        registry.register(
            "probe_failures",
            "Probes that produced no RTT (loss), per target, probe and reason \
             (timeout, refused, io, tls, protocol)",
            failures.clone(),
        );
        registry.register(
            "target_up",
            "1 when the target's most recent probe round succeeded, 0 when it failed",
            up.clone(),
        );
        registry.register(
            "check_status",
            "The preflight check's status over the sliding window: 0 ok, 1 warning, 2 error",
            check.clone(),
        );
        registry.register(
            "retry_attempts",
            "Attempts made by the retry layer (discovery, etcd MemberList), per operation and \
             class",
            retries.clone(),
        );
        registry.register_with_unit(
            "probe_schedule_lag",
            "How late a probe started after its scheduled time (runtime overload, not the \
             target's slowness)",
            Unit::Seconds,
            lag.clone(),
        );
        registry.register(
            "probe_rounds_skipped",
            "Probe rounds skipped because the previous round of the same target was still \
             running (a slow or blackholed target)",
            skipped.clone(),
        );
        registry.register("targets", "Targets this instance probes", targets.clone());
        registry.register(
            "targets_over_cap",
            "Targets of this instance's shard left out because of maxTargets",
            targets_capped.clone(),
        );
        registry.register(
            "targets_other_shards",
            "Known targets that other replicas probe (shard)",
            targets_other_shards.clone(),
        );
        registry.register_with_unit(
            "path_mtu",
            "The largest packet (IPv4, DF set) that crossed to the target's host in the last \
             path MTU round; one series per host, named after its first target",
            Unit::Bytes,
            path_mtu.clone(),
        );
        registry.register_with_unit(
            "path_tcp_mss",
            "The TCP MSS this node sends with to an etcd member's peer port, on a connection \
             whose full-size segments crossed (a padded request was answered) in the last path \
             MTU round",
            Unit::Bytes,
            tcp_mss.clone(),
        );
        let identity_expiry = Gauge::default();
        let identity_renewals = Counter::default();
        registry.register_with_unit(
            "etcd_client_certificate_expiry_timestamp",
            "When the etcd client certificate the probes use expires (Unix time); a minted one \
             is renewed at two thirds of its life",
            Unit::Seconds,
            identity_expiry.clone(),
        );
        registry.register(
            "etcd_client_certificate_renewals",
            "Times the etcd client identity was renewed (the cluster section resolved again)",
            identity_renewals.clone(),
        );
        Metrics {
            registry,
            rtt,
            last_rtt,
            attempts,
            failures,
            up,
            check,
            retries,
            lag,
            skipped,
            targets,
            targets_capped,
            targets_other_shards,
            path_mtu,
            tcp_mss,
            identity_expiry,
            identity_renewals,
            check_gauges: Mutex::new(CheckGauges::default()),
        }
    }

    /// The etcd client certificate's expiry (none known: the series stays 0).
    pub(crate) fn identity_expiry(&self, not_after: Option<std::time::SystemTime>) {
        if let Some(t) = not_after.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()) {
            self.identity_expiry
                .set(i64::try_from(t.as_secs()).unwrap_or(i64::MAX));
        }
    }

    /// One renewal of the etcd client identity, valid until `not_after`.
    pub(crate) fn identity_renewed(&self, not_after: Option<std::time::SystemTime>) {
        self.identity_renewals.inc();
        self.identity_expiry(not_after);
    }

    /// Records one probe attempt of a target, through its handles ([`TargetSeries`]).
    pub(crate) fn observe(
        &self,
        series: &mut TargetSeries,
        probe: ProbeKind,
        result: &Result<Duration, ProbeFailure>,
    ) {
        let i = match series.probes.iter().position(|p| p.kind == probe) {
            Some(i) => i,
            None => {
                let labels = ProbeLabels {
                    target: series.target.clone(),
                    probe: probe.as_str().to_string(),
                };
                series.probes.push(ProbeSeries {
                    kind: probe,
                    attempts: self.attempts.get_or_create(&labels).clone(),
                    rtt: self.rtt.get_or_create(&labels).clone(),
                    last_rtt: self.last_rtt.get_or_create(&labels).clone(),
                    failures: Vec::new(),
                });
                series.probes.len() - 1
            }
        };
        let p = &mut series.probes[i];
        p.attempts.inc();
        match result {
            Ok(d) => {
                p.rtt.observe(d.as_secs_f64());
                p.last_rtt.set(d.as_secs_f64());
            }
            Err(f) => {
                let why = reason(f);
                let counter = match p.failures.iter().find(|(r, _)| *r == why) {
                    Some((_, c)) => c,
                    None => {
                        let c = self
                            .failures
                            .get_or_create(&FailureLabels {
                                target: series.target.clone(),
                                probe: probe.as_str().to_string(),
                                reason: why.to_string(),
                            })
                            .clone();
                        p.failures.push((why, c));
                        &p.failures[p.failures.len() - 1].1
                    }
                };
                counter.inc();
                p.last_rtt.set(f64::NAN);
            }
        }
    }

    /// Sets a target's `up`, through its handle.
    pub(crate) fn set_up(&self, series: &mut TargetSeries, up: bool) {
        let target = &series.target;
        series
            .up
            .get_or_insert_with(|| {
                self.up
                    .get_or_create(&TargetLabels {
                        target: target.clone(),
                    })
                    .clone()
            })
            .set(i64::from(up));
    }

    pub(crate) fn observe_lag(&self, lag: Duration) {
        self.lag.observe(lag.as_secs_f64());
    }

    pub fn skipped(&self) {
        self.skipped.inc();
    }

    pub(crate) fn set_target_counts(&self, probed: usize, capped: usize, other_shards: usize) {
        let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        self.targets.set(n(probed));
        self.targets_capped.set(n(capped));
        self.targets_other_shards.set(n(other_shards));
    }

    /// Sets the path MTU of a host (under its target's name), or removes the series when the
    /// last round measured none.
    pub(crate) fn set_path_mtu(&self, target: &str, bytes: Option<u16>) {
        set_or_remove(&self.path_mtu, target, bytes.map(i64::from));
    }

    /// Sets the TCP MSS toward a member's peer port, or removes the series.
    pub(crate) fn set_tcp_mss(&self, target: &str, bytes: Option<u32>) {
        set_or_remove(&self.tcp_mss, target, bytes.map(i64::from));
    }

    /// Removes every series of a target that is no longer probed.
    pub(crate) fn forget(&self, target: &str, probes: &[ProbeKind]) {
        for p in probes {
            let labels = ProbeLabels {
                target: target.to_string(),
                probe: p.as_str().to_string(),
            };
            self.rtt.remove(&labels);
            self.last_rtt.remove(&labels);
            self.attempts.remove(&labels);
            for r in ["timeout", "refused", "io", "tls", "protocol"] {
                self.failures.remove(&FailureLabels {
                    target: target.to_string(),
                    probe: p.as_str().to_string(),
                    reason: r.to_string(),
                });
            }
        }
        self.up.remove(&TargetLabels {
            target: target.to_string(),
        });
    }

    /// Sets the check gauges to `results` (worst status per (check, target)) and removes the
    /// series of checks that no longer exist. `name_of` gives a target's name by its endpoint
    /// (an endpoint it does not hold is its own name); `generation` changes whenever `name_of`
    /// may have.
    pub(crate) fn set_checks(
        &self,
        results: &[CheckResult],
        name_of: &HashMap<String, String>,
        generation: u64,
    ) {
        let mut state = self.check_gauges.lock().unwrap_or_else(|e| e.into_inner());
        if state.same_keys(results, generation) {
            let mut worst = vec![i64::MIN; state.slots.len()];
            for (r, &slot) in results.iter().zip(&state.slot_of) {
                worst[slot] = worst[slot].max(status_value(r.status));
            }
            for (g, v) in state.slots.iter().zip(worst) {
                g.set(v);
            }
            return;
        }
        // The keys changed: by name, and the map of results to gauges built again.
        let mut worst: HashMap<(CheckName, &str), (i64, usize)> =
            HashMap::with_capacity(results.len());
        let mut slot_of = Vec::with_capacity(results.len());
        for r in results {
            let target = name_of
                .get(&r.target)
                .map_or(r.target.as_str(), |n| n.as_str());
            let v = status_value(r.status);
            let next = worst.len();
            let e = worst.entry((r.name, target)).or_insert((v, next));
            e.0 = e.0.max(v);
            slot_of.push(e.1);
        }
        let state = &mut *state;
        let gauges = &mut state.by_check;
        for (check, by_target) in gauges.iter_mut() {
            by_target.retain(|target, _| {
                let keep = worst.contains_key(&(*check, target.as_str()));
                if !keep {
                    self.check.remove(&CheckLabels {
                        check: check.as_str().to_string(),
                        target: target.clone(),
                    });
                }
                keep
            });
        }
        let mut slots = vec![None; worst.len()];
        for ((check, target), (v, slot)) in worst {
            let by_target = gauges.entry(check).or_default();
            let g = match by_target.get(target) {
                Some(g) => g.clone(),
                None => {
                    let g = self
                        .check
                        .get_or_create(&CheckLabels {
                            check: check.as_str().to_string(),
                            target: target.to_string(),
                        })
                        .clone();
                    by_target.insert(target.to_string(), g.clone());
                    g
                }
            };
            g.set(v);
            slots[slot] = Some(g);
        }
        state.slots = slots.into_iter().flatten().collect();
        state.slot_of = slot_of;
        state.keys = results.iter().map(|r| (r.name, r.target.clone())).collect();
        state.generation = Some(generation);
    }

    /// Brings the retry counters up to the recorder's counts (they only grow).
    pub(crate) fn sync_retries(&self, recorder: &Recorder) {
        for c in recorder.counts() {
            let counter = self.retries.get_or_create(&RetryLabels {
                op: c.op.clone(),
                class: c.class.as_str().to_string(),
            });
            let have = counter.get();
            if c.count > have {
                counter.inc_by(c.count - have);
            }
        }
    }

    /// The exposition in OpenMetrics text (ends with `# EOF`).
    pub fn openmetrics(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The exposition in Prometheus text 0.0.4, derived from the OpenMetrics text.
    pub(crate) fn prometheus_text(&self) -> String {
        to_prometheus_text(&self.openmetrics())
    }
}

/// Sets a per-target gauge, or removes its series when there is no value.
fn set_or_remove(family: &Family<TargetLabels, Gauge>, target: &str, value: Option<i64>) {
    let labels = TargetLabels {
        target: target.to_string(),
    };
    match value {
        Some(v) => {
            family.get_or_create(&labels).set(v);
        }
        None => {
            family.remove(&labels);
        }
    }
}

/// OpenMetrics text to Prometheus text 0.0.4: a counter family `x` exposes its sample as
/// `x_total`, and Prometheus text names the family after the sample, so HELP and TYPE lines of
/// counters get the `_total` suffix; `# UNIT` and `# EOF` have no place there and are dropped.
pub(crate) fn to_prometheus_text(om: &str) -> String {
    let counters: BTreeSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let rewritten = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        match rewritten {
            Some(l) => out.push_str(l.trim_end()),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: CheckName, target: &str, status: Status) -> CheckResult {
        CheckResult {
            name,
            target: target.to_string(),
            status,
            message: String::new(),
            measured: None,
            threshold: None,
        }
    }

    /// The `joinguard_check_status` samples, sorted.
    fn check_samples(m: &Metrics) -> Vec<String> {
        let mut v: Vec<String> = m
            .openmetrics()
            .lines()
            .filter(|l| l.starts_with("joinguard_check_status{"))
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    /// A round with last round's keys sets the gauges through the kept map (the worst status of
    /// a (check, target) wins, as by name); a round with other keys, or under other names,
    /// goes by name again and removes what no longer exists.
    #[test]
    fn check_gauges_follow_each_round_by_the_kept_map_or_by_name() {
        let m = Metrics::new();
        let names: HashMap<String, String> = [
            ("10.0.0.11:2380".to_string(), "m1".to_string()),
            ("10.0.0.12:2380".to_string(), "m2".to_string()),
        ]
        .into();
        let round = |a: Status, b: Status, c: Status| {
            vec![
                result(CheckName::EtcdPeerLatency, "10.0.0.11:2380", a),
                result(CheckName::EtcdPeerLatency, "10.0.0.11:2380", b),
                result(CheckName::PacketLoss, "10.0.0.12:2380", c),
            ]
        };
        let line = |check: &str, target: &str, v: i64| {
            format!(r#"joinguard_check_status{{check="{check}",target="{target}"}} {v}"#)
        };
        m.set_checks(&round(Status::Ok, Status::Ok, Status::Ok), &names, 1);
        assert_eq!(
            check_samples(&m),
            [
                line("EtcdPeerLatency", "m1", 0),
                line("PacketLoss", "m2", 0)
            ]
        );
        // The same keys: the kept map, the worst of the two m1 results.
        m.set_checks(
            &round(Status::Warning, Status::Error, Status::Ok),
            &names,
            1,
        );
        assert_eq!(
            check_samples(&m),
            [
                line("EtcdPeerLatency", "m1", 2),
                line("PacketLoss", "m2", 0)
            ]
        );
        m.set_checks(
            &round(Status::Warning, Status::Ok, Status::Error),
            &names,
            1,
        );
        assert_eq!(
            check_samples(&m),
            [
                line("EtcdPeerLatency", "m1", 1),
                line("PacketLoss", "m2", 2)
            ]
        );
        // Other keys: m2's check is gone, a new one appears.
        let other = vec![
            result(CheckName::EtcdPeerLatency, "10.0.0.11:2380", Status::Ok),
            result(CheckName::ClockSkew, "10.0.0.12:2380", Status::Warning),
        ];
        m.set_checks(&other, &names, 1);
        assert_eq!(
            check_samples(&m),
            [line("ClockSkew", "m2", 1), line("EtcdPeerLatency", "m1", 0)]
        );
        // The same keys under a new generation of names: m1 renamed.
        let renamed: HashMap<String, String> = [
            ("10.0.0.11:2380".to_string(), "first".to_string()),
            ("10.0.0.12:2380".to_string(), "m2".to_string()),
        ]
        .into();
        m.set_checks(&other, &renamed, 2);
        assert_eq!(
            check_samples(&m),
            [
                line("ClockSkew", "m2", 1),
                line("EtcdPeerLatency", "first", 0)
            ]
        );
        m.set_checks(&other, &renamed, 2);
        assert_eq!(
            check_samples(&m),
            [
                line("ClockSkew", "m2", 1),
                line("EtcdPeerLatency", "first", 0)
            ]
        );
    }

    /// `joinguard_build_info`, as exporters have it: a gauge at 1 whose labels name the build, in
    /// both exposition formats.
    #[test]
    fn build_info_names_the_build() {
        let m = Metrics::with_build(BuildLabels {
            version: "0.1.0".into(),
            commit: "abc1234".into(),
            rustc: "rustc 1.89.0".into(),
        });
        let sample =
            r#"joinguard_build_info{version="0.1.0",commit="abc1234",rustc="rustc 1.89.0"} 1"#;
        for text in [m.openmetrics(), m.prometheus_text()] {
            assert!(text.lines().any(|l| l == sample), "{text}");
            assert!(text.contains("# TYPE joinguard_build_info gauge"), "{text}");
        }
    }

    #[test]
    fn prometheus_text_names_counter_families_after_their_samples() {
        let m = Metrics::new();
        let mut series = TargetSeries::new("etcd-peer/10.0.0.11:2380");
        m.observe(
            &mut series,
            ProbeKind::EtcdPeerProbe,
            &Ok(Duration::from_millis(3)),
        );
        m.observe(
            &mut series,
            ProbeKind::EtcdPeerProbe,
            &Err(ProbeFailure::Timeout(2000)),
        );
        m.set_up(&mut series, false);
        let om = m.openmetrics();
        assert!(om.ends_with("# EOF\n"), "{om}");
        assert!(
            om.contains("# TYPE joinguard_probe_attempts counter"),
            "{om}"
        );
        let text = m.prometheus_text();
        assert!(
            text.contains("# TYPE joinguard_probe_attempts_total counter"),
            "{text}"
        );
        assert!(
            text.contains("# HELP joinguard_probe_attempts_total Probes attempted"),
            "{text}"
        );
        assert!(
            text.contains(
                "joinguard_probe_failures_total{target=\"etcd-peer/10.0.0.11:2380\",probe=\"etcd-peer-probe\",reason=\"timeout\"} 1"
            ),
            "{text}"
        );
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains(
                "joinguard_probe_attempts_total{target=\"etcd-peer/10.0.0.11:2380\",probe=\"etcd-peer-probe\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("joinguard_target_up{target=\"etcd-peer/10.0.0.11:2380\"} 0"),
            "{text}"
        );
        m.forget("etcd-peer/10.0.0.11:2380", &[ProbeKind::EtcdPeerProbe]);
        assert!(!m.openmetrics().contains("10.0.0.11"));
        // A prober being aborted may still record through the handles it holds: that brings no
        // series back.
        m.observe(
            &mut series,
            ProbeKind::EtcdPeerProbe,
            &Err(ProbeFailure::Timeout(2000)),
        );
        m.set_up(&mut series, true);
        assert!(!m.openmetrics().contains("10.0.0.11"));
    }
}
