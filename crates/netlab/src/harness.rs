//! The lab test harness: what every lab test of joinguard (and of netlab) needs around its own
//! assertions, in one place instead of one copy per test binary.
//!
//! - [`serial`] takes the process-wide [`SERIAL`] lock, so that one lab runs at a time in a test
//!   binary (two cores; several 3-member etcd clusters at once would disturb each other's
//!   timing). It tolerates poisoning: a failed test must not fail the ones after it. Under
//!   cargo-nextest every test is its own process and the lock holds nothing back: there,
//!   joinguard's `.config/nextest.toml` decides which labs may run at once.
//! - [`EnvBuilder`] builds a [`LabEnv`]: a lab with a joiner host, an etcd cluster of N members
//!   (m1..mN) on this run's kubeadm PKI, optionally the API server stand-in on host `api` with
//!   what `kubeadm init` leaves behind (bootstrap token [`TOKEN`], optionally kubeadm-certs under
//!   [`CERT_KEY`]) in one of the kubeadm [`Layout`]s, and an admin kubeconfig.
//! - [`Run`] is one run of a program inside a lab host with a deadline: exit code, stdout, stderr
//!   and wall time, with assertions that print both streams when they fail, and a check that no
//!   secret was printed.
//! - [`labtest!`](crate::labtest) declares a test that takes the lock, builds the environment
//!   and hands it to the body, as ripgrep's `rgtest!` hands each test its directory and command.
//!
//! The program under test is a parameter ([`EnvBuilder::bin`]): `env!("CARGO_BIN_EXE_joinguard")`
//! exists only in joinguard's own tests. Labs keep their random per-run prefix, so lab tests of
//! different binaries, or of different engineers, never collide; a test's name is recorded in its
//! lab directory (`test-name`) for a kept (`NETLAB_KEEP=1`) lab.
//!
//! This module must not know joinguard's flags, output or exit codes (the tests assert those), and
//! must not weaken what the pieces it assembles do: the etcd members, the stand-in and the fixture
//! are exactly what the tests built by hand.

use std::ffi::OsStr;
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::apiserver::fixture::{self, ApiEndpoint, ExternalEtcd, Fixture, FixtureOptions};
use crate::apiserver::{ApiServer, ApiServerOptions};
use crate::etcd::{EtcdCluster, EtcdSpec};
use crate::process::output_within;
use crate::{Host, Impairment, Lab};

/// The proxy variables Go (and so joinguard) reads.
const PROXY_VARS: [&str; 7] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUEST_METHOD",
];

/// The bootstrap token of every environment: kubeadm's documentation example
/// (`kubeadm token --help`), `[a-z0-9]{6}.[a-z0-9]{16}`. joinguard's `--help` examples show the
/// same token, so the no-secret check does not apply to `--help` output.
pub const TOKEN: &str = "abcdef.0123456789abcdef";

/// Its id, the part before the dot (the Secret is `bootstrap-token-abcdef`).
pub const TOKEN_ID: &str = "abcdef";
/// Its secret, the part after the dot: what must never be printed.
pub const SECRET: &str = "0123456789abcdef";
/// The certificate key kubeadm-certs is encrypted with when an environment uploads certs: 64 hex
/// digits, 32 bytes of AES-256 key, as `kubeadm init --upload-certs` prints one.
pub const CERT_KEY: &str = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
/// A well-formed CA pin that matches no CA.
pub const WRONG_PIN: &str =
    "sha256:1111111111111111111111111111111111111111111111111111111111111111";
/// Default deadline of one [`LabEnv::run`].
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Deadline of one `kubectl` run ([`LabEnv::kubectl`]).
pub const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the builder waits for the etcd cluster to become healthy.
pub const ETCD_HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);
/// The host the stand-in runs in.
pub const API_HOST: &str = "api";

/// One lab at a time in a test binary. Take it with [`serial`].
pub static SERIAL: Mutex<()> = Mutex::new(());

