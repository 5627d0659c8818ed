//! `etcd promote` meeting a network or certificate fault on loopback: what the operator reads on
//! stderr is the condition and what to do, in the command's own line format, never a library's
//! debug text (`tonic::transport::Error(...)`, `Os { code: 111 ... }`, `OtherError(...)`).

use std::net::TcpListener;
use std::process::Command;
use std::sync::Arc;

use netlab::pki::{CertSpec, TestCa};
use rustls::pki_types::pem::PemObject;

/// The etcd CA and a client certificate it signed, written under `dir`.
struct Files {
    ca: String,
    cert: String,
    key: String,
}

fn files(ca: &TestCa, dir: &std::path::Path) -> Files {
    let ca_path = ca.write_ca(dir, "ca").expect("write the CA");
    let (cert, key) = ca
        .issue(&CertSpec::client("kube-apiserver-etcd-client", None))
        .expect("issue")
        .write(dir, "apiserver-etcd-client")
        .expect("write the client certificate");
    let s = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    Files {
        ca: s(ca_path),
        cert: s(cert),
        key: s(key),
    }
}

/// `joinguard etcd promote` against `endpoint`; returns (exit code, stderr).
fn promote(f: &Files, endpoint: &str) -> (i32, String) {
    promote_with(f, endpoint, &[])
}

fn promote_with(f: &Files, endpoint: &str, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_joinguard"))
        .args(["etcd", "promote", "--node-name", "cp4", "--timeout", "3s"])
        .args(extra)
        .args(["--etcd-endpoints", endpoint])
        .args([
            "--etcd-cacert",
            &f.ca,
            "--etcd-cert",
            &f.cert,
            "--etcd-key",
            &f.key,
        ])
        .env_remove("RUST_LOG")
        .output()
        .expect("run joinguard");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// No library text, and every line in the command's format: `[etcd promote] ...` for progress,
/// warnings and retries, `joinguard etcd promote: ...` for the one line that ends the run.
fn assert_for_people(stderr: &str) {
    for raw in ["tonic::", "Os {", "OtherError", "Custom {", "ConnectError("] {
        assert!(
            !stderr.contains(raw),
            "library text {raw:?} on stderr:\n{stderr}"
        );
    }
    for line in stderr.lines() {
        assert!(
            line.starts_with("[etcd promote] ") || line.starts_with("joinguard etcd promote: "),
            "a line in another format: {line:?}\n{stderr}"
        );
    }
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("joinguard etcd promote: "))
            .count(),
        1,
        "one closing line:\n{stderr}"
    );
}

#[test]
fn promote_on_a_refused_port_says_nothing_listens() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("etcd-ca").expect("CA");
    let f = files(&ca, dir.path());
    // A port that was just free: nothing listens on it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, stderr) = promote(&f, &format!("https://127.0.0.1:{port}"));
    eprintln!("{stderr}");
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("connection refused: nothing listens on the member's client port"),
        "{stderr}"
    );
    assert!(
        stderr.contains("attempt 1 failed: connection refused"),
        "{stderr}"
    );
    assert_for_people(&stderr);
}

/// A member that serves the CA certificate itself as its server certificate (a copy of
/// `etcd/ca.crt` where `etcd/server.crt` belongs): a trust failure (exit 3) that says so.
#[test]
fn promote_against_a_ca_used_as_the_server_certificate_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("etcd-ca").expect("CA");
    let f = files(&ca, dir.path());
    let chain = vec![
        rustls::pki_types::CertificateDer::from_pem_slice(ca.cert_pem().as_bytes())
            .expect("the CA's DER"),
    ];
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(ca.key_pem().as_bytes())
        .expect("the CA's key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("server config");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        // Bounded: the command's 3 s make a few connections at most.
        for _ in 0..64 {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = acceptor.accept(tcp).await;
            });
        }
    });
    let (code, stderr) = promote(&f, &format!("https://{addr}"));
    drop(rt);
    eprintln!("{stderr}");
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("the server presents a CA certificate as its own"),
        "{stderr}"
    );
    assert_for_people(&stderr);
}
