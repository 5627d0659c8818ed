//! etcd client-port probes: one gRPC client per member, set-up timed apart from steady state.
//!
//! This module owns talking to one etcd member through `etcd-client`: `Maintenance.Status`
//! (latency and the member's view of the cluster), a linearizable `Range` of a key that does not
//! exist (a quorum read that commits nothing), `Alarm` and `MemberList`, and the two opt-in probes
//! (a self-cleaning lease-bound write and a byte-capped snapshot stream).
//!
//! `Client::status()` takes no endpoint: the balancer picks one. So each [`MemberClient`] is
//! built on exactly one endpoint, and every answer's header is checked to come from the same
//! member id. The first RPC on a client pays for TCP, TLS and HTTP/2 set-up (3-4 round trips);
//! [`connect`] makes that call and reports it as [`MemberClient::setup`], and every later call
//! reuses the established channel (about one round trip).
//!
//! Every call is a single attempt bounded by the per-sample timeout: a failure is a data point
//! (loss), never retried here. The retry layer (`crate::retry`, docs/retries.md) is a separate module.
//!
//! Key material: etcd-client takes PEM, and tonic copies the key into buffers this crate cannot
//! zeroize. Our own copies ([`EtcdTls`]) are zeroized on drop.

use std::fmt;
use std::time::Duration;

use etcd_client::{
    AlarmAction, AlarmType, Certificate, Client, ConnectOptions, GetOptions, Identity, PutOptions,
    TlsOptions,
};
use serde::Serialize;
use tokio::time::Instant;
use zeroize::Zeroizing;

use super::identity::{CaBundle, ClientIdentity, IdentityError, ALPN_H2};
use super::tcp::ms;
use super::tls::{self, TlsClient, TlsFailure, TrustFailure};
use super::ProbeFailure;
use crate::target::{Target, TargetKind};

/// Keys the write probe creates live under this prefix, and nowhere else.
pub const PREFLIGHT_PREFIX: &str = "/joinguard/preflight/";

/// The longest lease the write probe asks for: nothing it writes can outlive this
/// (etcd raises TTLs below its minimum, 2 s by default, `server/lease/lessor.go`).
pub const MAX_WRITE_TTL: Duration = Duration::from_secs(10);

/// TLS settings for etcd-client: the CA and, optionally, the client identity, as PEM.
#[derive(Clone)]
pub struct EtcdTls {
    /// The same trust and identity for our own rustls, to diagnose what etcd-client reports
    /// only as "transport error".
    diagnose: TlsClient,
    ca_pem: Vec<u8>,
    cert_pem: Option<Vec<u8>>,
    key_pem: Option<Zeroizing<Vec<u8>>>,
}

impl fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdTls")
            .field("identity", &self.cert_pem.is_some())
            .finish()
    }
}

impl EtcdTls {
    /// Trust `ca`; present `identity` if given.
    pub fn new(ca: &CaBundle, identity: Option<&ClientIdentity>) -> Result<Self, IdentityError> {
        Ok(EtcdTls {
            diagnose: TlsClient::new(ca, identity, &[ALPN_H2])?,
            ca_pem: ca.pem().to_vec(),
            cert_pem: identity.map(|i| i.cert_pem().to_vec()),
            key_pem: identity.map(|i| Zeroizing::new(i.key_pem().to_vec())),
        })
    }

    fn options(&self, timeout: Duration) -> TlsOptions {
        let mut tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(&self.ca_pem))
            .timeout(timeout);
        if let (Some(cert), Some(key)) = (&self.cert_pem, &self.key_pem) {
            tls = tls.identity(Identity::from_pem(cert, key.as_slice()));
        }
        tls
    }
}

