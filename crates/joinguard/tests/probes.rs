//! Probe layer against real components on loopback: a single-member etcd (3.4+, mTLS on client
//! and peer ports, certificates from `netlab::pki`) and a tiny hyper + rustls HTTPS server.
//!
//! Each etcd test starts its own member on free loopback ports in a temporary directory, so tests
//! run in parallel; the member is killed when its guard drops (also on panic).

use std::net::{IpAddr, Ipv4Addr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use joinguard::cli::named;
use joinguard_core::input::Input;
use joinguard_core::probe::etcd::{self, EtcdFailure, EtcdTls, SnapshotStop, PREFLIGHT_PREFIX};
use joinguard_core::probe::http::{self, HttpFailure};
use joinguard_core::probe::identity::{
    CaBundle, ClientIdentity, IdentityError, ALPN_H2, ALPN_HTTP1,
};
use joinguard_core::probe::peer;
use joinguard_core::probe::tcp;
use joinguard_core::probe::tls::{self, TlsClient, TlsFailure, TrustFailureKind};
use joinguard_core::probe::{ProbeFailure, ProbeKind};
use joinguard_core::target::{Target, TargetKind};
use netlab::pki::{CertSpec, TestCa};
use tempfile::TempDir;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const TIMEOUT: Duration = Duration::from_secs(5);

fn free_port() -> u16 {
    StdListener::bind((LOOPBACK, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

fn target(kind: TargetKind, port: u16) -> Target {
    Target::parse_url(kind, &format!("https://127.0.0.1:{port}")).unwrap()
}

/// TLS files for one test: a CA, a server/peer certificate for 127.0.0.1, a client identity.
struct Pki {
    ca_path: PathBuf,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
}

fn pki(dir: &Path) -> Pki {
    let ca = TestCa::new("etcd-ca").unwrap();
    let ca_path = ca.write_ca(dir, "ca").unwrap();
    // kubeadm's etcd server and peer certificates carry both usages and the node IP + 127.0.0.1.
    let mut spec = CertSpec::server("etcd-member", &[LOOPBACK], &["localhost"]);
    spec.client = true;
    let server = ca.issue(&spec).unwrap().write(dir, "server").unwrap();
    let client = ca
        .issue(&CertSpec::client("kube-apiserver-etcd-client", None))
        .unwrap()
        .write(dir, "client")
        .unwrap();
    Pki {
        ca_path,
        server,
        client,
    }
}

/// A running single-member etcd; killed on drop.
struct Etcd {
    child: Child,
    dir: TempDir,
    pki: Pki,
    client_port: u16,
    peer_port: u16,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Etcd {
    async fn start() -> Etcd {
        let bin = std::env::var_os("JOINGUARD_ETCD_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"));
        let mut last_log = String::new();
        for _attempt in 0..3 {
            let dir = TempDir::new().unwrap();
            let pki = pki(dir.path());
            let (client_port, peer_port) = (free_port(), free_port());
            let peer_url = format!("https://127.0.0.1:{peer_port}");
            let client_url = format!("https://127.0.0.1:{client_port}");
            let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap();
            let child = Command::new(&bin)
                .args(["--name", "m1", "--data-dir"])
                .arg(dir.path().join("data"))
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("m1={peer_url}")])
                .args(["--initial-cluster-state", "new"])
                .arg("--cert-file")
                .arg(&pki.server.0)
                .arg("--key-file")
                .arg(&pki.server.1)
                .arg("--trusted-ca-file")
                .arg(&pki.ca_path)
                .arg("--client-cert-auth")
                .arg("--peer-cert-file")
                .arg(&pki.server.0)
                .arg("--peer-key-file")
                .arg(&pki.server.1)
                .arg("--peer-trusted-ca-file")
                .arg(&pki.ca_path)
                .arg("--peer-client-cert-auth")
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
            let mut etcd = Etcd {
                child,
                dir,
                pki,
                client_port,
                peer_port,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = etcd.child.try_wait() {
                    break; // exited: most likely a port race; retry with new ports
                }
                let tls = etcd.etcd_tls();
                if let Ok(mut m) =
                    etcd::connect(&etcd.client_url(), Some(&tls), Duration::from_secs(1)).await
                {
                    if m.first_status().leader != 0 && m.quorum_read().await.is_ok() {
                        return etcd;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            last_log =
                std::fs::read_to_string(etcd.dir.path().join("etcd.log")).unwrap_or_default();
        }
        panic!("etcd did not become ready; last log:\n{last_log}");
    }

    fn client_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.client_port)
    }

    fn ca(&self) -> CaBundle {
        CaBundle::load(named(Input::EtcdCacert), &self.pki.ca_path).unwrap()
    }

    fn identity(&self) -> ClientIdentity {
        ClientIdentity::load(
            (named(Input::EtcdCert), &self.pki.client.0),
            (named(Input::EtcdKey), &self.pki.client.1),
        )
        .unwrap()
    }

    fn etcd_tls(&self) -> EtcdTls {
        EtcdTls::new(&self.ca(), Some(&self.identity())).unwrap()
    }

    /// A plain etcd-client for assertions (not the code under test).
    async fn raw_client(&self) -> etcd_client::Client {
        let ca = std::fs::read(&self.pki.ca_path).unwrap();
        let cert = std::fs::read(&self.pki.client.0).unwrap();
        let key = std::fs::read(&self.pki.client.1).unwrap();
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(ca))
            .identity(etcd_client::Identity::from_pem(cert, key));
        let opts = etcd_client::ConnectOptions::new()
            .with_tls(tls)
            .with_timeout(TIMEOUT);
        etcd_client::Client::connect([self.client_url()], Some(opts))
            .await
            .unwrap()
    }
}

// ---------------------------------------------------------------------------------------------
// TCP

#[tokio::test]
async fn tcp_connect_to_listener_succeeds_and_closed_port_is_refused() {
    let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sample = tcp::probe(&target(TargetKind::EtcdClient, port), TIMEOUT).await;
    let rtt = sample.result.expect("connect to a listening port");
    assert!(rtt < Duration::from_secs(1), "{rtt:?}");

    drop(listener);
    let sample = tcp::probe(&target(TargetKind::EtcdClient, port), TIMEOUT).await;
    assert_eq!(sample.result, Err(ProbeFailure::Refused));
}

// ---------------------------------------------------------------------------------------------
// Identity

#[test]
fn key_that_does_not_match_cert_names_etcd_key() {
    let dir = TempDir::new().unwrap();
    let ca = TestCa::new("ca").unwrap();
    let (cert_a, _) = ca
        .issue(&CertSpec::client("a", None))
        .unwrap()
        .write(dir.path(), "a")
        .unwrap();
    let (_, key_b) = ca
        .issue(&CertSpec::client("b", None))
        .unwrap()
        .write(dir.path(), "b")
        .unwrap();
    let err = ClientIdentity::load(
        (named(Input::EtcdCert), &cert_a),
        (named(Input::EtcdKey), &key_b),
    )
    .unwrap_err();
    assert!(matches!(err, IdentityError::KeyMismatch { .. }), "{err:?}");
    assert_eq!(err.input(), Input::EtcdKey);
    let msg = err.to_string();
    assert!(msg.starts_with("--etcd-key "), "{msg}");
    assert!(msg.contains("does not match the certificate"), "{msg}");

    // Swapped files: a certificate where the key should be.
    let err = ClientIdentity::load(
        (named(Input::EtcdCert), &cert_a),
        (named(Input::EtcdKey), &cert_a),
    )
    .unwrap_err();
    assert_eq!(err.input(), Input::EtcdKey, "{err}");
    assert!(err.to_string().contains("no private key"), "{err}");
    // A key where the certificate should be.
    let err = ClientIdentity::load(
        (named(Input::EtcdCert), &key_b),
        (named(Input::EtcdKey), &key_b),
    )
    .unwrap_err();
    assert_eq!(err.input(), Input::EtcdCert, "{err}");
    assert!(err.to_string().contains("no certificate"), "{err}");
    // Missing file.
    let err = ClientIdentity::load(
        (named(Input::EtcdCert), &dir.path().join("nope.crt")),
        (named(Input::EtcdKey), &key_b),
    )
    .unwrap_err();
    assert_eq!(err.input(), Input::EtcdCert);
    assert!(err.to_string().contains("cannot read"), "{err}");
    // The matching pair loads, and Debug does not leak the key.
    let cert_b = dir.path().join("b.crt");
    let id = ClientIdentity::load(
        (named(Input::EtcdCert), &cert_b),
        (named(Input::EtcdKey), &key_b),
    )
    .unwrap();
    let key_text = std::fs::read_to_string(&key_b).unwrap();
    let body_line = key_text.lines().nth(1).unwrap();
    assert!(!format!("{id:?}").contains(body_line));
}

// ---------------------------------------------------------------------------------------------
// TLS

#[tokio::test]
async fn tls_to_etcd_with_right_ca_succeeds_and_with_other_ca_is_a_trust_failure() {
    let etcd = Etcd::start().await;
    let t = target(TargetKind::EtcdClient, etcd.client_port);

    // The right CA, no identity: the TLS 1.3 handshake completes from the client's view and the
    // server asked for a certificate; or, when the server's rejection alert arrives before the
    // client has finished (seen with etcd 3.5.1 / Go 1.16), the handshake fails naming the cause.
    // Both are what an operator may see; neither is a trust failure.
    let tls = TlsClient::new(&etcd.ca(), None, &[ALPN_H2]).unwrap();
    match tls::probe(&t, &tls, TIMEOUT).await {
        Ok(hs) => {
            assert_eq!(hs.protocol.as_deref(), Some("TLSv1_3"));
            assert_eq!(hs.alpn.as_deref(), Some("h2"));
            assert!(hs.client_cert_requested && !hs.client_cert_sent, "{hs:?}");
            assert!(hs.handshake > Duration::ZERO && hs.handshake < Duration::from_secs(1));
        }
        Err(e) => {
            assert!(e.trust_failure().is_none(), "{e}");
            assert!(
                e.to_string().contains("requires a client certificate"),
                "{e}"
            );
        }
    }

    // With the identity, the certificate is sent.
    let tls_id = TlsClient::new(&etcd.ca(), Some(&etcd.identity()), &[ALPN_H2]).unwrap();
    let hs = tls::probe(&t, &tls_id, TIMEOUT)
        .await
        .expect("mTLS handshake");
    assert!(hs.client_cert_sent);
    let cert = hs
        .server_cert
        .as_ref()
        .expect("server certificate validity");
    let now = SystemTime::now();
    assert!(cert.not_before < now && now < cert.not_after, "{cert:?}");

    // Another CA: a trust failure, distinguishable from other TLS errors, with the cert captured.
    let other_dir = TempDir::new().unwrap();
    let other = TestCa::new("some-other-ca").unwrap();
    let other_path = other.write_ca(other_dir.path(), "ca").unwrap();
    let other_ca = CaBundle::load(named(Input::EtcdCacert), &other_path).unwrap();
    let tls_bad = TlsClient::new(&other_ca, None, &[ALPN_H2]).unwrap();
    let err = tls::probe(&t, &tls_bad, TIMEOUT).await.unwrap_err();
    let trust = err.trust_failure().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(trust.kind, TrustFailureKind::UnknownIssuer);
    assert!(trust.server_cert.is_some());
    assert!(
        err.to_string().contains("not signed by the given CA"),
        "{err}"
    );
    assert!(matches!(ProbeFailure::from(err), ProbeFailure::Tls(_)));

    // The same through etcd-client: also a trust failure.
    let bad = EtcdTls::new(&other_ca, Some(&etcd.identity())).unwrap();
    let err = etcd::connect(&etcd.client_url(), Some(&bad), TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EtcdFailure::Untrusted(t) if t.kind == TrustFailureKind::UnknownIssuer),
        "{err:?}"
    );
}

#[tokio::test]
async fn handshake_against_a_server_that_never_answers_times_out() {
    let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold connections without ever writing.
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let dir = TempDir::new().unwrap();
    let p = pki(dir.path());
    let ca = CaBundle::load(named(Input::ApiserverCacert), &p.ca_path).unwrap();
    let tls = TlsClient::new(&ca, None, &[ALPN_HTTP1]).unwrap();
    let t = target(TargetKind::ApiServer, port);

    let start = Instant::now();
    let err = tls::probe(&t, &tls, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(err, TlsFailure::Timeout(300));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );

    let start = Instant::now();
    let err = http::readyz(&t, &tls, Duration::from_millis(300))
        .await
        .unwrap_err();
    assert_eq!(ProbeFailure::from(err), ProbeFailure::Timeout(300));
    assert!(start.elapsed() < Duration::from_secs(2));
    holder.abort();
}

// ---------------------------------------------------------------------------------------------
// HTTPS /readyz, /livez

/// A local HTTPS server: `/readyz` answers 200 "ok", anything else 500.
async fn https_server(p: &Pki) -> (u16, tokio::task::JoinHandle<()>) {
    use http_body_util::Full;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let cert_pem = std::fs::read(&p.server.0).unwrap();
    let key_pem = std::fs::read(&p.server.1).unwrap();
    let chain: Vec<_> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(&key_pem).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let (status, body) = if req.uri().path() == "/readyz" {
                        (200, "ok")
                    } else {
                        (500, "[-]etcd failed: reason withheld\nlivez check failed\n")
                    };
                    Ok::<_, std::convert::Infallible>(
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(bytes::Bytes::from_static(body.as_bytes())))
                            .unwrap(),
                    )
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, task)
}

