//! The etcd learner after a control-plane join: promote this node's learner once etcd will
//! accept it ([`promote`]), or remove this node's leftover learner or unstarted member so that a
//! fresh join can start over ([`cleanup`]).
//!
//! This module owns finding this node's member ([`member`]), watching a learner catch up, the
//! promotion and the removal, and the rules that keep both safe: a lost answer is resolved by
//! re-reading `MemberList`, never by a blind retry; a started voter is never removed; a removal
//! that would leave the cluster without quorum is refused. Every etcd call runs on the retry
//! layer's etcd policy ([`crate::retry`]).
//!
//! It must not parse flags, print or exit: callers hand in a [`PromoteSpec`] or [`CleanupSpec`]
//! and a progress sink, and get a typed outcome or a [`LearnerError`] back. Wiring it to the
//! `joinguard etcd promote|cleanup` commands is the CLI's job.

pub mod cleanup;
mod metrics;
pub(crate) mod progress;
pub mod promote;
pub mod report;
pub mod resolve;

use std::collections::HashMap;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};
use tokio::time::Instant;

use crate::probe::etcd::{MemberInfo, MemberStatus};
use crate::probe::identity::{CaBundle, ClientIdentity};
use crate::retry::{self, Recorder, RetryError, RetryPolicy};

pub use crate::check::member;
pub use cleanup::{cleanup, CleanupOutcome, CleanupSpec};
pub use member::{MemberRef, MemberState, NodeRef, Quorum};
pub use progress::{CatchUp, Progress};
pub use promote::{promote, PromoteOutcome, PromoteSpec};
pub use report::EtcdReport;
pub use resolve::{resolve, EtcdMemberSpec, Resolved};

/// kubeadm's own per-call cap on etcd calls (`cmd/kubeadm/app/util/etcd/etcd.go`: each call
/// bounded at 2 s, retried every 500 ms until `timeouts.etcdAPICall`). Our default per attempt:
/// a promotion that etcd applied but whose answer is lost is then found out after 2 s.
pub const DEFAULT_PER_ATTEMPT: Duration = Duration::from_secs(2);

/// How to reach the cluster: its client URLs and TLS material, as preflight takes them.
#[derive(Debug)]
pub struct EtcdAccess {
    /// Client URLs (`https://IP:2379`) of the existing members.
    pub endpoints: Vec<String>,
    /// The etcd CA (`/etc/kubernetes/pki/etcd/ca.crt`).
    pub ca: CaBundle,
    /// The client identity (`apiserver-etcd-client` or `etcd/healthcheck-client`).
    pub identity: Option<ClientIdentity>,
}

/// What discovery left out that promote and cleanup need.
#[derive(Debug, thiserror::Error)]
pub enum NotDiscovered {
    #[error(
        "discovery found no etcd CA (an external etcd without kubeadm-certs?); give {explicit}"
    )]
    Ca { explicit: String },
    #[error(
        "discovery found no etcd member (no external etcd, no ClusterStatus, no annotated etcd \
         pod); give {endpoints}"
    )]
    Members { endpoints: &'static str },
}

impl EtcdAccess {
    /// The etcd members and the TLS material to reach them, from the join's validated input
    /// (flags, join configuration, token discovery), as preflight takes them.
    pub fn discovered(
        input: crate::discovery::input::PreflightInput,
    ) -> Result<EtcdAccess, NotDiscovered> {
        let Some(ca) = input.etcd_ca else {
            return Err(NotDiscovered::Ca {
                explicit: input.spelling.explicit_etcd(),
            });
        };
        if input.etcd_clients.is_empty() {
            return Err(NotDiscovered::Members {
                endpoints: input.spelling.spell(crate::input::Input::EtcdEndpoints),
            });
        }
        Ok(EtcdAccess {
            endpoints: input.etcd_clients.iter().map(|t| t.url()).collect(),
            ca,
            identity: input.etcd_identity,
        })
    }
}