/// Why an etcd call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdFailure {
    /// The endpoint is not a usable URL (or is http:// while TLS is configured).
    #[error("invalid etcd endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    /// No answer within the per-sample timeout.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// Connection refused.
    #[error("connection refused")]
    Refused,
    /// Any other transport error.
    #[error("{0}")]
    Io(String),
    /// The member's certificate is not trusted by the CA (the CLI exits 3).
    #[error("{0}")]
    Untrusted(TrustFailure),
    /// Other TLS failures, including the member rejecting our client certificate.
    #[error("TLS: {0}")]
    Tls(String),
    /// The member is a learner: it rejects linearizable reads and writes.
    #[error("the member is a learner and rejects this request ({0})")]
    Learner(String),
    /// Answers came from a different member than the first one: the endpoint is not pinned to one
    /// member (a load balancer in front of etcd?), so per-member numbers would be meaningless.
    #[error("answer came from member {got:x}, but this endpoint first answered as {expected:x}; it must reach exactly one member")]
    MemberChanged { expected: u64, got: u64 },
    /// A gRPC error status.
    #[error("gRPC {code}: {message}")]
    Rpc { code: String, message: String },
    /// The member answered, but not as expected.
    #[error("{0}")]
    Protocol(String),
}

impl EtcdFailure {
    /// The trust failure, if that is what this is.
    pub fn trust_failure(&self) -> Option<&TrustFailure> {
        match self {
            EtcdFailure::Untrusted(t) => Some(t),
            _ => None,
        }
    }

    /// Classifies an etcd-client error. `timeout` is the per-sample timeout, for the message.
    pub(crate) fn from_client_error(err: &etcd_client::Error, timeout: Duration) -> Self {
        use std::error::Error as _;
        if let etcd_client::Error::InvalidArgs(m) = err {
            return EtcdFailure::Endpoint {
                endpoint: String::new(),
                reason: m.clone(),
            };
        }
        // Look for the root cause first: a connection error is wrapped as gRPC Unavailable.
        let mut source: Option<&(dyn std::error::Error + 'static)> = match err {
            etcd_client::Error::GRpcStatus(s) => s.source(),
            etcd_client::Error::TransportError(t) => Some(t),
            etcd_client::Error::IoError(e) => Some(e),
            _ => None,
        };
        let mut texts = Vec::new();
        while let Some(s) = source {
            if let Some(r) = s.downcast_ref::<rustls::Error>() {
                return Self::from_rustls(r);
            }
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                if let Some(r) = io
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                {
                    return Self::from_rustls(r);
                }
                match io.kind() {
                    std::io::ErrorKind::ConnectionRefused => return EtcdFailure::Refused,
                    std::io::ErrorKind::TimedOut => return EtcdFailure::Timeout(ms(timeout)),
                    _ => {}
                }
            }
            texts.push(s.to_string());
            source = s.source();
        }
        let joined = texts.join(": ");
        // h2 flattens an I/O error from rustls into text, so a TLS alert the member sends after
        // the TLS 1.3 handshake (our client certificate rejected or missing) is only visible here.
        if let Some(at) = joined.find("received fatal alert") {
            return EtcdFailure::Tls(format!(
                "the member rejected the session ({}); etcd requires a client certificate signed \
                 by its CA: check the etcd client certificate and key given",
                &joined[at..]
            ));
        }
        if joined.contains("timed out") || joined.contains("Timeout expired") {
            return EtcdFailure::Timeout(ms(timeout));
        }
        match err {
            etcd_client::Error::GRpcStatus(s) => {
                let message = s.message().to_string();
                if message.contains("not supported for learner") {
                    return EtcdFailure::Learner(message);
                }
                match s.code() {
                    tonic::Code::DeadlineExceeded => EtcdFailure::Timeout(ms(timeout)),
                    tonic::Code::Cancelled if message.contains("Timeout") => {
                        EtcdFailure::Timeout(ms(timeout))
                    }
                    tonic::Code::Unavailable => {
                        let detail = if joined.is_empty() { message } else { joined };
                        if detail.to_ascii_lowercase().contains("tls")
                            || detail.contains("certificate")
                            || detail.contains("HTTP/2 was not negotiated")
                        {
                            EtcdFailure::Tls(detail)
                        } else {
                            EtcdFailure::Io(detail)
                        }
                    }
                    code => EtcdFailure::Rpc {
                        code: format!("{code:?}"),
                        message,
                    },
                }
            }
            other if joined.is_empty() => EtcdFailure::Io(other.to_string()),
            other => EtcdFailure::Io(format!("{other}: {joined}")),
        }
    }

    fn from_rustls(err: &rustls::Error) -> Self {
        match TlsFailure::from_rustls(err, &Default::default()) {
            TlsFailure::Untrusted(t) => EtcdFailure::Untrusted(t),
            other => EtcdFailure::Tls(other.to_string()),
        }
    }
}

