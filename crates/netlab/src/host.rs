//! Hosts: one network namespace each, with an address in 198.18.0.0/15, one in
//! fd00:198:18::/48, or both (the lab's [`crate::IpFamily`]).
//!
//! This module owns namespace creation and deletion, and running code inside a host: as a child
//! process (`ip netns exec`), as an async tokio command, or as a closure on a thread that has
//! entered the namespace. It must not know about the forwarder or etcd; the lab wires those up.

use std::ffi::OsStr;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sched::{setns, CloneFlags};

use crate::Error;

/// A host of the lab: a network namespace with one address on the lab network.
///
/// Cloning is cheap and shares the namespace; the namespace is deleted when the [`crate::Lab`]
/// that created it is dropped, not when a clone is.
#[derive(Clone, Debug)]
pub struct Host {
    inner: Arc<HostInner>,
}

#[derive(Debug)]
struct HostInner {
    name: String,
    netns: String,
    addr: Option<Ipv4Addr>,
    addr6: Option<Ipv6Addr>,
    index: usize,
}

impl Host {
    pub(crate) fn new(
        name: String,
        netns: String,
        addr: Option<Ipv4Addr>,
        addr6: Option<Ipv6Addr>,
        index: usize,
    ) -> Self {
        Host {
            inner: Arc::new(HostInner {
                name,
                netns,
                addr,
                addr6,
                index,
            }),
        }
    }

    /// The short name given to the lab builder, for example `m1` or `joiner`.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The namespace name, for `ip netns exec <netns> ...`.
    pub fn netns(&self) -> &str {
        &self.inner.netns
    }

    /// The host's IPv4 address on the lab network. Panics in an IPv6-only lab: a test that
    /// asks for it there is a bug in the test ([`Host::ip`] is the family-neutral address).
    pub fn addr(&self) -> Ipv4Addr {
        self.inner.addr.unwrap_or_else(|| {
            panic!(
                "host {} is in an IPv6-only lab: it has no IPv4 address (use Host::ip)",
                self.inner.name
            )
        })
    }

    /// The host's IPv6 address on the lab network, in an IPv6 or dual-stack lab.
    pub fn addr6(&self) -> Option<Ipv6Addr> {
        self.inner.addr6
    }

    /// The address the lab's services use for this host: IPv4 unless the lab is IPv6 only.
    pub fn ip(&self) -> IpAddr {
        match (self.inner.addr, self.inner.addr6) {
            (Some(v4), _) => IpAddr::V4(v4),
            (None, Some(v6)) => IpAddr::V6(v6),
            (None, None) => unreachable!("a host has at least one address"),
        }
    }

    /// Every address of the host on the lab network (IPv4 first).
    pub fn ips(&self) -> Vec<IpAddr> {
        let v4 = self.inner.addr.map(IpAddr::V4);
        let v6 = self.inner.addr6.map(IpAddr::V6);
        v4.into_iter().chain(v6).collect()
    }

    /// Position of the host in the lab, as used by the forwarder.
    pub fn index(&self) -> usize {
        self.inner.index
    }

