//! Report: the preflight result as data, and its two renderings (kubeadm-style text and JSON).
//!
//! This is the only module that formats preflight output. It writes to a caller-given writer and
//! never to stdout itself, so `-o json` cannot be corrupted by a stray line. It must not judge
//! (the verdict comes from `check`) or measure.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::time::Duration;

use serde::Serialize;

use crate::check::{CheckName, CheckResult, Status, Verdict};
use crate::failure::Ending;
use crate::probe::ProbeKind;
use crate::stats::Summary;
use crate::target::TargetKind;
use crate::trace::report::TracedPath;

/// Version of the JSON shape. Bump on any incompatible change; adding keys is compatible.
pub const SCHEMA_VERSION: u32 = 2;

/// The whole result of one preflight run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub schema_version: u32,
    pub verdict: Verdict,
    pub checks: Vec<CheckResult>,
    pub measurements: Vec<Measurement>,
    /// Facts the operator should know that are not checks (fallbacks taken, probes skipped).
    pub notes: Vec<String>,
    /// `--ignore-preflight-errors=all`: every error was turned into a warning, so the verdict
    /// says nothing. Present (true) only then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ignored_all: bool,
    /// A worker join (no `--control-plane`, no etcd inputs): only the API path was checked.
    #[serde(skip)]
    pub worker_join: bool,
    /// The text report's first line was printed already, when the run started: the text
    /// rendering leaves it out. Not part of the JSON document.
    #[serde(skip)]
    pub header_shown: bool,
    pub duration_ms: u64,
    /// Per-hop traces of failing targets (`joinguard trace`), when run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traces: Option<Vec<TargetTrace>>,
    /// Attempts made by the retry layer, when any were retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<Vec<serde_json::Value>>,
    /// What was probed, for the text header.
    #[serde(skip)]
    pub scope: Scope,
    /// The inputs the text names, as the run's caller spells them (the ignore list, the
    /// deadline); words when it did not say.
    #[serde(skip)]
    pub spelled: Spelled,
}

/// The inputs a report's text names, spelled by the caller (`--ignore-preflight-errors`, or a
/// YAML key); the default describes them in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spelled {
    pub ignore: &'static str,
    pub timeout: &'static str,
}

impl Default for Spelled {
    fn default() -> Spelled {
        Spelled {
            ignore: "the ignore list",
            timeout: "the time limit",
        }
    }
}

impl Spelled {
    pub fn by(spelling: crate::input::Spelling) -> Spelled {
        use crate::input::Input;
        Spelled {
            ignore: spelling.spell(Input::IgnorePreflightErrors),
            timeout: spelling.spell(Input::Timeout),
        }
    }
}

/// The trace of a target that failed a latency or loss check.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetTrace {
    /// The target of the failed checks, `host:port` as in `checks[].target`.
    pub check_target: String,
    /// The checks that failed for it.
    pub checks: Vec<CheckName>,
    #[serde(flatten)]
    pub path: TracedPath,
}

/// How many endpoints of each kind were probed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    pub api_endpoints: usize,
    pub etcd_clients: usize,
    pub etcd_peers: usize,
}

/// One row of the measurement table. Its keys are camelCase like the rest of the document
/// (`minMs`, `p50Ms`, ...; snake_case until schema version 2). Figures are `null` when every
/// attempt failed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// `host:port`, as in `checks[].target`.
    pub target: String,
    pub probe: ProbeKind,
    pub samples: u32,
    pub lost: u32,
    pub min_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub jitter_ms: Option<f64>,
}

impl Measurement {
    /// The plain (untrimmed) figures: the table shows what was measured; checks say in their
    /// messages which trimmed figure they judged.
    pub(crate) fn from_summary(s: &Summary) -> Measurement {
        let l = s.latency.as_ref();
        let f = |g: fn(&crate::stats::Latency) -> f64| l.map(|l| round3(g(l)));
        Measurement {
            target: s.target.endpoint.clone(),
            probe: s.probe,
            samples: s.samples,
            lost: s.lost,
            min_ms: f(|l| l.min_ms),
            p50_ms: f(|l| l.p50_ms),
            p90_ms: f(|l| l.p90_ms),
            p99_ms: f(|l| l.p99_ms),
            max_ms: f(|l| l.max_ms),
            jitter_ms: f(|l| l.jitter_ms),
        }
    }
}