impl From<EtcdFailure> for ProbeFailure {
    fn from(f: EtcdFailure) -> Self {
        match f {
            EtcdFailure::Timeout(ms) => ProbeFailure::Timeout(ms),
            EtcdFailure::Refused => ProbeFailure::Refused,
            EtcdFailure::Io(m) => ProbeFailure::Io(m),
            EtcdFailure::Untrusted(t) => ProbeFailure::Tls(t.to_string()),
            EtcdFailure::Tls(m) => ProbeFailure::Tls(m),
            other => ProbeFailure::Protocol(other.to_string()),
        }
    }
}

/// One member's answer to `Maintenance.Status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberStatus {
    /// The answering member (from the response header).
    pub member_id: u64,
    pub cluster_id: u64,
    /// The leader this member knows of; 0 means none.
    pub leader: u64,
    pub raft_term: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
    /// Backend size in bytes (what a learner must receive as a snapshot).
    pub db_size: i64,
    pub db_size_in_use: i64,
    /// The backend quota in bytes (etcd 3.6's `dbSizeQuota`); 0 from earlier versions, and from
    /// 3.6.0 to 3.6.5 when no quota was set.
    pub db_size_quota: i64,
    pub is_learner: bool,
    /// Errors the member reports (e.g. active alarms as text).
    pub errors: Vec<String>,
    /// Server version, e.g. "3.4.23".
    pub version: String,
}

/// One entry of `MemberList`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberInfo {
    pub id: u64,
    /// Empty for a member that has been added but not started.
    pub name: String,
    pub client_urls: Vec<String>,
    pub peer_urls: Vec<String>,
    pub is_learner: bool,
}

impl MemberStatus {
    /// The facts preflight keeps from a `Maintenance.Status` answer. Pure, so that it can be
    /// fuzzed over decoded wire messages (`fuzz/fuzz_targets/etcd_responses.rs`).
    #[doc(hidden)]
    pub fn from_response(resp: &etcd_client::StatusResponse) -> MemberStatus {
        let header = resp.header();
        MemberStatus {
            member_id: header.map(|h| h.member_id()).unwrap_or(0),
            cluster_id: header.map(|h| h.cluster_id()).unwrap_or(0),
            leader: resp.leader(),
            raft_term: resp.raft_term(),
            raft_index: resp.raft_index(),
            raft_applied_index: resp.raft_applied_index(),
            db_size: resp.db_size(),
            db_size_in_use: resp.raft_used_db_size(),
            db_size_quota: resp.db_size_quota(),
            is_learner: resp.is_learner(),
            errors: resp.errors().to_vec(),
            version: resp.version().to_string(),
        }
    }
}

impl MemberInfo {
    /// The members of a `MemberList` answer. Pure, for the same reason as
    /// [`MemberStatus::from_response`].
    #[doc(hidden)]
    pub fn from_response(resp: &etcd_client::MemberListResponse) -> Vec<MemberInfo> {
        resp.members()
            .iter()
            .map(|m| MemberInfo {
                id: m.id(),
                name: m.name().to_string(),
                client_urls: m.client_urls().to_vec(),
                peer_urls: m.peer_urls().to_vec(),
                is_learner: m.is_learner(),
            })
            .collect()
    }

    /// The targets this member adds to a run: its first client URL and its first peer URL, each
    /// when it parses (a member that was added but never started has none).
    pub fn targets(&self) -> (Option<Target>, Option<Target>) {
        let first =
            |urls: &[String], kind| urls.first().and_then(|u| Target::parse_url(kind, u).ok());
        (
            first(&self.client_urls, TargetKind::EtcdClient),
            first(&self.peer_urls, TargetKind::EtcdPeer),
        )
    }
}

/// An active alarm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alarm {
    pub member_id: u64,
    /// "NOSPACE", "CORRUPT", or the raw number.
    pub kind: String,
}

/// What the opt-in write probe measured. Each step is one Raft proposal except the read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteProbe {
    pub key: String,
    pub lease_id: i64,
    /// The TTL etcd granted (it may raise a small request to its minimum).
    pub granted_ttl: i64,
    pub grant: Duration,
    pub put: Duration,
    /// Linearizable read of the key just written.
    pub get: Duration,
    pub revoke: Duration,
}

