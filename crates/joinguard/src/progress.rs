//! Progress of long work on stderr, as an operator expects it: on a terminal, one line that
//! redraws in place (an indicatif bar), with the run's other notes printed above it; otherwise
//! (a log file, `journalctl`, a CI job) plain lines, the repeating ones at most one per
//! [`PLAIN_EVERY`] so a 10-minute catch-up is not 2,400 lines. stdout is never touched: it holds
//! the report alone.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::output::say;

/// How often a repeating progress line is printed when stderr is not a terminal.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// A progress display for one command's run.
#[derive(Debug)]
pub struct Progress {
    prefix: String,
    terminal: bool,
    /// Made on the first update (a run with nothing to wait for draws no bar), taken away when
    /// it is finished (a `--wait` run draws a new one per check).
    bar: Mutex<Option<ProgressBar>>,
    last_plain: Mutex<Option<Instant>>,
}

impl Progress {
    /// A bar when stderr is a terminal (and `TERM` is not `dumb`), plain lines otherwise.
    /// `prefix` leads every line, as `[etcd]` does.
    pub fn stderr(prefix: &str) -> Progress {
        let terminal =
            std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
        Progress {
            prefix: prefix.to_string(),
            terminal,
            bar: Mutex::new(None),
            last_plain: Mutex::new(None),
        }
    }

    /// Whether progress is drawn as a bar.
    pub fn is_bar(&self) -> bool {
        self.terminal
    }

    /// A note that stays: printed above the bar, or as a line.
    pub fn line(&self, text: &str) {
        match self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(b) => b.println(text),
            None => say(text),
        }
    }

    /// Work done as a percentage (0 to 100) and what the bar says beside it. Without a bar,
    /// `plain` is printed the first time and then at most once per [`PLAIN_EVERY`].
    pub fn update(&self, percent: u64, message: &str, plain: &str) {
        match self.terminal {
            true => {
                let mut slot = self.bar.lock().unwrap_or_else(|e| e.into_inner());
                let fresh = slot.is_none();
                let b = slot.get_or_insert_with(|| bar(&self.prefix));
                b.set_message(message.to_string());
                b.set_position(percent.min(100));
                if fresh {
                    // Drawn from here on, with its first message and position already set.
                    b.set_draw_target(ProgressDrawTarget::stderr());
                    b.tick();
                }
            }
            false => {
                let mut last = self.last_plain.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                if due(*last, now) {
                    *last = Some(now);
                    say(plain);
                }
            }
        }
    }

    /// Clears the bar (the outcome follows on stdout); nothing without one.
    pub fn finish(&self) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn bar(prefix: &str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(Some(100), ProgressDrawTarget::hidden());
    // The template is a constant: a mistake in it is a programming error caught by the tests.
    let style = ProgressStyle::with_template("{prefix} [{bar:24}] {pos:>3}% {elapsed:>4} {msg}")
        .expect("progress template")
        .progress_chars("=> ");
    b.set_style(style);
    b.set_prefix(prefix.to_string());
    b
}

/// Whether a repeating plain line is due: the first one, then one per [`PLAIN_EVERY`].
fn due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|t| now.duration_since(t) >= PLAIN_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_repeat_at_most_once_per_interval() {
        let t0 = Instant::now();
        assert!(due(None, t0), "the first line is printed");
        assert!(!due(Some(t0), t0 + Duration::from_millis(250)));
        assert!(!due(Some(t0), t0 + PLAIN_EVERY - Duration::from_millis(1)));
        assert!(due(Some(t0), t0 + PLAIN_EVERY));
    }

    #[test]
    fn the_bar_template_parses() {
        let _ = bar("[etcd]");
    }
}
