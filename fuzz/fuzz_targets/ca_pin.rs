//! `--discovery-token-ca-cert-hash` pins.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for pin in text.split(',') {
            if let Ok(p) = joinguard_core::discovery::parse_pin(pin) {
                // A pin that parses is exactly `sha256:` and 64 hex digits.
                assert_eq!(pin.len(), 71);
                assert_eq!(p.len(), 32);
            }
        }
    }
});