/// Why the snapshot probe stopped reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotStop {
    /// The byte cap was reached; the stream was cancelled.
    ByteCap,
    /// The time cap was reached; the stream was cancelled.
    TimeCap,
    /// The whole snapshot arrived before either cap.
    Complete,
}

/// What the opt-in bandwidth probe measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotProbe {
    /// Snapshot bytes received.
    pub bytes: u64,
    /// Request to the first chunk (includes the member starting its snapshot).
    pub first_byte: Duration,
    /// Request to the last chunk read.
    pub elapsed: Duration,
    pub stop: SnapshotStop,
    /// Bytes the member said were still to come after the last chunk read.
    pub remaining_bytes: Option<u64>,
}

impl SnapshotProbe {
    /// Throughput over the whole probe, set-up included (conservative for catch-up predictions).
    pub fn bytes_per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 / secs
        } else {
            0.0
        }
    }
}

/// A client bound to exactly one etcd member, with its channel established.
///
/// A clone shares the established channel (HTTP/2 multiplexes the calls), so several streams
/// can measure one member at once.
#[derive(Clone)]
pub struct MemberClient {
    endpoint: String,
    client: Client,
    timeout: Duration,
    member_id: u64,
    absent_key: String,
    setup: Duration,
    first_status: MemberStatus,
}

impl fmt::Debug for MemberClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemberClient")
            .field("endpoint", &self.endpoint)
            .field("member_id", &format_args!("{:x}", self.member_id))
            .field("setup", &self.setup)
            .finish()
    }
}

/// Builds a client for `endpoint` (a client URL such as `https://10.0.0.11:2379`, or
/// `host:port`) and makes the warm-up `Status` call, which pays for TCP, TLS and HTTP/2 set-up.
/// Every RPC on the client, this one included, is bounded by `timeout`.
pub async fn connect(
    endpoint: &str,
    tls: Option<&EtcdTls>,
    timeout: Duration,
) -> Result<MemberClient, EtcdFailure> {
    let bad = |reason: String| EtcdFailure::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    if tls.is_some() && endpoint.starts_with("http://") {
        return Err(bad(
            "TLS certificates are given, so the URL must be https://".into(),
        ));
    }
    // tonic's own timeouts are a backstop; ours (below) decides, so the failure says Timeout.
    let backstop = timeout + Duration::from_millis(500);
    let mut options = ConnectOptions::new()
        .with_connect_timeout(backstop)
        .with_timeout(backstop);
    if let Some(tls) = tls {
        options = options.with_tls(tls.options(backstop));
    }
    let start = Instant::now();
    let client =
        match tokio::time::timeout(timeout, Client::connect([endpoint], Some(options))).await {
            Err(_) => return Err(EtcdFailure::Timeout(ms(timeout))),
            Ok(Err(e)) => {
                return Err(match EtcdFailure::from_client_error(&e, timeout) {
                    EtcdFailure::Endpoint { reason, .. } => bad(reason),
                    other => other,
                })
            }
            Ok(Ok(c)) => c,
        };
    let mut member = MemberClient {
        endpoint: endpoint.to_string(),
        client,
        timeout,
        member_id: 0,
        absent_key: format!("{PREFLIGHT_PREFIX}absent-{:016x}", rand::random::<u64>()),
        setup: Duration::ZERO,
        first_status: MemberStatus {
            member_id: 0,
            cluster_id: 0,
            leader: 0,
            raft_term: 0,
            raft_index: 0,
            raft_applied_index: 0,
            db_size: 0,
            db_size_in_use: 0,
            db_size_quota: 0,
            is_learner: false,
            errors: Vec::new(),
            version: String::new(),
        },
    };
    let left = timeout.saturating_sub(start.elapsed());
    let (_, status) = match member.status_within(left).await {
        Ok(ok) => ok,
        Err(e) => {
            let left = timeout.saturating_sub(start.elapsed());
            return Err(match (tls, &e) {
                (Some(tls), EtcdFailure::Rpc { .. } | EtcdFailure::Io(_) | EtcdFailure::Tls(_))
                    if !left.is_zero() =>
                {
                    diagnose(endpoint, tls, left).await.unwrap_or(e)
                }
                _ => e,
            });
        }
    };
    member.setup = start.elapsed();
    member.member_id = status.member_id;
    member.first_status = status;
    Ok(member)
}