/// Takes [`SERIAL`], also after a test panicked while holding it, and sends netlab's logs to the
/// test's captured output (`RUST_LOG` picks the level).
pub fn serial() -> MutexGuard<'static, ()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What can go wrong while building an environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The builder was given something it cannot build.
    #[error("lab environment: {0}")]
    Invalid(String),
    /// The lab or the etcd cluster.
    #[error("lab environment: {0}")]
    Lab(#[from] crate::Error),
    /// The API server stand-in or its fixture.
    #[error("lab environment: {0}")]
    Api(#[from] crate::apiserver::Error),
    /// A file of the environment could not be written.
    #[error("lab environment: write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the API shows of the cluster's etcd, as kubeadm versions leave it. The stand-in and its
/// fixture are only started when the builder asks for them ([`EnvBuilder::api`] or
/// [`EnvBuilder::layout`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// kubeadm >= 1.22, stacked etcd, with nothing that names the members: kubeadm-config without
    /// a ClusterStatus, no etcd Pods. Token discovery and update-status need no more.
    #[default]
    Modern,
    /// kubeadm < 1.22: kubeadm-config has a ClusterStatus whose one apiEndpoint is `cp-1` at m1's
    /// address (the control-plane node `kubeadm init` made); the other members are found through
    /// etcd's member list.
    ClusterStatus,
    /// kubeadm >= 1.22, stacked etcd: the mirror Pods `etcd-m1`.. in kube-system carry each
    /// member's client URL in `kubeadm.kubernetes.io/etcd.advertise-client-urls`.
    EtcdPods,
    /// External etcd: ClusterConfiguration `etcd.external` lists the members' client URLs, and
    /// kubeadm-certs (with a certificate key) carries the client identity as `external-etcd.*`.
    External,
}

type FixtureHook = Box<dyn FnOnce(&mut FixtureOptions<'_>)>;

/// Describes a [`LabEnv`]. Hosts are, in this order (so in address order): `api` (with the
/// stand-in), the joiner, the etcd members `m1..mN`, the spare hosts `m<N+1>..`, and the extra
/// hosts.
pub struct EnvBuilder {
    name: String,
    bin: Option<PathBuf>,
    joiner: String,
    members: usize,
    spare: usize,
    extra: Vec<String>,
    api: bool,
    layout: Layout,
    certificate_key: Option<String>,
    joiner_delay: Option<Duration>,
    etcd_spec: EtcdSpec,
    api_options: Option<ApiServerOptions>,
    fixture_hook: Option<FixtureHook>,
    run_timeout: Duration,
    seed: Option<u64>,
    family: crate::IpFamily,
}

impl fmt::Debug for EnvBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvBuilder")
            .field("name", &self.name)
            .field("bin", &self.bin)
            .field("members", &self.members)
            .field("api", &self.api)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl Default for EnvBuilder {
    fn default() -> Self {
        EnvBuilder {
            name: String::new(),
            bin: None,
            joiner: "joiner".into(),
            members: 1,
            spare: 0,
            extra: Vec::new(),
            api: false,
            layout: Layout::default(),
            certificate_key: None,
            joiner_delay: None,
            etcd_spec: EtcdSpec::default(),
            api_options: None,
            fixture_hook: None,
            run_timeout: RUN_TIMEOUT,
            seed: None,
            family: crate::IpFamily::V4,
        }
    }
}

impl EnvBuilder {
    /// A joiner and one etcd member, no API server.
    pub fn new() -> EnvBuilder {
        EnvBuilder::default()
    }

    /// The test's name, for messages and the lab directory ([`labtest!`](crate::labtest) sets
    /// it).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The program [`LabEnv::run`] runs, e.g. `env!("CARGO_BIN_EXE_joinguard")`.
    pub fn bin(mut self, bin: impl Into<PathBuf>) -> Self {
        self.bin = Some(bin.into());
        self
    }

    /// The joiner's host name (default `joiner`; joinguard's monitor test calls it `mon`).
    pub fn joiner(mut self, name: impl Into<String>) -> Self {
        self.joiner = name.into();
        self
    }

    /// etcd members `m1..mN` (default 1; 0 for a lab without etcd, 1 to 7 otherwise).
    pub fn members(mut self, n: usize) -> Self {
        self.members = n;
        self
    }

    /// Hosts after the members, named on from them (`m<N+1>`..), without etcd: for a member added
    /// later, or an address where nothing listens.
    pub fn spare_hosts(mut self, n: usize) -> Self {
        self.spare = n;
        self
    }

    /// More hosts, after all the others.
    pub fn extra_hosts<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.extra.extend(names.into_iter().map(Into::into));
        self
    }

    /// The API server stand-in on host `api` over the cluster's etcd, with the `kubeadm init`
    /// fixture in the current [`Layout`] and an admin kubeconfig.
    pub fn api(mut self) -> Self {
        self.api = true;
        self
    }

    /// The kubeadm layout of the fixture; implies [`EnvBuilder::api`].
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self.api = true;
        self
    }

    /// Uploads kubeadm-certs encrypted with [`CERT_KEY`], as `kubeadm init --upload-certs`.
    pub fn upload_certs(self) -> Self {
        self.certificate_key(CERT_KEY)
    }

    /// Uploads kubeadm-certs encrypted with `key` (64 hex digits).
    pub fn certificate_key(mut self, key: impl Into<String>) -> Self {
        self.certificate_key = Some(key.into());
        self
    }

    /// A one-way delay on every link between the joiner and an etcd member (each direction).
    pub fn joiner_delay(mut self, delay: Duration) -> Self {
        self.joiner_delay = Some(delay);
        self
    }

    /// How the etcd members run (binary, timing flags, PKI).
    pub fn etcd_spec(mut self, spec: EtcdSpec) -> Self {
        self.etcd_spec = spec;
        self
    }

    /// How the stand-in runs (port, CA, version, body limit).
    pub fn api_options(mut self, opts: ApiServerOptions) -> Self {
        self.api_options = Some(opts);
        self.api = true;
        self
    }

    /// Changes the fixture's options after the layout has set them (token expiration, kubeadm
    /// API version, ...).
    pub fn fixture(mut self, hook: impl FnOnce(&mut FixtureOptions<'_>) + 'static) -> Self {
        self.fixture_hook = Some(Box::new(hook));
        self.api = true;
        self
    }

    /// The deadline of [`LabEnv::run`] (default [`RUN_TIMEOUT`]).
    pub fn run_timeout(mut self, timeout: Duration) -> Self {
        self.run_timeout = timeout;
        self
    }

    /// Seeds the forwarder's random decisions (loss, jitter).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The hosts' address families; etcd and the stand-in use IPv6 in an IPv6-only lab.
    pub fn ip_family(mut self, family: crate::IpFamily) -> Self {
        self.family = family;
        self
    }

    /// The host names, in lab order.
    fn host_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if self.api {
            names.push(API_HOST.to_string());
        }
        names.push(self.joiner.clone());
        names.extend((1..=self.members + self.spare).map(|i| format!("m{i}")));
        names.extend(self.extra.iter().cloned());
        names
    }

    fn check(&self) -> Result<(), Error> {
        if self.api && self.members == 0 {
            return Err(Error::Invalid(
                "the API server stand-in stores its objects in etcd: give members(1) or more"
                    .into(),
            ));
        }
        if self.certificate_key.is_some() && !self.api {
            return Err(Error::Invalid(
                "a certificate key encrypts kubeadm-certs in the API: add api() or a layout".into(),
            ));
        }
        Ok(())
    }

    /// Builds the lab, starts etcd and waits until it is healthy, then the stand-in and its
    /// fixture. What is already built is torn down if a later step fails.
    pub fn build(self) -> Result<LabEnv, Error> {
        self.check()?;
        let started = Instant::now();
        let mut lab = Lab::builder()
            .hosts(self.host_names())
            .ip_family(self.family);
        if let Some(seed) = self.seed {
            lab = lab.seed(seed);
        }
        let lab = lab.build()?;
        if !self.name.is_empty() {
            let path = lab.dir().join("test-name");
            std::fs::write(&path, format!("{}\n", self.name))
                .map_err(|source| Error::Write { path, source })?;
        }
        let member_names: Vec<String> = (1..=self.members).map(|i| format!("m{i}")).collect();
        if let Some(d) = self.joiner_delay {
            for m in &member_names {
                lab.net()
                    .set_link(lab.host(&self.joiner), lab.host(m), Impairment::delay(d));
            }
        }
        let etcd = if self.members == 0 {
            None
        } else {
            let hosts: Vec<&Host> = member_names.iter().map(|m| lab.host(m)).collect();
            let etcd = EtcdCluster::start(&lab, &hosts, &self.etcd_spec)?;
            etcd.wait_healthy(ETCD_HEALTHY_TIMEOUT)?;
            Some(etcd)
        };
        let (api, fixture, admin) = match (&etcd, self.api) {
            (Some(etcd), true) => {
                let api = ApiServer::start(
                    lab.host(API_HOST),
                    etcd,
                    self.api_options.unwrap_or_default(),
                )?;
                let fixture = kubeadm_init(
                    &api,
                    etcd,
                    &lab,
                    self.layout,
                    self.certificate_key,
                    self.fixture_hook,
                )?;
                let path = lab.dir().join("admin.conf");
                std::fs::write(&path, api.kubeconfig(Some(api.admin_token()))).map_err(
                    |source| Error::Write {
                        path: path.clone(),
                        source,
                    },
                )?;
                (Some(api), Some(fixture), Some(path))
            }
            _ => (None, None, None),
        };
        tracing::info!(
            test = %self.name,
            lab = lab.prefix(),
            members = self.members,
            api = api.is_some(),
            took = ?started.elapsed(),
            "lab environment up"
        );
        Ok(LabEnv {
            api,
            fixture,
            etcd,
            lab,
            name: self.name,
            bin: self.bin,
            joiner: self.joiner,
            admin_kubeconfig: admin,
            run_timeout: self.run_timeout,
        })
    }
}

