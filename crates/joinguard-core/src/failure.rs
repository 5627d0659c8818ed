//! Why a command stopped before it could judge anything, typed by what the binary's exit-code
//! map needs to know: bad input (exit 2), a trust failure (exit 3) or a failure to reach or read
//! the cluster (exit 1). The message is the one the user sees, wording unchanged.
//!
//! [`TrustFailure`] is the one trust type: a certificate our verifier rejected (TLS probes, etcd,
//! the API), a CA pin or a cluster-info signature that did not match (discovery). Every layer
//! that meets one carries it as it is, adding where it happened ([`TrustFailure::context`]).
//! Foundation: imports nothing from the crate.

use std::time::SystemTime;

/// The validity window and subject of a server's leaf certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertValidity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// Subject DN, for messages.
    pub subject: String,
}

/// What could not be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrustFailureKind {
    /// The chain does not lead to the given CA: the wrong `--*-cacert`, or a different cluster.
    UnknownIssuer,
    /// A signature in the chain does not verify.
    BadSignature,
    /// The certificate is not valid for the host dialled (no matching SAN).
    NameMismatch,
    /// Now is after notAfter (or this host's clock is ahead).
    Expired,
    /// Now is before notBefore (or this host's clock is behind).
    NotYetValid,
    /// Any other certificate error (bad encoding, wrong key usage, ...).
    Other,
    /// The cluster CA matches none of the `--discovery-token-ca-cert-hash` pins.
    CaPin,
    /// cluster-info carries no valid signature for the token (JWS).
    Signature,
    /// cluster-info is not what kubeadm signs, or changed between two fetches.
    Content,
    /// A TLS failure a transport reported only as text (a gRPC status, a hyper error).
    Transport,
}

/// An answer that could not be trusted. Never retried, never downgraded; the CLI exits 3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustFailure {
    pub kind: TrustFailureKind,
    /// What did not verify, and what to check: the whole message but for its context.
    pub detail: String,
    /// The rejected certificate's validity window, when it could be captured (for clock skew).
    pub server_cert: Option<CertValidity>,
    /// Where it happened, outermost first, each with its own separator (`10.0.0.11:2379: `).
    context: String,
}

impl TrustFailure {
    pub fn new(kind: TrustFailureKind, detail: impl Into<String>) -> TrustFailure {
        TrustFailure {
            kind,
            detail: detail.into(),
            server_cert: None,
            context: String::new(),
        }
    }

    /// The same failure, its message prefixed with `prefix` (`10.0.0.11:2379: `).
    pub fn context(mut self, prefix: &str) -> TrustFailure {
        self.context.insert_str(0, prefix);
        self
    }
}

impl std::fmt::Display for TrustFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.context)?;
        f.write_str(&self.detail)
    }
}

impl std::error::Error for TrustFailure {}

/// A command that stopped early, with the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A flag, config field or file could not be used; nothing was judged.
    #[error("{0}")]
    Invalid(String),
    /// A CA pin, JWS signature or certificate did not verify. Never retried or downgraded.
    #[error("{0}")]
    Trust(TrustFailure),
    /// The cluster could not be reached or read within the budget.
    #[error("{0}")]
    Failed(String),
}

impl Stopped {
    /// The same kind, its message prefixed (`cluster: ...`).
    pub fn context(self, prefix: &str) -> Stopped {
        match self {
            Stopped::Invalid(m) => Stopped::Invalid(format!("{prefix}{m}")),
            Stopped::Trust(t) => Stopped::Trust(t.context(prefix)),
            Stopped::Failed(m) => Stopped::Failed(format!("{prefix}{m}")),
        }
    }
}
