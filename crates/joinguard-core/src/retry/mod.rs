//! The retry layer (policies and error table in docs/retries.md): every call joinguard makes to the API server or etcd, and
//! every "wait until fit" loop, runs through here.
//!
//! This module owns the four standard policies and their budgets, the backoff schedules (built on
//! backon's `ExponentialBuilder`, with our jitter factors applied on top), the per-attempt timeout and
//! whole-operation deadline, error classification ([`classify`]), `Retry-After`, the 409
//! re-read-and-re-apply path ([`run_mutation`]), the wake-on-connect watcher ([`wake`]) and the
//! attempt record ([`record`]). It must not know what an operation does (it gets a closure), must
//! not print (logs go through `tracing`, reports read the [`Recorder`]), and no other code may
//! sleep and loop to retry: use [`run`], [`run_mutation`] or [`wait_until`].

pub(crate) mod classify;
pub(crate) mod record;
pub(crate) mod wake;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tokio::time::Instant;

use crate::failure::{TrustFailure, TrustFailureKind};

pub use classify::{
    classify_grpc, parse_retry_after, ApiCallError, ApiError, ClassLabel, Classify, ErrorClass,
    Reason, TransportError,
};
pub use record::{AttemptCount, AttemptRecord, Recorder};
pub use wake::WakeOnConnect;

/// The least time worth starting an attempt with. The runner never sleeps into the last
/// `MIN_ATTEMPT_WINDOW` of a budget: it shortens the final sleep instead, so the budget is used
/// and still not exceeded.
pub const MIN_ATTEMPT_WINDOW: Duration = Duration::from_millis(250);

/// The shortest budget [`RetryPolicy::with_budget`] accepts: one attempt must fit.
pub const MIN_BUDGET: Duration = Duration::from_secs(1);

/// A hard cap on backoff steps per operation, on top of the deadline (no loop
/// is unbounded).
const MAX_STEPS: usize = 1000;

/// The sleep before re-reading after a 409: a few tens of milliseconds of jitter so that
/// concurrent joiners racing on one ConfigMap fall out of step.
const CONFLICT_JITTER: Duration = Duration::from_millis(50);

/// One exponential schedule: `start`, times `factor` each step, capped at `max_delay`, then
/// jittered. Jitter follows Kubernetes' `wait.Jitter` (the model behind our policies' and clusterctl's
/// numbers): a step `d` becomes `d + d * jitter * U[0,1)`, i.e. it lies in `[d, d * (1 + jitter))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub start: Duration,
    pub factor: f32,
    pub jitter: f64,
    /// Cap on the un-jittered step.
    pub max_delay: Duration,
}

impl Backoff {
    /// `preflight --wait`: each check itself takes seconds, so start at 1 s, grow gently, and
    /// never wait more than 15 s between checks.
    pub const PREFLIGHT_WAIT: Backoff = Backoff {
        start: Duration::from_secs(1),
        factor: 1.5,
        jitter: 0.2,
        max_delay: Duration::from_secs(15),
    };

    /// The schedule as an iterator of sleeps, seeded from the OS.
    pub fn schedule(&self) -> Schedule {
        self.schedule_with(SmallRng::from_rng(&mut rand::rng()))
    }

    /// The same schedule with a fixed jitter seed (tests, reproducible benchmarks).
    #[cfg(test)]
    pub(crate) fn schedule_seeded(&self, seed: u64) -> Schedule {
        self.schedule_with(SmallRng::seed_from_u64(seed))
    }

    fn schedule_with(&self, rng: SmallRng) -> Schedule {
        // backon's own jitter adds U[0,1) * d (a fixed jitter of 1.0), which cannot express 0.1,
        // 0.2 or 0.4; so backon computes the exponential steps without jitter and we add ours.
        let base = ExponentialBuilder::new()
            .with_min_delay(self.start)
            .with_factor(self.factor)
            .with_max_delay(self.max_delay)
            .with_max_times(MAX_STEPS)
            .build();
        Schedule {
            base,
            jitter: self.jitter.clamp(0.0, 1.0),
            rng,
        }
    }
}

