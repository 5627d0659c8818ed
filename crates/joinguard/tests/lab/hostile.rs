//! Hardening, end to end with the real binary (docs/hardening.md):
//! - against every hostile server of `netlab::hostile`, `preflight` (API endpoint, etcd endpoint,
//!   token discovery) and `update-status` end within `--timeout` + 1 s, exit non-zero, name the
//!   target and the fault, and stay under 100 MB peak RSS;
//! - bad flags and config files exit 2 with a message naming the flag or field, never a panic;
//! - at `-vvv`, no token secret, certificate key or private key reaches any output or file;
//! - a `--write-probe` run killed between its put and its revoke leaves no key once the lease
//!   TTL has passed.
//!
//! The hostile cases listen on loopback and run in parallel; the two lab tests take a lock.
//! Needs root (the lab tests, and ICMP in preflight).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netlab::harness::{serial, Layout, CERT_KEY, SECRET, TOKEN};
use netlab::hostile::{CertFault, Fault, HostileServer};
use netlab::pki::{CertSpec, TestCa};
use netlab::process::{output_with_peak_rss, MeasuredOutput};

use crate::JOINGUARD;

const TIMEOUT: Duration = Duration::from_secs(4);
const MAX_RSS_KIB: u64 = 100 * 1024;

fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn text(m: &MeasuredOutput) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&m.output.stdout),
        String::from_utf8_lossy(&m.output.stderr)
    )
}

/// A token kubeconfig for `server`, trusting `ca`.
fn kubeconfig(server: &str, ca: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    \
         user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: hostile-test-token\n",
        b64(ca)
    )
}

/// Which command a hostile case runs, and against what.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Via {
    /// `preflight ENDPOINT --apiserver-cacert`: TCP, TLS, /readyz.
    PreflightApi,
    /// `preflight --etcd-endpoints URL` with an etcd identity: etcd-client over TLS.
    PreflightEtcd,
    /// `preflight ENDPOINT --token --discovery-token-unsafe-skip-ca-verification`: discovery.
    PreflightToken,
    /// `update-status --kubeconfig` pointing at the server.
    UpdateStatus,
}

struct Case {
    via: Via,
    fault: Fault,
    /// Any of these in the output names the fault.
    fault_words: &'static [&'static str],
}

struct Files {
    dir: tempfile::TempDir,
    ca: TestCa,
}