/// Why promote or cleanup could not run or finish. A [`PromoteOutcome::Refused`] or
/// [`CleanupOutcome::Refused`] is a decision, not an error.
#[derive(Debug, thiserror::Error)]
pub enum LearnerError {
    /// The spec cannot be used (no endpoint, no way to name this node).
    #[error("{0}")]
    Invalid(String),
    /// An etcd call failed on the retry layer: budget spent, or a permanent or trust failure.
    #[error("{0}")]
    Etcd(#[from] RetryError<EtcdCallError>),
    /// The learner did not catch up (or etcd kept refusing the promotion) within the budget.
    #[error("learner {member:x} was not promoted within {}s: {last}", .waited.as_secs())]
    NotPromoted {
        member: u64,
        waited: Duration,
        last: String,
    },
}

impl LearnerError {
    /// Invalid input, a trust failure, or a failure to reach or change the cluster.
    pub fn ending(&self) -> crate::failure::Ending {
        use crate::failure::Ending;
        match self {
            LearnerError::Invalid(_) => Ending::InvalidInput,
            e if e.trust_failure().is_some() => Ending::Untrusted,
            _ => Ending::Failed,
        }
    }

    /// The trust failure, if that is why it stopped (the CLI exits 3).
    pub fn trust_failure(&self) -> Option<crate::failure::TrustFailure> {
        match self {
            LearnerError::Etcd(e) => e.trust_failure(),
            _ => None,
        }
    }
}

/// The clients one run uses: a balanced one over every endpoint, and one per member endpoint for
/// `Status` (the balancer picks its own member, and progress needs the leader's and the
/// learner's own answers).
pub(crate) struct Conn {
    endpoints: Vec<String>,
    options: ConnectOptions,
    all: Client,
    per_endpoint: HashMap<String, Client>,
    pub(crate) policy: RetryPolicy,
    pub(crate) recorder: Recorder,
}

impl Conn {
    pub(crate) async fn new(
        access: &EtcdAccess,
        budget: Option<Duration>,
        per_attempt: Option<Duration>,
        deadline: Instant,
    ) -> Result<Conn, LearnerError> {
        if access.endpoints.is_empty() {
            return Err(LearnerError::Invalid(
                "no etcd endpoint given: pass the existing members' client URLs".into(),
            ));
        }
        let per_attempt = per_attempt.unwrap_or(DEFAULT_PER_ATTEMPT);
        let mut policy = RetryPolicy::etcd()
            .with_per_attempt(per_attempt)
            .with_deadline(deadline);
        if let Some(b) = budget {
            policy = policy.with_budget(b);
        }
        // etcd-client's own timeouts are a backstop only: the retry layer bounds each attempt.
        let backstop = per_attempt + Duration::from_millis(500);
        let mut tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(access.ca.pem()))
            .timeout(backstop);
        if let Some(id) = &access.identity {
            tls = tls.identity(Identity::from_pem(id.cert_pem(), id.key_pem()));
        }
        let options = ConnectOptions::new()
            .with_connect_timeout(backstop)
            .with_timeout(backstop)
            .with_tls(tls);
        let recorder = Recorder::new();
        let eps = access.endpoints.clone();
        let opts = options.clone();
        // Connecting is lazy in etcd-client (the balanced channel dials on first use); an
        // error here is a bad URL, which the retry layer classifies as permanent.
        let all = retry::run(&policy, "etcd connect", &recorder, None, |_| {
            let (eps, opts) = (eps.clone(), opts.clone());
            async move { Ok::<_, EtcdCallError>(Client::connect(eps, Some(opts)).await?) }
        })
        .await?;
        Ok(Conn {
            endpoints: access.endpoints.clone(),
            options,
            all,
            per_endpoint: HashMap::new(),
            policy,
            recorder,
        })
    }

