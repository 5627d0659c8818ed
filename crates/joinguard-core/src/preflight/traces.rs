//! Traces of failing targets: every host whose latency or loss check failed is traced with TCP
//! SYNs to the port that failed (the path the join's own connections take), within what is left
//! of `--timeout`, and the traces are added to the report.
//!
//! A trace starts as soon as it can ([`Early`]): each stream of the run is judged alone the
//! moment it finishes, and a host whose stream fails a traced check is traced beside the streams
//! still running. After the verdict, [`attach`] keeps the traces of the hosts the report fails,
//! starts those not started yet, and stops the rest (a stream judged alone can fail where the
//! whole run does not: a guessed peer the member list did not confirm, latency judged net of the
//! host's loss).
//!
//! This module decides what to trace and with how much time; the tracer measures and the report
//! prints. It never changes a verdict.

use std::time::{Duration, Instant};

use crate::check::{CheckName, Checker, Status};
use crate::notes::Notes;
use crate::preflight::report::{Report, TargetTrace};
use crate::preflight::run::Series;
use crate::probe::ProbeKind;
use crate::stats::Summary;
use crate::target::TargetKind;
use crate::trace::report::TracedPath;
use crate::trace::{self, PathTrace, TraceError, TraceInput, TraceProtocol};

/// Probes per hop of a preflight trace: enough for a loss figure per hop, as mtr's default.
const CYCLES: u32 = 10;
/// At least this many, or the trace is not worth its time.
const MIN_CYCLES: u32 = 3;
/// Between cycles. Faster than mtr's 1 s so a failing preflight is not held up for long; the
/// attribution uses only what persists to later hops, so a router that rate-limits its answers
/// (Linux: about 1/s per destination after a burst of 6, `net.ipv4.icmp_ratelimit`) is not
/// blamed for the loss it shows.
const INTERVAL: Duration = Duration::from_millis(200);
/// One probe's wait: 1 s, as the ICMP loss probe's late limit.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// The report needs a moment after the traces.
const MARGIN: Duration = Duration::from_millis(150);

/// The checks whose failure a trace can explain.
fn traced(name: CheckName) -> bool {
    matches!(
        name,
        CheckName::EtcdPeerLatency
            | CheckName::EtcdClientLatency
            | CheckName::EtcdQuorumReadLatency
            | CheckName::EtcdDialTime
            | CheckName::ApiServerLatency
            | CheckName::PacketLoss
    )
}

/// A trace's outcome: the path, or why there is none (`true`: no privilege to trace at all).
type Traced = Result<PathTrace, (bool, String)>;

/// A trace under way.
struct Running {
    /// The check target whose failure started it (its port is the trace's).
    target: String,
    host: String,
    checks: Vec<CheckName>,
    task: tokio::task::JoinHandle<Traced>,
}

impl Running {
    /// Starts tracing `host` with TCP SYNs to `port` (the port of `target`).
    fn start(
        target: String,
        host: String,
        port: u16,
        checks: Vec<CheckName>,
        (cycles, budget): (u32, Duration),
    ) -> Running {
        Running {
            target,
            task: tokio::spawn(run_trace(host.clone(), port, cycles, budget)),
            host,
            checks,
        }
    }
}

impl Drop for Running {
    // A trace nobody will read stops: its SYNs would only load the path.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Traces started while the run still measures, one per host.
#[derive(Default)]
pub(crate) struct Started(Vec<Running>);

/// Judges each stream alone as it finishes and starts the trace of a host that fails a traced
/// check, within what is left of the run's `--timeout` (`deadline`).
pub(crate) struct Early {
    checker: Checker,
    /// Whether the etcd streams are judged on TCP connects (no etcd identity).
    connect_only: bool,
    deadline: Instant,
    started: Started,
}

impl Early {
    pub(crate) fn new(checker: Checker, connect_only: bool, deadline: Instant) -> Early {
        Early {
            checker,
            connect_only,
            deadline,
            started: Started::default(),
        }
    }

