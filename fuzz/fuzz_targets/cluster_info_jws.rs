//! The cluster-info detached JWS: `<jws>\n<kubeconfig content>` verified with a fixed token.
//! Also the signed kubeconfig's CA and server extraction, and the SPKI pins of the CA.
#![no_main]
use joinguard_core::discovery::{spki_pins, verify_detached_jws, BootstrapToken};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let token = BootstrapToken::parse("abcdef.0123456789abcdef").unwrap();
    let (jws, content) = text.split_once('\n').unwrap_or((text, ""));
    let _ = verify_detached_jws(jws, content, &token);
    let _ = joinguard_core::discovery::cluster_of(content);
    let _ = spki_pins(content.as_bytes());
});
