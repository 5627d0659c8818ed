//! Labs: a named set of hosts joined by one forwarder, with a temp dir, removed as a whole.
//!
//! This module owns the per-run prefix (`jg` + 4 hex digits), host addressing
//! (198.18.0.1, .2, ... on 198.18.0.0/24, the benchmarking range of RFC 2544; with IPv6,
//! fd00:198:18::1, ::2, ... on fd00:198:18::/64, a unique-local prefix reserved for the lab), the
//! address family of a lab ([`IpFamily`]), and the order of
//! cleanup: forwarder first, then namespaces (which kills any process left in them), then the
//! temp dir. Cleanup runs in Drop, so it also happens when a test panics.
//!
//! It also owns routes (multi-hop labs): the path table the forwarder follows, and the kernel
//! settings that make a host a router.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use rand::RngExt;

use crate::forwarder::Network;
use crate::host::{self, Host};
use crate::Error;

/// Every netlab namespace, TUN device and temp dir starts with this, so [`crate::sweep`] can
/// find leftovers.
pub const PREFIX: &str = "jg";
/// The lab network: hosts get .1, .2, ... in builder order.
pub const NETWORK: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 0);
/// The lab's IPv6 network: hosts get ::1, ::2, ... in builder order (the same number as their
/// IPv4 address), on a /64 of the unique-local prefix fd00:198:18::/48 (RFC 4193).
pub const NETWORK6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0);
/// Hosts per lab. The /24 and the forwarder's NxN table both allow more; this keeps labs small.
pub const MAX_HOSTS: usize = 32;
/// Name of the TUN device inside each host.
pub const LAB_IFACE: &str = "lab0";

/// The address families of a lab's hosts, and the one its services use first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IpFamily {
    /// IPv4 only (IPv6 is switched off in every host).
    #[default]
    V4,
    /// IPv6 only: hosts have no IPv4 address on the lab network.
    V6,
    /// Both: every host has both addresses; services listen on both and advertise IPv4 first,
    /// as a kubeadm node whose node IP lists IPv4 first.
    Dual,
}

impl IpFamily {
    /// Whether hosts have an IPv4 address.
    pub fn has_v4(self) -> bool {
        self != IpFamily::V6
    }

    /// Whether hosts have an IPv6 address.
    pub fn has_v6(self) -> bool {
        self != IpFamily::V4
    }
}

impl std::str::FromStr for IpFamily {
    type Err = Error;
    /// `ipv4`, `ipv6` or `dual`, as `netlab up --ip-family` takes them.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "ipv4" => Ok(IpFamily::V4),
            "ipv6" => Ok(IpFamily::V6),
            "dual" => Ok(IpFamily::Dual),
            other => Err(Error::Invalid(format!(
                "ip family `{other}`: use ipv4, ipv6 or dual"
            ))),
        }
    }
}

/// Describes a lab before it is built.
#[derive(Debug, Default)]
pub struct LabBuilder {
    hosts: Vec<String>,
    family: IpFamily,
    prefix: Option<String>,
    seed: Option<u64>,
    routes: Vec<Vec<String>>,
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

    /// Routes traffic between the first and the last host of `path` through the hosts in
    /// between, in both directions: `route(&["joiner", "r1", "r2", "m1"])` makes the joiner's
    /// packets for m1 cross joiner -> r1 -> r2 -> m1, and m1's replies the reverse. Every pair
    /// of hosts on the path follows it too (the joiner reaches r2 through r1).
    ///
    /// The hosts in between become routers: kernel forwarding on, ICMP redirects off, reverse
    /// path filtering off and ICMP rate limiting off (Linux sends at most about one Time
    /// Exceeded per second and destination by default, `net.ipv4.icmp_ratelimit`, which would
    /// read as loss in a trace). Their kernels decrement the TTL and answer with real ICMP Time
    /// Exceeded from their own address. Impairments then apply per link:
    /// `net().set_link(r1, r2, ..)` delays only that hop.
    ///
    /// Two routes that disagree on a next hop are an error at [`LabBuilder::build`].
    pub fn route<S: AsRef<str>>(mut self, path: &[S]) -> Self {
        self.routes
            .push(path.iter().map(|h| h.as_ref().to_string()).collect());
        self
    }