/// The HTTP/2 client connection preface (RFC 9113 section 3.4) followed by an empty SETTINGS
/// frame: enough for etcd's listener (cmux) to answer, so a rejection alert cannot be missed.
const H2_HELLO: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// etcd-client (through h2) often reports a TLS alert as a bare "transport error" or "connection
/// closed". Repeat the TLS part with our own client to find out whether TLS was the cause.
async fn diagnose(endpoint: &str, tls: &EtcdTls, timeout: Duration) -> Option<EtcdFailure> {
    let target = Target::parse_url(TargetKind::EtcdClient, endpoint).ok()?;
    match tls::confirm(&target.host, target.port, &tls.diagnose, H2_HELLO, timeout).await {
        Ok(_) => None,
        Err(TlsFailure::Untrusted(t)) => Some(EtcdFailure::Untrusted(t)),
        Err(TlsFailure::Handshake(m)) => Some(EtcdFailure::Tls(m)),
        Err(_) => None,
    }
}

impl MemberClient {
    /// The endpoint this client is bound to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The member id that answered the warm-up call.
    pub fn member_id(&self) -> u64 {
        self.member_id
    }

    /// The warm-up call's time: TCP + TLS + HTTP/2 set-up + one Status.
    pub fn setup(&self) -> Duration {
        self.setup
    }

    /// The warm-up call's answer.
    pub fn first_status(&self) -> &MemberStatus {
        &self.first_status
    }

    async fn call<T, F>(&mut self, within: Duration, f: F) -> Result<(Duration, T), EtcdFailure>
    where
        F: AsyncFnOnce(&mut Client) -> Result<T, etcd_client::Error>,
    {
        let t0 = Instant::now();
        match tokio::time::timeout(within, f(&mut self.client)).await {
            Err(_) => Err(EtcdFailure::Timeout(ms(self.timeout))),
            Ok(Err(e)) => Err(EtcdFailure::from_client_error(&e, self.timeout)),
            Ok(Ok(v)) => Ok((t0.elapsed(), v)),
        }
    }

    fn check_member(
        &self,
        header: Option<&etcd_client::ResponseHeader>,
    ) -> Result<(), EtcdFailure> {
        let got = header.map(|h| h.member_id()).unwrap_or(0);
        if self.member_id != 0 && got != self.member_id {
            return Err(EtcdFailure::MemberChanged {
                expected: self.member_id,
                got,
            });
        }
        Ok(())
    }

    async fn status_within(
        &mut self,
        within: Duration,
    ) -> Result<(Duration, MemberStatus), EtcdFailure> {
        let (took, resp) = self.call(within, async |c| c.status().await).await?;
        self.check_member(resp.header())?;
        Ok((took, MemberStatus::from_response(&resp)))
    }

    /// One timed `Maintenance.Status` on the established channel. Fails with
    /// [`EtcdFailure::MemberChanged`] if another member answered.
    pub async fn status(&mut self) -> Result<(Duration, MemberStatus), EtcdFailure> {
        self.status_within(self.timeout).await
    }

    /// One timed linearizable `Range` of a key that does not exist: member to leader to quorum,
    /// no write. Learners reject it ([`EtcdFailure::Learner`]).
    pub async fn quorum_read(&mut self) -> Result<Duration, EtcdFailure> {
        let key = self.absent_key.clone();
        let opts = GetOptions::new().with_keys_only().with_limit(1);
        let (took, resp) = self
            .call(self.timeout, async move |c| c.get(key, Some(opts)).await)
            .await?;
        self.check_member(resp.header())?;
        if !resp.kvs().is_empty() {
            return Err(EtcdFailure::Protocol(format!(
                "{}: the probe key {} exists; expected it to be absent",
                self.endpoint, self.absent_key
            )));
        }
        Ok(took)
    }