/// The sleeps of one operation, in order. See [`Backoff`].
#[derive(Debug)]
pub struct Schedule {
    base: <ExponentialBuilder as BackoffBuilder>::Backoff,
    jitter: f64,
    rng: SmallRng,
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let d = self.base.next()?;
        let u: f64 = self.rng.random();
        Some(d.mul_f64(1.0 + self.jitter * u))
    }
}

/// Which standard policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    Write,
    Read,
    Connect,
    Etcd,
}

impl PolicyKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            PolicyKind::Write => "write",
            PolicyKind::Read => "read",
            PolicyKind::Connect => "connect",
            PolicyKind::Etcd => "etcd",
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a 404 means at this call site. "404 on a get is an answer, not an error"; a 404 on an
/// update is permanent; a get that waits for an object to appear (a Node the kubelet has not
/// registered yet) treats it as transient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotFound {
    /// Return at once, quietly (no warning, class `permanent`, [`GaveUp::Answer`]); the caller
    /// turns it into `None` with [`found`].
    Answer,
    /// Fail at once with a warning (the default).
    Permanent,
    /// Retry on the policy's schedule until the object appears or the budget ends.
    Transient,
}

/// A named schedule, a budget and a per-attempt timeout.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    pub kind: PolicyKind,
    pub backoff: Backoff,
    /// The whole operation's budget, attempts and sleeps included, from the first attempt.
    pub budget: Duration,
    /// Each attempt's timeout; always capped by what is left of the budget.
    pub per_attempt: Duration,
    /// An absolute deadline on top of the budget (e.g. the command's `--timeout`).
    pub deadline: Option<Instant>,
    pub not_found: NotFound,
    /// 409s in one [`run_mutation`] before giving up. 20 concurrent joiners on one ConfigMap
    /// lose at most 19 races each in the worst case; 32 leaves room.
    pub max_conflicts: u32,
}

impl RetryPolicy {
    fn standard(
        kind: PolicyKind,
        start_ms: u64,
        jitter: f64,
        budget: u64,
        per_attempt: u64,
    ) -> Self {
        RetryPolicy {
            kind,
            backoff: Backoff {
                start: Duration::from_millis(start_ms),
                factor: 1.5,
                jitter,
                // Beyond the policy table: a cap so that an HTTP-level outage (503s, where the watcher
                // cannot help) is re-tried at least every ~10 s (5 s for the 15 s policies).
                max_delay: Duration::from_secs(if budget > 15 { 10 } else { 5 }),
            },
            budget: Duration::from_secs(budget),
            per_attempt: Duration::from_secs(per_attempt),
            deadline: None,
            not_found: NotFound::Permanent,
            max_conflicts: 32,
        }
    }

    /// Groups with at least one write: 500 ms, x1.5, jitter 0.4, 40 s (kubeadm
    /// `APICallWithWriteTimeout`, clusterctl `newWriteBackoff`). 10 s per attempt.
    pub fn write() -> Self {
        Self::standard(PolicyKind::Write, 500, 0.4, 40, 10)
    }

    /// Read-only groups: 250 ms, x1.5, jitter 0.1, 15 s (kubeadm `APICallWithReadTimeout`,
    /// clusterctl `newReadBackoff`). 10 s per attempt.
    pub fn read() -> Self {
        Self::standard(PolicyKind::Read, 250, 0.1, 15, 10)
    }

    /// First contact with the API server: 250 ms, x1.5, jitter 0.1, 15 s (clusterctl
    /// `newConnectBackoff`). 5 s per attempt: a healthy first contact is a TCP+TLS handshake.
    pub fn connect() -> Self {
        Self::standard(PolicyKind::Connect, 250, 0.1, 15, 5)
    }

    /// etcd RPCs: 500 ms, x1.5, jitter 0.2, 2 min (kubeadm `EtcdAPICallTimeout`,
    /// `EtcdAPICallRetryInterval`). 10 s per attempt.
    pub fn etcd() -> Self {
        Self::standard(PolicyKind::Etcd, 500, 0.2, 120, 10)
    }

