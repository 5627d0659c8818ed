//! Bad input as an operator types it, without a network: each case asserts the message on
//! stderr and the exit code for invalid input (2), not clap's own advice or a library's text.

use std::process::Command;

/// Runs the binary; returns (exit code, stderr).
fn joinguard(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_joinguard"))
        .args(args)
        .env_remove("JOINGUARD_TOKEN")
        .env_remove("JOINGUARD_CERTIFICATE_KEY")
        .output()
        .expect("run joinguard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `etcd promote` and `etcd cleanup` with nothing given: the command is named once, by the
/// prefix, and the message says what to give.
#[test]
fn etcd_commands_without_inputs_name_the_command_once() {
    for (args, needed) in [
        (
            &["promote"][..],
            "this node's identity is needed: --node-name NAME",
        ),
        (
            &["cleanup"],
            "this node's identity is needed: --node-name NAME",
        ),
        (
            &["cleanup", "--member-id", "8e9e05c52164694d"],
            "the etcd members are needed: --etcd-endpoints",
        ),
    ] {
        let cmd = args[0];
        let (code, err) = joinguard(&[&["etcd"][..], args].concat());
        assert_eq!(code, 2, "{err}");
        let line = err.lines().last().unwrap_or_default();
        assert!(
            line.starts_with(&format!("joinguard etcd {cmd}: {needed}")),
            "{err}"
        );
        assert_eq!(line.matches(cmd).count(), 1, "{err}");
    }
}