    /// Active alarms (cluster-wide, as this member knows them).
    pub async fn alarms(&mut self) -> Result<Vec<Alarm>, EtcdFailure> {
        let (_, resp) = self
            .call(self.timeout, async |c| {
                c.alarm(AlarmAction::Get, AlarmType::None, None).await
            })
            .await?;
        Ok(resp
            .alarms()
            .iter()
            .map(|a| Alarm {
                member_id: a.member_id(),
                kind: match a.alarm() {
                    AlarmType::Nospace => "NOSPACE".to_string(),
                    AlarmType::Corrupt => "CORRUPT".to_string(),
                    AlarmType::None => "NONE".to_string(),
                },
            })
            .collect())
    }

    /// The cluster's members, as this member knows them.
    pub async fn member_list(&mut self) -> Result<Vec<MemberInfo>, EtcdFailure> {
        let (_, resp) = self
            .call(self.timeout, async |c| c.member_list().await)
            .await?;
        Ok(MemberInfo::from_response(&resp))
    }

    /// The opt-in write probe: `LeaseGrant(ttl)`, `Put` of `PREFLIGHT_PREFIX<node>/<random>`
    /// bound to that lease, a linearizable `Get` of it, `LeaseRevoke`. `ttl` is capped at
    /// [`MAX_WRITE_TTL`]. If any step after the grant fails, the lease is still revoked (best
    /// effort); if that fails too, the key disappears when the lease expires.
    pub async fn write_probe(
        &mut self,
        node: &str,
        ttl: Duration,
    ) -> Result<WriteProbe, EtcdFailure> {
        let ttl_secs = ttl
            .clamp(Duration::from_secs(1), MAX_WRITE_TTL)
            .as_secs_f64();
        let ttl_secs = ttl_secs.ceil() as i64;
        let (grant, lease) = self
            .call(self.timeout, async |c| c.lease_grant(ttl_secs, None).await)
            .await?;
        let lease_id = lease.id();
        if let Err(why) = check_lease(lease_id, lease.ttl(), ttl_secs) {
            // Nothing is written under a lease we cannot account for; give it back if we can.
            if lease_id > 0 {
                let _ = self
                    .call(self.timeout, async |c| c.lease_revoke(lease_id).await)
                    .await;
            }
            return Err(EtcdFailure::Protocol(format!(
                "write probe: {why}; nothing was written"
            )));
        }
        let key = format!(
            "{PREFLIGHT_PREFIX}{}/{:016x}",
            sanitize_node(node),
            rand::random::<u64>()
        );
        let value = format!("joinguard preflight write probe; lease {lease_id:x}");
        let result = self.write_steps(&key, &value, lease_id).await;
        match result {
            Ok((put, get)) => {
                let (revoke, _) = self
                    .call(self.timeout, async |c| c.lease_revoke(lease_id).await)
                    .await?;
                Ok(WriteProbe {
                    key,
                    lease_id,
                    granted_ttl: lease.ttl(),
                    grant,
                    put,
                    get,
                    revoke,
                })
            }
            Err(e) => {
                if let Err(revoke_err) = self
                    .call(self.timeout, async |c| c.lease_revoke(lease_id).await)
                    .await
                {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        lease = lease_id,
                        error = %revoke_err,
                        "write probe: revoking the lease failed; its key expires with the lease"
                    );
                }
                Err(e)
            }
        }
    }

    async fn write_steps(
        &mut self,
        key: &str,
        value: &str,
        lease_id: i64,
    ) -> Result<(Duration, Duration), EtcdFailure> {
        let (k, v) = (key.to_string(), value.to_string());
        let (put, _) = self
            .call(self.timeout, async move |c| {
                c.put(k, v, Some(PutOptions::new().with_lease(lease_id)))
                    .await
            })
            .await?;
        let k = key.to_string();
        let (get, resp) = self
            .call(self.timeout, async move |c| c.get(k, None).await)
            .await?;
        match resp.kvs().first() {
            Some(kv) if kv.value() == value.as_bytes() => Ok((put, get)),
            _ => Err(EtcdFailure::Protocol(format!(
                "{}: write probe read back a different value for {key}",
                self.endpoint
            ))),
        }
    }

    /// The opt-in bandwidth probe: reads the `Maintenance.Snapshot` stream until `byte_cap` bytes
    /// or `time_cap` have passed, then drops the stream (which cancels it on the member).
    pub async fn snapshot_probe(
        &mut self,
        byte_cap: u64,
        time_cap: Duration,
    ) -> Result<SnapshotProbe, EtcdFailure> {
        let start = Instant::now();
        let deadline = start + time_cap;
        let timeout = self.timeout;
        let mut stream = match tokio::time::timeout_at(deadline, self.client.snapshot()).await {
            Err(_) => return Err(EtcdFailure::Timeout(ms(time_cap))),
            Ok(Err(e)) => return Err(EtcdFailure::from_client_error(&e, timeout)),
            Ok(Ok(s)) => s,
        };
        let mut bytes = 0u64;
        let mut first_byte = None;
        let mut elapsed = Duration::ZERO;
        let mut remaining_bytes = None;
        let stop = loop {
            if bytes >= byte_cap {
                break SnapshotStop::ByteCap;
            }
            match tokio::time::timeout_at(deadline, stream.message()).await {
                Err(_) => break SnapshotStop::TimeCap,
                Ok(Err(e)) => return Err(EtcdFailure::from_client_error(&e, timeout)),
                Ok(Ok(None)) => break SnapshotStop::Complete,
                Ok(Ok(Some(chunk))) => {
                    elapsed = start.elapsed();
                    first_byte.get_or_insert(elapsed);
                    bytes += chunk.blob().len() as u64;
                    remaining_bytes = Some(chunk.remaining_bytes());
                    if chunk.remaining_bytes() == 0 {
                        break SnapshotStop::Complete;
                    }
                }
            }
        };
        drop(stream);
        if bytes == 0 && stop == SnapshotStop::TimeCap {
            return Err(EtcdFailure::Timeout(ms(time_cap)));
        }
        Ok(SnapshotProbe {
            bytes,
            first_byte: first_byte.unwrap_or(elapsed),
            elapsed,
            stop,
            remaining_bytes,
        })
    }
}

