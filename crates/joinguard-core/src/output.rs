//! The one printer. Everything joinguard shows a user on stdout goes through here, so a stray
//! print cannot corrupt `-o json`; diagnostics go to stderr through `tracing` or [`say`].

use std::io::Write;

/// Writes `text` to stdout. A closed pipe (`joinguard ... | head`) is not an error worth a panic.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// A progress or error line for a human, on stderr.
pub fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Writes raw bytes to stdout (completion scripts, man pages), like [`stdout`].
pub fn stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

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
pub fn print_version(args: crate::cli::VersionArgs) -> u8 {
    let b = build_info();
    match args.output {
        crate::cli::Output::Json => stdout(&format!(
            "{}\n",
            serde_json::to_string_pretty(&b).unwrap_or_default()
        )),
        crate::cli::Output::Text => stdout(&format!(
            "joinguard {} (commit {}, {}, {}, {} build, {})\n",
            b.version,
            b.git_commit,
            b.target,
            if b.static_binary { "static" } else { "dynamic" },
            b.profile,
            b.rustc,
        )),
    }
    0
}

/// A planned command that is not built yet: say so, exit 2 (invalid input, nothing was done).
pub fn unbuilt(name: &str) -> u8 {
    say(&format!(
        "joinguard {name}: not built yet in this version. Planned: see `joinguard --help` and the \
         project's issue tracker. Nothing was done."
    ));
    2
}