    /// Overrides the budget (v1beta4 `timeouts.kubernetesAPICall` / `etcdAPICall`). Clamped to
    /// at least [`MIN_BUDGET`].
    pub(crate) fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget.max(MIN_BUDGET);
        self
    }

    pub(crate) fn with_per_attempt(mut self, per_attempt: Duration) -> Self {
        self.per_attempt = per_attempt.max(Duration::from_millis(1));
        self
    }

    /// Adds an absolute deadline; the operation ends at the earlier of it and the budget.
    pub(crate) fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    #[cfg(test)]
    pub(crate) fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    pub(crate) fn on_not_found(mut self, not_found: NotFound) -> Self {
        self.not_found = not_found;
        self
    }

    fn deadline_from(&self, started: Instant) -> Instant {
        let by_budget = started + self.budget;
        match self.deadline {
            Some(d) if d < by_budget => d,
            _ => by_budget,
        }
    }
}

/// Budget overrides from a v1beta4 JoinConfiguration's `timeouts`. Parsing the file is the
/// config module's job; this only applies what it found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budgets {
    /// `timeouts.kubernetesAPICall`: overrides the `write`, `read` and `connect` budgets, as in
    /// kubeadm, where it bounds every API call.
    pub kubernetes_api_call: Option<Duration>,
    /// `timeouts.etcdAPICall`: overrides the `etcd` budget.
    pub etcd_api_call: Option<Duration>,
}

impl Budgets {
    pub(crate) fn from_v1beta4(
        kubernetes_api_call: Option<Duration>,
        etcd_api_call: Option<Duration>,
    ) -> Self {
        Budgets {
            kubernetes_api_call,
            etcd_api_call,
        }
    }

    /// Applies the matching override, if any, to a policy.
    pub fn apply(&self, policy: RetryPolicy) -> RetryPolicy {
        let over = match policy.kind {
            PolicyKind::Etcd => self.etcd_api_call,
            PolicyKind::Write | PolicyKind::Read | PolicyKind::Connect => self.kubernetes_api_call,
        };
        match over {
            Some(b) => policy.with_budget(b),
            None => policy,
        }
    }

    pub fn write(&self) -> RetryPolicy {
        self.apply(RetryPolicy::write())
    }

    pub fn read(&self) -> RetryPolicy {
        self.apply(RetryPolicy::read())
    }

    pub fn connect(&self) -> RetryPolicy {
        self.apply(RetryPolicy::connect())
    }

    pub fn etcd(&self) -> RetryPolicy {
        self.apply(RetryPolicy::etcd())
    }
}

/// What an attempt is told about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptCtx {
    /// 1-based.
    pub attempt: u32,
    /// This attempt's timeout (the runner enforces it; pass it on to client timeouts too).
    pub timeout: Duration,
    /// The operation's deadline.
    pub deadline: Instant,
}

/// The last failure of an operation: the operation's own error, or the runner's timeout.
#[derive(Debug)]
pub enum Failure<E> {
    Op(E),
    /// The runner cut the attempt off after this long.
    AttemptTimeout(Duration),
    /// The runner abandoned the attempt after this long: the endpoint went dark during it and
    /// came back ([`WakeOnConnect::outage_over`]).
    Abandoned(Duration),
}

impl<E: Classify> Failure<E> {
    fn class(&self, policy: &RetryPolicy) -> ErrorClass {
        match self {
            Failure::Op(e) if e.is_not_found() => match policy.not_found {
                NotFound::Transient => ErrorClass::Transient(Reason::NotFound),
                NotFound::Answer | NotFound::Permanent => ErrorClass::Permanent(Reason::NotFound),
            },
            Failure::Op(e) => e.classify(),
            Failure::AttemptTimeout(_) => ErrorClass::Transient(Reason::AttemptTimeout),
            Failure::Abandoned(_) => ErrorClass::Transient(Reason::PathRecovered),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Op(e) => e.retry_after(),
            Failure::AttemptTimeout(_) | Failure::Abandoned(_) => None,
        }
    }

