//! The files under `examples/` are what operators copy: each must stay true to the binary.
//! YAML parses, JoinConfigurations load with joinguard's own reader, every `joinguard ...`
//! command line in them parses with the real flag definitions, and shell scripts pass `bash -n`.
//! (`kubectl create --dry-run=client` needs a server's discovery and the Cluster API CRDs, so the
//! Cluster API kinds are checked field by field; see examples/README.md.)

use std::path::{Path, PathBuf};

use clap::Parser;
use joinguard::cli::{Cli, Command};
use joinguard_core::joinconfig::JoinConfig;
use joinguard_core::yaml;
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    yaml::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Splits a shell command line into words: quotes group, `$VAR`s stay as they are.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Every `joinguard ...` invocation in a text, with `\` continuations joined, cut at the first
/// shell operator (`||`, `&&`, `;`, `>`, `|`).
fn joinguard_commands(text: &str) -> Vec<Vec<String>> {
    let joined = text.replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("joinguard ") {
            let before = &rest[..i];
            let at_word_start = before.is_empty()
                || before.ends_with(' ')
                || before.ends_with('`')
                || before.ends_with("then ");
            let tail = &rest[i..];
            let end = ["||", "&&", ";", ">", "|", "`"]
                .iter()
                .filter_map(|op| tail[1..].find(op).map(|p| p + 1))
                .min()
                .unwrap_or(tail.len());
            let cmd = words(&tail[..end]);
            // Prose like "joinguard never prints" is not a command: commands have a subcommand.
            let is_cmd = at_word_start
                && cmd
                    .get(1)
                    .is_some_and(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
                && Cli::command_names().contains(&cmd[1]);
            if is_cmd {
                found.push(cmd);
            }
            rest = &tail[end.max(1)..];
        }
    }
    found
}

trait CommandNames {
    fn command_names() -> Vec<String>;
}
impl CommandNames for Cli {
    fn command_names() -> Vec<String> {
        use clap::CommandFactory;
        Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect()
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![examples()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_joinguard_command_in_the_examples_parses() {
    let mut n = 0;
    for f in all_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        for cmd in joinguard_commands(&text) {
            if let Err(e) = Cli::try_parse_from(&cmd) {
                panic!("{}: `{}` does not parse:\n{e}", f.display(), cmd.join(" "));
            }
            n += 1;
        }
    }
    // The KCP, the runbook (4) and the script (2) at least.
    assert!(n >= 7, "found only {n} joinguard commands in examples/");
}

/// The README's integration lines are copied as they stand: each must parse too.
#[test]
fn every_joinguard_command_in_the_readme_parses() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let cmds = joinguard_commands(&std::fs::read_to_string(readme).unwrap());
    for cmd in &cmds {
        if let Err(e) = Cli::try_parse_from(cmd) {
            panic!("README.md: `{}` does not parse:\n{e}", cmd.join(" "));
        }
    }
    // The Cluster API line, the kubeadm line and the example's command at least.
    let preflights = cmds.iter().filter(|c| c[1] == "preflight").count();
    assert!(preflights >= 3, "{cmds:?}");
}

#[test]
fn the_capi_control_plane_runs_preflight_on_joins_and_stops_the_script_on_failure() {
    let path = examples().join("capi/kubeadm-control-plane.yaml");
    let d = docs(&path);
    assert_eq!(d.len(), 2);
    let kcp = &d[0];
    assert_eq!(kcp["kind"], "KubeadmControlPlane");
    assert_eq!(kcp["apiVersion"], "controlplane.cluster.x-k8s.io/v1beta1");
    let spec = &kcp["spec"]["kubeadmConfigSpec"];
    let pre: Vec<&str> = spec["preKubeadmCommands"]
        .as_array()
        .expect("preKubeadmCommands is a list")
        .iter()
        .map(|v| v.as_str().expect("each command is a string"))
        .collect();
    let check = pre
        .iter()
        .find(|c| c.contains("joinguard preflight"))
        .expect("a preflight command");
    // Only where the join config exists (not on the init machine), and runcmd stops on failure.
    assert!(check.starts_with("if [ -f /run/kubeadm/kubeadm-join-config.yaml ]"));
    assert!(check.contains("|| exit 1"), "{check}");
    let cmds = joinguard_commands(check);
    assert_eq!(cmds.len(), 1);
    let cli = Cli::try_parse_from(&cmds[0]).unwrap();
    let Command::Preflight(args) = cli.command else {
        panic!("not preflight")
    };
    assert_eq!(
        args.config.as_deref(),
        Some(Path::new("/run/kubeadm/kubeadm-join-config.yaml"))
    );
    assert_eq!(args.wait, Some(std::time::Duration::from_secs(180)));
    assert_eq!(
        args.cert_dir.as_deref(),
        Some(Path::new("/etc/kubernetes/pki"))
    );
    // The binary is installed and checked before it runs, and a failed install ends the script
    // (the script itself: the_capi_install_script_fails_closed_and_installs_only_a_matching_binary).
    let install = pre
        .iter()
        .position(|c| *c == "/usr/local/sbin/joinguard-install || exit 1")
        .expect("the install command, ending the script when it fails");
    let run = pre
        .iter()
        .position(|c| c.contains("joinguard preflight"))
        .unwrap();
    assert!(install < run);
    let files = spec["files"].as_array().expect("files is a list");
    let file = |path: &str| {
        files
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("no file {path}"))
    };
    assert_eq!(
        file("/usr/local/sbin/joinguard-install")["permissions"],
        "0755"
    );
    // As copied: no URL and no checksum (nothing that looks like a real host or a real sum).
    assert_eq!(
        file("/etc/joinguard/release.env")["content"],
        "JOINGUARD_URL=\nJOINGUARD_SHA256=\n"
    );
    // CABPK renders the user data as a Jinja template: nothing in the files may look like one.
    for f in files {
        let c = f["content"].as_str().unwrap();
        assert!(
            !["{{", "{%", "{#"].iter().any(|t| c.contains(t)),
            "{}",
            f["path"]
        );
    }