    /// The client for one endpoint, made on first use.
    async fn client_for(&mut self, endpoint: &str) -> Result<Client, etcd_client::Error> {
        if let Some(c) = self.per_endpoint.get(endpoint) {
            return Ok(c.clone());
        }
        let c = Client::connect([endpoint], Some(self.options.clone())).await?;
        self.per_endpoint.insert(endpoint.to_string(), c.clone());
        Ok(c)
    }

    /// `MemberList` on the retry layer, from `endpoint` when given (the leader, after a lost
    /// answer: it applied the change first), else from the balancer.
    pub(crate) async fn member_list(
        &mut self,
        endpoint: Option<&str>,
    ) -> Result<Vec<MemberInfo>, LearnerError> {
        let client = match endpoint {
            Some(ep) => match self.client_for(ep).await {
                Ok(c) => c,
                Err(_) => self.all.clone(),
            },
            None => self.all.clone(),
        };
        let policy = self.policy.clone();
        let r = retry::run(&policy, "etcd MemberList", &self.recorder, None, |_| {
            let mut c = client.clone();
            async move { Ok::<_, EtcdCallError>(c.member_list().await?) }
        })
        .await?;
        Ok(MemberInfo::from_response(&r))
    }

    /// One `Status` of `endpoint`, a single attempt bounded by the per-attempt timeout: a
    /// member that does not answer is a fact for the progress report, not a reason to wait.
    pub(crate) async fn status_once(&mut self, endpoint: &str) -> Option<MemberStatus> {
        let mut c = self.client_for(endpoint).await.ok()?;
        let within = self.policy.per_attempt;
        match tokio::time::timeout(within, c.status()).await {
            Ok(Ok(s)) => Some(MemberStatus::from_response(&s)),
            _ => None,
        }
    }

    /// Every configured endpoint's `Status` (for the leader and the voters that answer), and
    /// `extra`'s (the learner's own client URL). All at once: a member whose port accepts
    /// connections without serving (a learner applying a snapshot) or a slow dial costs the
    /// round one per-attempt timeout, not one per member. In endpoint order.
    pub(crate) async fn statuses(&mut self, extra: &[String]) -> Vec<(String, MemberStatus)> {
        let mut eps = self.endpoints.clone();
        for e in extra {
            if !eps.contains(e) {
                eps.push(e.clone());
            }
        }
        let within = self.policy.per_attempt;
        let mut set = tokio::task::JoinSet::new();
        for (i, ep) in eps.iter().enumerate() {
            let cached = self.per_endpoint.get(ep).cloned();
            let (ep, options) = (ep.clone(), self.options.clone());
            set.spawn(async move {
                let mut c = match cached {
                    Some(c) => c,
                    None => Client::connect([ep.as_str()], Some(options)).await.ok()?,
                };
                let status = match tokio::time::timeout(within, c.status()).await {
                    Ok(Ok(s)) => Some(MemberStatus::from_response(&s)),
                    _ => None,
                };
                Some((i, ep, status, c))
            });
        }
        let mut out = Vec::new();
        while let Some(joined) = set.join_next().await {
            let Ok(Some((i, ep, status, c))) = joined else {
                continue;
            };
            self.per_endpoint.entry(ep.clone()).or_insert(c);
            if let Some(s) = status {
                out.push((i, ep, s));
            }
        }
        out.sort_by_key(|(i, _, _)| *i);
        out.into_iter().map(|(_, ep, s)| (ep, s)).collect()
    }

    /// A new client (a new connection) for `endpoint`: after an outage the old connection can
    /// sit behind TCP's retransmission backoff for seconds, a new one answers at once.
    pub(crate) fn fresh_options(&self) -> ConnectOptions {
        self.options.clone()
    }

    pub(crate) fn balanced(&self) -> Client {
        self.all.clone()
    }

    pub(crate) async fn client(&mut self, endpoint: &str) -> Result<Client, etcd_client::Error> {
        self.client_for(endpoint).await
    }
}

