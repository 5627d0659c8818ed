//! Logs: `tracing` to stderr, never stdout (stdout carries only the report, so `-o json` stays
//! parseable). `RUST_LOG` overrides `-v`.
//!
//! Up to `-v`, a log line looks like every other line a command writes on stderr: the command in
//! brackets, then the message (`[etcd promote] etcd MemberList: attempt 1 failed ...`), with
//! `WARNING:` or `ERROR:` where the level says so, as kubeadm writes its `[preflight]` lines. From
//! `-vv` on, and always for the monitor (a daemon, whose lines need their time), tracing's full
//! format: timestamp, level, message and every field.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the subscriber: warn by default, -v info, -vv debug, -vvv trace. `command` is the
/// bracketed tag of the plain format (`etcd promote`); `None` keeps tracing's full format.
pub fn init(verbose: u8, command: Option<&'static str>) {
    joinguard_core::logging::set_verbosity(verbose);
    let level = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // Colour only on a terminal: logs captured to a file or a CI log stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false);
    let _ = match command {
        Some(tag) if verbose < 2 => builder.event_format(Plain { tag }).try_init(),
        _ => builder.try_init(),
    };
}

/// `[tag] WARNING: message`: the message alone, its fields left for `-vv`.
struct Plain {
    tag: &'static str,
}

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut message = Message(String::new());
        event.record(&mut message);
        let level = match *event.metadata().level() {
            Level::ERROR => "ERROR: ",
            Level::WARN => "WARNING: ",
            _ => "",
        };
        writeln!(writer, "[{}] {level}{}", self.tag, message.0)
    }
}

/// The event's `message` field.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            use fmt::Write as _;
            let _ = write!(self.0, "{value:?}");
        }
    }
}
