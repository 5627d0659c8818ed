//! Labs: a named set of hosts joined by one forwarder, with a temp dir, removed as a whole.
//!
//! This module owns the per-run prefix (`jg` + 4 hex digits), host addressing
//! (198.18.0.1, .2, ... on 198.18.0.0/24, the benchmarking range of RFC 2544), and the order of
//! cleanup: forwarder first, then namespaces (which kills any process left in them), then the
//! temp dir. Cleanup runs in Drop, so it also happens when a test panics.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use rand::Rng;

use crate::forwarder::Network;
use crate::host::{self, Host};
use crate::Error;

/// Every netlab namespace, TUN device and temp dir starts with this, so [`crate::sweep`] can
/// find leftovers.
pub const PREFIX: &str = "jg";
/// The lab network: hosts get .1, .2, ... in builder order.
pub const NETWORK: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
/// Hosts per lab. The /24 and the forwarder's NxN table both allow more; this keeps labs small.
pub const MAX_HOSTS: usize = 32;
/// Name of the TUN device inside each host.
pub const LAB_IFACE: &str = "lab0";

/// Describes a lab before it is built.
#[derive(Debug, Default)]
pub struct LabBuilder {
    hosts: Vec<String>,
    prefix: Option<String>,
    seed: Option<u64>,
}

impl LabBuilder {
    /// Adds one host.
    pub fn host(mut self, name: impl Into<String>) -> Self {
        self.hosts.push(name.into());
        self
    }

    /// Adds several hosts.
    pub fn hosts<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.hosts.extend(names.into_iter().map(Into::into));
        self
    }

    /// Uses a fixed prefix instead of a random one. It must start with `jg` and fit in 6
    /// characters, so that `<prefix>t<index>` is a valid interface name.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Seeds the forwarder's random decisions (loss, jitter), for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Creates the namespaces, the TUN devices and the forwarder.
    pub fn build(self) -> Result<Lab, Error> {
        check_prerequisites()?;
        if self.hosts.is_empty() || self.hosts.len() > MAX_HOSTS {
            return Err(Error::Invalid(format!(
                "a lab needs 1 to {MAX_HOSTS} hosts, got {}",
                self.hosts.len()
            )));
        }
        for (i, h) in self.hosts.iter().enumerate() {
            let valid = !h.is_empty()
                && h.len() <= 8
                && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !valid {
                return Err(Error::Invalid(format!(
                    "host name `{h}`: use 1 to 8 characters of [a-z0-9-]"
                )));
            }
            if self.hosts[..i].contains(h) {
                return Err(Error::Invalid(format!("host `{h}` is listed twice")));
            }
        }
        let prefix = match self.prefix {
            Some(p) if p.starts_with(PREFIX) && p.len() <= 6 => p,
            Some(p) => {
                return Err(Error::Invalid(format!(
                    "prefix `{p}` must start with `{PREFIX}` and have at most 6 characters"
                )))
            }
            None => fresh_prefix(),
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("netlab-{prefix}-"))
            .tempdir()
            .map_err(|e| Error::Invalid(format!("temp dir: {e}")))?;

        // From here on, `partial` owns what exists, so an error cleans up after itself.
        let mut partial = Lab {
            net: None,
            hosts: Vec::new(),
            prefix: prefix.clone(),
            dir: Some(dir),
        };
        let mut devices = Vec::new();
        let mut addrs = Vec::new();
        for (i, name) in self.hosts.iter().enumerate() {
            let netns = format!("{prefix}-{name}");
            let addr = host_addr(i);
            host::create_netns(&netns)?;
            partial
                .hosts
                .push(Host::new(name.clone(), netns.clone(), addr, i));
            let tun_name = format!("{prefix}t{i}");
            let mut cfg = tun::Configuration::default();
            cfg.tun_name(&tun_name).layer(tun::Layer::L3).mtu(1500);
            let dev = tun::create(&cfg).map_err(|e| {
                Error::Tun(format!("create {tun_name} (is /dev/net/tun there?): {e}"))
            })?;
            host::ip(&["link", "set", "dev", &tun_name, "netns", &netns])?;
            host::ip(&[
                "-n", &netns, "link", "set", "dev", &tun_name, "name", LAB_IFACE,
            ])?;
            host::ip(&[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                LAB_IFACE,
            ])?;
            host::ip(&["-n", &netns, "link", "set", "dev", LAB_IFACE, "up"])?;
            devices.push(dev);
            addrs.push(addr);
        }
        let names = self.hosts.clone();
        let seed = self.seed.unwrap_or_else(|| rand::rng().random());
        partial.net = Some(Network::start(devices, names, addrs, seed)?);
        tracing::info!(prefix = %prefix, hosts = ?self.hosts, "lab up");
        Ok(partial)
    }
}

