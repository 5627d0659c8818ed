use super::*;
use crate::input::tests::named;

#[test]
fn missing_file_names_flag() {
    let err =
        CaBundle::load(named(Input::EtcdCacert), Path::new("/nonexistent/ca.crt")).unwrap_err();
    assert_eq!(err.input(), Input::EtcdCacert);
    let msg = err.to_string();
    assert!(
        msg.starts_with("--etcd-cacert /nonexistent/ca.crt: cannot read"),
        "{msg}"
    );
}

#[test]
fn not_pem_names_flag_and_expectation() {
    let err = CaBundle::from_pem(
        named(Input::ApiserverCacert),
        Path::new("ca.crt"),
        b"hello world\n".to_vec(),
    )
    .unwrap_err();
    assert!(matches!(err, IdentityError::NotPem { .. }), "{err:?}");
    assert!(err.to_string().contains("--apiserver-cacert"));
    assert!(err
        .to_string()
        .contains("expected a PEM file with the CA certificate"));
}

#[test]
fn key_file_without_key_is_reported() {
    let pem = b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let ca = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["c".to_string()])
        .unwrap()
        .self_signed(&ca)
        .unwrap();
    let err = ClientIdentity::from_pem(
        (
            named(Input::EtcdCert),
            Path::new("c.crt"),
            cert.pem().into_bytes(),
        ),
        (
            named(Input::EtcdKey),
            Path::new("k.pem"),
            Zeroizing::new(pem.to_vec()),
        ),
    )
    .unwrap_err();
    assert!(matches!(err, IdentityError::Key { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("--etcd-key k.pem: encrypted PKCS#8 key (BEGIN ENCRYPTED PRIVATE KEY)"),
        "{msg}"
    );
    assert!(msg.contains("openssl pkey -in k.pem"), "{msg}");
}