impl Report {
    /// Assembles a report; `checks` must already have the ignore list applied.
    pub fn new(
        summaries: &[Summary],
        checks: Vec<CheckResult>,
        notes: Vec<String>,
        duration: Duration,
    ) -> Report {
        // Targets probed for themselves: an ICMP stream alone (to the proxy in front of an API
        // endpoint) is the path to another target, not one more endpoint.
        let count = |kind: TargetKind| {
            summaries
                .iter()
                .filter(|s| s.target.kind == kind && s.probe != ProbeKind::IcmpEcho)
                .map(|s| s.target.endpoint.as_str())
                .collect::<BTreeSet<_>>()
                .len()
        };
        let scope = Scope {
            api_endpoints: count(TargetKind::ApiServer),
            etcd_clients: count(TargetKind::EtcdClient),
            etcd_peers: count(TargetKind::EtcdPeer),
        };
        let checks: Vec<CheckResult> = checks
            .into_iter()
            .map(|mut c| {
                c.measured = c.measured.map(round3);
                c.threshold = c.threshold.map(round3);
                c
            })
            .collect();
        Report {
            schema_version: SCHEMA_VERSION,
            verdict: Verdict::from_checks(&checks),
            checks,
            measurements: summaries.iter().map(Measurement::from_summary).collect(),
            notes,
            ignored_all: false,
            worker_join: false,
            header_shown: false,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            traces: None,
            retries: None,
            scope,
            spelled: Spelled::default(),
        }
    }

    /// Done when fit, Failed when unfit. Trust failures and bad input never reach a report.
    pub fn ending(&self) -> Ending {
        self.verdict.ending()
    }
}

impl crate::render::Render for Report {
    fn render(&self, output: crate::spec::Output, w: &mut dyn Write) -> io::Result<()> {
        match output {
            crate::spec::Output::Text => render_text(self, w),
            crate::spec::Output::Json => render_json(self, w),
        }
    }
}

/// Writes the report as one JSON object followed by a newline.
pub(crate) fn render_json<W: Write + ?Sized>(report: &Report, w: &mut W) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, report)?;
    writeln!(w)
}

/// Writes the report as kubeadm-style `[preflight]` lines and a measurement table.
///
/// Ignored checks print as `[WARNING Name]`, as kubeadm prints ignored errors; the JSON keeps
/// their status `ignored`.
pub(crate) fn render_text<W: Write + ?Sized>(report: &Report, w: &mut W) -> io::Result<()> {
    let join = join_kind(report.worker_join);
    let ignore_input = report.spelled.ignore;
    if !report.header_shown {
        writeln!(w, "{}", running_line(report.worker_join))?;
    }
    if let Some(scope) = scope_line(&report.scope) {
        writeln!(w, "[preflight] {scope}")?;
    }
    for c in report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Warning | Status::Ignored))
    {
        let ignored = if c.status == Status::Ignored {
            format!(" (ignored: {ignore_input})")
        } else {
            String::new()
        };
        writeln!(w, "\t[WARNING {}]: {}{ignored}", c.name, c.message)?;
    }
    for n in &report.notes {
        writeln!(w, "[preflight] Note: {n}")?;
    }
    if report.ignored_all {
        let ignored = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Ignored)
            .count();
        writeln!(
            w,
            "[preflight] WARNING: {ignore_input}=all: every joinguard error was ignored \
             ({ignored} check{} would have failed or warned); this verdict says nothing about \
             the network",
            if ignored == 1 { "" } else { "s" }
        )?;
    }
    if !report.measurements.is_empty() {
        writeln!(w, "[preflight] Measurements:")?;
        write_table(&report.measurements, w)?;
    }
    for t in report.traces.iter().flatten() {
        let names: Vec<&str> = t.checks.iter().map(|c| c.as_str()).collect();
        writeln!(
            w,
            "[preflight] {} failed {}; where the path loses it:",
            t.check_target,
            names.join(", ")
        )?;
        crate::trace::report::render_text(&t.path, "[preflight]", w)?;
    }
    let took = report.duration_ms as f64 / 1000.0;
    let errors: Vec<&CheckResult> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Error)
        .collect();
    if report.verdict == Verdict::Unfit {
        writeln!(
            w,
            "error execution phase preflight: [preflight] Some fatal errors occurred:"
        )?;
        for c in &errors {
            writeln!(w, "\t[ERROR {}]: {}", c.name, c.message)?;
        }
        let names: BTreeSet<&str> = errors.iter().map(|c| c.name.as_str()).collect();
        let names: Vec<&str> = names.into_iter().collect();
        writeln!(
            w,
            "[preflight] If you know what you are doing, you can make a check non-fatal with \
             `{ignore_input}={}`",
            names.join(",")
        )?;
    } else {
        let warnings = report
            .checks
            .iter()
            .filter(|c| matches!(c.status, Status::Warning | Status::Ignored))
            .count();
        let ignored = report.checks.iter().any(|c| c.status == Status::Ignored);
        if report.ignored_all && ignored {
            writeln!(
                w,
                "[preflight] No fatal errors only because every error was ignored \
                 ({ignore_input}=all), with {warnings} warning{} (took {took:.1}s)",
                if warnings == 1 { "" } else { "s" }
            )?;
        } else if warnings == 0 {
            writeln!(
                w,
                "[preflight] All checks passed: the network is fit for {join} (took {took:.1}s)"
            )?;
        } else {
            writeln!(
                w,
                "[preflight] No fatal errors: the network is fit for {join}, with {warnings} \
                 warning{} (took {took:.1}s)",
                if warnings == 1 { "" } else { "s" }
            )?;
        }
    }
    Ok(())
}

