use super::*;
use netlab::pki::{KeyAlgorithm as LabAlg, KeyEncoding as LabEnc, KeyProfile, TestCa};

/// A fixture made by the real openssl (`tests/data/keys/make.sh`).
fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../joinguard/tests/data/keys")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(pem: &[u8]) -> Result<PrivateKey, KeyError> {
    PrivateKey::from_pem(pem, Some(Path::new("/etc/kubernetes/pki/etcd/ca.key")))
}

/// No base64 line of the key's body appears in `text`.
fn assert_no_key_bytes(pem: &[u8], text: &str) {
    let pem = String::from_utf8_lossy(pem);
    // Base64 lines only: RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`) are named on purpose.
    for line in pem
        .lines()
        .filter(|l| !l.starts_with("-----") && !l.contains(':') && l.len() > 16)
    {
        assert!(!text.contains(line.trim()), "key bytes in {text:?}");
    }
}

#[test]
fn every_encoding_kubeadm_and_openssl_write_loads_and_signs() {
    let cases = [
        (
            KeyProfile::RSA_2048,
            KeyAlgorithm::Rsa { bits: 2048 },
            KeyEncoding::Pkcs1,
        ),
        (
            KeyProfile::ECDSA_P256,
            KeyAlgorithm::EcdsaP256,
            KeyEncoding::Sec1,
        ),
        (
            KeyProfile::kubeadm(LabAlg::EcdsaP384),
            KeyAlgorithm::EcdsaP384,
            KeyEncoding::Sec1,
        ),
        (
            KeyProfile::PKCS8_P256,
            KeyAlgorithm::EcdsaP256,
            KeyEncoding::Pkcs8,
        ),
        (
            KeyProfile {
                algorithm: LabAlg::Rsa(2048),
                encoding: LabEnc::Pkcs8,
            },
            KeyAlgorithm::Rsa { bits: 2048 },
            KeyEncoding::Pkcs8,
        ),
    ];
    for (profile, algorithm, encoding) in cases {
        let ca = TestCa::with_profile("kubernetes", profile).unwrap();
        let pem = ca.key_pem();
        assert!(
            pem.starts_with(&format!("-----BEGIN {}-----", profile.pem_label())),
            "{profile}: {pem:.40}"
        );
        let key = load(pem.as_bytes()).unwrap_or_else(|e| panic!("{profile}: {e}"));
        assert_eq!(key.algorithm(), algorithm, "{profile}");
        assert_eq!(key.encoding(), encoding, "{profile}");
        let signer = key.to_rcgen().unwrap();
        assert!(signer.is_compatible(match algorithm {
            KeyAlgorithm::Rsa { .. } => &rcgen::PKCS_RSA_SHA256,
            KeyAlgorithm::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyAlgorithm::EcdsaP384 => &rcgen::PKCS_ECDSA_P384_SHA384,
            KeyAlgorithm::Ed25519 => &rcgen::PKCS_ED25519,
        }));
        // rustls takes the converted key, and the PKCS#8 PEM for etcd-client reads back the same.
        rustls::crypto::ring::sign::any_supported_type(&key.to_rustls()).unwrap();
        let again = load(&key.to_pkcs8_pem()).unwrap();
        assert_eq!(again.algorithm(), algorithm);
        assert_eq!(again.encoding(), KeyEncoding::Pkcs8);
        assert!(!format!("{key:?}").contains(&pem[40..80]));
    }
    let ed = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let key = load(ed.serialize_pem().as_bytes()).unwrap();
    assert_eq!(key.algorithm(), KeyAlgorithm::Ed25519);
    assert_eq!(key.describe(), "Ed25519 key, PKCS#8 (BEGIN PRIVATE KEY)");
}

#[test]
fn kubeadm_rsa_sizes_are_read_with_their_size() {
    for bits in [3072, 4096] {
        let ca = TestCa::with_profile("etcd-ca", KeyProfile::kubeadm(LabAlg::Rsa(bits))).unwrap();
        let key = load(ca.key_pem().as_bytes()).unwrap();
        assert_eq!(
            key.describe(),
            format!("RSA-{bits} key, PKCS#1 (BEGIN RSA PRIVATE KEY)")
        );
    }
}