    /// The operation's error, if the last failure was one.
    pub fn error(&self) -> Option<&E> {
        match self {
            Failure::Op(e) => Some(e),
            Failure::AttemptTimeout(_) | Failure::Abandoned(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Op(e) => e.fmt(f),
            Failure::AttemptTimeout(d) => {
                write!(f, "no answer within the {} attempt timeout", secs(*d))
            }
            Failure::Abandoned(d) => write!(
                f,
                "abandoned after {}: the endpoint stopped answering and came back",
                secs(*d)
            ),
        }
    }
}

/// Why the runner stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GaveUp {
    /// Permanent or trust: not retried.
    NotRetryable,
    /// A 404 the call site declared an answer ([`NotFound::Answer`]).
    Answer,
    /// The budget (or deadline) left no room for another attempt.
    BudgetExhausted,
    /// The server's `Retry-After` reaches past the deadline.
    RetryAfterBeyondBudget {
        retry_after: Duration,
        remaining: Duration,
    },
    /// [`RetryPolicy::max_conflicts`] 409s in one mutation.
    TooManyConflicts,
    /// A 409 from [`run`], which cannot re-read and re-apply.
    ConflictWithoutMutation,
    /// The mutation closure itself failed.
    MutateFailed,
}

/// An operation that did not succeed: which call, how hard we tried, and the last cause.
#[derive(Debug)]
pub struct RetryError<E> {
    pub op: String,
    pub policy: PolicyKind,
    pub budget: Duration,
    pub attempts: u32,
    pub elapsed: Duration,
    pub class: ErrorClass,
    pub last: Failure<E>,
    pub gave_up: GaveUp,
}

impl<E> RetryError<E> {
    pub(crate) fn is_trust(&self) -> bool {
        self.class == ErrorClass::Trust
    }

    /// The trust failure this call ended on, with the whole message (the operation, attempts
    /// and the last error): the rejected certificate's kind and validity when the last error
    /// carried them, a [`TrustFailureKind::Transport`] failure when only text named it.
    pub fn trust_failure(&self) -> Option<TrustFailure>
    where
        E: Classify,
        Self: fmt::Display,
    {
        if !self.is_trust() {
            return None;
        }
        let mut t = self
            .last
            .error()
            .and_then(Classify::trust_failure)
            .cloned()
            .unwrap_or_else(|| TrustFailure::new(TrustFailureKind::Transport, ""));
        t.detail = self.to_string();
        Some(t)
    }

    /// True when the last failure was a 404 (whatever the call site made of it).
    pub(crate) fn is_not_found(&self) -> bool {
        self.class.reason() == Some(Reason::NotFound)
    }

    pub(crate) fn budget_exhausted(&self) -> bool {
        matches!(
            self.gave_up,
            GaveUp::BudgetExhausted | GaveUp::RetryAfterBeyondBudget { .. }
        )
    }
}

/// "404 on a get is an answer": turns a 404 failure into `Ok(None)`.
pub fn found<T, E>(r: Result<T, RetryError<E>>) -> Result<Option<T>, RetryError<E>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn attempts_word(n: u32) -> String {
    if n == 1 {
        "1 attempt".to_string()
    } else {
        format!("{n} attempts")
    }
}