/// A node name as one key segment: no `/`, nothing that needs escaping.
fn sanitize_node(node: &str) -> String {
    let s: String = node
        .chars()
        .take(63)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unknown-node".to_string()
    } else {
        s
    }
}

/// A lease grant the write probe does not write under.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LeaseGrantError {
    #[error("etcd granted lease id {0}, not a lease")]
    Id(i64),
    #[error(
        "etcd granted lease {id:x} a TTL of {granted} s for the {requested} s asked (etcd raises \
         a short TTL to at most 75 s)"
    )]
    Ttl {
        id: i64,
        granted: i64,
        requested: i64,
    },
}

/// Whether a granted lease is the one asked for: a positive id, and a TTL from the request up to
/// what etcd may raise it to. etcd raises a TTL below its minimum, 1.5 x the election timeout
/// (`minTTL` in `server/lease/lessor.go`), so a 10 s request may come back larger on a cluster
/// with a long election timeout, never above 75 s (etcd's election timeout is at most 50 s).
pub(crate) fn check_lease(
    id: i64,
    granted_ttl: i64,
    requested_ttl: i64,
) -> Result<(), LeaseGrantError> {
    const MAX_RAISED: i64 = 75;
    if id <= 0 {
        return Err(LeaseGrantError::Id(id));
    }
    if granted_ttl <= 0 || granted_ttl > requested_ttl.max(MAX_RAISED) {
        return Err(LeaseGrantError::Ttl {
            id,
            granted: granted_ttl,
            requested: requested_ttl,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_become_one_key_segment() {
        assert_eq!(sanitize_node("cp-1.example"), "cp-1.example");
        assert_eq!(sanitize_node("a/b c"), "a_b_c");
        assert_eq!(sanitize_node(""), "unknown-node");
    }

    #[test]
    fn a_lease_is_checked_before_anything_is_written_under_it() {
        assert!(check_lease(0x1234, 10, 10).is_ok());
        // etcd's minTTL raise (1.5 x a long election timeout).
        assert!(check_lease(0x1234, 15, 10).is_ok());
        assert!(check_lease(0x1234, 75, 10).is_ok());
        for (id, ttl) in [
            (0, 10),
            (-5, 10),
            (0x1234, 0),
            (0x1234, -1),
            (0x1234, 76),
            (7, 3600),
        ] {
            let e = check_lease(id, ttl, 10).unwrap_err();
            assert!(e.to_string().contains("granted"), "{id} {ttl}: {e}");
        }
    }
}