/// The fixture options of `layout`, then the test's hook, then `kubeadm init`.
fn kubeadm_init(
    api: &ApiServer,
    etcd: &EtcdCluster,
    lab: &Lab,
    layout: Layout,
    certificate_key: Option<String>,
    hook: Option<FixtureHook>,
) -> Result<Fixture, Error> {
    let mut opts = FixtureOptions::new(TOKEN, etcd.ca());
    opts.certificate_key = certificate_key;
    match layout {
        Layout::Modern => {}
        Layout::ClusterStatus => {
            opts.cluster_status = vec![ApiEndpoint {
                node: "cp-1".into(),
                address: lab.host("m1").ip(),
                port: crate::apiserver::DEFAULT_PORT,
            }];
        }
        Layout::EtcdPods => {
            opts.etcd_pods = etcd
                .members()
                .iter()
                .map(|m| (m.name().to_string(), m.client_url().to_string()))
                .collect();
        }
        Layout::External => {
            let id = etcd.client_identity();
            let read = |path: &Path| {
                std::fs::read_to_string(path)
                    .map_err(|e| crate::Error::Pki(format!("read {}: {e}", path.display())))
            };
            opts.external_etcd = Some(ExternalEtcd {
                endpoints: etcd.client_endpoints(),
                client_cert_pem: read(&id.cert)?,
                client_key_pem: read(&id.key)?,
            });
        }
    }
    if let Some(hook) = hook {
        hook(&mut opts);
    }
    Ok(fixture::kubeadm_init(api, opts)?)
}