    // etcd cleanup after preflight, on joins only, from the join's own config: no --etcd-*
    // flag, nothing the node does not have before its join.
    const JOIN_CONFIG: &str = "/run/kubeadm/kubeadm-join-config.yaml";
    let etcd_args = |c: &str| -> joinguard::cli::EtcdMemberArgs {
        let cmds = joinguard_commands(c);
        assert_eq!(cmds.len(), 1, "{c}");
        match Cli::try_parse_from(&cmds[0]).unwrap().command {
            Command::Etcd(joinguard::cli::EtcdCommand::Cleanup(a)) => a.member,
            Command::Etcd(joinguard::cli::EtcdCommand::Promote(a)) => a.member,
            other => panic!("not an etcd command: {other:?}"),
        }
    };
    let cleanup = pre
        .iter()
        .position(|c| c.contains("joinguard etcd cleanup"))
        .expect("an etcd cleanup command");
    assert!(run < cleanup, "cleanup runs after the preflight verdict");
    assert!(pre[cleanup].starts_with("if [ -f /run/kubeadm/kubeadm-join-config.yaml ]"));
    assert!(pre[cleanup].contains("|| exit 1"), "{}", pre[cleanup]);
    let post: Vec<&str> = spec["postKubeadmCommands"]
        .as_array()
        .expect("postKubeadmCommands is a list")
        .iter()
        .map(|v| v.as_str().expect("each command is a string"))
        .collect();
    let promote = post
        .iter()
        .find(|c| c.contains("joinguard etcd promote"))
        .expect("an etcd promote command");
    // Only on a join that did not succeed (CABPK writes the sentinel after `kubeadm join`).
    assert!(
        promote.contains("[ ! -f /run/cluster-api/bootstrap-success.complete ]"),
        "{promote}"
    );
    assert!(
        promote.contains("&& kubeadm join phase control-plane-join mark-control-plane"),
        "{promote}"
    );
    for c in [pre[cleanup], promote] {
        let a = etcd_args(c);
        assert_eq!(a.config.as_deref(), Some(Path::new(JOIN_CONFIG)), "{c}");
        assert!(
            a.etcd_endpoints.is_empty() && a.etcd_cacert.is_none(),
            "{c}"
        );
        assert!(a.etcd_cert.is_none() && a.cert_dir.is_none(), "{c}");
    }

