//! `joinguard etcd promote` and `joinguard etcd cleanup`: flags -> the core's `PromoteSpec` /
//! `CleanupSpec` (TLS material loaded and checked here, so a bad file is exit 2 before any etcd
//! call), progress to stderr as it happens, the outcome to stdout, and the exit code.
//!
//! The certificate directory follows kubeadm: its own etcd client during a join uses
//! `etcd/ca.crt` and `apiserver-etcd-client.{crt,key}` under `--cert-dir`
//! (`etcdutil.NewFromCluster` in `cmd/kubeadm/app/util/etcd/etcd.go`; file names from
//! `cmd/kubeadm/app/constants/constants.go`). A node before its join has no such pair: then a
//! client certificate is minted in memory from `etcd/ca.crt` and `etcd/ca.key`, as preflight
//! mints it. `--config` takes this node's name and address and the `etcdAPICall` budget from the
//! join's JoinConfiguration.

use std::path::Path;
use std::time::Duration;

use joinguard_core::discovery::cluster::etcd_material_from_dir;
use joinguard_core::input::{Input, Named};
use joinguard_core::joinconfig::JoinConfig;
use joinguard_core::learner::{
    self, CleanupOutcome, CleanupSpec, EtcdAccess, MemberRef, NodeRef, PromoteOutcome, PromoteSpec,
};
use joinguard_core::preflight::PreflightInput;
use joinguard_core::probe::identity::{CaBundle, ClientIdentity};
use joinguard_core::retry::AttemptRecord;
use joinguard_core::{Ending, Output as CoreOutput, PreflightSpec, Recorder, Render, Stopped};
use serde::Serialize;
use tokio::runtime::Runtime;

use crate::cli::{named, CleanupArgs, EtcdMemberArgs, Output, PromoteArgs, FLAGS};
use crate::commands::Stderr;
use crate::output::{say, stdout};
use crate::progress::Progress;

/// kubeadm's file names under the certificate directory.
const CA: &str = "etcd/ca.crt";
const CLIENT_CERT: &str = "apiserver-etcd-client.crt";
const CLIENT_KEY: &str = "apiserver-etcd-client.key";

/// kubeadm's `timeouts.etcdAPICall` default (v1beta4; `constants.EtcdAPICallTimeout`).
const ETCD_API_CALL: Duration = Duration::from_secs(120);

struct Resolved {
    access: EtcdAccess,
    node: NodeRef,
    timeout: Duration,
}

/// `need_node`: promote always needs this node's name or address; cleanup not when
/// `--member-id` names the member.
fn resolve(
    rt: &Runtime,
    cmd: &str,
    a: &EtcdMemberArgs,
    need_node: bool,
) -> Result<Resolved, Stopped> {
    // The files first: a directory that is not there is the first thing to fix.
    if let Some(dir) = a.cert_dir.as_deref().filter(|d| !d.is_dir()) {
        return Err(Stopped::Invalid(format!(
            "{} {}: not a directory; expected kubeadm's certificate directory \
             (/etc/kubernetes/pki, with etcd/ca.crt)",
            named(Input::CertDir),
            dir.display()
        )));
    }
    let join = a
        .config
        .as_deref()
        .map(JoinConfig::load)
        .transpose()
        .map_err(|e| Stopped::Invalid(format!("{} {e}", named(Input::Config))))?;
    if let Some(j) = &join {
        for w in &j.warnings {
            say(&format!("[{cmd}] WARNING: --config: {w}"));
        }
    }
    let mut node_name = a
        .node_name
        .clone()
        .or_else(|| join.as_ref().and_then(|j| j.node_name.clone()));
    if node_name.is_none() && a.apiserver_advertise_address.is_none() && a.token.is_some() {
        // kubeadm join names the node (and its etcd member) after the hostname by default.
        node_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        if let Some(n) = &node_name {
            say(&format!(
                "[{cmd}] this node's name: {n} (the hostname, kubeadm join's default; \
                 --node-name overrides it)"
            ));
        }
    }
    let address = a.apiserver_advertise_address.or_else(|| {
        join.as_ref()
            .and_then(|j| j.local_api_endpoint)
            .and_then(|(addr, _)| addr)
    });
    let timeout = a
        .timeout
        .or_else(|| join.as_ref().and_then(|j| j.etcd_api_call))
        .unwrap_or(ETCD_API_CALL);
    if need_node && node_name.is_none() && address.is_none() {
        return Err(Stopped::Invalid(
            "this node's identity is needed: --node-name NAME (its etcd member's name) and/or \
             --apiserver-advertise-address IP (its peer URL is https://IP:2380), or --config \
             with the join's JoinConfiguration"
                .to_string(),
        ));
    }
    let access = if a.etcd_endpoints.is_empty() {
        discovered(rt, cmd, a, timeout)?
    } else {
        let (ca, identity) = match &a.cert_dir {
            Some(dir) => from_cert_dir(cmd, dir).map_err(Stopped::Invalid)?,
            None => {
                let ca = a.etcd_cacert.as_deref().ok_or_else(|| {
                    Stopped::Invalid(format!(
                        "the etcd CA is needed: --etcd-cacert FILE, or --cert-dir DIR \
                         (kubeadm's /etc/kubernetes/pki, which holds {CA})"
                    ))
                })?;
                let ca = CaBundle::load(named(Input::EtcdCacert), ca)
                    .map_err(|e| Stopped::Invalid(e.to_string()))?;
                let identity = match (&a.etcd_cert, &a.etcd_key) {
                    (Some(c), Some(k)) => Some(load_identity(c, k).map_err(Stopped::Invalid)?),
                    _ => None,
                };
                (ca, identity)
            }
        };
        EtcdAccess {
            endpoints: a.etcd_endpoints.clone(),
            ca,
            identity,
        }
    };
    Ok(Resolved {
        access,
        node: NodeRef::new(node_name.as_deref(), address),
        timeout,
    })
}