/// A lab with etcd and, if asked for, the API server stand-in and its fixture. Dropping it stops
/// the stand-in, then etcd, then removes the lab (fields drop in declaration order).
pub struct LabEnv {
    api: Option<ApiServer>,
    fixture: Option<Fixture>,
    etcd: Option<EtcdCluster>,
    lab: Lab,
    name: String,
    bin: Option<PathBuf>,
    joiner: String,
    admin_kubeconfig: Option<PathBuf>,
    run_timeout: Duration,
}

impl fmt::Debug for LabEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LabEnv")
            .field("name", &self.name)
            .field("lab", &self.lab.prefix())
            .field("api", &self.api.as_ref().map(ApiServer::url))
            .finish_non_exhaustive()
    }
}

impl LabEnv {
    /// Starts describing an environment.
    pub fn builder() -> EnvBuilder {
        EnvBuilder::new()
    }

    /// The test's name, if the builder was given one.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lab.
    pub fn lab(&self) -> &Lab {
        &self.lab
    }

    /// The lab's directory (removed with the lab unless `NETLAB_KEEP=1`).
    pub fn dir(&self) -> &Path {
        self.lab.dir()
    }

    /// The host called `name`; panics with the list of hosts if there is none.
    pub fn host(&self, name: &str) -> &Host {
        self.lab.host(name)
    }