/// `40 s`, `40.1 s`, `250 ms`.
fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{} ms", d.as_millis());
    }
    let s = d.as_secs_f64();
    if (s - s.round()).abs() < 0.05 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (op, n, took) = (&self.op, attempts_word(self.attempts), secs(self.elapsed));
        let budget = format!("{} budget {}", self.policy, secs(self.budget));
        let last = &self.last;
        match self.gave_up {
            GaveUp::BudgetExhausted => write!(
                f,
                "{op}: gave up after {n} in {took} ({budget}); last error: {last}"
            ),
            GaveUp::RetryAfterBeyondBudget {
                retry_after,
                remaining,
            } => write!(
                f,
                "{op}: the server asked to retry after {}, more than the {} left of the {budget}; \
                 gave up after {n} in {took}; last error: {last}",
                secs(retry_after),
                secs(remaining)
            ),
            GaveUp::NotRetryable if self.class == ErrorClass::Trust => {
                write!(f, "{op}: {last} (a trust failure: not retried)")
            }
            GaveUp::NotRetryable if self.attempts > 1 => {
                write!(
                    f,
                    "{op}: {last} (permanent, not retried; after {n} in {took})"
                )
            }
            GaveUp::NotRetryable => write!(f, "{op}: {last} (permanent, not retried)"),
            GaveUp::Answer => write!(f, "{op}: {last}"),
            GaveUp::TooManyConflicts => write!(
                f,
                "{op}: gave up after {n} in {took}: the object kept changing under us (409 \
                 Conflict each time we re-read and re-applied); last error: {last}"
            ),
            GaveUp::ConflictWithoutMutation => write!(
                f,
                "{op}: {last} (409 Conflict on a call that is not a read-modify-write; it is \
                 never blindly retried)"
            ),
            GaveUp::MutateFailed => write!(f, "{op}: could not apply the change: {last}"),
        }
    }
}

impl<E: Classify + fmt::Debug> std::error::Error for RetryError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.last {
            Failure::Op(e) => e.cause(),
            _ => None,
        }
    }
}

/// How long an attempt runs before the wake-on-connect watcher starts looking at its endpoint. API
/// and etcd calls answer in milliseconds; an attempt still open after a second may be stuck on a
/// dead path.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_secs(1);

/// One operation's state: the schedule, the deadline and the attempt count.
struct Driver<'a> {
    policy: &'a RetryPolicy,
    op: &'a str,
    recorder: &'a Recorder,
    wake: Option<&'a WakeOnConnect>,
    started: Instant,
    deadline: Instant,
    schedule: Schedule,
    attempts: u32,
    conflicts: u32,
    /// The last attempt failed on the connection (refused, reset, no answer): the endpoint may
    /// still be dark when the next one starts.
    dark: bool,
}