#[tokio::test]
async fn readyz_reports_phases_status_body_and_date() {
    let dir = TempDir::new().unwrap();
    let p = pki(dir.path());
    let (port, server) = https_server(&p).await;
    let ca = CaBundle::load(named(Input::ApiserverCacert), &p.ca_path).unwrap();
    let tls = TlsClient::new(&ca, None, &[ALPN_HTTP1]).unwrap();
    let t = target(TargetKind::ApiServer, port);

    let r = http::readyz(&t, &tls, TIMEOUT).await.expect("readyz");
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(r.exchange.status, 200);
    assert_eq!(&r.exchange.body[..], b"ok");
    assert!(r.tls.connect > Duration::ZERO && r.tls.handshake > Duration::ZERO);
    assert!(r.exchange.first_byte > Duration::ZERO);
    assert!(r.exchange.first_byte <= r.exchange.total);
    assert!(r.total() >= r.tls.connect + r.tls.handshake + r.exchange.total);
    let date = r.exchange.date.expect("Date header");
    let skew = SystemTime::now()
        .duration_since(date)
        .unwrap_or_else(|e| e.duration());
    assert!(skew < Duration::from_secs(5), "{skew:?}");
    assert_eq!(http::sample(&Ok(r.clone())).result, Ok(r.total()));

    let r = http::livez(&t, &tls, TIMEOUT).await.expect("livez answers");
    assert_eq!(r.exchange.status, 500);
    assert!(!r.is_ok());
    assert!(String::from_utf8_lossy(&r.exchange.body).contains("livez check failed"));

    // A CA that did not sign the server: the HTTP probe surfaces the trust failure.
    let other = TestCa::new("other").unwrap();
    let other_path = other.write_ca(dir.path(), "other").unwrap();
    let other_ca = CaBundle::load(named(Input::ApiserverCacert), &other_path).unwrap();
    let tls_bad = TlsClient::new(&other_ca, None, &[ALPN_HTTP1]).unwrap();
    let err = http::readyz(&t, &tls_bad, TIMEOUT).await.unwrap_err();
    assert!(
        matches!(&err, HttpFailure::Tls(TlsFailure::Untrusted(_))),
        "{err:?}"
    );
    assert!(err.trust_failure().is_some());
    server.abort();
}

