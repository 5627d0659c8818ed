//! The sweeper: removes what a killed run left behind.
//!
//! Drop guards clean up after panics, but not after SIGKILL. The sweeper finds namespaces, TUN
//! devices and temp dirs by the `jg` prefix (or a narrower one), kills processes left in those
//! namespaces, and removes them. It must never touch anything without the prefix.

use std::path::PathBuf;
use std::process::Command;

use serde::Serialize;

use crate::host;
use crate::lab::PREFIX;

/// What one sweep found (and, unless it was a dry run, removed).
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Leftovers {
    pub namespaces: Vec<String>,
    pub processes: Vec<i32>,
    pub devices: Vec<String>,
    /// Temp dirs and stale control sockets.
    pub dirs: Vec<PathBuf>,
}

impl Leftovers {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
            && self.processes.is_empty()
            && self.devices.is_empty()
            && self.dirs.is_empty()
    }
}

/// Finds leftovers whose names start with `prefix` (which must itself start with `jg`).
pub fn find(prefix: &str) -> Leftovers {
    let prefix = if prefix.starts_with(PREFIX) {
        prefix
    } else {
        PREFIX
    };
    let mut out = Leftovers::default();
    if let Ok(rd) = std::fs::read_dir("/run/netns") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) {
                out.processes.extend(host::netns_pids(&name));
                out.namespaces.push(name);
            }
        }
    }
    if let Ok(o) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            // "12: jg3f9at0: <POINTOPOINT,...>"
            if let Some(name) = line.split(": ").nth(1) {
                let name = name.split('@').next().unwrap_or(name);
                if name.starts_with(prefix) {
                    out.devices.push(name.to_string());
                }
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!("netlab-{prefix}")) {
                out.dirs.push(e.path());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/etc/netns") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) {
                out.dirs.push(e.path());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(crate::control::SOCKET_DIR) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(prefix) && name.ends_with(".sock") {
                out.dirs.push(e.path());
            }
        }
    }
    out.namespaces.sort();
    out.devices.sort();
    out.dirs.sort();
    out
}

/// Finds and removes leftovers of `prefix`. Returns what it removed.
pub fn sweep(prefix: &str) -> Leftovers {
    let found = find(prefix);
    for ns in &found.namespaces {
        host::delete_netns(ns);
    }
    for dev in &found.devices {
        let _ = host::ip(&["link", "delete", dev]);
    }
    for path in &found.dirs {
        if path.is_dir() {
            let _ = std::fs::remove_dir_all(path);
        } else {
            let _ = std::fs::remove_file(path);
        }
    }
    found
}