impl Files {
    fn new() -> Files {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("hostile-ca").unwrap();
        ca.write_ca(dir.path(), "ca").unwrap();
        ca.issue(&CertSpec::client("joinguard", None))
            .unwrap()
            .write(dir.path(), "client")
            .unwrap();
        Files { dir, ca }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn command(files: &Files, via: Via, server: &HostileServer, n: usize) -> Command {
    let mut cmd = Command::new(JOINGUARD);
    let timeout = format!("{}s", TIMEOUT.as_secs());
    match via {
        Via::PreflightApi => {
            cmd.args(["preflight", &server.endpoint(), "--apiserver-cacert"])
                .arg(files.path("ca.crt"));
        }
        Via::PreflightEtcd => {
            // https even for the plain-HTTP impostor: TLS is what an etcd URL promises.
            cmd.args(["preflight", "--etcd-endpoints"])
                .arg(format!("https://{}", server.endpoint()))
                .arg("--etcd-cacert")
                .arg(files.path("ca.crt"))
                .arg("--etcd-cert")
                .arg(files.path("client.crt"))
                .arg("--etcd-key")
                .arg(files.path("client.key"));
        }
        Via::PreflightToken => {
            cmd.args(["preflight", &server.endpoint(), "--token", TOKEN])
                .arg("--discovery-token-unsafe-skip-ca-verification");
        }
        Via::UpdateStatus => {
            let kc = files.path(&format!("kubeconfig-{n}"));
            std::fs::write(
                &kc,
                kubeconfig(
                    &format!("https://{}", server.endpoint()),
                    files.ca.cert_pem(),
                ),
            )
            .unwrap();
            cmd.args(["update-status", "--kubeconfig"])
                .arg(kc)
                .args(["--node-name", "cp-2", "--apiserver-advertise-address"])
                .arg("127.0.0.1");
        }
    }
    cmd.args(["--timeout", &timeout]);
    cmd
}

fn hostile_cases() -> Vec<Case> {
    use CertFault::*;
    use Fault::*;
    use Via::*;
    let timeout: &[&str] = &["timed out", "timeout", "Timeout", "deadline"];
    let tls_expired: &[&str] = &["expired"];
    let tls_not_yet: &[&str] = &["not valid yet", "not yet valid", "NotValidYet"];
    let tls_san: &[&str] = &["not valid for", "NotValidForName", "SAN", "name"];
    let tls_unknown: &[&str] = &["UnknownIssuer", "unknown issuer", "not signed", "issuer"];
    let too_big: &[&str] = &["too large", "length limit", "exceeded", "body over"];
    let broken: &[&str] = &[
        "closed",
        "GOAWAY",
        "go away",
        "reset",
        "EOF",
        "eof",
        "incomplete",
        "unexpected end",
        "broken pipe",
        "protocol error",
    ];
    let not_tls: &[&str] = &[
        "corrupt",
        "InvalidContentType",
        "not TLS",
        "unexpected message",
        "TLS",
    ];
    let mut cases = Vec::new();
    let mut add = |via, fault, fault_words| {
        cases.push(Case {
            via,
            fault,
            fault_words,
        })
    };
    for via in [PreflightApi, UpdateStatus] {
        add(via, Silent, timeout);
        add(via, SlowTlsHandshake, timeout);
        add(via, SlowHeaders, timeout);
        add(via, HugeBody, too_big);
        add(via, EndlessHeaders, too_big);
        add(via, BadCert(Expired), tls_expired);
        add(via, BadCert(NotYetValid), tls_not_yet);
        add(via, BadCert(WrongSan), tls_san);
        add(via, BadCert(SelfSigned), tls_unknown);
        add(via, GoawayMidStream, broken);
    }
    for fault in [Silent, SlowHeaders, HugeBody, EndlessHeaders] {
        let words = match fault {
            HugeBody | EndlessHeaders => too_big,
            _ => timeout,
        };
        add(PreflightToken, fault, words);
    }
    add(PreflightEtcd, Silent, timeout);
    add(PreflightEtcd, SlowTlsHandshake, timeout);
    add(PreflightEtcd, BadCert(Expired), tls_expired);
    add(PreflightEtcd, GoawayMidStream, broken);
    add(PreflightEtcd, PlainHttp, not_tls);
    add(PreflightEtcd, Echo, not_tls);
    cases
}

#[test]
fn hostile_servers_end_in_time_name_the_target_and_the_fault_and_stay_small() {
    // The lab suites' lock, though no lab is built: 30 runs, seven at a time, on 2 cores would
    // disturb the timing the lab tests in this binary assert.
    let _s = serial();
    let files = Files::new();
    let cases = hostile_cases();
    let servers: Vec<HostileServer> = cases
        .iter()
        .map(|c| HostileServer::start(c.fault, &files.ca).expect("hostile server"))
        .collect();
    // A few at a time: the floods cost CPU, and the timing bound must hold on a busy machine.
    let results: Vec<MeasuredOutput> = std::thread::scope(|s| {
        let mut results: Vec<Option<MeasuredOutput>> = (0..cases.len()).map(|_| None).collect();
        for chunk in (0..cases.len()).collect::<Vec<_>>().chunks(7) {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&i| {
                    let mut cmd = command(&files, cases[i].via, &servers[i], i);
                    s.spawn(move || {
                        (
                            i,
                            output_with_peak_rss(&mut cmd, TIMEOUT + Duration::from_secs(20))
                                .expect("joinguard ran"),
                        )
                    })
                })
                .collect();
            for h in handles {
                let (i, m) = h.join().unwrap();
                results[i] = Some(m);
            }
        }
        results.into_iter().map(Option::unwrap).collect()
    });

    let mut failures = Vec::new();
    let mut table = String::new();
    let mut peak = 0;
    for ((case, server), m) in cases.iter().zip(&servers).zip(&results) {
        let out = text(m);
        let code = m.output.status.code().unwrap_or(-1);
        let endpoint = server.endpoint();
        let line = out
            .lines()
            .find(|l| l.contains(&endpoint) && case.fault_words.iter().any(|w| l.contains(w)))
            .or_else(|| {
                out.lines()
                    .find(|l| l.contains("[ERROR") || l.contains("joinguard"))
            })
            .unwrap_or("")
            .trim()
            .to_string();
        table.push_str(&format!(
            "{:<15} {:<22} exit {code}  {:>5} ms  {:>6} KiB  {line}\n",
            format!("{:?}", case.via),
            format!("{:?}", case.fault),
            m.took.as_millis(),
            m.peak_rss_kib
        ));
        peak = peak.max(m.peak_rss_kib);
        let what = format!("{:?} against {:?} ({endpoint})", case.via, case.fault);
        if m.killed || m.took > TIMEOUT + Duration::from_secs(1) {
            failures.push(format!("{what}: took {:?} (killed: {})", m.took, m.killed));
        }
        if code == 0 || code == 2 {
            failures.push(format!("{what}: exit {code}, want 1 or 3"));
        }
        if !out.contains(&endpoint) {
            failures.push(format!("{what}: the output does not name {endpoint}"));
        }
        if !case.fault_words.iter().any(|w| out.contains(w)) {
            failures.push(format!(
                "{what}: the output names none of {:?}",
                case.fault_words
            ));
        }
        if out.contains("panicked") {
            failures.push(format!("{what}: panicked"));
        }
        if m.peak_rss_kib >= MAX_RSS_KIB {
            failures.push(format!("{what}: peak RSS {} KiB", m.peak_rss_kib));
        }
    }
    eprintln!("{table}peak RSS over all cases: {peak} KiB");
    if !failures.is_empty() {
        for ((case, _), m) in cases.iter().zip(&servers).zip(&results) {
            eprintln!(
                "---- {:?} {:?}\n{}",
                case.via,
                case.fault,
                text(m).lines().take(40).collect::<Vec<_>>().join("\n")
            );
        }
        panic!("{} failures:\n{}", failures.len(), failures.join("\n"));
    }
}

/// One bad-input case: the command line (with `{dir}` for the case files), what stderr must
/// name, and the files to create first.
struct Bad {
    args: &'static str,
    want: &'static str,
    files: &'static [(&'static str, &'static str)],
}

const GOOD_KC: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    certificate-authority-data: {ca}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    token: abc\n";

fn bad_inputs() -> Vec<Bad> {
    let b = |args, want, files| Bad { args, want, files };
    vec![
        // preflight flags
        b("preflight", "--etcd-endpoints", &[]),
        b("preflight ftp://10.0.0.1:6443", "scheme", &[]),
        b("preflight https://10.0.0.1:6443/path", "path", &[]),
        b("preflight 198.18.0.1:6443 --timeout 10", "--timeout", &[]),
        b("preflight 198.18.0.1:6443 --timeout 100ms", "--timeout", &[]),
        b("preflight 198.18.0.1:6443 --wait forever", "--wait", &[]),
        b("preflight 198.18.0.1:6443 --etcd-election-timeout 60s", "--etcd-election-timeout", &[]),
        b("preflight 198.18.0.1:6443 --etcd-heartbeat-interval 1x", "--etcd-heartbeat-interval", &[]),
        b("preflight 198.18.0.1:6443 --etcd-endpoints ftp://198.18.0.2:2379", "--etcd-endpoints", &[]),
        b("preflight 198.18.0.1:6443 --etcd-endpoints https://u:pw@198.18.0.2:2379", "--etcd-endpoints", &[]),
        b("preflight 198.18.0.1:6443 --etcd-peer-endpoints https://198.18.0.2:2380/x", "--etcd-peer-endpoints", &[]),
        b("preflight 198.18.0.1:6443 --token abc", "--token", &[]),
        b("preflight 198.18.0.1:6443 --token abcdef.0123456789abcdef", "--discovery-token-ca-cert-hash", &[]),
        b("preflight 198.18.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash sha256:abcd", "64 hex digits", &[]),
        b("preflight 198.18.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash md5:abcd", "sha256:", &[]),
        b("preflight 198.18.0.1:6443 --token abcdef.0123456789abcdef --discovery-token-unsafe-skip-ca-verification --certificate-key zz", "certificate key", &[]),
        b("preflight 198.18.0.1:6443 --apiserver-cacert {dir}/missing.crt", "--apiserver-cacert", &[]),
        b("preflight 198.18.0.1:6443 --apiserver-cacert {dir}/junk.crt", "--apiserver-cacert", &[("junk.crt", "not a certificate\n")]),
        b("preflight 198.18.0.1:6443 --apiserver-cacert /dev/zero", "larger than", &[]),
        b("preflight 198.18.0.1:6443 --etcd-endpoints https://198.18.0.2:2379 --etcd-cert {dir}/c.crt", "--etcd-key", &[]),
        b("preflight 198.18.0.1:6443 --etcd-endpoints https://198.18.0.2:2379 --etcd-cacert {dir}/empty.crt", "--etcd-cacert", &[("empty.crt", "")]),
        b("preflight 198.18.0.1:6443 --etcd-endpoints https://198.18.0.2:2379 --etcd-cacert {dir}/ca.crt --etcd-cert {dir}/junk.crt --etcd-key {dir}/junk.key", "--etcd-cert", &[("junk.crt", "junk\n"), ("junk.key", "junk\n")]),
        b("preflight 198.18.0.1:6443 --node-name Bad_Name", "--node-name", &[]),
        b("preflight 198.18.0.1:6443 -o yaml", "--output", &[]),
        // JoinConfiguration files
        b("preflight --config {dir}/missing.yaml", "--config", &[]),
        b("preflight --config {dir}/join.yaml", "--config", &[("join.yaml", "{{{ not yaml")]),
        b("preflight --config {dir}/join.yaml", "JoinConfiguration", &[("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n")]),
        b("preflight --config {dir}/join.yaml", "apiVersion", &[("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta1\nkind: JoinConfiguration\n")]),
        b("preflight --config {dir}/join.yaml", "token", &[("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 198.18.0.1:6443\n    token: NOT-A-TOKEN\n    unsafeSkipCAVerification: true\ncontrolPlane: {}\n")]),
        b("preflight --config {dir}/join.yaml", "--discovery-token-ca-cert-hash", &[("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 198.18.0.1:6443\n    token: abcdef.0123456789abcdef\n    caCertHashes: [\"sha256:zz\"]\ncontrolPlane: {}\n")]),
        b("preflight --config /dev/zero", "larger than", &[]),
        // update-status flags and kubeconfig files
        b("update-status --kubeconfig {dir}/missing.conf --node-name cp-2", "--kubeconfig", &[]),
        b("update-status --kubeconfig /dev/zero --node-name cp-2", "larger than", &[]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "not a kubeconfig", &[("kc", "clusters: 7\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "https://", &[("kc", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://198.18.0.1:6443\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers: []\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "insecure-skip-tls-verify", &[("kc", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    insecure-skip-tls-verify: true\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: abc}\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "exec credential plugin", &[("kc", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    certificate-authority-data: {ca}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "certificate-authority-data", &[("kc", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    certificate-authority-data: '!!not base64!!'\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: abc}\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2", "without a key", &[("kc", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://198.18.0.1:6443\n    certificate-authority-data: {ca}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate-data: {ca}\n")]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2 --context nope", "\"nope\"", &[("kc", GOOD_KC)]),
        b("update-status --kubeconfig {dir}/kc --node-name Not_A_Node", "--node-name", &[("kc", GOOD_KC)]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2 --apiserver-bind-port 0", "--apiserver-bind-port", &[("kc", GOOD_KC)]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2 --apiserver-advertise-address 999.1.1.1", "--apiserver-advertise-address", &[("kc", GOOD_KC)]),
        b("update-status --kubeconfig {dir}/kc --node-name cp-2 --timeout soon", "--timeout", &[("kc", GOOD_KC)]),
        b("update-status --kubeconfig {dir}/kc --config {dir}/join.yaml", "worker join", &[("kc", GOOD_KC), ("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n")]),
        b("update-status --kubeconfig {dir}/kc --config {dir}/join.yaml", "kubernetesAPICall", &[("kc", GOOD_KC), ("join.yaml", "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane: {}\nnodeRegistration: {name: cp-2}\ntimeouts:\n  kubernetesAPICall: forever\n")]),
    ]
}

#[test]
fn bad_cli_and_config_inputs_exit_2_naming_the_flag_or_field() {
    let cases = bad_inputs();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let ca = TestCa::new("kubernetes").unwrap();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("ca.crt"), ca.cert_pem()).unwrap();
        for (name, content) in case.files {
            std::fs::write(
                dir.path().join(name),
                content.replace("{ca}", &b64(ca.cert_pem())),
            )
            .unwrap();
        }
        let args: Vec<String> = case
            .args
            .split(' ')
            .map(|a| a.replace("{dir}", &d))
            .collect();
        let m = output_with_peak_rss(Command::new(JOINGUARD).args(&args), Duration::from_secs(20))
            .unwrap();
        let stderr = String::from_utf8_lossy(&m.output.stderr);
        let code = m.output.status.code();
        let first = stderr.lines().next().unwrap_or("").to_string();
        eprintln!("{i:>2} exit {code:?} {:<70} {first}", case.args);
        if code != Some(2) || !stderr.contains(case.want) || stderr.contains("panicked") {
            failures.push(format!(
                "{}: exit {code:?}, want 2 and {:?}:\n{stderr}",
                case.args, case.want
            ));
        }
        if !m.output.stdout.is_empty() {
            failures.push(format!("{}: printed a report on bad input", case.args));
        }
        if stderr.contains("NOT-A-TOKEN") || stderr.contains(":pw@") {
            failures.push(format!("{}: repeated a secret: {stderr}", case.args));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn secrets_appear_in_no_output_and_no_file_at_top_verbosity() {
    let _s = serial();
    // api, joiner, m1; kubeadm < 1.22 (a ClusterStatus naming cp-1 at m1), kubeadm-certs under
    // CERT_KEY.
    let env = crate::lab()
        .layout(Layout::ClusterStatus)
        .upload_certs()
        .name("secrets_appear_in_no_output_and_no_file_at_top_verbosity")
        .build()
        .expect("lab environment");
    let (lab, api, fx) = (env.lab(), env.api(), env.fixture());

    // admin.conf-style kubeconfig: an embedded client key, the PEM the check looks for.
    let admin_id = api
        .ca()
        .issue(&CertSpec::client(
            "kubernetes-admin",
            Some("system:masters"),
        ))
        .unwrap();
    let inputs = tempfile::tempdir().unwrap();
    let token_conf = api.kubeconfig(Some(api.admin_token()));
    let cert_conf = token_conf.replace(
        &format!("    token: {}\n", api.admin_token()),
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&admin_id.cert_pem),
            b64(&admin_id.key_pem)
        ),
    );
    assert_ne!(cert_conf, token_conf);
    let admin = inputs.path().join("admin.conf");
    std::fs::write(&admin, &cert_conf).unwrap();
    // The same credentials against a port nobody listens on: the failure path.
    let dead = inputs.path().join("dead.conf");
    std::fs::write(
        &dead,
        cert_conf.replace(&api.addr().to_string(), &format!("{}:1", api.addr().ip())),
    )
    .unwrap();
    let key_line = admin_id
        .key_pem
        .lines()
        .nth(1)
        .expect("a PEM body line")
        .to_string();
    let secrets = [
        SECRET.to_string(),
        CERT_KEY.to_string(),
        "PRIVATE KEY".to_string(),
        key_line,
        b64(&admin_id.key_pem),
        api.admin_token().to_string(),
    ];

    let endpoint = api.addr().to_string();
    let wrong_key = "f".repeat(64);
    let runs: Vec<(&str, Vec<String>)> = vec![
        (
            "preflight, discovery + kubeadm-certs (ok)",
            vec![
                "preflight",
                &endpoint,
                "--token",
                TOKEN,
                "--discovery-token-ca-cert-hash",
                &fx.ca_pin,
                "--certificate-key",
                CERT_KEY,
                "--timeout",
                "30s",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        (
            "preflight, wrong certificate key",
            vec![
                "preflight",
                &endpoint,
                "--token",
                TOKEN,
                "--discovery-token-ca-cert-hash",
                &fx.ca_pin,
                "--certificate-key",
                &wrong_key,
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        (
            "preflight, wrong token secret",
            vec![
                "preflight",
                &endpoint,
                "--token",
                "abcdef.ffffffffffffffff",
                "--discovery-token-ca-cert-hash",
                &fx.ca_pin,
                "--certificate-key",
                CERT_KEY,
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        (
            "preflight, wrong pin",
            vec![
                "preflight",
                &endpoint,
                "--token",
                TOKEN,
                "--discovery-token-ca-cert-hash",
                &format!("sha256:{}", "00".repeat(32)),
                "--certificate-key",
                CERT_KEY,
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        (
            "update-status, client certificate (ok)",
            vec![
                "update-status",
                "--kubeconfig",
                admin.to_str().unwrap(),
                "--node-name",
                "cp-2",
                "--apiserver-advertise-address",
                "198.18.0.99",
                "-o",
                "json",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
        (
            "update-status, unreachable server",
            vec![
                "update-status",
                "--kubeconfig",
                dead.to_str().unwrap(),
                "--node-name",
                "cp-3",
                "--apiserver-advertise-address",
                "198.18.0.98",
                "--timeout",
                "3s",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        ),
    ];
    let mut expected_codes = Vec::new();
    for (what, args) in &runs {
        // Its own working directory and TMPDIR: whatever joinguard writes lands there.
        let work = tempfile::tempdir().unwrap();
        let mut cmd = lab.host("joiner").command(JOINGUARD);
        cmd.args(args)
            .arg("-vvv")
            .current_dir(work.path())
            .env("TMPDIR", work.path())
            .env("HOME", work.path());
        let m = output_with_peak_rss(&mut cmd, Duration::from_secs(90)).expect("joinguard ran");
        let out = text(&m);
        let code = m.output.status.code().unwrap_or(-1);
        eprintln!(
            "{what}: exit {code}, {} bytes of output at -vvv, {} KiB peak RSS",
            out.len(),
            m.peak_rss_kib
        );
        expected_codes.push((what, code));
        assert!(
            out.lines().count() > 5,
            "{what}: -vvv logs something:\n{out}"
        );
        for s in &secrets {
            assert!(
                !out.contains(s.as_str()),
                "{what}: {s:?} appears in the output:\n{out}"
            );
        }
        let written = files_under(work.path());
        for f in &written {
            let content = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
            for s in &secrets {
                assert!(
                    !content.contains(s.as_str()),
                    "{what}: {s:?} in {}",
                    f.display()
                );
            }
        }
        eprintln!("  files written in its working dir / TMPDIR: {written:?}");
    }
    // The failure paths did fail (else they prove nothing about failure paths).
    let codes: Vec<i32> = expected_codes.iter().map(|(_, c)| *c).collect();
    assert_eq!(codes, [0, 2, 3, 3, 0, 1], "{expected_codes:?}");
}

#[test]
fn etcd_write_probe_killed_between_put_and_revoke_leaves_no_key_after_the_ttl() {
    let _s = serial();
    let env = crate::lab()
        .name("etcd_write_probe_killed_between_put_and_revoke_leaves_no_key_after_the_ttl")
        .build()
        .expect("lab environment");
    let (lab, etcd) = (env.lab(), env.etcd());
    let joiner = lab.host("joiner");
    let m1 = lab.host("m1");
    // 50 ms each way: the get and the revoke after the put take at least 200 ms, while the
    // watch below (etcdctl on the member's own host) sees the put within a few milliseconds.
    lab.net().set_link(
        joiner,
        m1,
        netlab::Impairment::delay(Duration::from_millis(50)),
    );
    let id = etcd.client_identity();
    let keys = || -> Vec<String> {
        let out = etcd
            .etcdctl(m1)
            .args(["get", "--prefix", "/joinguard/", "--keys-only"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert!(keys().is_empty(), "a clean cluster");
    // Kill on the put itself, seen through a watch, so the kill lands before the revoke.
    let mut left = Vec::new();
    for attempt in 0..5 {
        let mut watch = etcd
            .etcdctl(m1)
            .args(["watch", "--prefix", "/joinguard/"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let mut cmd = joiner.command(JOINGUARD);
        cmd.args(["preflight", "--etcd-endpoints"])
            .arg(etcd.client_endpoints().join(","))
            .arg("--etcd-cacert")
            .arg(&id.ca)
            .arg("--etcd-cert")
            .arg(&id.cert)
            .arg("--etcd-key")
            .arg(&id.key)
            .args(["--write-probe", "--node-name", "killed", "--timeout", "20s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = watch.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line == "PUT" {
                    let _ = tx.send(());
                    return;
                }
            }
        });
        let put_seen = rx.recv_timeout(Duration::from_secs(20)).is_ok();
        let _ = child.kill();
        let _ = child.wait();
        let _ = watch.kill();
        let _ = watch.wait();
        assert!(put_seen, "attempt {attempt}: the write probe never wrote");
        left = keys();
        eprintln!("attempt {attempt}: killed on the put; keys left right after: {left:?}");
        if !left.is_empty() {
            break;
        }
    }
    assert!(
        !left.is_empty(),
        "no kill landed between the put and the revoke in 5 attempts; the test proved nothing"
    );
    assert!(left
        .iter()
        .all(|k| k.starts_with(joinguard_core::probe::etcd::PREFLIGHT_PREFIX)));
    // MAX_WRITE_TTL (10 s), plus etcd's lease checkpoint slack.
    let deadline =
        Instant::now() + joinguard_core::probe::etcd::MAX_WRITE_TTL + Duration::from_secs(4);
    while !keys().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        keys(),
        Vec::<String>::new(),
        "a write-probe key outlived its lease"
    );
}
