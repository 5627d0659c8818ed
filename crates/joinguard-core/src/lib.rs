//! joinguard-core: everything joinguard does, behind plain types. kubeadm control-plane joins
//! fail fast on an unfit network (`preflight`), write their status with retries that recover
//! from transient API faults (`status`), and can be traced (`trace`) and watched (`monitor`).
//!
//! The core never parses flags, prints or exits. Callers hand it a spec (`spec`: what the flags
//! or the monitor's YAML say), a [`Notes`] sink for progress lines, and a tokio runtime; it
//! hands back values (reports, [`preflight::Outcome`], [`Stopped`]) that the caller prints and
//! maps to an exit code. The modules form layers (docs/architecture.md; `tests/layering.rs`
//! checks them): foundation, then kube/kubeadm/retry, then probe/sampling/check/trace, then
//! discovery, then the commands. Data flows spec -> validated input -> plan -> probes -> stats
//! -> checks -> report.

pub mod check;
pub mod discovery;
pub mod duration;
pub(crate) mod failure;
pub mod input;
pub mod joinconfig;
pub(crate) mod key;
pub mod kube;
pub mod kubeadm;
pub mod learner;
pub(crate) mod limits;
pub mod logging;
pub mod monitor;
pub(crate) mod notes;
pub mod preflight;
pub mod probe;
pub mod proxy;
pub(crate) mod render;
pub mod retry;
pub(crate) mod sample;
pub(crate) mod sampling;
pub mod secret;
pub mod spec;
pub(crate) mod stats;
pub mod status;
pub mod target;
pub mod trace;
mod wire;
pub mod yaml;

// The short paths: the types a caller of the core names most.
pub use check::{CheckName, CheckResult, IgnoreList, Status, Thresholds, Verdict};
pub use discovery::{BootstrapToken, CaTrust, Discovered, DiscoveryError};
pub use failure::{Ending, Stopped, TrustFailure};
pub use monitor::{Monitor, MonitorConfig};
pub use notes::{Notes, Silent};
pub use preflight::report::Report;
pub use preflight::{Outcome, PreflightInput};
pub use render::Render;
pub use retry::{Recorder, RetryPolicy};
pub use spec::{Output, PreflightSpec, StatusSpec, TraceProtocol, TraceSpec};
pub use status::{StatusInput, StatusReport};
pub use target::{Target, TargetKind};
pub use trace::{PathTrace, TraceInput};