    /// The hosts' address families (IPv4 only unless set).
    pub fn ip_family(mut self, family: IpFamily) -> Self {
        self.family = family;
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
        let next = path_table(&self.hosts, &self.routes)?;
        let routers: Vec<usize> = (0..self.hosts.len())
            .filter(|&i| {
                self.routes
                    .iter()
                    .any(|r| r.len() > 2 && r[1..r.len() - 1].iter().any(|h| *h == self.hosts[i]))
            })
            .collect();
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
            family: IpFamily::V4,
            hosts: Vec::new(),
            prefix: prefix.clone(),
            dir: Some(dir),
        };
        let mut devices = Vec::new();
        let mut addrs = Vec::new();
        let family = self.family;
        for (i, name) in self.hosts.iter().enumerate() {
            let netns = format!("{prefix}-{name}");
            let addr = host_addr(i);
            let addr6 = family.has_v6().then(|| host_addr6(i));
            host::create_netns(&netns, family.has_v6())?;
            partial.hosts.push(Host::new(
                name.clone(),
                netns.clone(),
                family.has_v4().then_some(addr),
                addr6,
                i,
            ));
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
            if family.has_v4() {
                host::ip(&[
                    "-n",
                    &netns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    LAB_IFACE,
                ])?;
            }
            if let Some(a6) = addr6 {
                // No link-local address (so no router solicitation or MLD report from one) and
                // no duplicate address detection: the lab address is usable at once.
                host::ip(&[
                    "-n",
                    &netns,
                    "link",
                    "set",
                    "dev",
                    LAB_IFACE,
                    "addrgenmode",
                    "none",
                ])?;
                host::ip(&[
                    "-n",
                    &netns,
                    "-6",
                    "addr",
                    "add",
                    &format!("{a6}/64"),
                    "dev",
                    LAB_IFACE,
                    "nodad",
                ])?;
            }
            host::ip(&["-n", &netns, "link", "set", "dev", LAB_IFACE, "up"])?;
            devices.push(dev);
            addrs.push((addr, addr6));
        }
        for &i in &routers {
            make_router(partial.hosts[i].netns(), family)?;
        }
        if family.has_v6() {
            // Every host's name resolves in every host, to each of its addresses (both in a
            // dual-stack lab, as a DNS name with A and AAAA records).
            let entries: Vec<(IpAddr, &str)> = partial
                .hosts
                .iter()
                .flat_map(|h| h.ips().into_iter().map(move |ip| (ip, h.name())))
                .collect();
            for h in &partial.hosts {
                host::write_hosts(h.netns(), &entries)?;
            }
        }
        let names = self.hosts.clone();
        let seed = self.seed.unwrap_or_else(|| rand::rng().random());
        partial.family = family;
        partial.net = Some(Network::start(devices, names, addrs, next, seed)?);
        tracing::info!(prefix = %prefix, hosts = ?self.hosts, routes = ?self.routes, "lab up");
        Ok(partial)
    }
}

/// A running lab. Dropping it removes everything it created.
#[derive(Debug)]
pub struct Lab {
    net: Option<Network>,
    family: IpFamily,
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

