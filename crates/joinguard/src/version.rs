//! `joinguard version`: the build information fixed at build time (see build.rs).

use crate::output;
use joinguard_core::Ending;

/// What `joinguard version` reports, fixed at build time (see build.rs).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BuildInfo {
    pub schema_version: u32,
    pub version: &'static str,
    pub git_commit: &'static str,
    pub target: &'static str,
    pub profile: &'static str,
    pub rustc: &'static str,
    /// Statically linked (crt-static: the musl build, or glibc with +crt-static).
    #[serde(rename = "static")]
    pub static_binary: bool,
}

/// The build information of this binary.
pub fn build_info() -> BuildInfo {
    BuildInfo {
        schema_version: 1,
        version: env!("CARGO_PKG_VERSION"),
        git_commit: env!("JOINGUARD_GIT_COMMIT"),
        target: env!("JOINGUARD_TARGET"),
        profile: env!("JOINGUARD_PROFILE"),
        rustc: env!("JOINGUARD_RUSTC"),
        static_binary: cfg!(target_feature = "crt-static"),
    }
}

/// `joinguard version [-o json]`.
pub fn print_version(args: crate::cli::VersionArgs) -> Ending {
    let b = build_info();
    match args.output {
        crate::cli::Output::Json => output::stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&b).unwrap_or_default()
        )),
        crate::cli::Output::Text => output::stdout(&format!(
            "joinguard {} (commit {}, {}, {}, {} build, {})\n",
            b.version,
            b.git_commit,
            b.target,
            if b.static_binary { "static" } else { "dynamic" },
            b.profile,
            b.rustc,
        )),
    }
    Ending::Done
}