#[test]
fn unusable_keys_name_the_format_found_and_what_to_do() {
    let cases: [(&str, &str, &str); 8] = [
        (
            "encrypted-pkcs8.pem",
            "encrypted PKCS#8 key (BEGIN ENCRYPTED PRIVATE KEY)",
            "decrypt it first: openssl pkey -in /etc/kubernetes/pki/etcd/ca.key -out /etc/kubernetes/pki/etcd/ca.key.plain",
        ),
        (
            "legacy-encrypted-rsa.pem",
            "encrypted legacy PEM key (BEGIN RSA PRIVATE KEY, Proc-Type: 4,ENCRYPTED)",
            "openssl pkey -in",
        ),
        (
            "rsa-1024-pkcs1.pem",
            "RSA-1024 key, PKCS#1 (BEGIN RSA PRIVATE KEY)",
            "2048 to 4096 bits",
        ),
        (
            "p521-sec1.pem",
            "ECDSA P-521 key, SEC1 (BEGIN EC PRIVATE KEY)",
            "only P-256 and P-384",
        ),
        (
            "p384-sec1-no-public.pem",
            "EC key without its public key, SEC1 (BEGIN EC PRIVATE KEY)",
            "openssl ec -in /etc/kubernetes/pki/etcd/ca.key",
        ),
        ("dsa-traditional.pem", "DSA key (BEGIN DSA PRIVATE KEY)", "not supported"),
        ("dsa-pkcs8.pem", "DSA key in PKCS#8 (BEGIN PRIVATE KEY)", "not supported"),
        (
            "encrypted-pkcs8.pem",
            "ENCRYPTED PRIVATE KEY",
            "kubeadm never writes encrypted keys",
        ),
    ];
    for (file, found, advice) in cases {
        let pem = fixture(file);
        let e = load(&pem).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(found) || e.found.contains(found),
            "{file}: {msg}"
        );
        assert!(msg.contains(advice), "{file}: {msg}");
        assert_no_key_bytes(&pem, &msg);
    }
}

#[test]
fn truncated_and_garbled_pem_are_named_as_such() {
    let ca = TestCa::with_profile("kubernetes", KeyProfile::RSA_2048).unwrap();
    let pem = ca.key_pem();
    let cut = &pem.as_bytes()[..pem.len() / 2];
    let e = load(cut).unwrap_err();
    assert_eq!(
        e.found,
        "truncated PEM (BEGIN RSA PRIVATE KEY without its END line)"
    );
    assert_no_key_bytes(cut, &e.to_string());

    let mut lines: Vec<String> = pem.lines().map(str::to_string).collect();
    lines[3] = "!!!!not base64!!!!".into();
    let bad = lines.join("\n");
    let e = load(bad.as_bytes()).unwrap_err();
    assert_eq!(
        e.found,
        "garbled PEM (BEGIN RSA PRIVATE KEY): its base64 does not decode"
    );
    assert_no_key_bytes(bad.as_bytes(), &e.to_string());

    // Valid base64, but not an RSAPrivateKey.
    let junk = "-----BEGIN RSA PRIVATE KEY-----\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n-----END RSA PRIVATE KEY-----\n";
    let e = load(junk.as_bytes()).unwrap_err();
    assert_eq!(
        e.found,
        "garbled key, PKCS#1 (BEGIN RSA PRIVATE KEY): its DER is not an RSAPrivateKey"
    );
    let e = load(ca.cert_pem().as_bytes()).unwrap_err();
    assert_eq!(e.found, "no private key (the PEM holds BEGIN CERTIFICATE)");
    let e = load(b"not a key at all").unwrap_err();
    assert_eq!(e.found, "no PEM block");
}

#[test]
fn the_pem_armor_scan_sees_every_block() {
    let text = b"junk\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n\
                 -----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nAAAA\n";
    let blocks = scan_armor(text);
    assert_eq!(blocks.len(), 2);
    assert!(blocks[0].complete && !blocks[0].encrypted);
    assert!(!blocks[1].complete && blocks[1].encrypted);
    assert_eq!(blocks[1].label, "RSA PRIVATE KEY");
}
