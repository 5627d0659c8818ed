//! Our flag parsing: endpoint URLs (positional API endpoint, --etcd-endpoints,
//! --etcd-peer-endpoints, member URLs), durations (--timeout, --wait, kubeadm's Go durations),
//! the bootstrap token and the certificate key; kubeadm's spellings (the argv pre-pass, check
//! names for --ignore-preflight-errors, Go bools).
#![no_main]
use joinguard_core::target::{Target, TargetKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for kind in [
        TargetKind::ApiServer,
        TargetKind::EtcdClient,
        TargetKind::EtcdPeer,
    ] {
        if let Ok(t) = Target::parse_url(kind, s) {
            let _ = t.url();
        }
        for bare in [false, true] {
            let _ = joinguard_core::preflight::input::parse_endpoint(
                joinguard::cli::named(joinguard_core::input::Input::EtcdEndpoints),
                s,
                kind,
                bare,
            );
        }
    }
    let _ = joinguard::cli::parse_duration(s);
    let _ = joinguard_core::duration::parse_go_duration(s);
    if let Err(e) = joinguard_core::discovery::BootstrapToken::parse(s) {
        // The error must not depend on the value at all (so it cannot repeat any of it). Not
        // "does not contain the input": the message's own example token contains many inputs
        // (crash `abcdef.0123456789a` in fuzz/regressions/flags, a false positive of that oracle).
        let reference = joinguard_core::discovery::BootstrapToken::parse("x").unwrap_err();
        assert_eq!(e, reference, "the token error depends on the value");
    }
    let _ = joinguard_core::discovery::cluster::parse_certificate_key(s);
    let _ = joinguard::cli::parse_go_bool(s);
    let _ = joinguard_core::kubeadm::checks::canonical(s);
    let _ = joinguard_core::check::IgnoreList::parse(s);
    // The pre-pass keeps one argument per input argument, or joins `-v N` into one.
    let args: Vec<std::ffi::OsString> = s.split(' ').map(Into::into).collect();
    let out = joinguard::cli::kubeadm_argv(args.clone());
    assert!(out.len() <= args.len() && out.len() + args.len() / 2 >= args.len());
});