    /// Judges one finished stream; starts its host's trace if it fails a traced check.
    pub(crate) fn offer(&mut self, series: &Series, notes: &dyn Notes) {
        let failing = self.failing(series);
        if failing.is_empty() {
            return;
        }
        let Some((host, port)) = host_port(&series.target.endpoint) else {
            return;
        };
        if let Some(r) = self.started.0.iter_mut().find(|r| r.host == host) {
            for c in failing {
                if !r.checks.contains(&c) {
                    r.checks.push(c);
                }
            }
            return;
        }
        let budget = self.deadline.saturating_duration_since(Instant::now());
        let Some((cycles, budget)) = fit(budget) else {
            // What is left is too short: `attach` says so with the verdict.
            return;
        };
        let target = series.target.endpoint.clone();
        // Beside `stream finished ... at_ms=` (`-vv`): when the trace began, and with how much
        // of --timeout left.
        tracing::debug!(
            %target,
            checks = %names(&failing),
            cycles,
            left_ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX),
            "trace started beside the running streams"
        );
        notes.note(&format!(
            "[preflight] Tracing the path to {target} ({}) with TCP SYNs, {cycles} cycles \
             (about {:.1}s), beside the checks still running",
            names(&failing),
            (INTERVAL * cycles).as_secs_f64()
        ));
        self.started.0.push(Running::start(
            target,
            host,
            port,
            failing,
            (cycles, budget),
        ));
    }

    /// The traced checks one stream fails when judged alone. Only a stream that decides its
    /// check in the whole run counts (the etcd TCP connects decide only without an identity; a
    /// latency stream never decides packet loss where the host has an echo stream), and a
    /// stream that never got an answer is a reachability error, which a trace does not explain.
    fn failing(&self, s: &Series) -> Vec<CheckName> {
        let decides = match (s.target.kind, s.probe) {
            (_, ProbeKind::IcmpEcho) => true,
            (TargetKind::EtcdPeer, ProbeKind::EtcdPeerProbe)
            | (TargetKind::EtcdClient, ProbeKind::EtcdStatus | ProbeKind::EtcdQuorumRead)
            | (TargetKind::ApiServer, ProbeKind::ApiReadyz) => true,
            (TargetKind::EtcdPeer | TargetKind::EtcdClient, ProbeKind::TcpConnect) => {
                self.connect_only
            }
            _ => false,
        };
        let answered = s.samples.iter().any(|x| x.result.is_ok());
        if !decides || !(answered || s.probe == ProbeKind::IcmpEcho) {
            return Vec::new();
        }
        let summary = Summary::from_samples(&s.target, s.probe, &s.samples);
        let checks = self
            .checker
            .finish(self.checker.evaluate_summaries(&[summary]));
        let mut out = Vec::new();
        for c in checks {
            let loss_stream = s.probe == ProbeKind::IcmpEcho;
            if c.status == Status::Error
                && traced(c.name)
                && (c.name == CheckName::PacketLoss) == loss_stream
                && !out.contains(&c.name)
            {
                out.push(c.name);
            }
        }
        out
    }

    /// The traces started so far.
    pub(crate) fn into_started(self) -> Started {
        self.started
    }
}

