//! The binary's half of every command: the one tokio runtime (built once in `main`), the notes
//! sink (each progress line to stderr at once) and the printer (stdout carries the report only).
//! Every command returns its [`Ending`]; `main` turns it into the exit code with the one map,
//! [`Ending::code`] (0 fit/done, 1 unfit/failed, 2 invalid input, 3 trust failure). The core
//! validates, runs and returns typed values; nothing here decides a verdict.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use joinguard_core::monitor::{self, DEFAULT_LISTEN};
use joinguard_core::preflight::{self, PreflightInput};
use joinguard_core::status;
use joinguard_core::trace::report::TracedPath;
use joinguard_core::trace::{self, TraceError, TraceInput};
use joinguard_core::{
    Ending, MonitorConfig, Notes, Outcome, Output, PreflightSpec, Recorder, StatusInput,
    StatusReport, StatusSpec, Stopped, TraceSpec,
};
use tokio::runtime::Runtime;

use crate::output::{print, say, stdout_bytes};

/// The binary's notes: each line to stderr as it happens.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl Notes for Stderr {
    fn note(&self, line: &str) {
        say(line);
    }
}

/// preflight's notes and progress on stderr: the measurement as a one-line bar on a terminal
/// (streams finished of those started, elapsed), the notes above it; without a terminal, a
/// progress line only for a run that takes longer than [`crate::progress::PLAIN_EVERY`], then
/// at most one per interval. stdout is left to the report.
struct PreflightNotes {
    progress: crate::progress::Progress,
}

impl Notes for PreflightNotes {
    fn note(&self, line: &str) {
        self.progress.line(line);
    }

    fn progress(&self, done: usize, total: usize, elapsed: Duration) {
        if !self.progress.is_bar() && elapsed < crate::progress::PLAIN_EVERY {
            return;
        }
        let percent = (done * 100).checked_div(total).unwrap_or(0) as u64;
        let counts = format!("{done} of {total} probe streams finished");
        self.progress.update(
            percent,
            &counts,
            &format!(
                "[preflight] measuring: {counts} after {:.0}s",
                elapsed.as_secs_f64()
            ),
        );
    }

    fn progress_done(&self) {
        self.progress.finish();
    }
}

/// The one runtime of the process: two workers (the machines joinguard runs on are busy
/// joining a control plane; the probes are I/O-bound).
pub fn runtime() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// A command that stopped early: its message on stderr, its ending.
fn stopped(command: &str, s: &Stopped) -> Ending {
    crate::output::say_error(command, s);
    s.ending()
}

/// The `-o json` document of a preflight that ended without a verdict (invalid input, a trust
/// failure, a cluster that could not be reached or read): the report's shape, empty, with
/// `verdict: "error"` and the error's class, exit code and message, so that a log file a
/// bootstrap script writes from stdout always holds the reason.
fn preflight_error_document(ending: Ending, message: &str, started: Instant) -> String {
    let class = match ending {
        Ending::InvalidInput => "invalid-input",
        Ending::Untrusted => "trust",
        Ending::Failed | Ending::Done => "failed",
    };
    // The report's field order (schemaVersion first), which `json!` would sort away.
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ErrorDoc<'a> {
        schema_version: u8,
        verdict: &'a str,
        error: ErrorPart<'a>,
        checks: [(); 0],
        measurements: [(); 0],
        notes: [(); 0],
        duration_ms: u64,
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct ErrorPart<'a> {
        class: &'a str,
        exit_code: u8,
        message: &'a str,
    }
    let doc = ErrorDoc {
        schema_version: 2,
        verdict: "error",
        error: ErrorPart {
            class,
            exit_code: ending.code(),
            message,
        },
        checks: [],
        measurements: [],
        notes: [],
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}

