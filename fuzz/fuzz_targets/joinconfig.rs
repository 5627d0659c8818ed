//! JoinConfiguration YAML (`--config`), as `joinguard preflight/update-status` read it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = std::path::Path::new("fuzz/join.yaml");
        if let Ok(cfg) = joinguard_core::joinconfig::JoinConfig::parse(path, text) {
            // Whatever parsed must also print (errors and reports format these values).
            let _ = format!("{cfg:?}");
        }
    }
});
