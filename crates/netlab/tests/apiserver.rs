//! The API server stand-in, checked with the real `kubectl` (and `curl`) from a joiner host
//! against objects in a real etcd: CRUD with optimistic concurrency, bootstrap-token
//! authentication, kubeadm's RBAC, programmable faults, and the kubeadm init fixture. Needs root.
//!
//! The tests take a process-wide lock so that only one lab runs at a time (2 cores).

use std::path::PathBuf;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use netlab::apiserver::fixture::{self, FixtureOptions};
use netlab::apiserver::{ApiServer, ApiServerOptions, FaultKind, FaultRule, Method};
use netlab::etcd::EtcdCluster;
use netlab::process::output_within;
use netlab::Lab;
use serde_json::Value;

const CMD_TIMEOUT: Duration = Duration::from_secs(30);
const TOKEN: &str = "abcdef.0123456789abcdef";

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A lab with the stand-in on `api`, a 1-member etcd on `m1`, and a `joiner`. Fields drop in
/// order: server, then etcd, then the lab.
struct Env {
    api: ApiServer,
    etcd: EtcdCluster,
    lab: Lab,
}

fn env() -> Env {
    let lab = Lab::builder()
        .hosts(["api", "m1", "joiner"])
        .build()
        .expect("lab");
    let etcd = EtcdCluster::start(&lab, &[lab.host("m1")], &Default::default()).expect("etcd");
    etcd.wait_healthy(Duration::from_secs(20))
        .expect("etcd healthy");
    let api = ApiServer::start(lab.host("api"), &etcd, ApiServerOptions::default())
        .expect("API server stand-in");
    Env { api, etcd, lab }
}

impl Env {
    /// Writes a kubeconfig with `token` (or none) and returns its path.
    fn kubeconfig(&self, name: &str, token: Option<&str>) -> PathBuf {
        let path = self.lab.dir().join(format!("kubeconfig-{name}"));
        std::fs::write(&path, self.api.kubeconfig(token)).expect("write kubeconfig");
        path
    }

    /// Runs kubectl in the joiner with `token` (anonymous when `None`).
    fn kubectl(&self, token: Option<&str>, args: &[&str]) -> Output {
        let name = token.map_or("anonymous".to_string(), |t| {
            t.split('.').next().unwrap_or("t").to_string()
        });
        let kc = self.kubeconfig(&name, token);
        let home = self.lab.dir().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let mut cmd = self.lab.host("joiner").command("kubectl");
        cmd.env("HOME", &home)
            .arg("--kubeconfig")
            .arg(&kc)
            .arg("--cache-dir")
            .arg(home.join("cache"))
            .arg("--request-timeout=20s")
            .args(args);
        output_within(&mut cmd, CMD_TIMEOUT).expect("kubectl ran")
    }

    /// Runs curl in the joiner against the stand-in with the CA, returning the output.
    fn curl(&self, token: Option<&str>, path: &str, extra: &[&str]) -> Output {
        let ca = self
            .api
            .ca()
            .write_ca(self.lab.dir(), "kubernetes-ca")
            .expect("CA file");
        let mut cmd = self.lab.host("joiner").command("curl");
        cmd.arg("-sS")
            .arg("-i")
            .arg("--max-time")
            .arg("15")
            .arg("--cacert")
            .arg(ca);
        if let Some(t) = token {
            cmd.arg("-H").arg(format!("Authorization: Bearer {t}"));
        }
        cmd.args(extra).arg(format!("{}{path}", self.api.url()));
        output_within(&mut cmd, CMD_TIMEOUT).expect("curl ran")
    }