fn join_kind(worker_join: bool) -> &'static str {
    if worker_join {
        "a worker join"
    } else {
        "a control-plane join"
    }
}

/// The text report's first line.
pub(crate) fn running_line(worker_join: bool) -> String {
    format!(
        "[preflight] Running joinguard pre-flight checks for {}",
        join_kind(worker_join)
    )
}

/// "Probing 1 API endpoint and 3 etcd members (client and peer ports)".
fn scope_line(s: &Scope) -> Option<String> {
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let members = s.etcd_clients.max(s.etcd_peers);
    let ports = match (s.etcd_clients > 0, s.etcd_peers > 0) {
        (true, true) => " (client and peer ports)",
        (true, false) => " (client ports)",
        (false, true) => " (peer ports)",
        (false, false) => "",
    };
    let mut parts = Vec::new();
    if s.api_endpoints > 0 {
        parts.push(plural(s.api_endpoints, "API endpoint", "API endpoints"));
    }
    if members > 0 {
        parts.push(format!(
            "{}{ports}",
            plural(members, "etcd member", "etcd members")
        ));
    }
    if parts.is_empty() {
        None
    } else {
        Some(format!("Probing {}", parts.join(" and ")))
    }
}

fn write_table<W: Write + ?Sized>(rows: &[Measurement], w: &mut W) -> io::Result<()> {
    let tw = rows
        .iter()
        .map(|m| m.target.len())
        .max()
        .unwrap_or(0)
        .max("TARGET".len());
    let pw = rows
        .iter()
        .map(|m| m.probe.as_str().len())
        .max()
        .unwrap_or(0)
        .max("PROBE".len());
    writeln!(
        w,
        "{:<tw$}  {:<pw$}  {:>5}  {:>5}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}",
        "TARGET", "PROBE", "N", "LOST", "MIN", "P50", "P90", "P99", "MAX", "JITTER"
    )?;
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for m in rows {
        writeln!(
            w,
            "{:<tw$}  {:<pw$}  {:>5}  {:>5}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}  {:>7}",
            m.target,
            m.probe.as_str(),
            m.samples,
            m.lost,
            cell(m.min_ms),
            cell(m.p50_ms),
            cell(m.p90_ms),
            cell(m.p99_ms),
            cell(m.max_ms),
            cell(m.jitter_ms),
        )?;
    }
    Ok(())
}