fn names(checks: &[CheckName]) -> String {
    checks
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `host` (brackets removed) and port of a check target.
fn host_port(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let host = host.trim_matches(|ch| ch == '[' || ch == ']').to_string();
    Some((host, port.parse().ok()?))
}

/// How many cycles fit in `left`, and the trace's own bound; `None` below [`MIN_CYCLES`].
fn fit(left: Duration) -> Option<(u32, Duration)> {
    let budget = left.saturating_sub(MARGIN);
    let fit = budget
        .saturating_sub(PROBE_TIMEOUT)
        .as_millis()
        .checked_div(INTERVAL.as_millis())
        .unwrap_or(0);
    let cycles = u32::try_from(fit).unwrap_or(u32::MAX).min(CYCLES);
    (cycles >= MIN_CYCLES).then_some((cycles, budget))
}

async fn run_trace(host: String, port: u16, cycles: u32, budget: Duration) -> Traced {
    match trace::command::resolve(&host).await {
        Ok(addr) => {
            let spec = TraceInput {
                label: host.clone(),
                target: addr,
                protocol: TraceProtocol::Tcp,
                port: Some(port),
                cycles,
                max_hops: 30,
                interval: INTERVAL,
                probe_timeout: PROBE_TIMEOUT,
                timeout: budget,
                dns: false,
                size: None,
            };
            trace::trace(&spec).await.map_err(|e| match e {
                TraceError::NoPrivilege(_) => (true, e.to_string()),
                e => (false, e.to_string()),
            })
        }
        Err(e) => Err((false, format!("TARGET `{host}`: {e}"))),
    }
}

/// Adds to `report` the traces of the hosts of its failed latency and loss checks (or a note
/// saying why there are none): those in `started` are awaited, the others traced now within
/// `left`; a started trace of a host the report does not fail is stopped.
pub async fn attach(
    report: &mut Report,
    left: Duration,
    notes: &dyn crate::notes::Notes,
    started: Started,
) {
    // One trace per host, to the port of its first failing check (checks are in target order).
    let mut plan: Vec<(String, String, u16, Vec<CheckName>)> = Vec::new();
    for c in report
        .checks
        .iter()
        .filter(|c| c.status == Status::Error && traced(c.name))
    {
        let Some((host, port)) = host_port(&c.target) else {
            continue;
        };
        match plan.iter_mut().find(|p| p.1 == host) {
            Some(p) => {
                if !p.3.contains(&c.name) {
                    p.3.push(c.name);
                }
            }
            None => plan.push((c.target.clone(), host, port, vec![c.name])),
        }
    }
    let mut running: Vec<Running> = Vec::new();
    for r in started.0 {
        if plan.iter().any(|p| p.1 == r.host) {
            running.push(r);
        } else {
            notes.note(&format!(
                "[preflight] Stopped tracing {}: no check of that host failed once every \
                 stream was in",
                r.target
            ));
        }
    }
    // The hosts not traced yet.
    let late: Vec<&(String, String, u16, Vec<CheckName>)> = plan
        .iter()
        .filter(|p| !running.iter().any(|r| r.host == p.1))
        .collect();
    if !late.is_empty() {
        match fit(left) {
            None => report.notes.push(format!(
                "no time was left in the run's deadline ({timeout}) to trace the failing targets \
                 (needs about {:.1}s); give the run more time, or run `joinguard trace {} \
                 --protocol tcp --port {}`",
                (PROBE_TIMEOUT + INTERVAL * MIN_CYCLES).as_secs_f64(),
                late[0].1,
                late[0].2,
                timeout = report.spelled.timeout,
            )),
            Some((cycles, budget)) => {
                let hosts: Vec<String> = late
                    .iter()
                    .map(|p| format!("{} ({})", p.0, names(&p.3)))
                    .collect();
                notes.note(&format!(
                    "[preflight] Tracing the path to {} with TCP SYNs, {cycles} cycles (about \
                     {:.1}s)",
                    hosts.join(", "),
                    (INTERVAL * cycles).as_secs_f64()
                ));
                for (target, host, port, checks) in late.into_iter().cloned() {
                    running.push(Running::start(target, host, port, checks, (cycles, budget)));
                }
            }
        }
    }
    if running.is_empty() {
        return;
    }
    // In the report's order of hosts; each with the checks the report fails on it.
    running.sort_by_key(|r| plan.iter().position(|p| p.1 == r.host));
    let mut traces = Vec::new();
    for mut r in running {
        let result = match (&mut r.task).await {
            Ok(x) => x,
            Err(e) => Err((false, format!("the trace task ended: {e}"))),
        };
        let checks = plan
            .iter()
            .find(|p| p.1 == r.host)
            .map(|p| p.3.clone())
            .unwrap_or_default();
        match result {
            Ok(t) => traces.push(TargetTrace {
                check_target: r.target.clone(),
                checks,
                path: TracedPath::new(t),
            }),
            Err((true, msg)) => {
                let n = format!("the failing targets were not traced: {msg}");
                if !report.notes.contains(&n) {
                    report.notes.push(n);
                }
            }
            Err((false, msg)) => report
                .notes
                .push(format!("{}: the trace failed: {msg}", r.target)),
        }
    }
    if !traces.is_empty() {
        report.traces = Some(traces);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{IgnoreList, Thresholds};
    use crate::probe::{ProbeFailure, Sample};
    use crate::target::Target;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    fn early(connect_only: bool, ignore: IgnoreList) -> Early {
        Early::new(
            Checker::new(Thresholds::default(), ignore),
            connect_only,
            Instant::now() + Duration::from_secs(10),
        )
    }

    fn series(kind: TargetKind, url: &str, probe: ProbeKind, ms: &[Option<u64>]) -> Series {
        Series {
            target: Target::parse_url(kind, url).unwrap(),
            probe,
            samples: ms
                .iter()
                .map(|m| Sample {
                    result: match m {
                        Some(ms) => Ok(Duration::from_millis(*ms)),
                        None => Err(ProbeFailure::Timeout(2000)),
                    },
                })
                .collect(),
        }
    }

    const PEER: &str = "https://198.18.0.2:2380";
    const CLIENT: &str = "https://198.18.0.2:2379";

    #[test]
    fn a_stream_that_decides_its_check_is_judged_alone() {
        let e = early(false, IgnoreList::default());
        // 400 ms RTT to a peer: over the 250 ms default limit (1/4 of a 1 s election timeout).
        let slow = series(
            TargetKind::EtcdPeer,
            PEER,
            ProbeKind::EtcdPeerProbe,
            &[Some(400); 20],
        );
        assert_eq!(e.failing(&slow), vec![CheckName::EtcdPeerLatency]);
        let fast = series(
            TargetKind::EtcdPeer,
            PEER,
            ProbeKind::EtcdPeerProbe,
            &[Some(2); 20],
        );
        assert!(e.failing(&fast).is_empty());
        let status = series(
            TargetKind::EtcdClient,
            CLIENT,
            ProbeKind::EtcdStatus,
            &[Some(700); 20],
        );
        // 700 ms per Status: over 1/4 of kubeadm's 2 s per-call etcd timeout.
        assert_eq!(e.failing(&status), vec![CheckName::EtcdClientLatency]);
        // Half the echoes lost: PacketLoss, from the echo stream only.
        let mut echoes = vec![Some(1); 100];
        echoes.extend([None; 100]);
        let icmp = series(TargetKind::EtcdClient, CLIENT, ProbeKind::IcmpEcho, &echoes);
        assert_eq!(e.failing(&icmp), vec![CheckName::PacketLoss]);
    }

    #[test]
    fn a_stream_that_does_not_decide_its_check_starts_no_trace() {
        let slow_connects = series(
            TargetKind::EtcdPeer,
            PEER,
            ProbeKind::TcpConnect,
            &[Some(400); 20],
        );
        // With an etcd identity the peer probe decides EtcdPeerLatency, not TCP connects.
        assert!(early(false, IgnoreList::default())
            .failing(&slow_connects)
            .is_empty());
        // Without one, the connects decide it.
        assert_eq!(
            early(true, IgnoreList::default()).failing(&slow_connects),
            vec![CheckName::EtcdPeerLatency]
        );
        // A latency stream that lost half its samples: the echo stream judges loss, not it.
        let mut lossy = vec![Some(2); 10];
        lossy.extend([None; 10]);
        let lossy = series(TargetKind::EtcdPeer, PEER, ProbeKind::EtcdPeerProbe, &lossy);
        assert!(!early(false, IgnoreList::default())
            .failing(&lossy)
            .contains(&CheckName::PacketLoss));
        // Never an answer: a reachability error, which a trace does not explain.
        let silent = series(
            TargetKind::EtcdPeer,
            PEER,
            ProbeKind::EtcdPeerProbe,
            &[None; 5],
        );
        assert!(early(false, IgnoreList::default())
            .failing(&silent)
            .is_empty());
        // An ignored check is not traced.
        let ignore = IgnoreList::parse("EtcdPeerLatency").unwrap();
        let slow = series(
            TargetKind::EtcdPeer,
            PEER,
            ProbeKind::EtcdPeerProbe,
            &[Some(400); 20],
        );
        assert!(early(false, ignore).failing(&slow).is_empty());
    }

    #[derive(Default)]
    struct Collect(Mutex<Vec<String>>);
    impl Notes for Collect {
        fn note(&self, line: &str) {
            self.0.lock().unwrap().push(line.to_string());
        }
    }

    /// Set when the future holding it is dropped (the task aborted).
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_started_trace_of_a_host_the_report_does_not_fail_is_stopped() {
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = Flag(stopped.clone());
        let task = tokio::spawn(async move {
            let _flag = flag;
            std::future::pending::<Traced>().await
        });
        let started = Started(vec![Running {
            target: "198.18.0.2:2380".into(),
            host: "198.18.0.2".into(),
            checks: vec![CheckName::EtcdPeerLatency],
            task,
        }]);
        let mut report = Report::new(&[], Vec::new(), Vec::new(), Duration::from_millis(500));
        let notes = Collect::default();
        // A trace that never ends would hold the run to --timeout if it were awaited.
        tokio::time::timeout(
            Duration::from_secs(2),
            attach(&mut report, Duration::from_secs(5), &notes, started),
        )
        .await
        .expect("attach does not wait for a trace nobody reads");
        assert!(report.traces.is_none());
        let lines = notes.0.lock().unwrap().clone();
        assert_eq!(
            lines,
            vec![
                "[preflight] Stopped tracing 198.18.0.2:2380: no check of that host failed once \
                 every stream was in"
                    .to_string()
            ]
        );
        for _ in 0..100 {
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the stopped trace's task still runs");
    }
}