    /// etcdctl `get <key> -w json`, parsed.
    fn etcd_get(&self, key: &str) -> Value {
        let out = output_within(
            self.etcd
                .etcdctl(self.lab.host("joiner"))
                .args(["get", key, "-w", "json"]),
            CMD_TIMEOUT,
        )
        .expect("etcdctl ran");
        assert!(out.status.success(), "etcdctl get {key}: {}", text(&out));
        serde_json::from_slice(&out.stdout).expect("etcdctl JSON")
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        text(out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(out: &Output, what: &str) -> String {
    assert!(
        !out.status.success(),
        "{what} succeeded unexpectedly:\n{}",
        text(out)
    );
    text(out)
}

/// The HTTP status code and body of a `curl -i` answer (the last response block).
fn http(out: &Output) -> (u16, String, String) {
    let t = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let (head, body) = t.rsplit_once("\n\n").unwrap_or((&t, ""));
    let head = head
        .rsplit("HTTP/")
        .next()
        .map(|h| format!("HTTP/{h}"))
        .unwrap_or_default();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head, body.to_string())
}

fn write_file(env: &Env, name: &str, v: &Value) -> PathBuf {
    let p = env.lab.dir().join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

#[test]
fn apiserver_kubectl_crud_with_resource_versions_from_etcd() {
    let _serial = serial();
    let t = Instant::now();
    let env = env();
    let admin = Some(env.api.admin_token().to_string());
    let admin = admin.as_deref();

    // Health and version, anonymously.
    let out = env.kubectl(None, &["get", "--raw", "/readyz"]);
    assert_eq!(ok(&out, "get --raw /readyz"), "ok");
    let out = env.kubectl(None, &["version", "-o", "json"]);
    let v: Value = serde_json::from_slice(ok(&out, "kubectl version").as_bytes()).unwrap();
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.32.0-standin", "{v}");

    // Create from a file.
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "default"},
        "data": {"k": "v1"},
    });
    let file = write_file(&env, "cm.json", &cm);
    let out = env.kubectl(admin, &["create", "-f", file.to_str().unwrap()]);
    assert!(
        ok(&out, "create").contains("configmap/x created"),
        "{}",
        text(&out)
    );
    let again = env.kubectl(admin, &["create", "-f", file.to_str().unwrap()]);
    let msg = fails(&again, "second create");
    assert!(msg.contains(r#"configmaps "x" already exists"#), "{msg}");

    // Get: resourceVersion is the etcd mod revision of the key.
    let out = env.kubectl(admin, &["get", "configmap", "x", "-o", "json"]);
    let got: Value = serde_json::from_str(&ok(&out, "get -o json")).unwrap();
    let rv1 = got["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let kv = env.etcd_get("/registry/configmaps/default/x");
    assert_eq!(kv["kvs"][0]["mod_revision"].to_string(), rv1, "{kv}");
    assert!(got["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    assert!(got["metadata"]["creationTimestamp"].as_str().is_some());
    let stored: Value = serde_json::from_slice(
        &STANDARD
            .decode(kv["kvs"][0]["value"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["data"]["k"], "v1");
    assert!(
        stored["metadata"].get("resourceVersion").is_none(),
        "{stored}"
    );

    // The default (table) output and list.
    let out = env.kubectl(admin, &["get", "cm"]);
    let table = ok(&out, "get cm");
    assert!(table.lines().any(|l| l.starts_with("x ")), "{table}");

    // Replace with the current resourceVersion works and bumps it.
    let mut newer = got.clone();
    newer["data"]["k"] = "v2".into();
    let file2 = write_file(&env, "cm2.json", &newer);
    let out = env.kubectl(admin, &["replace", "-f", file2.to_str().unwrap()]);
    assert!(
        ok(&out, "replace").contains("configmap/x replaced"),
        "{}",
        text(&out)
    );
    let kv = env.etcd_get("/registry/configmaps/default/x");
    let rv2 = kv["kvs"][0]["mod_revision"].to_string();
    assert_ne!(rv1, rv2);

    // Replace with the stale one is a 409 Conflict, and etcd keeps v2.
    let mut stale = got.clone();
    stale["data"]["k"] = "v3".into();
    let file3 = write_file(&env, "cm3.json", &stale);
    let out = env.kubectl(admin, &["replace", "-f", file3.to_str().unwrap()]);
    let msg = fails(&out, "stale replace");
    assert!(
        msg.contains(r#"Error from server (Conflict)"#)
            && msg.contains(r#"Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your changes to the latest version and try again"#),
        "{msg}"
    );
    let kv = env.etcd_get("/registry/configmaps/default/x");
    let stored: Value = serde_json::from_slice(
        &STANDARD
            .decode(kv["kvs"][0]["value"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["data"]["k"], "v2");
    assert_eq!(kv["kvs"][0]["mod_revision"].to_string(), rv2);
    let log = env.api.requests();
    assert!(
        log.iter().any(|r| r.method == Method::PUT
            && r.path == "/api/v1/namespaces/default/configmaps/x"
            && r.status == Some(409)
            && r.user.as_deref() == Some("kubernetes-admin")),
        "{log:?}"
    );

    // Patch (merge), then 404 for a missing object with the real Status.
    let out = env.kubectl(
        admin,
        &[
            "patch",
            "configmap",
            "x",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"p":"1"}}"#,
        ],
    );
    ok(&out, "patch");
    let out = env.kubectl(admin, &["get", "cm", "x", "-o", "jsonpath={.data.p}"]);
    assert_eq!(ok(&out, "get after patch"), "1");
    let out = env.kubectl(
        admin,
        &["get", "--raw", "/api/v1/namespaces/default/configmaps/nope"],
    );
    let msg = fails(&out, "get missing");
    assert!(msg.contains(r#"configmaps "nope" not found"#), "{msg}");
    let out = env.curl(admin, "/api/v1/namespaces/default/configmaps/nope", &[]);
    let (code, _, body) = http(&out);
    assert_eq!(code, 404);
    assert_eq!(
        body,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"configmaps"},"code":404}"#
    );

    // Delete removes the key from etcd.
    let out = env.kubectl(admin, &["delete", "configmap", "x"]);
    assert!(ok(&out, "delete").contains("deleted"), "{}", text(&out));
    let kv = env.etcd_get("/registry/configmaps/default/x");
    assert!(kv.get("kvs").is_none(), "{kv}");
    eprintln!("apiserver_kubectl_crud: {:?}", t.elapsed());
}

/// The fixture, plus a token without kubeadm's group and an expired one.
fn init(env: &Env, key: Option<&str>) -> fixture::Fixture {
    let mut opts = FixtureOptions::new(TOKEN, env.etcd.ca());
    opts.certificate_key = key.map(str::to_string);
    let f = fixture::kubeadm_init(&env.api, opts).expect("fixture");
    env.api
        .upsert(
            fixture::bootstrap_token_secret(
                "nogrp1.0123456789abcdef",
                Some(SystemTime::now() + Duration::from_secs(3600)),
                &[],
                "no kubeadm group",
            )
            .unwrap(),
        )
        .unwrap();
    env.api
        .upsert(
            fixture::bootstrap_token_secret(
                "old123.0123456789abcdef",
                Some(SystemTime::now() - Duration::from_secs(60)),
                &[fixture::NODE_BOOTSTRAP_GROUP],
                "expired",
            )
            .unwrap(),
        )
        .unwrap();
    f
}

#[test]
fn apiserver_bootstrap_tokens_and_kubeadm_rbac() {
    let _serial = serial();
    let t = Instant::now();
    let env = env();
    init(&env, Some(&"5a".repeat(32)));

    // The kubeadm token reads kubeadm-config and kubeadm-certs.
    let out = env.kubectl(
        Some(TOKEN),
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "kubeadm-config",
            "-o",
            "json",
        ],
    );
    let cm: Value = serde_json::from_str(&ok(&out, "token get kubeadm-config")).unwrap();
    assert!(cm["data"]["ClusterConfiguration"]
        .as_str()
        .unwrap()
        .contains("kind: ClusterConfiguration"));
    let out = env.kubectl(
        Some(TOKEN),
        &["get", "secret", "-n", "kube-system", "kubeadm-certs"],
    );
    ok(&out, "token get kubeadm-certs");
    let log = env.api.requests();
    assert!(
        log.iter()
            .any(|r| r.user.as_deref() == Some("system:bootstrap:abcdef")),
        "{log:?}"
    );

    // ...but may not list secrets or read other configmaps.
    let out = env.kubectl(
        Some(TOKEN),
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/kube-system/configmaps/kube-proxy",
        ],
    );
    let msg = fails(&out, "token get other configmap");
    assert!(msg.contains(r#"configmaps "kube-proxy" is forbidden: User "system:bootstrap:abcdef" cannot get resource "configmaps" in API group "" in the namespace "kube-system""#), "{msg}");

    // A token without kubeadm's group: 403 for kubeadm-certs, with kube's message.
    let out = env.curl(
        Some("nogrp1.0123456789abcdef"),
        "/api/v1/namespaces/kube-system/secrets/kubeadm-certs",
        &[],
    );
    let (code, _, body) = http(&out);
    assert_eq!(code, 403, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        r#"secrets "kubeadm-certs" is forbidden: User "system:bootstrap:nogrp1" cannot get resource "secrets" in API group "" in the namespace "kube-system""#
    );
    let out = env.kubectl(
        Some("nogrp1.0123456789abcdef"),
        &["get", "secret", "-n", "kube-system", "kubeadm-certs"],
    );
    assert!(fails(&out, "nogrp get kubeadm-certs").contains("Error from server (Forbidden)"));

    // Wrong secret and expired token: 401.
    for bad in [
        "abcdef.0123456789abcdee",
        "old123.0123456789abcdef",
        "not-a-token",
    ] {
        let out = env.curl(
            Some(bad),
            "/api/v1/namespaces/kube-system/configmaps/kubeadm-config",
            &[],
        );
        let (code, _, body) = http(&out);
        assert_eq!(code, 401, "{bad}: {body}");
        assert_eq!(
            body,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
    }
    let out = env.kubectl(
        Some("old123.0123456789abcdef"),
        &["get", "cm", "-n", "kube-system", "kubeadm-config"],
    );
    let msg = fails(&out, "expired token");
    assert!(msg.contains("Unauthorized"), "{msg}");

    // Anonymous: cluster-info yes, kube-system secrets no.
    let out = env.kubectl(
        None,
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/kube-public/configmaps/cluster-info",
        ],
    );
    let ci: Value = serde_json::from_str(&ok(&out, "anonymous cluster-info")).unwrap();
    assert!(ci["data"]["jws-kubeconfig-abcdef"].is_string());
    let out = env.curl(
        None,
        "/api/v1/namespaces/kube-system/secrets/kubeadm-certs",
        &[],
    );
    let (code, _, body) = http(&out);
    assert_eq!(code, 403);
    assert!(body.contains(r#"User \"system:anonymous\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kube-system\""#), "{body}");
    let out = env.kubectl(
        None,
        &["get", "--raw", "/api/v1/namespaces/kube-system/secrets"],
    );
    assert!(fails(&out, "anonymous list secrets").contains(
        r#"secrets is forbidden: User "system:anonymous" cannot list resource "secrets""#
    ));
    let out = env.curl(None, "/api", &[]);
    assert_eq!(http(&out).0, 403, "anonymous discovery is not public");
    eprintln!("apiserver_bootstrap_tokens: {:?}", t.elapsed());
}

#[test]
fn apiserver_faults_are_observable_by_clients() {
    let _serial = serial();
    let t = Instant::now();
    let env = env();
    let faults = env.api.faults();
    let path = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
    init(&env, None);

    // 429 with Retry-After.
    faults.add(
        FaultRule::always(FaultKind::TooManyRequests { retry_after_s: 7 })
            .path("cluster-info")
            .times(1),
    );
    let (code, head, body) = http(&env.curl(None, path, &[]));
    assert_eq!(code, 429, "{head}{body}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 7"),
        "{head}"
    );
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 7);
    assert_eq!(http(&env.curl(None, path, &[])).0, 200, "times(1) used up");

    // 500 etcdserver: leader changed, as kubectl shows it.
    faults.add(
        FaultRule::always(FaultKind::LeaderChanged)
            .method(Method::GET)
            .path("cluster-info"),
    );
    let out = env.kubectl(None, &["get", "--raw", path]);
    let msg = fails(&out, "leader changed");
    assert!(msg.contains("etcdserver: leader changed"), "{msg}");
    faults.clear();

    // 503.
    faults.add(
        FaultRule::always(FaultKind::Unavailable)
            .path("/readyz")
            .times(1),
    );
    let (code, _, body) = http(&env.curl(None, "/readyz", &[]));
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("ServiceUnavailable"));

    // Reset: the connection drops without a response.
    faults.add(
        FaultRule::always(FaultKind::Reset)
            .path("cluster-info")
            .times(1),
    );
    let out = env.curl(None, path, &[]);
    let err = fails(&out, "reset");
    assert!(
        err.contains("reset") || err.contains("Empty reply") || err.contains("closed"),
        "{err}"
    );
    assert_eq!(http(&env.curl(None, path, &[])).0, 200);

    // Stall, then the real answer; and stall then drop.
    faults.add(
        FaultRule::always(FaultKind::Stall(Duration::from_millis(1500)))
            .path("cluster-info")
            .times(1),
    );
    let s = Instant::now();
    assert_eq!(http(&env.curl(None, path, &[])).0, 200);
    assert!(
        s.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        s.elapsed()
    );
    faults.add(
        FaultRule::always(FaultKind::Stall(Duration::from_secs(10)))
            .path("cluster-info")
            .times(1),
    );
    let out = env.curl(None, path, &["--max-time", "1"]);
    assert!(fails(&out, "stall past client timeout").contains("timed out"));
    faults.add(
        FaultRule::always(FaultKind::StallThenReset(Duration::from_millis(300)))
            .path("cluster-info")
            .times(1),
    );
    fails(&env.curl(None, path, &[]), "stall then reset");

    // The request log shows what the faults did.
    let log = env.api.requests();
    let codes: Vec<Option<u16>> = log
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.status)
        .collect();
    assert!(
        codes.contains(&Some(429)) && codes.contains(&Some(500)) && codes.contains(&None),
        "{codes:?}"
    );
    assert_eq!(faults.active(), 0);
    eprintln!("apiserver_faults: {:?}", t.elapsed());
}

#[test]
fn apiserver_fixture_matches_kubeadm_formats() {
    let _serial = serial();
    let t = Instant::now();
    let env = env();
    let key_hex = "0f".repeat(16) + &"a1".repeat(16);
    let f = init(&env, Some(&key_hex));

    // cluster-info: the JWS verifies with the token secret (HMAC recomputed here).
    let ci = env
        .api
        .get_object("v1", "ConfigMap", "kube-public", "cluster-info")
        .unwrap()
        .expect("cluster-info");
    let kubeconfig = ci["data"]["kubeconfig"].as_str().unwrap();
    assert_eq!(kubeconfig, f.cluster_info_kubeconfig);
    assert!(
        kubeconfig.contains(&format!("server: {}", env.api.url())),
        "{kubeconfig}"
    );
    let jws = ci["data"]["jws-kubeconfig-abcdef"].as_str().unwrap();
    let (header, sig) = jws.split_once("..").expect("detached JWS");
    let header_json: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    assert_eq!(
        header_json,
        serde_json::json!({"alg": "HS256", "kid": "abcdef"})
    );
    let signing_input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(kubeconfig));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
    ring::hmac::verify(
        &key,
        signing_input.as_bytes(),
        &URL_SAFE_NO_PAD.decode(sig).unwrap(),
    )
    .expect("JWS verifies with the token secret");

    // The CA in cluster-info is the serving CA, and the pin is over its SPKI.
    let ca_b64 = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
        .unwrap();
    let ca_pem = String::from_utf8(STANDARD.decode(ca_b64).unwrap()).unwrap();
    assert_eq!(ca_pem, env.api.ca_pem());
    let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let spki = cert.tbs_certificate.subject_pki.raw;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(f.ca_pin, format!("sha256:{hex}"));

    // kubeadm-certs decrypts with the key (AES-256-GCM, nonce first), through kubectl.
    let out = env.kubectl(
        Some(TOKEN),
        &[
            "get",
            "secret",
            "-n",
            "kube-system",
            "kubeadm-certs",
            "-o",
            "json",
        ],
    );
    let secret: Value = serde_json::from_str(&ok(&out, "get kubeadm-certs")).unwrap();
    let key_bytes: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&key_hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let aead = ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, &key_bytes).unwrap(),
    );
    let open = |name: &str| -> String {
        let sealed = STANDARD
            .decode(
                secret["data"][name]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name} missing")),
            )
            .unwrap();
        let (nonce, rest) = sealed.split_at(12);
        let mut buf = rest.to_vec();
        let plain = aead
            .open_in_place(
                ring::aead::Nonce::try_assume_unique_for_key(nonce).unwrap(),
                ring::aead::Aad::empty(),
                &mut buf,
            )
            .expect("decrypts with the certificate key");
        String::from_utf8(plain.to_vec()).unwrap()
    };
    assert_eq!(open("etcd-ca.crt"), env.etcd.ca().cert_pem());
    assert_eq!(open("etcd-ca.key"), env.etcd.ca().key_pem());
    assert_eq!(open("ca.crt"), env.api.ca_pem());
    for name in [
        "ca.key",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "sa.key",
        "sa.pub",
    ] {
        assert!(open(name).contains("-----BEGIN"), "{name}");
    }
    assert!(
        fixture::decrypt_bytes(
            &STANDARD
                .decode(secret["data"]["ca.crt"].as_str().unwrap())
                .unwrap(),
            &[0u8; 32]
        )
        .is_none(),
        "a wrong key does not decrypt"
    );

    // kubeadm-config names the control-plane endpoint and stacked etcd.
    let cc = &f.cluster_configuration;
    assert!(cc.contains("apiVersion: kubeadm.k8s.io/v1beta4"));
    assert!(
        cc.contains(&format!("controlPlaneEndpoint: {}", env.api.addr())),
        "{cc}"
    );
    assert!(cc.contains("etcd:\n  local:\n"), "{cc}");
    // Nothing secret in the fixture's Debug output.
    let dbg = format!("{f:?}");
    assert!(
        !dbg.contains("0123456789abcdef") && !dbg.contains(&key_hex),
        "{dbg}"
    );
    eprintln!("apiserver_fixture: {:?}", t.elapsed());
}