/// A running lab. Dropping it removes everything it created.
#[derive(Debug)]
pub struct Lab {
    net: Option<Network>,
    hosts: Vec<Host>,
    prefix: String,
    dir: Option<tempfile::TempDir>,
}

impl Lab {
    /// Starts describing a lab.
    pub fn builder() -> LabBuilder {
        LabBuilder::default()
    }

    /// The host called `name`. Panics with the list of hosts if there is none: in a test that
    /// is a bug in the test.
    pub fn host(&self, name: &str) -> &Host {
        self.try_host(name).unwrap_or_else(|| {
            let names: Vec<_> = self.hosts.iter().map(Host::name).collect();
            panic!(
                "lab {} has no host `{name}` (hosts: {names:?})",
                self.prefix
            )
        })
    }

    /// The host called `name`, if any.
    pub fn try_host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name() == name)
    }

    /// Every host, in builder order.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    /// The forwarder, to change impairments and read counters.
    pub fn net(&self) -> &Network {
        self.net.as_ref().expect("a built lab has a network")
    }

    /// The run prefix (`jg` + 4 hex digits).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A temp dir for this lab's files (certificates, etcd data, logs). Removed on drop unless
    /// `NETLAB_KEEP=1` is set.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("a built lab has a dir").path()
    }

    /// Keeps the temp dir after drop (for debugging a failure) and returns its path.
    pub fn keep_dir(&mut self) -> PathBuf {
        self.dir.take().map(|d| d.keep()).unwrap_or_default()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        drop(self.net.take());
        for h in &self.hosts {
            host::delete_netns(h.netns());
        }
        if std::env::var_os("NETLAB_KEEP").is_some_and(|v| v == "1") {
            if let Some(d) = self.dir.take() {
                let p = d.keep();
                tracing::warn!(dir = %p.display(), "NETLAB_KEEP=1: keeping lab dir");
            }
        }
        tracing::info!(prefix = %self.prefix, "lab down");
    }
}

/// Address of the host at `index`.
pub fn host_addr(index: usize) -> Ipv4Addr {
    let o = NETWORK.octets();
    Ipv4Addr::new(o[0], o[1], o[2], (index + 1) as u8)
}

fn fresh_prefix() -> String {
    loop {
        let p = format!("{PREFIX}{:04x}", rand::rng().random::<u16>());
        let taken = std::fs::read_dir("/run/netns")
            .map(|rd| {
                rd.flatten().any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("{p}-"))
                })
            })
            .unwrap_or(false);
        if !taken {
            return p;
        }
    }
}

/// Root, /dev/net/tun and iproute2. Missing ones are errors, never skips: a test that needs a
/// lab and cannot have one must fail loudly.
pub fn check_prerequisites() -> Result<(), Error> {
    if !nix::unistd::geteuid().is_root() {
        return Err(Error::Prerequisite(
            "netlab needs root (network namespaces and TUN devices); run as root".into(),
        ));
    }
    if !Path::new("/dev/net/tun").exists() {
        return Err(Error::Prerequisite(
            "/dev/net/tun is missing; load the tun module (modprobe tun)".into(),
        ));
    }
    host::ip(&["-V"]).map_err(|_| {
        Error::Prerequisite("iproute2 `ip` not found; apt-get install iproute2".into())
    })
}
