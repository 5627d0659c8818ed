//! `joinguard etcd promote` and `joinguard etcd cleanup`: flags -> the core's `EtcdMemberSpec`,
//! which `learner::resolve` checks and completes (TLS material loaded and checked there, so a
//! bad file is exit 2 before any etcd call; the certificate directory, the join configuration,
//! token discovery), progress to stderr as it happens, the outcome to stdout, and the exit
//! code.

use joinguard_core::learner::{self, EtcdMemberSpec, EtcdReport, Resolved};
use joinguard_core::{Ending, Recorder, Stopped};
use tokio::runtime::Runtime;

use crate::cli::{CleanupArgs, EtcdMemberArgs, Output, PromoteArgs, FLAGS};
use crate::commands::Stderr;
use crate::progress::Progress;

/// The shared inputs as the core takes them.
fn member_spec(a: &EtcdMemberArgs) -> EtcdMemberSpec {
    EtcdMemberSpec {
        api_server_endpoint: a.api_server_endpoint.clone(),
        token: a.token.clone(),
        discovery_token_ca_cert_hash: a.discovery_token_ca_cert_hash.clone(),
        discovery_token_unsafe_skip_ca_verification: a.discovery_token_unsafe_skip_ca_verification,
        certificate_key: a.certificate_key.clone(),
        etcd_endpoints: a.etcd_endpoints.clone(),
        etcd_cacert: a.etcd_cacert.clone(),
        etcd_cert: a.etcd_cert.clone(),
        etcd_key: a.etcd_key.clone(),
        cert_dir: a.cert_dir.clone(),
        config: a.config.clone(),
        node_name: a.node_name.clone(),
        apiserver_advertise_address: a.apiserver_advertise_address,
        timeout: a.timeout,
        spelling: FLAGS,
    }
}

fn resolve(
    rt: &Runtime,
    cmd: &str,
    a: &EtcdMemberArgs,
    need_node: bool,
) -> Result<Resolved, Stopped> {
    rt.block_on(learner::resolve(
        &member_spec(a),
        need_node,
        &format!("[{cmd}]"),
        &Stderr,
    ))
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

/// A run's report on stdout (the JSON document even for a failure), its error on stderr.
fn finish(
    cmd: &str,
    report: &EtcdReport,
    error: Option<&dyn std::error::Error>,
    output: Output,
) -> Ending {
    if let Some(e) = error {
        crate::output::say_error(cmd, e);
    }
    crate::output::print(report, output.into());
    report.ending()
}

/// `joinguard etcd promote`.
pub fn promote(rt: &Runtime, args: PromoteArgs) -> Ending {
    const CMD: &str = "etcd promote";
    const TAG: &str = "[etcd promote]";
    let r = match resolve(rt, CMD, &args.member, true) {
        Ok(r) => r,
        Err(e) => {
            crate::output::say_error(CMD, &e);
            return e.ending();
        }
    };
    let spec = r.into_promote(Some(args.learner_metrics_url));
    let recorder = Recorder::new();
    let display = Progress::stderr(TAG);
    let result = rt.block_on(learner::promote::promote_recorded(
        &spec,
        &progress(CMD, &display),
        &recorder,
    ));
    display.finish();
    let error = result.as_ref().err().map(|e| e as &dyn std::error::Error);
    finish(
        CMD,
        &EtcdReport::promote(&result, &recorder),
        error,
        args.member.output,
    )
}

/// `joinguard etcd cleanup`.
pub fn cleanup(rt: &Runtime, args: CleanupArgs) -> Ending {
    const CMD: &str = "etcd cleanup";
    const TAG: &str = "[etcd cleanup]";
    let r = match resolve(rt, CMD, &args.member, args.member_id.is_none()) {
        Ok(r) => r,
        Err(e) => {
            crate::output::say_error(CMD, &e);
            return e.ending();
        }
    };
    let spec = r.into_cleanup(args.member_id, args.dry_run);
    let recorder = Recorder::new();
    let display = Progress::stderr(TAG);
    let result = rt.block_on(learner::cleanup::cleanup_recorded(
        &spec,
        &progress(CMD, &display),
        &recorder,
    ));
    display.finish();
    let error = result.as_ref().err().map(|e| e as &dyn std::error::Error);
    finish(
        CMD,
        &EtcdReport::cleanup(&result, &recorder),
        error,
        args.member.output,
    )
}