/// Without `--etcd-endpoints`: the members and the etcd client identity found as preflight
/// finds them from the join's inputs (`PreflightInput::from_spec`, one input model): token
/// discovery from `--config`, then kubeadm-config for the members and kubeadm-certs (the
/// config's `certificateKey`), `--cert-dir`, or the shared certificates kubeadm expects on this
/// node for the identity.
fn discovered(
    rt: &Runtime,
    cmd: &str,
    a: &EtcdMemberArgs,
    timeout: Duration,
) -> Result<EtcdAccess, Stopped> {
    if a.config.is_none() && a.token.is_none() {
        return Err(Stopped::Invalid(
            "the etcd members are needed: --etcd-endpoints URL[,URL...], --config with the \
             join's JoinConfiguration, or the join line (API_SERVER_ENDPOINT --token ... \
             --discovery-token-ca-cert-hash ...); token discovery then finds the members and \
             the etcd CA, as preflight does"
                .to_string(),
        ));
    }
    if a.etcd_cacert.is_some() || a.etcd_cert.is_some() {
        return Err(Stopped::Invalid(
            "--etcd-cacert, --etcd-cert and --etcd-key go with --etcd-endpoints; with \
             --config or the join line the etcd CA comes from the cluster"
                .to_string(),
        ));
    }
    // The kubeadm flags given, for kubeadm's rule on --config beside them.
    let given = [
        (a.config.is_some(), "config"),
        (a.cert_dir.is_some(), "cert-dir"),
        (a.token.is_some(), "token"),
        (
            !a.discovery_token_ca_cert_hash.is_empty(),
            "discovery-token-ca-cert-hash",
        ),
        (
            a.discovery_token_unsafe_skip_ca_verification,
            "discovery-token-unsafe-skip-ca-verification",
        ),
        (a.certificate_key.is_some(), "certificate-key"),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, f)| f.to_string())
    .collect();
    let spec = PreflightSpec {
        api_server_endpoint: a.api_server_endpoint.clone(),
        config: a.config.clone(),
        token: a.token.clone(),
        discovery_token_ca_cert_hash: a.discovery_token_ca_cert_hash.clone(),
        discovery_token_unsafe_skip_ca_verification: a.discovery_token_unsafe_skip_ca_verification,
        certificate_key: a.certificate_key.clone(),
        control_plane: true,
        cert_dir: a.cert_dir.clone(),
        no_bandwidth: true,
        timeout,
        given,
        ..PreflightSpec::new(FLAGS)
    };
    let input = rt.block_on(PreflightInput::from_spec(spec, &Recorder::new(), &Stderr))?;
    EtcdAccess::discovered(input).map_err(|e| Stopped::Failed(format!("{cmd}: {e}")))
}

