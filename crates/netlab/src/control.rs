//! Runtime control of a running lab from another process, over a Unix socket.
//!
//! `netlab up` serves `/run/netlab/<prefix>.sock`; `netlab impair` and `netlab stats` talk to it.
//! The protocol is one request line and one reply line, both JSON. This module owns that
//! protocol and nothing else: it changes impairments only through [`crate::Network`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, Impairment, Lab};

/// Directory of control sockets.
pub const SOCKET_DIR: &str = "/run/netlab";

/// The control socket path of a lab.
pub fn socket_path(prefix: &str) -> PathBuf {
    PathBuf::from(SOCKET_DIR).join(format!("{prefix}.sock"))
}

/// One request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Sets `spec` from `from` to `to`; with `both`, in both directions. `to` = "*" means every
    /// other host.
    Impair {
        from: String,
        to: String,
        spec: String,
        both: bool,
        /// `ipv4` or `ipv6`: only that family's packets (a dual-stack lab); absent: both.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        family: Option<String>,
    },
    /// Counters of every direction that carried traffic.
    Stats,
}

/// One reply.
#[derive(Debug, Serialize, Deserialize)]
pub struct Reply {
    pub ok: bool,
    pub message: String,
}

/// Serves the control socket of `lab` until `stop` is set. Blocks; run it on its own thread.
pub fn serve(lab: &Lab, stop: Arc<AtomicBool>) -> Result<(), Error> {
    std::fs::create_dir_all(SOCKET_DIR)
        .map_err(|e| Error::Invalid(format!("create {SOCKET_DIR}: {e}")))?;
    let path = socket_path(lab.prefix());
    let _ = std::fs::remove_file(&path);
    let listener =
        UnixListener::bind(&path).map_err(|e| Error::Invalid(format!("bind {path:?}: {e}")))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Invalid(format!("control socket: {e}")))?;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                handle(lab, stream);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let _ = std::fs::remove_file(&path);
    Ok(())
}

fn handle(lab: &Lab, stream: UnixStream) {
    let mut line = String::new();
    let mut reader = BufReader::new(&stream).take_limit();
    let reply = match reader.read_line(&mut line) {
        Ok(_) => match serde_json::from_str::<Request>(&line) {
            Ok(req) => apply(lab, req),
            Err(e) => Reply {
                ok: false,
                message: format!("bad request: {e}"),
            },
        },
        Err(e) => Reply {
            ok: false,
            message: format!("read: {e}"),
        },
    };
    let mut w = &stream;
    let _ = writeln!(w, "{}", serde_json::to_string(&reply).unwrap_or_default());
}

/// Bounds a request line to 64 KiB.
trait TakeLimit: Sized {
    fn take_limit(self) -> std::io::Take<Self>;
}
impl<R: std::io::Read> TakeLimit for R {
    fn take_limit(self) -> std::io::Take<Self> {
        std::io::Read::take(self, 64 * 1024)
    }
}

fn apply(lab: &Lab, req: Request) -> Reply {
    match req {
        Request::Impair {
            from,
            to,
            spec,
            both,
            family,
        } => {
            let imp: Impairment = match spec.parse() {
                Ok(i) => i,
                Err(e) => return fail(e.to_string()),
            };
            let fam = match family.as_deref().map(str::parse::<crate::IpFamily>) {
                None => crate::IpFamily::Dual,
                Some(Ok(f)) if f != crate::IpFamily::Dual => f,
                Some(_) => return fail("--family takes ipv4 or ipv6".into()),
            };
            if let Some(f) = family.as_deref() {
                let Some(a) = lab.try_host(&from) else {
                    return fail(format!("no host `{from}`"));
                };
                let Some(b) = lab.try_host(&to) else {
                    return fail(format!("no host `{to}` (--family needs one host, not `*`)"));
                };
                if both {
                    lab.net().set_link_family(a, b, fam, imp.clone());
                    return done(format!("{from} <-> {to} ({f} only): {imp}"));
                }
                lab.net().set_family(a, b, fam, imp.clone());
                return done(format!("{from} -> {to} ({f} only): {imp}"));
            }
            let Some(a) = lab.try_host(&from) else {
                return fail(format!("no host `{from}`"));
            };
            if to == "*" {
                lab.net().set_host(a, imp.clone());
                return done(format!("{from} <-> every host: {imp}"));
            }
            let Some(b) = lab.try_host(&to) else {
                return fail(format!("no host `{to}`"));
            };
            if both {
                lab.net().set_link(a, b, imp.clone());
                done(format!("{from} <-> {to}: {imp}"))
            } else {
                lab.net().set(a, b, imp.clone());
                done(format!("{from} -> {to}: {imp}"))
            }
        }
        Request::Stats => {
            let mut lines = Vec::new();
            for a in lab.hosts() {
                for b in lab.hosts() {
                    let s = lab.net().stats(a, b);
                    if s.forwarded
                        + s.dropped_loss
                        + s.dropped_blackout
                        + s.dropped_queue
                        + s.dropped_mtu
                        > 0
                    {
                        lines.push(format!(
                            "{:>8} -> {:<8} fwd {:>8} bytes {:>10} loss {:>6} blackout {:>6} queue {:>6} mtu {:>6}  [{}]",
                            a.name(),
                            b.name(),
                            s.forwarded,
                            s.bytes,
                            s.dropped_loss,
                            s.dropped_blackout,
                            s.dropped_queue,
                            s.dropped_mtu,
                            lab.net().get(a, b)
                        ));
                    }
                }
            }
            done(lines.join("\n"))
        }
    }
}

fn done(message: String) -> Reply {
    Reply { ok: true, message }
}

fn fail(message: String) -> Reply {
    Reply { ok: false, message }
}

/// Sends one request to the lab with `prefix` and returns its reply.
pub fn request(prefix: &str, req: &Request) -> Result<Reply, Error> {
    let path = socket_path(prefix);
    let stream = UnixStream::connect(&path).map_err(|e| {
        Error::Invalid(format!(
            "no running lab `{prefix}` ({}: {e}); start one with `netlab up`",
            path.display()
        ))
    })?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let mut w = &stream;
    writeln!(w, "{}", serde_json::to_string(req).unwrap_or_default())
        .map_err(|e| Error::Invalid(format!("send: {e}")))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .take_limit()
        .read_line(&mut line)
        .map_err(|e| Error::Invalid(format!("reply: {e}")))?;
    serde_json::from_str(&line).map_err(|e| Error::Invalid(format!("bad reply: {e}")))
}

/// The prefixes of labs whose control sockets exist.
pub fn running_labs() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(SOCKET_DIR)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_suffix(".sock")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