// ---------------------------------------------------------------------------------------------
// etcd client port

#[tokio::test]
async fn etcd_status_quorum_read_alarms_and_member_list() {
    let etcd = Etcd::start().await;
    let tls = etcd.etcd_tls();
    let mut m = etcd::connect(&etcd.client_url(), Some(&tls), TIMEOUT)
        .await
        .expect("connect");
    let id = m.member_id();
    assert_ne!(id, 0);
    let setup = m.setup();

    let mut steady = Vec::new();
    for _ in 0..20 {
        let (took, st) = m.status().await.expect("status");
        assert_eq!(st.member_id, id, "the same member answers every call");
        assert_ne!(st.leader, 0);
        assert!(!st.is_learner);
        assert!(st.version.starts_with("3."), "{}", st.version);
        assert!(st.db_size > 0);
        steady.push(took);
    }
    steady.sort();
    let p50 = steady[steady.len() / 2];
    eprintln!(
        "etcd status on loopback: first call (TCP+TLS+HTTP/2+RPC) {:?}, steady p50 {:?}, min {:?}",
        setup, p50, steady[0]
    );
    assert!(
        p50 < setup,
        "steady state ({p50:?}) is cheaper than set-up ({setup:?})"
    );

    let mut reads = Vec::new();
    for _ in 0..5 {
        reads.push(m.quorum_read().await.expect("quorum read of a missing key"));
    }
    eprintln!("etcd quorum read on loopback: {reads:?}");

    assert!(m.alarms().await.unwrap().is_empty());

    let members = m.member_list().await.unwrap();
    assert_eq!(members.len(), 1, "{members:?}");
    assert_eq!(members[0].id, id);
    assert_eq!(members[0].name, "m1");
    assert!(!members[0].is_learner);
    assert_eq!(
        members[0].peer_urls,
        vec![format!("https://127.0.0.1:{}", etcd.peer_port)]
    );
    assert_eq!(members[0].client_urls, vec![etcd.client_url()]);

    // A refused endpoint is classified, within the timeout.
    let closed = format!("https://127.0.0.1:{}", free_port());
    let start = Instant::now();
    let err = etcd::connect(&closed, Some(&tls), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(err, EtcdFailure::Refused);
    assert!(start.elapsed() < Duration::from_secs(3));
    // No client identity: etcd (--client-cert-auth) rejects the session; a TLS failure.
    let no_id = EtcdTls::new(&etcd.ca(), None).unwrap();
    let err = etcd::connect(&etcd.client_url(), Some(&no_id), Duration::from_secs(2))
        .await
        .unwrap_err();
    eprintln!("etcd without a client certificate: {err}");
    assert!(
        matches!(&err, EtcdFailure::Tls(m) if m.contains("requires a client certificate")),
        "{err:?}"
    );
    assert!(err.trust_failure().is_none());
    // A client certificate from another CA: rejected by the member, named as such.
    let dir = TempDir::new().unwrap();
    let rogue = TestCa::new("rogue").unwrap();
    let (c, k) = rogue
        .issue(&CertSpec::client("intruder", None))
        .unwrap()
        .write(dir.path(), "intruder")
        .unwrap();
    let rogue_id =
        ClientIdentity::load((named(Input::EtcdCert), &c), (named(Input::EtcdKey), &k)).unwrap();
    let rogue_tls = EtcdTls::new(&etcd.ca(), Some(&rogue_id)).unwrap();
    let err = etcd::connect(&etcd.client_url(), Some(&rogue_tls), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EtcdFailure::Tls(m) if m.contains("does not accept our client certificate")),
        "{err:?}"
    );
    // http:// with TLS material is invalid input.
    let err = etcd::connect(
        &format!("http://127.0.0.1:{}", etcd.client_port),
        Some(&tls),
        TIMEOUT,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, EtcdFailure::Endpoint { .. }), "{err:?}");
}