/// kubeadm's certificate directory: the join's own etcd client identity
/// (`apiserver-etcd-client.{crt,key}`) when both files are there; otherwise a client certificate
/// minted in memory from the etcd CA (`etcd/ca.crt`, `etcd/ca.key`), as preflight mints it.
fn from_cert_dir(cmd: &str, dir: &Path) -> Result<(CaBundle, Option<ClientIdentity>), String> {
    let (cert, key) = (dir.join(CLIENT_CERT), dir.join(CLIENT_KEY));
    if cert.exists() || key.exists() {
        let ca = CaBundle::load(in_cert_dir("the etcd CA in"), &dir.join(CA))
            .map_err(|e| e.to_string())?;
        return Ok((ca, Some(load_identity(&cert, &key)?)));
    }
    let m = etcd_material_from_dir(dir).map_err(|e| format!("--cert-dir: {e}"))?;
    say(&format!(
        "[{cmd}] {}: no {CLIENT_CERT} (a node before its join); minted an in-memory etcd client \
         certificate from {} (valid {}{})",
        dir.display(),
        dir.join("etcd/ca.key").display(),
        joinguard_core::discovery::cluster::minted_lifetime_text(),
        m.ca_key
            .as_deref()
            .map(|k| format!("; etcd CA key {k}"))
            .unwrap_or_default()
    ));
    let ca = CaBundle::from_pem(in_cert_dir("the etcd CA in"), &dir.join(CA), m.ca_pem)
        .map_err(|e| e.to_string())?;
    let minted = Path::new("etcd client certificate");
    let identity = ClientIdentity::from_pem(
        (
            Named::new(Input::EtcdCert, "the minted"),
            minted,
            m.cert_pem,
        ),
        (
            Named::new(Input::EtcdKey, "the key of the minted"),
            minted,
            m.key_pem,
        ),
    )
    .map_err(|e| e.to_string())?;
    Ok((ca, Some(identity)))
}

/// A file of `--cert-dir`, named for an error about it.
fn in_cert_dir(what: &'static str) -> Named {
    Named::new(Input::CertDir, what)
}

fn load_identity(cert: &Path, key: &Path) -> Result<ClientIdentity, String> {
    ClientIdentity::load((named(Input::EtcdCert), cert), (named(Input::EtcdKey), key))
        .map_err(|e| e.to_string())
}

/// promote's and cleanup's events on stderr: the catch-up as a bar on a terminal (plain lines,
/// one per [`crate::progress::PLAIN_EVERY`], otherwise), every other event as a line.
fn progress<'a>(
    cmd: &'static str,
    display: &'a Progress,
) -> impl Fn(&learner::Progress) + Sync + 'a {
    move |p| match p {
        learner::Progress::CatchingUp { member, catch_up } => {
            let percent = match catch_up.learner_index {
                Some(_) if catch_up.leader_index == 0 => 100,
                Some(l) => l.saturating_mul(100) / catch_up.leader_index,
                None => 0,
            };
            display.update(
                percent,
                &format!("learner {member:x}: {catch_up}"),
                &format!("[{cmd}] {p}"),
            );
        }
        other => display.line(&format!("[{cmd}] {other}")),
    }
}

/// The JSON document's version (docs/schema/etcd.schema.json).
const SCHEMA_VERSION: u32 = 2;

/// `etcd promote|cleanup -o json`, as docs/schema/etcd.schema.json describes it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EtcdDocument<'a> {
    schema_version: u32,
    command: &'a str,
    result: &'a str,
    message: &'a str,
    member: Option<MemberDocument>,
    attempts: Vec<AttemptRecord>,
}

/// The member the command acted on.
#[derive(Serialize)]
struct MemberDocument {
    /// Hexadecimal, as etcdctl prints member IDs.
    id: String,
    name: String,
    #[serde(rename = "peerURLs")]
    peer_urls: Vec<String>,
    state: String,
}

fn document(
    cmd: &str,
    result: &str,
    message: &str,
    member: Option<&MemberRef>,
    recorder: &Recorder,
) -> String {
    let doc = EtcdDocument {
        schema_version: SCHEMA_VERSION,
        command: cmd,
        result,
        message,
        member: member.map(|m| MemberDocument {
            id: format!("{:x}", m.id),
            name: m.name.clone(),
            peer_urls: m.peer_urls.clone(),
            state: m.state.to_string(),
        }),
        attempts: recorder.records(),
    };
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}

/// What `etcd promote|cleanup` tells its user: one line, or the JSON document.
struct EtcdResult<'a> {
    cmd: &'a str,
    result: &'a str,
    message: &'a str,
    member: Option<&'a MemberRef>,
    recorder: &'a Recorder,
}

impl Render for EtcdResult<'_> {
    fn render(&self, output: CoreOutput, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        match output {
            CoreOutput::Text => writeln!(w, "[{}] {}", self.cmd, self.message),
            CoreOutput::Json => w.write_all(
                document(
                    self.cmd,
                    self.result,
                    self.message,
                    self.member,
                    self.recorder,
                )
                .as_bytes(),
            ),
        }
    }
}