    /// A command that runs `program` inside this host (`ip netns exec`). `ip` execs the program, so
    /// the child's pid is the program's pid.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.arg("netns").arg("exec").arg(self.netns()).arg(program);
        cmd
    }

    /// The async form of [`Host::command`]. The child is killed when the handle is dropped.
    pub fn tokio_command(&self, program: impl AsRef<OsStr>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("ip");
        cmd.arg("netns")
            .arg("exec")
            .arg(self.netns())
            .arg(program)
            .kill_on_drop(true);
        cmd
    }

    /// Starts `cmd` (made with [`Host::command`]; owned or `&mut`) and returns a handle that kills
    /// it on drop.
    pub fn spawn(
        &self,
        mut cmd: impl std::borrow::BorrowMut<Command>,
        label: &str,
    ) -> Result<HostProcess, Error> {
        let child = cmd
            .borrow_mut()
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| Error::Spawn(format!("{label} in {}: {e}", self.netns())))?;
        Ok(HostProcess {
            child: Some(child),
            label: label.to_string(),
        })
    }

    /// Runs `f` on a thread that has entered this host's network namespace, and returns its
    /// result. Sockets opened by `f` belong to the host.
    pub fn run<T, F>(&self, f: F) -> Result<T, Error>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let path = format!("/run/netns/{}", self.netns());
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns =
                    File::open(&path).map_err(|e| Error::Netns(format!("open {path}: {e}")))?;
                setns(&ns, CloneFlags::CLONE_NEWNET)
                    .map_err(|e| Error::Netns(format!("setns {path}: {e}")))?;
                Ok(f())
            })
            .join()
            .map_err(|_| Error::Netns(format!("thread in {} panicked", self.netns())))?
        })
    }

    /// Runs the future made by `make` to completion on a current-thread tokio runtime inside this
    /// host. Use it to drive library code (joinguard probes, etcd clients) from a test.
    pub fn block_on<T, Fut, F>(&self, make: F) -> Result<T, Error>
    where
        F: FnOnce() -> Fut + Send,
        Fut: std::future::Future<Output = T>,
        T: Send,
    {
        self.run(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Netns(format!("tokio runtime: {e}")))?;
            Ok(rt.block_on(make()))
        })?
    }
}

/// A process running inside a host. Dropping the handle kills the process (SIGKILL) and reaps it.
#[derive(Debug)]
pub struct HostProcess {
    child: Option<Child>,
    label: String,
}

impl HostProcess {
    /// The process id, or `None` once it has been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What the process is, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then SIGKILL if the process has not exited within `grace`. Returns the exit
    /// status when the process exited on its own.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut c = self.child.take()?;
        let pid = nix::unistd::Pid::from_raw(c.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        loop {
            match c.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    return None;
                }
            }
        }
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Creates a namespace with loopback up. Without `ipv6` IPv6 is switched off (an IPv4 lab's
/// counters stay free of IPv6 noise); with it, IPv6 is switched on explicitly, whatever the
/// host's defaults for new namespaces are.
pub(crate) fn create_netns(name: &str, ipv6: bool) -> Result<(), Error> {
    ip(&["netns", "add", name])?;
    ip(&["-n", name, "link", "set", "lo", "up"])?;
    let setting = if ipv6 {
        "net.ipv6.conf.all.disable_ipv6=0"
    } else {
        "net.ipv6.conf.all.disable_ipv6=1"
    };
    let _ = Command::new("ip")
        .args(["netns", "exec", name, "sysctl", "-q", "-w"])
        .arg(setting)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    Ok(())
}

/// Kills every process left in the namespace, then deletes it. Never fails: it is called from
/// Drop and from the sweeper.
pub(crate) fn delete_netns(name: &str) {
    for _ in 0..3 {
        let pids = netns_pids(name);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("ip")
        .args(["netns", "delete", name])
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_dir_all(etc_dir(name));
}

/// `/etc/netns/<name>`: files `ip netns exec` bind-mounts over `/etc` in the namespace.
pub(crate) fn etc_dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new("/etc/netns").join(name)
}

/// Writes the namespace's own `/etc/hosts` (`ip netns exec` mounts `/etc/netns/<name>/hosts`
/// over it): loopback, then `entries` (address, name). A lab name with an IPv4 and an IPv6 line
/// resolves to both, as a dual-stack DNS name does.
pub(crate) fn write_hosts(name: &str, entries: &[(IpAddr, &str)]) -> Result<(), Error> {
    let dir = etc_dir(name);
    let mut text = String::from("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n");
    for (ip, host) in entries {
        text.push_str(&format!("{ip} {host}\n"));
    }
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("hosts"), text))
        .map_err(|e| Error::Netns(format!("write {}/hosts: {e}", dir.display())))
}

/// The pids of processes inside the namespace.
pub fn netns_pids(name: &str) -> Vec<i32> {
    let out = Command::new("ip")
        .args(["netns", "pids", name])
        .stderr(Stdio::null())
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs `ip ARGS`, returning its stderr as the error when it fails.
pub(crate) fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Prerequisite(format!("cannot run `ip` (install iproute2): {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Netns(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