/// An etcd-client error, classified as the retry layer does with one exception: tonic reports a
/// connection the server closed under an in-flight call as gRPC `Cancelled` ("operation was
/// canceled", source hyper "connection closed"), which `retry::classify_grpc` takes for a
/// permanent status. Seen in the lab while a leader streamed 100 MiB to a learner; for promote
/// and cleanup it is a lost answer, resolved by the re-read like a reset.
#[derive(Debug)]
pub struct EtcdCallError(pub etcd_client::Error);

/// What happened, for a person: the library's error mapped to the condition behind it (refused,
/// timed out, a certificate the verifier rejected and why, etcd's own answer). The raw error is
/// logged at debug level (`-vv`) when the error is made.
impl std::fmt::Display for EtcdCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(&self.0))
    }
}

impl From<etcd_client::Error> for EtcdCallError {
    fn from(e: etcd_client::Error) -> Self {
        tracing::debug!("etcd call failed: {e:?}");
        EtcdCallError(e)
    }
}

/// An etcd client error in words: the deepest cause that names a condition wins (an I/O error
/// kind, a TLS failure), then etcd's own message, then the library's top-level text.
pub(crate) fn describe(e: &etcd_client::Error) -> String {
    use std::error::Error as _;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = match e {
        etcd_client::Error::GRpcStatus(s) => s.source(),
        etcd_client::Error::TransportError(t) => Some(t),
        etcd_client::Error::IoError(io) => Some(io),
        _ => None,
    };
    let mut depth = 0;
    while let (Some(err), true) = (cur, depth < 16) {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return describe_tls(tls);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if let Some(tls) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return describe_tls(tls);
            }
            if let Some(words) = describe_io(io.kind()) {
                return words.to_string();
            }
        }
        cur = err.source();
        depth += 1;
    }
    match e {
        etcd_client::Error::GRpcStatus(s) => match s.code() {
            tonic::Code::DeadlineExceeded => {
                "no answer within the call's timeout (gRPC DeadlineExceeded)".into()
            }
            tonic::Code::Unavailable if s.message().is_empty() => {
                "the member is unavailable (gRPC Unavailable)".into()
            }
            // etcd's own answer ("etcdserver: unhealthy cluster", "member not found"), as
            // etcdctl prints it.
            _ => s.message().to_string(),
        },
        other => other.to_string(),
    }
}

fn describe_io(kind: std::io::ErrorKind) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match kind {
        K::ConnectionRefused => {
            "connection refused: nothing listens on the member's client port (etcd not running, \
             or not this port)"
        }
        K::TimedOut => {
            "connection timed out: no answer from the member (a dark path or a firewall)"
        }
        K::HostUnreachable => "host unreachable: no route to the member",
        K::NetworkUnreachable => "network unreachable: no route to the member",
        K::ConnectionReset => "connection reset by the member",
        K::ConnectionAborted => "connection aborted",
        K::UnexpectedEof => "the member closed the connection",
        _ => return None,
    })
}

fn describe_tls(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(ce) => {
            crate::failure::TrustFailure::from_certificate_error(ce).detail
        }
        rustls::Error::AlertReceived(alert) => format!(
            "the member refused the TLS handshake ({alert:?} alert): it does not accept this \
             client certificate (not signed by the etcd CA it trusts, or none given)"
        ),
        other => format!("TLS handshake failed: {other}"),
    }
}

impl retry::Classify for EtcdCallError {
    fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }

    fn classify(&self) -> retry::ErrorClass {
        if let etcd_client::Error::GRpcStatus(s) = &self.0 {
            if s.code() == tonic::Code::Cancelled && std::error::Error::source(s).is_some() {
                return retry::ErrorClass::Transient(retry::Reason::ConnectionReset);
            }
        }
        retry::Classify::classify(&self.0)
    }
}

/// The text of an etcd gRPC error, for matching etcd's own messages.
pub(crate) fn grpc_message(e: &etcd_client::Error) -> Option<&str> {
    match e {
        etcd_client::Error::GRpcStatus(s) => Some(s.message()),
        _ => None,
    }
}
