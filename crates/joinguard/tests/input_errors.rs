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

/// A negative duration is refused by the value parser with its reason, not by clap as an unknown
/// flag with the advice to write `-- -1`.
#[test]
fn negative_durations_are_refused_as_negative() {
    for args in [
        &["preflight", "10.0.0.10:6443", "--timeout", "-1s"][..],
        &["preflight", "10.0.0.10:6443", "--wait", "-5m"],
        &[
            "preflight",
            "10.0.0.10:6443",
            "--etcd-heartbeat-interval=-100ms",
        ],
        &["trace", "10.0.0.12", "--interval", "-.5s"],
        &["update-status", "--timeout", "-2m"],
        &["etcd", "promote", "--node-name", "cp-2", "--timeout", "-1s"],
    ] {
        let (code, err) = joinguard(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains("a duration cannot be negative"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("-- -"), "{args:?}: {err}");
    }
    // A flag where the value should be is still a missing value, not a negative duration.
    let (code, err) = joinguard(&["preflight", "10.0.0.10:6443", "--wait", "--timeout", "5s"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("a value is required for '--wait <DURATION>'"),
        "{err}"
    );
}

/// An IPv6 address without brackets, wherever an endpoint is read: the message gives the
/// bracketed form to write instead of the URL parser's "empty host".
#[test]
fn unbracketed_ipv6_endpoints_get_the_bracketed_form() {
    let (code, err) = joinguard(&["preflight", "::1:6443"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs brackets; write [::1]:6443"), "{err}");

    // The server of a kubeconfig (update-status), which is read by another parser.
    let dir = tempfile::tempdir().unwrap();
    let ca = netlab::pki::TestCa::new("kubernetes").unwrap();
    let ca_file = ca.write_ca(dir.path(), "ca").unwrap();
    let kubeconfig = dir.path().join("admin.conf");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    \
             server: https://::1:6443\n    certificate-authority: {}\nusers:\n- name: u\n  \
             user:\n    token: abc\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
             current-context: x\n",
            ca_file.display()
        ),
    )
    .unwrap();
    let (code, err) = joinguard(&[
        "update-status",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--node-name",
        "cp-2",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("needs brackets; write https://[::1]:6443"),
        "{err}"
    );
    assert!(!err.contains("empty host"), "{err}");

    // A proxy in the environment.
    let out = Command::new(env!("CARGO_BIN_EXE_joinguard"))
        .args(["preflight", "10.0.0.10:6443"])
        .env("HTTPS_PROXY", "::1:3128")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("HTTPS_PROXY: an IPv6 address in a URL needs brackets; write [::1]:3128"),
        "{err}"
    );
    assert!(!err.contains("empty host"), "{err}");
}
