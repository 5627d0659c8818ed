//! Why a command stopped before it could judge anything, typed by what the binary's exit-code
//! map needs to know: bad input (exit 2), a trust failure (exit 3) or a failure to reach or read
//! the cluster (exit 1). The message is the one the user sees, wording unchanged.
//! Foundation: imports nothing from the crate.

/// A command that stopped early, with the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A flag, config field or file could not be used; nothing was judged.
    #[error("{0}")]
    Invalid(String),
    /// A CA pin, JWS signature or certificate did not verify. Never retried or downgraded.
    #[error("{0}")]
    Trust(String),
    /// The cluster could not be reached or read within the budget.
    #[error("{0}")]
    Failed(String),
}

impl Stopped {
    /// The same kind, its message prefixed (`cluster: ...`).
    pub fn context(self, prefix: &str) -> Stopped {
        match self {
            Stopped::Invalid(m) => Stopped::Invalid(format!("{prefix}{m}")),
            Stopped::Trust(m) => Stopped::Trust(format!("{prefix}{m}")),
            Stopped::Failed(m) => Stopped::Failed(format!("{prefix}{m}")),
        }
    }
}