    /// The joiner host, where [`LabEnv::run`] and [`LabEnv::kubectl`] run.
    pub fn joiner(&self) -> &Host {
        self.lab.host(&self.joiner)
    }

    /// The joiner's IPv4 address (panics in an IPv6-only lab).
    pub fn joiner_addr(&self) -> Ipv4Addr {
        self.joiner().addr()
    }

    /// The joiner's address in the lab's first family.
    pub fn joiner_ip(&self) -> std::net::IpAddr {
        self.joiner().ip()
    }

    /// The etcd cluster; panics if the environment has none.
    pub fn etcd(&self) -> &EtcdCluster {
        self.etcd
            .as_ref()
            .expect("this environment has no etcd (EnvBuilder::members(0))")
    }

    /// The etcd cluster, to stop, kill, restart or add members.
    pub fn etcd_mut(&mut self) -> &mut EtcdCluster {
        self.etcd
            .as_mut()
            .expect("this environment has no etcd (EnvBuilder::members(0))")
    }

    /// The etcd cluster, if any.
    pub fn try_etcd(&self) -> Option<&EtcdCluster> {
        self.etcd.as_ref()
    }

    /// The API server stand-in; panics if the environment has none.
    pub fn api(&self) -> &ApiServer {
        self.api
            .as_ref()
            .expect("this environment has no API server (EnvBuilder::api or ::layout)")
    }

    /// The API server stand-in, if any.
    pub fn try_api(&self) -> Option<&ApiServer> {
        self.api.as_ref()
    }

    /// What the `kubeadm init` fixture wrote (CA pin, certificate key, ...); panics without the
    /// stand-in.
    pub fn fixture(&self) -> &Fixture {
        self.fixture
            .as_ref()
            .expect("this environment has no API server (EnvBuilder::api or ::layout)")
    }

    /// `<lab dir>/admin.conf`: a kubeconfig for the stand-in with the admin token
    /// (`kubernetes-admin`, `system:masters`); panics without the stand-in.
    pub fn admin_kubeconfig(&self) -> &Path {
        self.admin_kubeconfig
            .as_deref()
            .expect("this environment has no API server (EnvBuilder::api or ::layout)")
    }

    /// Writes a kubeconfig for the stand-in with `token` (anonymous without one) into the lab
    /// directory as `kubeconfig-<name>` and returns its path.
    pub fn write_kubeconfig(&self, name: &str, token: Option<&str>) -> PathBuf {
        self.write(&format!("kubeconfig-{name}"), &self.api().kubeconfig(token))
    }