    /// The hosts' address families.
    pub fn ip_family(&self) -> IpFamily {
        self.family
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

/// The forwarder's path table for `routes` over `hosts`: entry `from * n + dst` is the next hop
/// from `from` toward `dst`, or `None` for direct delivery.
fn path_table(hosts: &[String], routes: &[Vec<String>]) -> Result<Vec<Option<usize>>, Error> {
    let n = hosts.len();
    // `Some(None)`: a route says "direct"; `Some(Some(h))`: through h; `None`: no route says.
    let mut decided: Vec<Option<Option<usize>>> = vec![None; n * n];
    for r in routes {
        let shown = r.join(" -> ");
        if r.len() < 2 {
            return Err(Error::Invalid(format!(
                "route `{shown}`: a route needs at least two hosts"
            )));
        }
        let mut idx = Vec::with_capacity(r.len());
        for h in r {
            let Some(i) = hosts.iter().position(|x| x == h) else {
                return Err(Error::Invalid(format!(
                    "route `{shown}`: no host `{h}` (hosts: {hosts:?})"
                )));
            };
            if idx.contains(&i) {
                return Err(Error::Invalid(format!(
                    "route `{shown}`: host `{h}` appears twice"
                )));
            }
            idx.push(i);
        }
        // Every ordered pair on the path, both ways: p[i] reaches p[j] through p[i +- 1].
        for i in 0..idx.len() {
            for j in (0..idx.len()).filter(|&j| j != i) {
                let hop = if j > i { idx[i + 1] } else { idx[i - 1] };
                let want = (hop != idx[j]).then_some(hop);
                let slot = &mut decided[idx[i] * n + idx[j]];
                match *slot {
                    Some(old) if old != want => {
                        let via = |h: Option<usize>| match h {
                            Some(h) => format!("through {}", hosts[h]),
                            None => "directly".to_string(),
                        };
                        return Err(Error::Invalid(format!(
                            "route `{shown}`: {} reaches {} {} here but {} in an earlier route",
                            hosts[idx[i]],
                            hosts[idx[j]],
                            via(want),
                            via(old)
                        )));
                    }
                    _ => *slot = Some(want),
                }
            }
        }
    }
    Ok(decided.into_iter().map(Option::flatten).collect())
}

/// Kernel settings of a router host (see [`LabBuilder::route`]). IPv6 has no redirects to send
/// without a link-local address (lab hosts have none) and no reverse path filter; its Time
/// Exceeded rate limit is `net.ipv6.icmp.ratelimit` (1 s by default, as IPv4's).
fn make_router(netns: &str, family: IpFamily) -> Result<(), Error> {
    let mut settings = vec![
        "net.ipv4.ip_forward=1",
        "net.ipv4.conf.all.send_redirects=0",
        "net.ipv4.conf.default.send_redirects=0",
        "net.ipv4.conf.lab0.send_redirects=0",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.lab0.rp_filter=0",
        "net.ipv4.icmp_ratelimit=0",
    ];
    if family.has_v6() {
        settings.extend([
            "net.ipv6.conf.all.forwarding=1",
            "net.ipv6.conf.lab0.forwarding=1",
            "net.ipv6.icmp.ratelimit=0",
        ]);
    }
    let mut args = vec!["netns", "exec", netns, "sysctl", "-q", "-w"];
    args.extend(settings);
    host::ip(&args)
}

/// IPv4 address of the host at `index`.
pub fn host_addr(index: usize) -> Ipv4Addr {
    let o = NETWORK.octets();
    Ipv4Addr::new(o[0], o[1], o[2], (index + 1) as u8)
}

/// IPv6 address of the host at `index`.
pub fn host_addr6(index: usize) -> Ipv6Addr {
    let s = NETWORK6.segments();
    Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, (index + 1) as u16)
}

/// `ip` with `port` as a URL authority (`198.18.0.1:2379`, `[fd00:198:18::1]:2379`).
pub fn authority(ip: IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_route_sets_next_hops_both_ways_for_every_pair_on_it() {
        let hosts = names(&["joiner", "r1", "r2", "m1", "m2"]);
        let t = path_table(&hosts, &[names(&["joiner", "r1", "r2", "m1"])]).unwrap();
        let n = hosts.len();
        let next = |a: usize, b: usize| t[a * n + b];
        assert_eq!(next(0, 3), Some(1), "joiner -> m1 goes to r1");
        assert_eq!(next(1, 3), Some(2), "r1 -> m1 goes to r2");
        assert_eq!(next(2, 3), None, "r2 -> m1 is direct");
        assert_eq!(next(3, 0), Some(2), "m1 -> joiner goes to r2");
        assert_eq!(next(2, 0), Some(1));
        assert_eq!(next(0, 2), Some(1), "joiner reaches r2 through r1");
        assert_eq!(next(0, 4), None, "m2 is not on the route: direct");
        assert_eq!(next(4, 3), None);
    }

    #[test]
    fn routes_that_disagree_or_name_unknown_hosts_are_errors() {
        let hosts = names(&["a", "r1", "r2", "b"]);
        let e = path_table(
            &hosts,
            &[names(&["a", "r1", "b"]), names(&["a", "r2", "b"])],
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("a reaches b through r2 here but through r1"),
            "{e}"
        );
        let e = path_table(&hosts, &[names(&["a", "b"]), names(&["a", "r1", "b"])]).unwrap_err();
        assert!(
            e.to_string().contains("directly in an earlier route"),
            "{e}"
        );
        let e = path_table(&hosts, &[names(&["a", "x", "b"])]).unwrap_err();
        assert!(e.to_string().contains("no host `x`"), "{e}");
        let e = path_table(&hosts, &[names(&["a", "r1", "a"])]).unwrap_err();
        assert!(e.to_string().contains("appears twice"), "{e}");
        // Two routes sharing a prefix agree.
        path_table(
            &names(&["a", "r1", "b", "c"]),
            &[names(&["a", "r1", "b"]), names(&["a", "r1", "c"])],
        )
        .unwrap();
    }
}
