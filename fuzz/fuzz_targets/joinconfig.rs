//! JoinConfiguration YAML (`--config`), as `joinguard preflight/update-status` read it.
//!
//! Two oracles. Any text: whatever parses also prints. And no secret is echoed: the input is
//! placed after a JoinConfiguration whose `discovery.bootstrapToken.token` and
//! `controlPlane.certificateKey` hold two marker values, so it can change their types, continue
//! them as multi-line scalars, add duplicate keys, unknown fields or whole documents; neither the
//! error, nor a warning, nor the parsed value's `Debug` may contain a marker.
#![no_main]
use libfuzzer_sys::fuzz_target;

const TOKEN: &str = "q7tokensecretq7";
const KEY: &str = "k9certkeysecretk9";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = std::path::Path::new("fuzz/join.yaml");
    if let Ok(cfg) = joinguard_core::joinconfig::JoinConfig::parse(path, text) {
        // Whatever parsed must also print (errors and reports format these values).
        let _ = format!("{cfg:?}");
    }
    if text.contains(TOKEN) || text.contains(KEY) {
        return;
    }
    let doc = format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  \
         certificateKey: {KEY}\ndiscovery:\n  bootstrapToken:\n    token: {TOKEN}\n    {text}"
    );
    let shown = match joinguard_core::joinconfig::JoinConfig::parse(path, &doc) {
        Ok(cfg) => format!("{cfg:?} {}", cfg.warnings.join("\n")),
        Err(e) => e.to_string(),
    };
    assert!(
        !shown.contains(TOKEN) && !shown.contains(KEY),
        "a secret is echoed: {shown}"
    );
});