    /// Writes `text` into the lab directory as `name` and returns its path; panics if it cannot.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.lab.dir().join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// The program under test, run in the joiner with `args`.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command_in(self.joiner(), args)
    }

    /// The program under test, run in `host` with `args`.
    pub fn command_in<I, S>(&self, host: &Host, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let bin = self.bin.as_ref().unwrap_or_else(|| {
            panic!(
                "{}: no program to run: give EnvBuilder::bin(env!(\"CARGO_BIN_EXE_<name>\"))",
                self.name
            )
        });
        let mut cmd = host.command(bin);
        // The lab is its own network: a proxy of the machine the tests run on is not on it, and
        // the program reads the proxy variables (a test that wants them sets them).
        for var in PROXY_VARS {
            cmd.env_remove(var);
        }
        cmd.args(args);
        cmd
    }

    /// Runs the program under test in the joiner within the run deadline; panics if it cannot be
    /// started or overruns the deadline.
    #[track_caller]
    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(&mut self.command(args), self.run_timeout)
    }

    /// [`LabEnv::run`] in another host.
    #[track_caller]
    pub fn run_in<I, S>(&self, host: &Host, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(&mut self.command_in(host, args), self.run_timeout)
    }

    /// [`LabEnv::run`], with a deadline overrun as an error rather than a panic.
    pub fn try_run<I, S>(&self, args: I) -> Result<Run, crate::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        try_run(&mut self.command(args), self.run_timeout)
    }

    /// The real `kubectl` in the joiner with the admin kubeconfig (see [`LabEnv::kubectl_with`]).
    #[track_caller]
    pub fn kubectl<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        self.kubectl_with(self.admin_kubeconfig(), args)
    }

    /// The real `kubectl` in the joiner with `kubeconfig`, a HOME and cache directory in the lab,
    /// and `--request-timeout=20s`, within [`KUBECTL_TIMEOUT`].
    #[track_caller]
    pub fn kubectl_with<S: AsRef<OsStr>>(&self, kubeconfig: &Path, args: &[S]) -> Run {
        let home = self.lab.dir().join("home");
        std::fs::create_dir_all(&home).unwrap_or_else(|e| panic!("create {}: {e}", home.display()));
        let mut cmd = self.joiner().command("kubectl");
        cmd.env("HOME", &home)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(home.join("cache"))
            .arg("--request-timeout=20s")
            .args(args);
        run(&mut cmd, KUBECTL_TIMEOUT)
    }

    /// The secrets of this environment that no output may contain: [`SECRET`], [`CERT_KEY`], the
    /// admin token, and the first base64 lines of every private key of the lab PKI (the CAs',
    /// the service-account key, the etcd client identity's).
    pub fn secrets(&self) -> Vec<String> {
        let mut s = vec![SECRET.to_string(), CERT_KEY.to_string()];
        if let Some(f) = &self.fixture {
            if let Some((_, secret)) = f.token.split_once('.') {
                s.push(secret.to_string());
            }
            s.extend(f.certificate_key.clone());
        }
        if let Some(api) = &self.api {
            s.push(api.admin_token().to_string());
            s.extend(key_lines(&api.ca().key_pem()));
        }
        if let Some(etcd) = &self.etcd {
            let pki = etcd.pki();
            for pem in [
                pki.ca().key_pem(),
                pki.front_proxy_ca().key_pem(),
                pki.etcd_ca().key_pem(),
                pki.sa_key_pem().to_string(),
            ] {
                s.extend(key_lines(&pem));
            }
            if let Ok(pem) = std::fs::read_to_string(etcd.client_identity().key) {
                s.extend(key_lines(&pem));
            }
        }
        s.sort();
        s.dedup();
        s
    }

    /// Panics, showing the run, if its stdout or stderr contains one of [`LabEnv::secrets`] or a
    /// PEM private key. The message names the secret by its position in [`LabEnv::secrets`]; the
    /// run it shows is the evidence (these are the lab's throwaway secrets).
    #[track_caller]
    pub fn assert_no_secret(&self, run: &Run) {
        run.assert_none_of(&self.secrets());
    }
}

/// Lines of a PEM private key's base64 body long enough to be unique (the first two).
fn key_lines(pem: &str) -> Vec<String> {
    pem.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && l.len() >= 40)
        .take(2)
        .map(str::to_string)
        .collect()
}

/// One run of a program: what a user sees of it.
#[derive(Clone, Debug)]
pub struct Run {
    /// The command line, as `Command`'s Debug shows it (with `ip netns exec <host>` in front).
    pub command: String,
    /// The exit code; -1 when a signal ended the program.
    pub code: i32,
    /// Standard output, lossily decoded.
    pub stdout: String,
    /// Standard error, lossily decoded.
    pub stderr: String,
    /// Spawn to exit.
    pub took: Duration,
}

/// Runs `cmd` to completion within `timeout`; panics if it cannot be started or overruns the
/// deadline (it is killed then).
#[track_caller]
pub fn run(cmd: &mut Command, timeout: Duration) -> Run {
    match try_run(cmd, timeout) {
        Ok(run) => run,
        Err(e) => panic!("{e}"),
    }
}

/// [`run`], with the failures as errors: [`crate::Error::Spawn`] and [`crate::Error::Timeout`].
pub fn try_run(cmd: &mut Command, timeout: Duration) -> Result<Run, crate::Error> {
    let command = format!("{cmd:?}");
    let t = Instant::now();
    let out = output_within(cmd, timeout)?;
    Ok(Run::of(command, out, t.elapsed()))
}

impl Run {
    /// From a finished process's output.
    pub fn of(command: String, out: Output, took: Duration) -> Run {
        Run {
            command,
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took,
        }
    }

    /// Panics, showing both streams, unless the exit code is `code`.
    #[track_caller]
    pub fn assert_exit(&self, code: i32) -> &Run {
        assert!(
            self.code == code,
            "expected exit {code}, got {}:\n{self}",
            self.code
        );
        self
    }