    // What Cluster API renders from joinConfiguration loads with joinguard's reader.
    let mut join = spec["joinConfiguration"].clone();
    let m = join.as_object_mut().unwrap();
    m.insert("apiVersion".into(), "kubeadm.k8s.io/v1beta4".into());
    m.insert("kind".into(), "JoinConfiguration".into());
    m.insert(
        "discovery".into(),
        yaml::from_str::<Value>(
            "bootstrapToken: {apiServerEndpoint: '10.0.0.10:6443', token: abcdef.0123456789abcdef, \
             caCertHashes: ['sha256:00']}",
        )
        .unwrap(),
    );
    m.insert(
        "controlPlane".into(),
        yaml::from_str::<Value>("localAPIEndpoint: {advertiseAddress: 10.0.0.12, bindPort: 6443}")
            .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let rendered = dir.path().join("kubeadm-join-config.yaml");
    std::fs::write(&rendered, yaml::to_string(&join).unwrap()).unwrap();
    let c = JoinConfig::load(&rendered).unwrap();
    assert_eq!(
        c.node_name.as_deref(),
        Some("{{ ds.meta_data.local_hostname }}")
    );
    assert_eq!(c.api_server_endpoint.as_deref(), Some("10.0.0.10:6443"));

    // The MachineHealthCheck waits longer than joinguard's --wait, for control-plane Machines.
    let mhc = &d[1];
    assert_eq!(mhc["kind"], "MachineHealthCheck");
    assert_eq!(mhc["apiVersion"], "cluster.x-k8s.io/v1beta1");
    let startup =
        humantime::parse_duration(mhc["spec"]["nodeStartupTimeout"].as_str().unwrap()).unwrap();
    assert!(startup > std::time::Duration::from_secs(180));
    assert!(mhc["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
        .contains_key("cluster.x-k8s.io/control-plane"));
    assert_eq!(mhc["spec"]["clusterName"], "prod");
    assert_eq!(kcp["metadata"]["namespace"], mhc["metadata"]["namespace"]);
}

/// The install script of the Cluster API example, run with `sh` (dash on Debian, as cloud-init
/// runs it) in a scratch directory: the paths are moved there, nothing else changes.
#[test]
fn the_capi_install_script_fails_closed_and_installs_only_a_matching_binary() {
    let d = docs(&examples().join("capi/kubeadm-control-plane.yaml"));
    let files = d[0]["spec"]["kubeadmConfigSpec"]["files"]
        .as_array()
        .unwrap()
        .clone();
    let content = |path: &str| -> String {
        files.iter().find(|f| f["path"] == path).unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (env, bin, script) = (at("release.env"), at("joinguard"), at("joinguard-install"));
    std::fs::write(
        &script,
        content("/usr/local/sbin/joinguard-install")
            .replace("/etc/joinguard/release.env", &env)
            .replace("/usr/local/bin/joinguard", &bin),
    )
    .unwrap();
    // A stand-in release binary: answers `version` as the real one does.
    let release = at("joinguard-x86_64-linux-musl");
    std::fs::write(&release, "#!/bin/sh\necho \"joinguard 0.1.0 ($1)\"\n").unwrap();
    let sum = {
        let out = std::process::Command::new("sha256sum")
            .arg(&release)
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    let run = |url: &str, sha: &str| {
        std::fs::write(
            &env,
            format!("JOINGUARD_URL={url}\nJOINGUARD_SHA256={sha}\n"),
        )
        .unwrap();
        let out = std::process::Command::new("sh")
            .arg(&script)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let url = format!("file://{release}");
    let installed = || Path::new(&bin).exists();

    // As copied: both empty, nothing in the image -> exit 1, naming what to set.
    std::fs::write(&env, content("/etc/joinguard/release.env")).unwrap();
    let out = std::process::Command::new("sh")
        .arg(&script)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("JOINGUARD_URL is empty") && err.contains("JOINGUARD_SHA256"),
        "{err}"
    );
    assert!(!installed());

    // A URL without a checksum is refused before anything is downloaded.
    let (rc, _, err) = run(&url, "");
    assert_eq!(rc, Some(1), "{err}");
    assert!(err.contains("JOINGUARD_SHA256 is empty"), "{err}");
    assert!(!installed());

    // A wrong checksum: nothing installed, the download removed.
    let (rc, _, err) = run(&url, &"0".repeat(64));
    assert_eq!(rc, Some(1), "{err}");
    assert!(
        err.contains("does not match JOINGUARD_SHA256; not installed"),
        "{err}"
    );
    assert!(!installed() && !Path::new(&format!("{bin}.download")).exists());

    // The right one: installed, executable, and it runs.
    let (rc, stdout, err) = run(&url, &sum);
    assert_eq!(rc, Some(0), "{err}");
    assert_eq!(stdout, "joinguard 0.1.0 (version)\n");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&bin).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    // A binary baked into the image: used as it is, checked when a checksum is given.
    let (rc, _, err) = run("", "");
    assert_eq!(rc, Some(0), "{err}");
    let (rc, _, err) = run("", &sum);
    assert_eq!(rc, Some(0), "{err}");
    let (rc, _, err) = run("", &"0".repeat(64));
    assert_eq!(rc, Some(1), "{err}");
    assert!(
        err.contains("in the node image does not match JOINGUARD_SHA256"),
        "{err}"
    );
}

#[test]
fn the_kubeadm_join_config_loads_with_every_field_joinguard_reads() {
    let c = JoinConfig::load(&examples().join("kubeadm/join-config.yaml")).unwrap();
    assert_eq!(c.api_version, "kubeadm.k8s.io/v1beta4");
    assert_eq!(c.api_server_endpoint.as_deref(), Some("10.0.0.10:6443"));
    assert_eq!(
        c.token.as_ref().map(|t| t.expose()),
        Some("abcdef.0123456789abcdef")
    );
    assert_eq!(c.ca_cert_hashes.len(), 1);
    joinguard_core::discovery::parse_pin(&c.ca_cert_hashes[0]).expect("a well-formed pin");
    joinguard_core::discovery::cluster::parse_certificate_key(
        c.certificate_key.as_ref().unwrap().expose(),
    )
    .expect("a well-formed certificate key");
    assert_eq!(c.node_name.as_deref(), Some("cp-2"));
    assert_eq!(
        c.local_api_endpoint,
        Some((Some("10.0.0.12".parse().unwrap()), 6443))
    );
    assert_eq!(c.ignore_preflight_errors, vec!["NumCPU".to_string()]);
    assert_eq!(
        c.kubernetes_api_call,
        Some(std::time::Duration::from_secs(60))
    );
}

#[test]
fn the_join_script_is_valid_bash_and_checks_before_it_joins() {
    let path = examples().join("kubeadm/join.sh");
    let out = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("set -euo pipefail"));
    // The commands themselves, not the comments that describe them.
    let code: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let at = |what: &str| code.iter().position(|l| l.starts_with(what)).unwrap();
    let (pre, join, status) = (
        at("joinguard preflight"),
        at("kubeadm join"),
        at("joinguard update-status"),
    );
    assert!(pre < join && join < status);
    assert!(text.contains("--skip-phases control-plane-join/mark-control-plane"));
}

#[test]
fn the_command_finder_finds_commands_and_skips_prose() {
    let text = "run `joinguard preflight --wait 3m` first; joinguard never prints the token\n\
                x || joinguard update-status \\\n  --node-name a > log";
    let c = joinguard_commands(text);
    assert_eq!(
        c,
        vec![
            vec!["joinguard", "preflight", "--wait", "3m"],
            vec!["joinguard", "update-status", "--node-name", "a"],
        ]
    );
}
