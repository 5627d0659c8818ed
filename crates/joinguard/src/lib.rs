//! joinguard: fail-fast network pre-checks and self-healing retries for kubeadm control-plane
//! joins.
//!
//! The library holds all logic; the binary only parses flags and calls it. Data flows
//! inputs -> plan -> probes -> stats -> checks -> report (DESIGN section 3).

pub mod check;
pub mod cli;
pub mod discovery;
pub mod joinconfig;
pub mod key;
pub mod kube;
pub mod kubeadm;
pub mod learner;
pub mod limits;
pub mod logging;
pub mod manual;
pub mod monitor;
pub mod output;
pub mod preflight;
pub mod probe;
pub mod report;
pub mod retry;
pub mod sampling;
pub mod stats;
pub mod status;
pub mod target;
pub mod trace;
