//! The lab suites: the real `joinguard` binary run inside netlab labs (real etcd with mTLS, the
//! API server stand-in), in one test binary so the lab fabric, etcd client and harness are linked
//! once, not once per suite (ripgrep's `tests/integration.rs` with `mod` files).
//!
//! Every suite builds its environment with `netlab::harness` and takes its lock, so one lab runs
//! at a time in this binary under `cargo test`. `scripts/test` runs the tests under
//! cargo-nextest, one process each: `.config/nextest.toml` runs two labs at once and the tests
//! that assert timing alone (docs/testing.md); a new test that reads a clock or a measured figure
//! goes on its list. Test names keep the `etcd` word where they talk to etcd: `scripts/test`
//! runs the tests named `etcd` again on etcd 3.5 and picks suites by module path.

use netlab::harness::EnvBuilder;

mod deep_queue;
mod discovery;
mod hostile;
mod ipv6;
mod join_oracle;
mod kubeadm_join;
mod monitor;
mod pmtu;
mod preflight;
mod proxy;
mod schema;
mod trace;
mod unfit;
mod update_status;

/// The binary under test.
pub const JOINGUARD: &str = env!("CARGO_BIN_EXE_joinguard");

/// The harness's environment builder, running `joinguard`.
pub fn lab() -> EnvBuilder {
    EnvBuilder::new().bin(JOINGUARD)
}
