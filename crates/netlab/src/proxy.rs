//! An egress proxy in a lab host: the real tinyproxy (Debian's `tinyproxy`), an HTTP proxy that
//! tunnels TLS with CONNECT, as many control-plane nodes reach their cluster through.
//!
//! This module writes tinyproxy's configuration (listen address and port, CONNECT allowed to
//! every port, a deny list of hosts), starts it in the foreground in its host and waits until it
//! accepts connections. It must not know about joinguard.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::host::{Host, HostProcess};
use crate::Error;

/// The port tinyproxy listens on (squid's and tinyproxy's usual 3128).
pub const PROXY_PORT: u16 = 3128;

/// A running proxy; stopped when dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    dir: PathBuf,
    _process: HostProcess,
}

impl Proxy {
    /// Starts tinyproxy in `host`, listening on the host's address, port [`PROXY_PORT`]. CONNECT
    /// to any of `deny` (host names or addresses, matched whole) is answered `403 Filtered`;
    /// everything else is tunnelled. Files go to `dir` (config, log, filter).
    pub fn start(host: &Host, dir: &Path, deny: &[String]) -> Result<Proxy, Error> {
        let bin = which("tinyproxy").ok_or_else(|| {
            Error::Prerequisite("tinyproxy not found: apt-get install tinyproxy".into())
        })?;
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Invalid(format!("create {}: {e}", dir.display())))?;
        let addr = SocketAddr::new(host.ip(), PROXY_PORT);
        let filter = dir.join("deny");
        // tinyproxy's filter: extended regular expressions matched against the host; anchored
        // so that `198.18.0.5` does not also deny `198.18.0.50`.
        let rules: String = deny
            .iter()
            .map(|h| {
                format!(
                    "^{}$\n",
                    regex_escape(h.trim_matches(|c| c == '[' || c == ']'))
                )
            })
            .collect();
        let config = format!(
            "User root\nGroup root\nPort {PROXY_PORT}\nListen {listen}\nBindSame yes\n\
             Timeout 30\nMaxClients 64\nLogLevel Info\nLogFile \"{log}\"\n\
             Filter \"{filter}\"\nFilterType ere\nFilterDefaultDeny No\n\
             DisableViaHeader Yes\n",
            listen = host.ip(),
            log = dir.join("tinyproxy.log").display(),
            filter = filter.display(),
        );
        let conf = dir.join("tinyproxy.conf");
        std::fs::write(&filter, rules)
            .and_then(|()| std::fs::write(&conf, config))
            .map_err(|e| Error::Invalid(format!("write {}: {e}", conf.display())))?;
        let mut cmd = host.command(&bin);
        cmd.arg("-d").arg("-c").arg(&conf);
        cmd.stdout(std::process::Stdio::null());
        cmd.stderr(std::process::Stdio::null());
        let process = host.spawn(cmd, "tinyproxy")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let up = host
                .run(move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok())
                .unwrap_or(false);
            if up {
                break;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(dir.join("tinyproxy.log")).unwrap_or_default();
                return Err(Error::Spawn(format!(
                    "tinyproxy did not listen on {addr} within 10 s: {}",
                    log.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Proxy {
            addr,
            dir: dir.to_path_buf(),
            _process: process,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy as `HTTPS_PROXY` names it: `http://ADDR:3128` (plain HTTP to the proxy, TLS
    /// tunnelled with CONNECT).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// tinyproxy's log (what it tunnelled and refused).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("tinyproxy.log")).unwrap_or_default()
    }

    /// The address it listens on, as a host.
    pub fn ip(&self) -> IpAddr {
        self.addr.ip()
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = ".^$*+?()[]{}|\\".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// The path of `program` on `$PATH` (and the sbin directories Debian puts daemons in).
fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_rules_are_anchored_and_escaped() {
        assert_eq!(regex_escape("198.18.0.5"), "198\\.18\\.0\\.5");
        assert_eq!(regex_escape("api"), "api");
    }
}