impl<'a> Driver<'a> {
    fn new(
        policy: &'a RetryPolicy,
        op: &'a str,
        recorder: &'a Recorder,
        wake: Option<&'a WakeOnConnect>,
    ) -> Self {
        let started = Instant::now();
        Driver {
            policy,
            op,
            recorder,
            wake,
            started,
            deadline: policy.deadline_from(started),
            schedule: policy.backoff.schedule(),
            attempts: 0,
            conflicts: 0,
            dark: false,
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Starts an attempt: counts it and gives its timeout.
    fn next_ctx(&mut self) -> AttemptCtx {
        self.attempts += 1;
        AttemptCtx {
            attempt: self.attempts,
            timeout: self.policy.per_attempt.min(self.remaining()),
            deadline: self.deadline,
        }
    }

    async fn attempt<T, E, Fut>(&self, ctx: AttemptCtx, fut: Fut) -> Result<T, Failure<E>>
    where
        Fut: Future<Output = Result<T, E>>,
    {
        let t0 = Instant::now();
        let outcome = match self.wake {
            // An attempt in flight when its endpoint blacks out rides on a connection the kernel
            // retransmits on with a doubling timeout: after a 5 s outage the next retransmit can
            // be 3 s away. When the watcher sees the endpoint go dark and come back during the
            // attempt, a fresh connection is quicker: abandon this one. (Safe for writes too:
            // a mutation re-reads before it writes again.)
            // After an attempt that failed on the connection, this one may start while the
            // path is still dark (its backoff step ran out first), its SYN lost and resent only
            // after the kernel's 1 s: watch from the start instead of after the grace.
            Some(w) => tokio::select! {
                r = tokio::time::timeout(ctx.timeout, fut) => r,
                () = w.outage_over(if self.dark { Duration::ZERO } else { IN_FLIGHT_GRACE }, t0 + ctx.timeout) => {
                    return Err(Failure::Abandoned(t0.elapsed()));
                }
            },
            None => tokio::time::timeout(ctx.timeout, fut).await,
        };
        match outcome {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Failure::Op(e)),
            Err(_) => Err(Failure::AttemptTimeout(ctx.timeout)),
        }
    }

    fn record(
        &self,
        class: ClassLabel,
        reason: Option<Reason>,
        error: Option<String>,
        delay: Option<Duration>,
        gave_up: bool,
    ) {
        self.recorder.record(AttemptRecord {
            op: self.op.to_string(),
            policy: self.policy.kind.as_str().to_string(),
            attempt: self.attempts,
            class,
            reason,
            error,
            delay_before_next: delay,
            elapsed: self.started.elapsed(),
            gave_up,
        });
    }

    fn ok(&self) {
        self.record(ClassLabel::Ok, None, None, None, false);
        if self.attempts > 1 {
            tracing::info!(
                op = self.op,
                policy = self.policy.kind.as_str(),
                attempts = self.attempts,
                elapsed_ms = ms(self.started.elapsed()),
                "{}: succeeded after {} in {}",
                self.op,
                attempts_word(self.attempts),
                secs(self.started.elapsed())
            );
        }
    }

    fn give_up<E: Classify>(
        &self,
        last: Failure<E>,
        class: ErrorClass,
        why: GaveUp,
    ) -> RetryError<E> {
        let err = RetryError {
            op: self.op.to_string(),
            policy: self.policy.kind,
            budget: self.policy.budget,
            attempts: self.attempts,
            elapsed: self.started.elapsed(),
            class,
            last,
            gave_up: why,
        };
        if why != GaveUp::MutateFailed {
            self.record(
                class.label(),
                class.reason(),
                Some(err.last.to_string()),
                None,
                true,
            );
        }
        let line = record::redact(&err.to_string());
        if why == GaveUp::Answer {
            tracing::debug!(op = self.op, "{line}");
        } else {
            // The caller reports the error itself (the command's last line): info, not twice at
            // the default verbosity.
            tracing::info!(
                op = self.op,
                policy = self.policy.kind.as_str(),
                attempts = self.attempts,
                class = %class.label(),
                elapsed_ms = ms(err.elapsed),
                "{line}"
            );
        }
        err
    }

    /// Decides what a failure means: `Ok(())` after sleeping (retry now), or the final error.
    async fn failed<E: Classify>(
        &mut self,
        f: Failure<E>,
        can_reapply: bool,
    ) -> Result<(), RetryError<E>> {
        let class = f.class(self.policy);
        self.dark = class.is_connection();
        let delay = match class {
            ErrorClass::Transient(_) => {
                let Some(step) = self.schedule.next() else {
                    return Err(self.give_up(f, class, GaveUp::BudgetExhausted));
                };
                let remaining = self.remaining();
                let asked = f.retry_after();
                if let Some(ra) = asked {
                    if ra + MIN_ATTEMPT_WINDOW > remaining {
                        let why = GaveUp::RetryAfterBeyondBudget {
                            retry_after: ra,
                            remaining,
                        };
                        return Err(self.give_up(f, class, why));
                    }
                }
                if remaining <= MIN_ATTEMPT_WINDOW {
                    return Err(self.give_up(f, class, GaveUp::BudgetExhausted));
                }
                // Retry-After is a floor; the last sleep is shortened to leave one attempt's
                // window before the deadline.
                let delay = step
                    .max(asked.unwrap_or_default())
                    .min(remaining - MIN_ATTEMPT_WINDOW);
                if matches!(f, Failure::Abandoned(_)) {
                    // The watcher just saw the endpoint accept a connection: go now, on a
                    // fresh one, after a few tens of milliseconds of jitter.
                    delay.min(CONFLICT_JITTER.mul_f64(rand::rng().random::<f64>()))
                } else {
                    delay
                }
            }
            ErrorClass::Conflict if can_reapply => {
                self.conflicts += 1;
                if self.conflicts > self.policy.max_conflicts {
                    return Err(self.give_up(f, class, GaveUp::TooManyConflicts));
                }
                let remaining = self.remaining();
                if remaining <= MIN_ATTEMPT_WINDOW {
                    return Err(self.give_up(f, class, GaveUp::BudgetExhausted));
                }
                CONFLICT_JITTER.mul_f64(rand::rng().random::<f64>())
            }
            ErrorClass::Conflict => {
                return Err(self.give_up(f, class, GaveUp::ConflictWithoutMutation));
            }
            ErrorClass::Permanent(Reason::NotFound)
                if self.policy.not_found == NotFound::Answer =>
            {
                return Err(self.give_up(f, class, GaveUp::Answer));
            }
            ErrorClass::Permanent(_) | ErrorClass::Trust => {
                return Err(self.give_up(f, class, GaveUp::NotRetryable));
            }
        };
        let text = f.to_string();
        self.record(
            class.label(),
            class.reason(),
            Some(text.clone()),
            Some(delay),
            false,
        );
        // A warning, so that an operator sees at the default verbosity why a command is taking
        // longer than it should.
        tracing::warn!(
            op = self.op,
            policy = self.policy.kind.as_str(),
            attempt = self.attempts,
            class = %class.label(),
            delay_ms = ms(delay),
            "{}: attempt {} failed: {}; retrying in {}",
            self.op,
            self.attempts,
            record::redact(&text),
            secs(delay)
        );
        match self.wake {
            Some(w) if class.is_connection() => {
                if let wake::Sleep::Woken(after) = w.sleep(delay).await {
                    tracing::info!(
                        op = self.op,
                        endpoint = %w.addr(),
                        "{}: {} accepts connections again after {}; retrying now",
                        self.op,
                        w.addr(),
                        secs(after)
                    );
                }
            }
            _ => tokio::time::sleep(delay).await,
        }
        Ok(())
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs one call under a policy: each attempt gets `min(per_attempt, remaining budget)`;
/// transient failures sleep the next step (or `Retry-After`, if later) and retry; permanent and
/// trust failures, and 409s (use [`run_mutation`]), end it at once. `wake` ends a sleep early
/// after a connection-class failure once the endpoint accepts TCP again.
pub async fn run<T, E, F, Fut>(
    policy: &RetryPolicy,
    op_name: &str,
    recorder: &Recorder,
    wake: Option<&WakeOnConnect>,
    mut attempt: F,
) -> Result<T, RetryError<E>>
where
    E: Classify,
    F: FnMut(AttemptCtx) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut d = Driver::new(policy, op_name, recorder, wake);
    loop {
        let ctx = d.next_ctx();
        match d.attempt(ctx, attempt(ctx)).await {
            Ok(v) => {
                d.ok();
                return Ok(v);
            }
            Err(f) => d.failed(f, false).await?,
        }
    }
}

/// What a mutation closure reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    /// The object was changed and must be written.
    Yes,
    /// Already as wanted: nothing is written.
    No,
}

/// The result of [`run_mutation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation<Obj> {
    /// The object as written (or as read, when unchanged).
    pub object: Obj,
    pub changed: bool,
    /// API calls made (gets and updates).
    pub attempts: u32,
    /// 409s met on the way.
    pub conflicts: u32,
}