/// Microsecond precision is all a millisecond figure needs in a report.
fn round3(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1000.0).round() / 1000.0
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{CheckName, Checker, IgnoreList, Thresholds};
    use crate::probe::{ProbeFailure, Sample};
    use crate::target::Target;

    fn target(kind: TargetKind, endpoint: &str) -> Target {
        Target::parse(kind, endpoint, true).unwrap()
    }

    fn summary(kind: TargetKind, ep: &str, probe: ProbeKind, ms: f64, n: usize) -> Summary {
        let samples: Vec<Sample> = (0..n)
            .map(|i| Sample {
                result: Ok(Duration::from_secs_f64(
                    (ms + (i % 3) as f64 * 0.01) / 1000.0,
                )),
            })
            .collect();
        Summary::from_samples(&target(kind, ep), probe, &samples)
    }

    /// A lab-like run: API, three members (client and peer), one slow peer.
    fn lab(ignore: &str) -> Report {
        let mut sums = vec![summary(
            TargetKind::ApiServer,
            "198.18.0.10:6443",
            ProbeKind::ApiReadyz,
            6.0,
            20,
        )];
        for (i, peer_ms) in [(2, 2.0), (3, 280.0), (4, 2.0)] {
            sums.push(summary(
                TargetKind::EtcdClient,
                &format!("198.18.0.{i}:2379"),
                ProbeKind::EtcdStatus,
                2.0,
                20,
            ));
            sums.push(summary(
                TargetKind::EtcdPeer,
                &format!("198.18.0.{i}:2380"),
                ProbeKind::EtcdPeerProbe,
                peer_ms,
                20,
            ));
        }
        let dark = Summary::from_samples(
            &target(TargetKind::EtcdPeer, "198.18.0.6:2380"),
            ProbeKind::TcpConnect,
            &[Sample {
                result: Err(ProbeFailure::Timeout(500)),
            }],
        );
        let c = Checker::new(Thresholds::default(), IgnoreList::parse(ignore).unwrap());
        let mut checks = c.evaluate_summaries(&sums);
        checks.push(c.etcd_identity(true));
        sums.push(dark);
        let checks = c.finish(checks);
        let mut r = Report::new(
            &sums,
            checks,
            vec!["etcd peer URLs taken from --etcd-peer-endpoints".into()],
            Duration::from_millis(1234),
        );
        r.spelled = Spelled::by(crate::input::tests::FLAGS);
        r
    }

    fn text(r: &Report) -> String {
        let mut out = Vec::new();
        render_text(r, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_has_the_contract_keys() {
        let r = lab("");
        let mut out = Vec::new();
        render_json(&r, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "schemaVersion",
                "verdict",
                "checks",
                "measurements",
                "notes",
                "durationMs"
            ])
        );
        assert_eq!(v["schemaVersion"], 2);
        assert_eq!(v["verdict"], "unfit");
        assert_eq!(v["durationMs"], 1234);

        let check = &v["checks"][0];
        let keys: BTreeSet<&str> = check
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "name",
                "target",
                "status",
                "message",
                "measured",
                "threshold"
            ])
        );
        let slow = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "EtcdPeerLatency" && c["target"] == "198.18.0.3:2380")
            .unwrap();
        assert_eq!(slow["status"], "error");
        assert_eq!(slow["threshold"], 250.0);
        assert!(slow["measured"].as_f64().unwrap() > 280.0);

        let m = &v["measurements"][0];
        let keys: BTreeSet<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from([
                "target", "probe", "samples", "lost", "minMs", "p50Ms", "p90Ms", "p99Ms", "maxMs",
                "jitterMs"
            ])
        );
        assert_eq!(m["target"], "198.18.0.10:6443");
        assert_eq!(m["probe"], "api-readyz");
        assert_eq!(m["samples"], 20);
        assert_eq!(m["lost"], 0);
        assert_eq!(m["minMs"], 6.0);
        // A target that never answered has null figures, not zeros.
        let dark = v["measurements"].as_array().unwrap().last().unwrap();
        assert_eq!(dark["lost"], 1);
        assert!(dark["p50Ms"].is_null());
    }

    #[test]
    fn optional_sections_appear_when_set() {
        let mut r = lab("");
        r.retries = Some(vec![serde_json::json!({"attempts": 2})]);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["retries"][0]["attempts"], 2);
        assert!(v.get("traces").is_none());
    }

    #[test]
    fn traces_print_after_the_measurements_and_serialize_flat() {
        use crate::trace::analysis::tests::{hop, path};
        let mut r = lab("");
        r.traces = Some(vec![TargetTrace {
            check_target: "198.18.0.3:2380".into(),
            checks: vec![CheckName::EtcdPeerLatency],
            path: TracedPath::new(path(vec![
                hop(1, Some(0.1), 10, 10),
                hop(2, Some(80.1), 10, 10),
            ])),
        }]);
        let t = text(&r);
        let at = t
            .find("[preflight] 198.18.0.3:2380 failed EtcdPeerLatency; where the path loses it:")
            .expect("trace header");
        assert!(at > t.find("[preflight] Measurements:").unwrap(), "{t}");
        assert!(at < t.find("error execution phase").unwrap(), "{t}");
        assert!(
            t.contains("[preflight] latency first appears at hop 2 (198.18.0.3): +80.0 ms"),
            "{t}"
        );
        let v = serde_json::to_value(&r).unwrap();
        let tr = &v["traces"][0];
        assert_eq!(tr["checkTarget"], "198.18.0.3:2380");
        assert_eq!(tr["checks"][0], "EtcdPeerLatency");
        assert_eq!(tr["hops"][1]["avgMs"], 80.1);
        assert_eq!(tr["attribution"]["latency"]["hop"], 2);
    }

    #[test]
    fn text_names_the_error_and_target() {
        let r = lab("");
        let t = text(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "[preflight] Running joinguard pre-flight checks for a control-plane join"
        );
        assert_eq!(
            lines[1],
            "[preflight] Probing 1 API endpoint and 4 etcd members (client and peer ports)"
        );
        assert!(t.contains("[preflight] Note: etcd peer URLs taken from --etcd-peer-endpoints"));
        assert!(
            t.contains("error execution phase preflight: [preflight] Some fatal errors occurred:")
        );
        let err = lines
            .iter()
            .find(|l| l.starts_with("\t[ERROR EtcdPeerLatency]: "))
            .expect("an ERROR line");
        assert!(err.contains("198.18.0.3:2380"), "{err}");
        assert!(
            err.contains("exceeds 250 ms (1/4 of the 1 s election timeout"),
            "{err}"
        );
        assert!(!t.contains("[ERROR EtcdPeerLatency]: etcd peer 198.18.0.2:2380"));
        assert!(
            t.ends_with(
                "you can make a check non-fatal with `--ignore-preflight-errors=EtcdPeerLatency`\n"
            ),
            "{t}"
        );
        // The table.
        let header = lines
            .iter()
            .position(|l| *l == "[preflight] Measurements:")
            .unwrap();
        assert!(lines[header + 1].starts_with("TARGET            PROBE"));
        assert!(lines[header + 1].ends_with("JITTER"));
        assert!(lines[header + 2].starts_with("198.18.0.10:6443  api-readyz"));
        assert!(lines[header + 2].contains("   6.00"));
        assert!(
            t.contains("198.18.0.6:2380   tcp-connect          1      1        -"),
            "{t}"
        );
    }

    #[test]
    fn ignored_errors_print_as_warnings_and_pass() {
        let r = lab("etcdpeerlatency");
        assert_eq!(r.verdict, Verdict::Fit);
        assert_eq!(r.ending(), Ending::Done);
        let slow = r
            .checks
            .iter()
            .find(|c| c.name == CheckName::EtcdPeerLatency && c.target == "198.18.0.3:2380")
            .unwrap();
        assert_eq!(slow.status, Status::Ignored);
        let t = text(&r);
        assert!(
            t.contains("\t[WARNING EtcdPeerLatency]: etcd peer 198.18.0.3:2380"),
            "{t}"
        );
        assert!(!t.contains("[ERROR"));
        assert!(t.contains(
            "[preflight] No fatal errors: the network is fit for a control-plane join, with 1 warning (took 1.2s)"
        ), "{t}");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["verdict"], "fit");
    }

    #[test]
    fn all_passed_line() {
        let sums = vec![summary(
            TargetKind::EtcdClient,
            "198.18.0.2:2379",
            ProbeKind::EtcdStatus,
            2.0,
            20,
        )];
        let c = Checker::default();
        let checks = c.finish(c.evaluate_summaries(&sums));
        let r = Report::new(&sums, checks, vec![], Duration::from_millis(1200));
        let t = text(&r);
        assert!(
            t.contains("[preflight] Probing 1 etcd member (client ports)\n"),
            "{t}"
        );
        assert!(t.ends_with(
            "[preflight] All checks passed: the network is fit for a control-plane join (took 1.2s)\n"
        ), "{t}");
    }
}