#[tokio::test]
async fn write_probe_leaves_no_keys_and_revokes_its_lease() {
    let etcd = Etcd::start().await;
    let mut m = etcd::connect(&etcd.client_url(), Some(&etcd.etcd_tls()), TIMEOUT)
        .await
        .unwrap();
    let w = m
        .write_probe("cp-2/evil name", Duration::from_secs(30))
        .await
        .expect("write probe");
    eprintln!("write probe on loopback: {w:?}");
    assert!(
        w.key.starts_with("/joinguard/preflight/cp-2_evil_name/"),
        "{}",
        w.key
    );
    assert!(
        w.granted_ttl <= 10,
        "TTL capped at 10 s, got {}",
        w.granted_ttl
    );

    let mut raw = etcd.raw_client().await;
    let left = raw
        .get(
            PREFLIGHT_PREFIX,
            Some(
                etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_count_only(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(left.count(), 0, "keys left under {PREFLIGHT_PREFIX}");
    let leases = raw.leases().await.unwrap();
    assert!(
        leases.leases().iter().all(|l| l.id() != w.lease_id),
        "lease {:x} still exists",
        w.lease_id
    );
}

#[tokio::test]
async fn snapshot_probe_stops_at_the_byte_cap() {
    let etcd = Etcd::start().await;
    let mut raw = etcd.raw_client().await;
    // Grow the backend beyond one 32 KiB snapshot chunk (etcd `snapshotSendBufferSize`).
    let value = vec![b'x'; 4096];
    for i in 0..200 {
        raw.put(format!("/fill/{i:04}"), value.clone(), None)
            .await
            .unwrap();
    }
    let mut m = etcd::connect(&etcd.client_url(), Some(&etcd.etcd_tls()), TIMEOUT)
        .await
        .unwrap();
    // etcd commits its backend in batches (every 100 ms, `--backend-batch-interval`): Status
    // reports the new size once the batch of the puts above is committed.
    let cap = 64 * 1024;
    let grown_by = std::time::Instant::now() + Duration::from_secs(5);
    let db_size = loop {
        let size = m.status().await.unwrap().1.db_size as u64;
        if size > 2 * cap || std::time::Instant::now() > grown_by {
            break size;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(db_size > 2 * cap, "db {db_size} B");
    let s = m
        .snapshot_probe(cap, Duration::from_secs(10))
        .await
        .expect("snapshot probe");
    eprintln!(
        "snapshot probe on loopback: {} B in {:?} (first byte {:?}) = {:.1} MB/s, db {} B",
        s.bytes,
        s.elapsed,
        s.first_byte,
        s.bytes_per_second() / 1e6,
        db_size
    );
    assert_eq!(s.stop, SnapshotStop::ByteCap);
    assert!(s.bytes >= cap && s.bytes < db_size, "{s:?}");
    assert!(s.remaining_bytes.unwrap_or(0) > 0);
    assert!(s.bytes_per_second() > 0.0);

    // The member is unharmed and the channel still usable after the cancel.
    m.status().await.expect("status after cancelled snapshot");

    // Without a cap that matters, the whole snapshot arrives.
    let s = m
        .snapshot_probe(u64::MAX, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(s.stop, SnapshotStop::Complete);
    assert!(s.bytes >= db_size, "{s:?}");
}

// ---------------------------------------------------------------------------------------------
// etcd peer port

#[tokio::test]
async fn peer_probe_with_identity_measures_rtt_and_without_a_ca_signed_cert_fails() {
    let etcd = Etcd::start().await;
    let t = target(TargetKind::EtcdPeer, etcd.peer_port);
    let tls = TlsClient::new(&etcd.ca(), Some(&etcd.identity()), &[ALPN_HTTP1]).unwrap();

    let r = peer::probe(&t, Some(&tls), 10, Duration::from_millis(10), TIMEOUT)
        .await
        .expect("peer probe");
    assert_eq!(r.kind, ProbeKind::EtcdPeerProbe);
    assert!(r.fallback.is_none());
    assert_eq!(r.samples.len(), 10);
    let rtts: Vec<Duration> = r
        .samples
        .iter()
        .map(|s| s.result.clone().expect("every sample answered"))
        .collect();
    eprintln!(
        "peer /raft/probing on loopback: setup {:?} (tcp {:?}, tls {:?}), warm-up {:?}, samples {:?}",
        r.setup.as_ref().map(|s| s.connect + s.handshake),
        r.setup.as_ref().map(|s| s.connect),
        r.setup.as_ref().map(|s| s.handshake),
        r.warmup,
        rtts
    );
    assert!(rtts.iter().all(|d| *d < Duration::from_secs(1)));

    // A session also reports the member's clock.
    let mut s = peer::PeerSession::open(&t.host, t.port, &tls, TIMEOUT)
        .await
        .unwrap();
    assert!(s.probe(TIMEOUT).await.unwrap().server_now.is_some());

    // A client certificate from another CA: the peer rejects it (after the TLS 1.3 handshake).
    let dir = TempDir::new().unwrap();
    let rogue = TestCa::new("rogue").unwrap();
    let (c, k) = rogue
        .issue(&CertSpec::client("intruder", None))
        .unwrap()
        .write(dir.path(), "intruder")
        .unwrap();
    let rogue_id =
        ClientIdentity::load((named(Input::EtcdCert), &c), (named(Input::EtcdKey), &k)).unwrap();
    let tls_rogue = TlsClient::new(&etcd.ca(), Some(&rogue_id), &[ALPN_HTTP1]).unwrap();
    let err = peer::probe(&t, Some(&tls_rogue), 3, Duration::ZERO, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, HttpFailure::Tls(TlsFailure::Handshake(m)) if m.contains("does not accept our client certificate")),
        "{err:?}"
    );
    assert!(err.trust_failure().is_none(), "our side trusted the server");

    // No client certificate at all: also a TLS failure, at the handshake (when the server's
    // alert beats the client's Finished, as with etcd 3.5.1) or at the first request.
    let err = match peer::PeerSession::open(&t.host, t.port, &tls.without_identity(), TIMEOUT).await
    {
        Ok(mut s) => s.probe(TIMEOUT).await.unwrap_err(),
        Err(e) => e,
    };
    assert!(
        matches!(&err, HttpFailure::Tls(TlsFailure::Handshake(m)) if m.contains("requires a client certificate")),
        "{err:?}"
    );

    // Without an identity the probe falls back to TCP connect timing and says so.
    let r = peer::probe(
        &t,
        Some(&tls.without_identity()),
        3,
        Duration::ZERO,
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(r.kind, ProbeKind::TcpConnect);
    assert!(r.fallback.as_deref().unwrap().contains("TCP connect"));
    assert!(r.samples.iter().all(|s| s.result.is_ok()));
}