/// Read-modify-write without lost updates: `get` the object, `mutate` it, `update` it. A 409
/// re-reads and re-applies the mutation to the fresh object (counted as an attempt, after only a
/// few tens of milliseconds of jitter); a transient failure of either call sleeps the next
/// backoff step and starts again from the read (so an update that did land is seen, and the
/// mutation then reports [`Changed::No`]). A `mutate` error ends the operation at once.
pub async fn run_mutation<Obj, E, G, GF, M, U, UF>(
    policy: &RetryPolicy,
    op_name: &str,
    recorder: &Recorder,
    wake: Option<&WakeOnConnect>,
    mut get: G,
    mut mutate: M,
    mut update: U,
) -> Result<Mutation<Obj>, RetryError<E>>
where
    E: Classify,
    G: FnMut() -> GF,
    GF: Future<Output = Result<Obj, E>>,
    M: FnMut(&mut Obj) -> Result<Changed, E>,
    U: FnMut(Obj) -> UF,
    UF: Future<Output = Result<Obj, E>>,
{
    let mut d = Driver::new(policy, op_name, recorder, wake);
    loop {
        let ctx = d.next_ctx();
        let mut obj = match d.attempt(ctx, get()).await {
            Ok(o) => o,
            Err(f) => {
                d.failed(f, true).await?;
                continue;
            }
        };
        let changed = match mutate(&mut obj) {
            Ok(c) => c,
            Err(e) => {
                let class = e.classify();
                return Err(d.give_up(Failure::Op(e), class, GaveUp::MutateFailed));
            }
        };
        if changed == Changed::No {
            d.ok();
            return Ok(Mutation {
                object: obj,
                changed: false,
                attempts: d.attempts,
                conflicts: d.conflicts,
            });
        }
        d.record(ClassLabel::Ok, None, None, None, false);
        let ctx = d.next_ctx();
        match d.attempt(ctx, update(obj)).await {
            Ok(written) => {
                d.ok();
                return Ok(Mutation {
                    object: written,
                    changed: true,
                    attempts: d.attempts,
                    conflicts: d.conflicts,
                });
            }
            Err(f) => d.failed(f, true).await?,
        }
    }
}

