//! The names of kubeadm's own preflight checks, as `--ignore-preflight-errors` takes them.
//!
//! Source: kubernetes/kubernetes `cmd/kubeadm/app/preflight/checks.go` at
//! 00b6a4c7afdbd95d9ef5b5f3cada04ac15b0c135 (the `Name()` methods and the `Label`s given in
//! `InitNodeChecks`/`JoinNodeChecks`), `checks_linux.go` at 039c72e8 (`MemCheck`, the
//! executables of `addExecChecks`, the `FileContent` checks of `addIPv4Checks`/`addIPv6Checks`)
//! and `checks_unix.go` at 36bb0b9a (`IsPrivilegedUserCheck`). Names derived from a path or a
//! port are families: `DirAvailable-` + the path with `/` turned into `-`
//! (`DirAvailable--var-lib-etcd`), likewise `FileAvailable-`, `FileExisting-` (also
//! `FileExisting-<executable>` from `InPathCheck`), `FileContent-`; `Port-<n>`;
//! `Service-<Title-cased service>` (`Service-Kubelet`). kubeadm lower-cases every entry before
//! comparing (`ValidateIgnorePreflightErrors`, `setHasItemOrAll`), so matching is
//! case-insensitive.

/// The fixed names (`Name()` without a parameter, and the labels kubeadm sets).
pub const FIXED: &[&str] = &[
    "CRI",
    "ExternalEtcdClientCertificates",
    "ExternalEtcdVersion",
    "Firewalld",
    "HTTPProxy",
    "HTTPProxyCIDR",
    "Hostname",
    "ImagePull",
    "IsPrivilegedUser",
    "KubeletVersion",
    "KubernetesVersion",
    "Mem",
    "NumCPU",
    "Swap",
    "SystemVerification",
];

/// The name families, by prefix (the part after it must be non-empty).
pub const FAMILIES: &[&str] = &[
    "DirAvailable-",
    "FileAvailable-",
    "FileContent-",
    "FileExisting-",
    "Port-",
    "Service-",
];

/// kubeadm's spelling of `name` when it is one of kubeadm's check names (any case), else
/// `None`. Family members keep the user's suffix: `dirAvailable--var-lib-etcd` is reported as
/// `DirAvailable--var-lib-etcd`.
pub fn canonical(name: &str) -> Option<String> {
    let name = name.trim();
    if let Some(f) = FIXED.iter().find(|f| f.eq_ignore_ascii_case(name)) {
        return Some((*f).to_string());
    }
    for prefix in FAMILIES {
        let Some(head) = name.get(..prefix.len()) else {
            continue;
        };
        if !head.eq_ignore_ascii_case(prefix) {
            continue;
        }
        let rest = &name[prefix.len()..];
        if rest.is_empty() {
            return None;
        }
        if *prefix == "Port-" && !rest.parse::<u16>().is_ok_and(|p| p > 0) {
            return None;
        }
        return Some(format!("{prefix}{rest}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn kubeadm_names_in_any_case() {
        for (given, want) in [
            ("NumCPU", "NumCPU"),
            ("numcpu", "NumCPU"),
            ("MEM", "Mem"),
            ("IsPrivilegedUser", "IsPrivilegedUser"),
            ("Swap", "Swap"),
            ("CRI", "CRI"),
            ("Port-6443", "Port-6443"),
            ("port-10250", "Port-10250"),
            (
                "DirAvailable--etc-kubernetes-manifests",
                "DirAvailable--etc-kubernetes-manifests",
            ),
            (
                "FileAvailable--etc-kubernetes-kubelet.conf",
                "FileAvailable--etc-kubernetes-kubelet.conf",
            ),
            ("FileExisting-crictl", "FileExisting-crictl"),
            (
                "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
                "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
            ),
            ("HTTPProxy", "HTTPProxy"),
            ("HTTPProxyCIDR", "HTTPProxyCIDR"),
            ("SystemVerification", "SystemVerification"),
            ("KubeletVersion", "KubeletVersion"),
            ("Hostname", "Hostname"),
            ("ImagePull", "ImagePull"),
            ("ExternalEtcdVersion", "ExternalEtcdVersion"),
            ("Service-Kubelet", "Service-Kubelet"),
        ] {
            assert_eq!(canonical(given).as_deref(), Some(want), "{given}");
        }
    }

    #[test]
    fn not_kubeadm_names() {
        for bad in [
            "Bogus",
            "Port-",
            "Port-http",
            "Port-0",
            "Port-99999",
            "DirAvailable-",
            "NumCPUs",
            "EtcdPeerLatency",
        ] {
            assert_eq!(canonical(bad), None, "{bad}");
        }
    }
}