/// `joinguard preflight`.
pub fn preflight(rt: &Runtime, spec: PreflightSpec) -> Ending {
    let started = Instant::now();
    let json = spec.output == Output::Json;
    let unused: Vec<String> = spec
        .given
        .iter()
        .filter(|f| joinguard_core::kubeadm::flags::lookup(f).is_some_and(|k| !k.is_used()))
        .map(|f| format!("--{f}"))
        .collect();
    if !unused.is_empty() && joinguard_core::logging::verbosity() >= 1 {
        say(&format!(
            "[preflight] kubeadm flags accepted, not used by joinguard: {}",
            unused.join(", ")
        ));
    }
    let input = match rt.block_on(PreflightInput::from_spec(spec, &Recorder::new(), &Stderr)) {
        Ok(i) => i,
        Err(e) => {
            if json {
                stdout_bytes(
                    preflight_error_document(e.ending(), &e.to_string(), started).as_bytes(),
                );
            }
            return stopped("preflight", &e);
        }
    };
    // The report's first line at once, as kubeadm prints its own: the run takes seconds, and
    // the notes on stderr (traces, --wait) come after it, not before.
    let header_shown = input.output() == Output::Text;
    if header_shown {
        stdout_bytes(format!("{}\n", input.running_line()).as_bytes());
    }
    let notes = PreflightNotes {
        progress: crate::progress::Progress::stderr("[preflight]"),
    };
    let mut outcome = rt.block_on(preflight::preflight(&input, &notes));
    notes.progress.finish();
    if let Outcome::Report(r) = &mut outcome {
        r.header_shown = header_shown;
    }
    match &outcome {
        Outcome::Trust(msg) => {
            if json {
                stdout_bytes(
                    preflight_error_document(Ending::Untrusted, &msg.to_string(), started)
                        .as_bytes(),
                );
            }
            say(&format!(
                "[preflight] trust failure: {msg}\n[preflight] This is not retried: check that the \
                 CA file belongs to this cluster, or that nothing intercepts the connection."
            ));
        }
        Outcome::Report(r) => {
            print(r.as_ref(), input.output());
            // With -o json the reason is in the document; stderr (a bootstrap log) gets it too.
            if json && r.ending() != Ending::Done {
                let errors: Vec<String> = r
                    .checks
                    .iter()
                    .filter(|c| c.status == joinguard_core::check::Status::Error)
                    .map(|c| format!("{} {}", c.name, c.target))
                    .collect();
                say(&format!(
                    "joinguard preflight: not fit: {}",
                    errors.join(", ")
                ));
            }
        }
    }
    outcome.ending()
}

/// `joinguard update-status`.
pub fn update_status(rt: &Runtime, spec: StatusSpec) -> Ending {
    let input = match StatusInput::from_spec(&spec, &Stderr) {
        Ok(i) => i,
        Err(e) => return stopped("update-status", &Stopped::invalid(e)),
    };
    let recorder = Recorder::new();
    let run = rt.block_on(status::update_status(&input, &recorder));
    if let Some(e) = &run.input_error {
        return stopped("update-status", &Stopped::input(e.clone()));
    }
    let report = StatusReport::new(
        input.server(),
        input.node_name().to_string(),
        &run,
        &recorder,
    );
    print(&report, spec.output);
    // The reason on stderr too, whatever the report's format: a bootstrap log keeps stderr.
    if let Some(why) = report.failure() {
        say(&format!("joinguard update-status: {why}"));
    }
    report.ending()
}

/// `joinguard trace`.
pub fn trace(rt: &Runtime, request: TraceSpec) -> Ending {
    let spec = match rt.block_on(TraceInput::from_spec(&request)) {
        Ok(s) => s,
        Err(e) => return stopped("trace", &Stopped::invalid(e)),
    };
    say(&format!("[trace] {}", spec.plan()));
    match rt.block_on(trace::trace(&spec)) {
        Ok(t) => {
            let p = TracedPath::new(t);
            print(&p, request.output);
            p.ending()
        }
        // No CAP_NET_RAW, or a protocol this host cannot send: the invocation is at fault.
        Err(e @ TraceError::NoPrivilege(_)) => stopped("trace", &Stopped::invalid(e)),
        Err(e) => stopped("trace", &Stopped::failed(e)),
    }
}

/// `joinguard monitor`: runs until SIGTERM/SIGINT.
pub fn monitor(rt: &Runtime, config: &Path, listen: Option<SocketAddr>) -> Ending {
    let b = crate::version::build_info();
    let build = monitor::BuildLabels {
        version: b.version.to_string(),
        commit: b.git_commit.to_string(),
        rustc: b.rustc.to_string(),
    };
    let config = match MonitorConfig::load(config, &|k| std::env::var(k).ok()) {
        Ok(c) => c.built_by(build),
        Err(e) => return stopped("monitor", &Stopped::input(format!("--config {e}"))),
    };
    let listen = match (listen, config.listen()) {
        (Some(l), _) | (None, Some(l)) => l,
        (None, None) => DEFAULT_LISTEN
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 9810))),
    };
    rt.block_on(async move {
        match monitor::start(config, listen, &Stderr).await {
            Ok(m) => {
                monitor::wait_for_signal().await;
                tracing::info!("shutting down");
                m.stop();
                Ending::Done
            }
            Err(e) => stopped("monitor", &e),
        }
    })
}