/// Where a [`wait_until`] stands after a check that said "not yet".
#[derive(Debug)]
pub struct WaitProgress<'a, N> {
    pub attempt: u32,
    pub elapsed: Duration,
    pub not_yet: &'a N,
    /// The sleep before the next check; `None` when the deadline leaves no room for one.
    pub next_in: Option<Duration>,
}

/// [`wait_until`] reached its deadline.
#[derive(Debug)]
pub struct WaitTimedOut<N> {
    pub checks: u32,
    pub elapsed: Duration,
    /// The last check's answer; `None` if the deadline cut the first check off.
    pub last: Option<N>,
}

impl<N: fmt::Display> fmt::Display for WaitTimedOut<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "still not ready after {} in {}",
            match self.checks {
                1 => "1 check".to_string(),
                n => format!("{n} checks"),
            },
            secs(self.elapsed)
        )?;
        match &self.last {
            Some(n) => write!(f, ": {n}"),
            None => f.write_str(" (the last check did not finish before the deadline)"),
        }
    }
}

impl<N: fmt::Display + fmt::Debug> std::error::Error for WaitTimedOut<N> {}

/// Re-runs `check` on `backoff`'s schedule until it is ready or `deadline` passes (`preflight
/// --wait`). Each check is bounded by the time left; `progress` hears about every "not yet"
/// before the sleep. Gives up as soon as the next sleep would end past the deadline.
pub async fn wait_until<R, N, F, Fut, P>(
    backoff: &Backoff,
    deadline: Instant,
    mut check: F,
    mut progress: P,
) -> Result<R, WaitTimedOut<N>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<R, N>>,
    P: FnMut(WaitProgress<'_, N>),
{
    let started = Instant::now();
    let mut schedule = backoff.schedule();
    let mut last = None;
    let mut checks = 0u32;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(WaitTimedOut {
                checks,
                elapsed: started.elapsed(),
                last,
            });
        }
        checks += 1;
        let not_yet = match tokio::time::timeout(remaining, check(checks)).await {
            Ok(Ok(ready)) => return Ok(ready),
            Ok(Err(n)) => n,
            Err(_) => {
                return Err(WaitTimedOut {
                    checks,
                    elapsed: started.elapsed(),
                    last: None,
                })
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let next_in = schedule.next().filter(|s| *s < remaining);
        progress(WaitProgress {
            attempt: checks,
            elapsed: started.elapsed(),
            not_yet: &not_yet,
            next_in,
        });
        let Some(delay) = next_in else {
            return Err(WaitTimedOut {
                checks,
                elapsed: started.elapsed(),
                last: Some(not_yet),
            });
        };
        last = Some(not_yet);
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests;