    /// Panics, showing both streams, unless stdout contains `needle`.
    #[track_caller]
    pub fn assert_stdout_contains(&self, needle: &str) -> &Run {
        self.assert_contains("stdout", &self.stdout, needle)
    }

    /// Panics, showing both streams, unless stderr contains `needle`.
    #[track_caller]
    pub fn assert_stderr_contains(&self, needle: &str) -> &Run {
        self.assert_contains("stderr", &self.stderr, needle)
    }

    #[track_caller]
    fn assert_contains(&self, stream: &str, text: &str, needle: &str) -> &Run {
        assert!(
            text.contains(needle),
            "{stream} does not contain {needle:?}:\n{self}"
        );
        self
    }

    /// stdout as one JSON document; panics, showing both streams, if it is not one.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{self}"))
    }

    /// Panics, showing the run, if stdout or stderr contains [`SECRET`], [`CERT_KEY`] or a PEM
    /// private key. With a [`LabEnv`], [`LabEnv::assert_no_secret`] checks its keys and tokens
    /// too.
    #[track_caller]
    pub fn assert_no_secret(&self) -> &Run {
        self.assert_none_of(&[SECRET, CERT_KEY])
    }

    /// Panics, showing the run, if stdout or stderr contains any of `secrets` or a PEM private
    /// key. The message names the secret by its position and length; the run it shows is the
    /// evidence.
    #[track_caller]
    pub fn assert_none_of<S: AsRef<str>>(&self, secrets: &[S]) -> &Run {
        for (stream, text) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            for (i, s) in secrets.iter().enumerate() {
                let s = s.as_ref();
                assert!(
                    s.is_empty() || !text.contains(s),
                    "secret #{i} ({} characters) is printed on {stream}:\n{self}",
                    s.len()
                );
            }
            // PEM armor: `-----BEGIN RSA PRIVATE KEY-----` and its kin. joinguard names key
            // formats in messages ("PKCS#1 (BEGIN RSA PRIVATE KEY)"), without the dashes.
            assert!(
                !text.contains("PRIVATE KEY-----"),
                "a PEM private key is printed on {stream}:\n{self}"
            );
        }
        self
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nl = |s: &str| {
            if s.is_empty() || s.ends_with('\n') {
                ""
            } else {
                "\n"
            }
        };
        write!(
            f,
            "{}\nexit {} after {:?}\n--- stdout\n{}{}--- stderr\n{}{}--- end",
            self.command,
            self.code,
            self.took,
            self.stdout,
            nl(&self.stdout),
            self.stderr,
            nl(&self.stderr)
        )
    }
}

