//! kubeadm-certs decryption (`--certificate-key`): the raw AES-GCM unsealing of arbitrary bytes,
//! and the whole Secret handling with entries that decrypt (sealed here with the fixed key), so
//! the PEM parsing and the client-certificate minting behind them see the fuzzer's bytes.
#![no_main]
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use joinguard_core::discovery::cluster::{decrypt_bytes, etcd_material};
use libfuzzer_sys::fuzz_target;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};

const KEY: [u8; 32] = [0x42; 32];
const NAMES: [&str; 7] = [
    "ca.crt",
    "ca.key",
    "etcd-ca.crt",
    "etcd-ca.key",
    "external-etcd-ca.crt",
    "external-etcd.crt",
    "external-etcd.key",
];

fn seal(plain: &[u8]) -> String {
    let nonce = [7u8; 12];
    let mut buf = plain.to_vec();
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &KEY).unwrap())
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
        .unwrap();
    let mut out = nonce.to_vec();
    out.extend_from_slice(&buf);
    STANDARD.encode(out)
}

fuzz_target!(|data: &[u8]| {
    let _ = decrypt_bytes(data, &KEY);
    // First byte: which entries are present; the rest, split on NUL, their plaintexts.
    let Some((&mask, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == 0);
    let mut entries = serde_json::Map::new();
    for (i, name) in NAMES.iter().enumerate() {
        if mask & (1 << i) != 0 {
            let plain = parts.next().unwrap_or_default();
            let value = if mask & 0x80 != 0 && i == 0 {
                // Not sealed: base64 of garbage, as a corrupted Secret would hold.
                STANDARD.encode(plain)
            } else {
                seal(plain)
            };
            entries.insert((*name).to_string(), value.into());
        }
    }
    let secret = serde_json::json!({ "data": entries });
    let key = joinguard_core::input::Named::new(
        joinguard_core::input::Input::CertificateKey,
        "--certificate-key",
    );
    let _ = etcd_material(&secret, &KEY, &key);
});
