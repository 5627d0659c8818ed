//! Running a program to completion with a deadline: its exit status and both output streams
//! ([`output_within`]), or also its wall time and peak memory ([`output_with_peak_rss`]).
//!
//! This module owns spawning with piped output, draining both pipes on their own threads (so a
//! chatty child never blocks on a full pipe), polling for exit, and killing at the deadline. It
//! knows nothing about labs: run a [`crate::Host::command`] to run the program inside a host. It
//! must not interpret the output or the exit code (a non-zero exit is not an error here).

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::Error;

/// How often [`output_within`] looks for the child's exit.
const POLL: Duration = Duration::from_millis(10);
/// How often [`output_with_peak_rss`] samples the child's memory (and looks for its exit).
const RSS_POLL: Duration = Duration::from_millis(2);

/// Runs `cmd` to completion with its output captured, killing it if it takes longer than
/// `timeout`. A timeout is an error ([`Error::Timeout`]); a non-zero exit is not (check
/// `status`).
pub fn output_within(cmd: &mut Command, timeout: Duration) -> Result<Output, Error> {
    let mut run = Running::spawn(cmd)?;
    match run.wait(Some(run.start + timeout), POLL, |_| {})? {
        Some(status) => Ok(run.collect(status)),
        None => {
            run.kill();
            // The pipe readers are left to finish on their own: a grandchild that inherited a
            // pipe could keep it open long after the deadline.
            Err(Error::Timeout {
                what: run.desc,
                after: timeout,
            })
        }
    }
}

/// What [`output_with_peak_rss`] observed of one child process.
#[derive(Debug)]
pub struct MeasuredOutput {
    /// Exit status, stdout and stderr.
    pub output: Output,
    /// Spawn to exit.
    pub took: Duration,
    /// The child's peak resident set size in KiB: the largest `VmHWM` (the kernel's high-water
    /// mark of the process's own memory) read from `/proc/<pid>/status` every 2 ms until exit.
    /// Not `wait4(2)`'s `ru_maxrss`: at exec the kernel folds the pre-exec memory into it, and
    /// with posix_spawn (vfork) that is the whole parent's, here the test process.
    pub peak_rss_kib: u64,
    /// The child was killed at the timeout.
    pub killed: bool,
}

/// Runs `cmd` with piped stdout and stderr, killing it after `timeout`, and reports its exit,
/// output, wall time and peak RSS. With `ip netns exec` in front (a [`crate::Host::command`]),
/// `ip` execs the program in the same process, so the figure is the program's. Unlike
/// [`output_within`], a timeout is not an error: the child is killed and reported as such.
pub fn output_with_peak_rss(cmd: &mut Command, timeout: Duration) -> Result<MeasuredOutput, Error> {
    let mut run = Running::spawn(cmd)?;
    let mut peak = 0;
    // Sampled before each exit check: once the child is reaped, its /proc entry is gone.
    let mut sample = |pid: u32| {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = peak.max(kib);
        }
    };
    let (status, killed) = match run.wait(Some(run.start + timeout), RSS_POLL, &mut sample)? {
        Some(status) => (status, false),
        None => {
            run.kill_only();
            let status = run
                .wait(None, RSS_POLL, &mut sample)?
                .expect("without a deadline, wait returns at exit");
            (status, true)
        }
    };
    let took = run.start.elapsed();
    Ok(MeasuredOutput {
        output: run.collect(status),
        took,
        peak_rss_kib: peak,
        killed,
    })
}

/// `VmHWM` of `pid` in KiB, while the process lives.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A spawned child whose stdout and stderr are being drained.
struct Running {
    child: Child,
    desc: String,
    start: Instant,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
}

impl Running {
    fn spawn(cmd: &mut Command) -> Result<Running, Error> {
        let desc = format!("{cmd:?}");
        let start = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::Spawn(format!("{desc}: {e}")))?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        Ok(Running {
            child,
            desc,
            start,
            stdout,
            stderr,
        })
    }

    /// Polls every `poll` until the child exits (`Some(status)`) or `deadline` passes (`None`),
    /// calling `each(pid)` before every look.
    fn wait(
        &mut self,
        deadline: Option<Instant>,
        poll: Duration,
        mut each: impl FnMut(u32),
    ) -> Result<Option<ExitStatus>, Error> {
        let pid = self.child.id();
        loop {
            each(pid);
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok(Some(status)),
                Ok(None) if deadline.is_some_and(|d| Instant::now() >= d) => return Ok(None),
                Ok(None) => std::thread::sleep(poll),
                Err(e) => return Err(Error::Spawn(format!("wait for {}: {e}", self.desc))),
            }
        }
    }

    /// SIGKILL, and reap.
    fn kill(&mut self) {
        self.kill_only();
        let _ = self.child.wait();
    }

    /// SIGKILL, leaving the child to be reaped by [`Running::wait`].
    fn kill_only(&mut self) {
        let _ = self.child.kill();
    }

    /// The output, once the child has exited and the pipes are closed.
    fn collect(self, status: ExitStatus) -> Output {
        Output {
            status,
            stdout: self.stdout.join().unwrap_or_default(),
            stderr: self.stderr.join().unwrap_or_default(),
        }
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut v);
        }
        v
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_within_kills_a_slow_command() {
        let t = Instant::now();
        let err =
            output_within(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap_err();
        assert!(err.to_string().contains("did not finish"), "{err}");
        assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let out = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn output_within_drains_more_than_a_pipe_holds() {
        // 1 MiB on each stream: a child writing into undrained pipes would block at 64 KiB.
        let out = output_within(
            Command::new("sh").args([
                "-c",
                "head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2",
            ]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(out.status.success());
        assert_eq!((out.stdout.len(), out.stderr.len()), (1 << 20, 1 << 20));
    }

    #[test]
    fn a_program_that_cannot_start_is_a_spawn_error() {
        let err = output_within(
            &mut Command::new("/nonexistent/program"),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Spawn(_)), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/program"), "{err}");
    }

    #[test]
    fn peak_rss_is_measured_and_a_timeout_kills_without_an_error() {
        let m = output_with_peak_rss(
            Command::new("sh").args(["-c", "sleep 0.2; echo hi; exit 4"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(m.output.status.code(), Some(4));
        assert_eq!(m.output.stdout, b"hi\n");
        assert!(!m.killed);
        assert!(m.peak_rss_kib > 0, "{m:?}");
        let t = Instant::now();
        let m = output_with_peak_rss(Command::new("sleep").arg("30"), Duration::from_millis(200))
            .unwrap();
        assert!(m.killed);
        assert_eq!(m.output.status.code(), None, "killed by a signal");
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
