//! kubeconfig YAML (`update-status --kubeconfig`), current context and a named one.
//! The path is in a directory that does not exist, so relative file references fail to read.
#![no_main]
use joinguard_core::input::{Input, Named};
use joinguard_core::kube::Kubeconfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("/nonexistent-joinguard-fuzz/admin.conf");
    if let Ok(k) = Kubeconfig::parse(path, data, None) {
        let _ = format!("{k:?}");
        // The server must then be usable by the client, or refused with an error.
        let input = Named::new(Input::Kubeconfig, "kubeconfig");
        let _ = joinguard_core::kube::ApiClient::new(&input, &k);
    }
    let _ = Kubeconfig::parse(path, data, Some("kubernetes-admin@kubernetes"));
});
