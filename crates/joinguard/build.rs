//! Build information for `joinguard version`: the commit, the target triple, the profile and the
//! compiler. Nothing else is generated here; completions and man pages come from `joinguard
//! completion` and `joinguard man` at run time, so they always match the binary.

use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let commit = if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=JOINGUARD_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=JOINGUARD_RUSTC={rustc_version}");
    println!(
        "cargo:rustc-env=JOINGUARD_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
    println!(
        "cargo:rustc-env=JOINGUARD_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_default()
    );
}