/// Declares a lab test: takes [`serial`], builds the environment (the default [`EnvBuilder`], or
/// the one given, named after the test) and runs the body with it. The test's name is the
/// function's, so `cargo test -- etcd` still selects by name. Attributes (`#[ignore]`, doc
/// comments) may come first.
///
/// ```no_run
/// use std::time::Duration;
/// use netlab::harness::{EnvBuilder, Layout};
///
/// fn lab() -> EnvBuilder {
///     // In joinguard's tests: EnvBuilder::new().bin(env!("CARGO_BIN_EXE_joinguard"))
///     EnvBuilder::new().bin("/usr/bin/etcdctl")
/// }
///
/// netlab::labtest!(etcd_members_answer, lab().members(3), |env| {
///     let run = env.run(["version"]);
///     run.assert_exit(0).assert_stdout_contains("etcdctl version");
///     env.etcd().wait_healthy(Duration::from_secs(5)).unwrap();
/// });
///
/// netlab::labtest!(etcd_stand_in_with_pods, lab().layout(Layout::EtcdPods), |env| {
///     env.kubectl(&["-n", "kube-system", "get", "pods"]).assert_exit(0);
/// });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! labtest {
    ($(#[$meta:meta])* $name:ident, |$env:pat_param| $body:block) => {
        $crate::labtest!($(#[$meta])* $name, $crate::harness::EnvBuilder::new(), |$env| $body);
    };
    ($(#[$meta:meta])* $name:ident, $builder:expr, |$env:pat_param| $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            let _serial = $crate::harness::serial();
            let $env: $crate::harness::LabEnv = match $crate::harness::EnvBuilder::name(
                $builder,
                stringify!($name),
            )
            .build()
            {
                Ok(env) => env,
                Err(e) => panic!("{}: {e}", stringify!($name)),
            };
            $body
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Run {
        run(
            Command::new("sh").args(["-c", script]),
            Duration::from_secs(10),
        )
    }

    fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("it panics");
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn a_run_has_the_exit_code_and_both_streams() {
        let r = sh("echo out; echo err >&2; exit 3");
        assert_eq!(
            (r.code, r.stdout.as_str(), r.stderr.as_str()),
            (3, "out\n", "err\n")
        );
        assert!(r.command.contains("exit 3"), "{}", r.command);
        r.assert_exit(3)
            .assert_stdout_contains("out")
            .assert_stderr_contains("err");
    }

    #[test]
    fn a_failed_exit_assertion_prints_both_streams() {
        let r = sh("echo the-report; echo the-log >&2; exit 1");
        let msg = panic_message(move || {
            r.assert_exit(0);
        });
        assert!(msg.contains("expected exit 0, got 1"), "{msg}");
        assert!(msg.contains("--- stdout\nthe-report\n"), "{msg}");
        assert!(msg.contains("--- stderr\nthe-log\n"), "{msg}");
    }

    #[test]
    fn json_panics_with_the_run_when_stdout_is_not_json() {
        assert_eq!(sh(r#"echo '{"a": 1}'"#).json()["a"], 1);
        let r = sh("echo not json; echo why >&2");
        let msg = panic_message(move || {
            r.json();
        });
        assert!(msg.contains("stdout is not one JSON document"), "{msg}");
        assert!(msg.contains("why"), "{msg}");
    }

    #[test]
    fn the_no_secret_check_finds_secrets_and_pem_keys_but_not_their_names() {
        sh("echo 'token abcdef.<redacted>; key format PKCS#1 (BEGIN RSA PRIVATE KEY)'")
            .assert_no_secret();
        for script in [
            format!("echo {TOKEN}"),
            format!("echo {CERT_KEY} >&2"),
            "printf -- '-----BEGIN EC PRIVATE KEY-----\\n'".to_string(),
        ] {
            let r = sh(&script);
            let msg = panic_message(move || {
                r.assert_no_secret();
            });
            assert!(msg.contains("is printed on"), "{script}: {msg}");
        }
        let r = sh("echo s3cr3t-value");
        let msg = panic_message(move || {
            r.assert_none_of(&["s3cr3t-value"]);
        });
        assert!(
            msg.contains("secret #0 (12 characters) is printed on stdout"),
            "{msg}"
        );
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_and_named() {
        let t = Instant::now();
        let e = try_run(Command::new("sleep").arg("30"), Duration::from_millis(200)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(matches!(e, crate::Error::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains("\"sleep\" \"30\""), "{e}");
        let msg = panic_message(|| {
            run(Command::new("sleep").arg("30"), Duration::from_millis(100));
        });
        assert!(msg.contains("did not finish within 100ms"), "{msg}");
    }

    #[test]
    fn serial_survives_a_test_that_panicked_holding_it() {
        let _ = std::thread::spawn(|| {
            let _s = serial();
            panic!("a failing test");
        })
        .join();
        drop(serial());
    }

    #[test]
    fn builder_puts_hosts_in_address_order_and_refuses_what_it_cannot_build() {
        let b = EnvBuilder::new()
            .members(3)
            .spare_hosts(1)
            .extra_hosts(["r1"])
            .api();
        assert_eq!(
            b.host_names(),
            ["api", "joiner", "m1", "m2", "m3", "m4", "r1"]
        );
        assert_eq!(EnvBuilder::new().joiner("mon").host_names(), ["mon", "m1"]);
        let e = EnvBuilder::new().members(0).api().build().unwrap_err();
        assert!(e.to_string().contains("give members(1) or more"), "{e}");
        let e = EnvBuilder::new().upload_certs().build().unwrap_err();
        assert!(e.to_string().contains("add api() or a layout"), "{e}");
    }

    #[test]
    fn key_lines_are_the_base64_body_only() {
        let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nBBBB\n-----END PRIVATE KEY-----\n";
        assert_eq!(
            key_lines(pem),
            [
                "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            ]
        );
    }
}