fn print(
    output: Output,
    cmd: &str,
    result: &str,
    message: &str,
    member: Option<&MemberRef>,
    recorder: &Recorder,
) {
    let r = EtcdResult {
        cmd,
        result,
        message,
        member,
        recorder,
    };
    crate::output::print(&r, output.into());
}

/// `joinguard etcd promote`.
pub fn promote(rt: &Runtime, args: PromoteArgs) -> Ending {
    const CMD: &str = "etcd promote";
    let r = match resolve(rt, CMD, &args.member, true) {
        Ok(r) => r,
        Err(e) => {
            say(&format!("joinguard {CMD}: {e}"));
            return e.ending();
        }
    };
    let spec = PromoteSpec {
        access: r.access,
        node: r.node,
        timeout: r.timeout,
        per_attempt: None,
        learner_metrics_url: Some(args.learner_metrics_url),
    };
    let recorder = Recorder::new();
    let out = args.member.output;
    let display = Progress::stderr("[etcd]");
    let result = rt.block_on(learner::promote::promote_recorded(
        &spec,
        &progress("etcd", &display),
        &recorder,
    ));
    display.finish();
    match result {
        Ok(PromoteOutcome::Promoted {
            member,
            waited,
            promote_calls,
            confirmed_by_reread,
        }) => {
            let how = if confirmed_by_reread {
                ", the answer was lost and the member list confirmed it"
            } else {
                ""
            };
            let msg = format!(
                "promoted {member} after {:.1}s ({promote_calls} MemberPromote call{}{how}); \
                 next: kubeadm join phase control-plane-join mark-control-plane",
                waited.as_secs_f64(),
                if promote_calls == 1 { "" } else { "s" },
            );
            print(out, CMD, "promoted", &msg, Some(&member), &recorder);
            Ending::Done
        }
        Ok(PromoteOutcome::AlreadyVoter { member }) => {
            let msg = format!("{member} is already a voter: nothing to do");
            print(out, CMD, "nothingToDo", &msg, Some(&member), &recorder);
            Ending::Done
        }
        Ok(PromoteOutcome::Refused(why)) => {
            print(out, CMD, "refused", &why, None, &recorder);
            Ending::Failed
        }
        Err(e) => {
            say(&format!("joinguard {CMD}: {e}"));
            if out == Output::Json {
                stdout(&document(CMD, "failed", &e.to_string(), None, &recorder));
            }
            e.ending()
        }
    }
}

/// `joinguard etcd cleanup`.
pub fn cleanup(rt: &Runtime, args: CleanupArgs) -> Ending {
    const CMD: &str = "etcd cleanup";
    let r = match resolve(rt, CMD, &args.member, args.member_id.is_none()) {
        Ok(r) => r,
        Err(e) => {
            say(&format!("joinguard {CMD}: {e}"));
            return e.ending();
        }
    };
    let spec = CleanupSpec {
        access: r.access,
        node: r.node,
        member_id: args.member_id,
        dry_run: args.dry_run,
        timeout: r.timeout,
        per_attempt: None,
    };
    let recorder = Recorder::new();
    let out = args.member.output;
    let quorum_note = |q: &Option<learner::Quorum>| match q {
        Some(q) => format!(" ({q})"),
        None => String::new(),
    };
    let display = Progress::stderr("[etcd]");
    let result = rt.block_on(learner::cleanup::cleanup_recorded(
        &spec,
        &progress("etcd", &display),
        &recorder,
    ));
    display.finish();
    match result {
        Ok(CleanupOutcome::Removed { member, quorum, .. }) => {
            let msg = format!(
                "removed {member}{}; next: a fresh kubeadm join",
                quorum_note(&quorum)
            );
            print(out, CMD, "removed", &msg, Some(&member), &recorder);
            Ending::Done
        }
        Ok(CleanupOutcome::WouldRemove { member, quorum }) => {
            let msg = format!(
                "dry run: would remove {member}{}; nothing was changed",
                quorum_note(&quorum)
            );
            print(out, CMD, "wouldRemove", &msg, Some(&member), &recorder);
            Ending::Done
        }
        Ok(CleanupOutcome::NothingToDo(why)) => {
            print(out, CMD, "nothingToDo", &why, None, &recorder);
            Ending::Done
        }
        Ok(CleanupOutcome::Refused(why)) => {
            print(out, CMD, "refused", &why, None, &recorder);
            Ending::Failed
        }
        Err(e) => {
            say(&format!("joinguard {CMD}: {e}"));
            if out == Output::Json {
                stdout(&document(CMD, "failed", &e.to_string(), None, &recorder));
            }
            e.ending()
        }
    }
}
