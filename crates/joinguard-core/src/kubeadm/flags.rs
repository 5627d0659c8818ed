//! The command line of `kubeadm join`, 1.28 to 1.35: every flag, which versions have it, and
//! kubeadm's rule for mixing `--config` with flags.
//!
//! Sources (kubernetes/kubernetes unless said otherwise):
//! - `cmd/kubeadm/app/cmd/join.go` at 0010d3992ac5feaa754b462bd8c44e1ae5585654 (a 1.33+ tree:
//!   `addJoinConfigFlags`, `addJoinOtherFlags`; `--skip-phases` comes from
//!   `cmd/phases/workflow/runner.go` `BindToCommand`, `--cri-socket` from
//!   `cmd/util` `AddCRISocketFlag`, `--config` and `--patches` from `cmd/options`).
//! - kubernetes/website `content/en/docs/reference/setup-tools/kubeadm/generated/kubeadm_join/_index.md`
//!   at 3842a2847339fe9ad1013653ef81c9aa0f77b639 (phases of 1.30/1.31: no update-status,
//!   wait-control-plane experimental) and at 20067f198597a2ea23f07dda2eb008220d7c4394 (phases of
//!   1.32+: etcd-join, kubelet-wait-bootstrap): the same 17 join flags plus `-h`, and `--rootfs`
//!   inherited. No join flag was added or removed in 1.28-1.35: `--dry-run` came in 1.22
//!   (k/k PR #103027), `--patches` replaced `--experimental-patches` before 1.28 (the old
//!   `generated/kubeadm_join.md` at 0c06a3c865f42736342148c3733e20e18bb7625e still has the latter).
//! - The klog flags come from `cmd/kubeadm/app/kubeadm.go`, which changed twice in the range:
//!   1.28-1.30 call `klog.InitFlags(nil)` and only hide most flags (k/k PR #122385, Dec 2023,
//!   lists them); k/k PR #125179 (merged 2024-05-29, so 1.31) registers only `v`,
//!   `add_dir_header`, `skip_headers` (its release note lists the ten it dropped); k/k PR #131647
//!   (merged 2025-05-07, so 1.34) keeps only `v` and `vmodule` (KEP-2845). The stored
//!   kubeadm.go at 07428f7e is older than the range; the later code was read from the search
//!   index's current copy (the `case "v", "vmodule":` switch).
//! - pflag turns the one-letter Go flag `v` into `-v`/`--v`, and kubeadm's
//!   `WordSepNormalizeFunc` makes `--log_file` and `--log-file` the same flag.
//! - `ValidateMixedArguments`/`isAllowedFlag` in `cmd/kubeadm/app/apis/kubeadm/validation/validation.go`
//!   (the copy with `sets.New` and `"log-file"`, as quoted in kubernetes/kubeadm#2902 at k/k
//!   0ae9aaac, July 2023, and unchanged in the 1.30+ copy with UpgradeConfiguration validation).
//!   `--cri-socket` left the allowed list in 1.22 (k/k PR #101600).

use super::KubeadmVersion;

/// What a flag's value looks like (pflag's type names, as `kubeadm join --help` prints them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A pflag bool: `--flag`, `--flag=true`, `--flag=false`.
    Bool,
    String,
    /// `strings`: comma-separated, repeatable.
    Strings,
    Int32,
    Uint,
    /// klog's `Level` (an integer).
    Level,
    /// klog's `moduleSpec` (`pattern=N,...`).
    ModuleSpec,
    /// klog's `traceLocation` (`file.go:N`).
    TraceLocation,
    /// klog's `severity` (`INFO`, `WARNING`, `ERROR`, `FATAL`, or 0-3).
    Severity,
}

/// Where kubeadm defines the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `kubeadm join`'s own flags.
    Join,
    /// Inherited from the `kubeadm` root command (`--rootfs`).
    Root,
    /// klog's flags that `kubeadm.go` registers globally.
    Klog,
}

/// What joinguard does with the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// It changes what joinguard checks; the text says how.
    Used(&'static str),
    /// Accepted so that the kubeadm join line runs unchanged, and listed at `-v` as not used.
    Ignored(&'static str),
}

/// One flag of `kubeadm join`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KubeadmFlag {
    /// The long name, as kubeadm spells it.
    pub name: &'static str,
    pub shorthand: Option<char>,
    pub value: ValueKind,
    pub origin: Origin,
    /// First and last minor version (inclusive) that have it.
    pub since: u8,
    pub until: u8,
    pub joinguard: Use,
}

impl KubeadmFlag {
    pub(crate) fn in_version(&self, v: KubeadmVersion) -> bool {
        (self.since..=self.until).contains(&v.0)
    }

    pub fn is_used(&self) -> bool {
        matches!(self.joinguard, Use::Used(_))
    }
}

const fn join(name: &'static str, value: ValueKind, joinguard: Use) -> KubeadmFlag {
    KubeadmFlag {
        name,
        shorthand: None,
        value,
        origin: Origin::Join,
        since: 28,
        until: 35,
        joinguard,
    }
}

const fn klog(name: &'static str, value: ValueKind, since: u8, until: u8) -> KubeadmFlag {
    KubeadmFlag {
        name,
        shorthand: None,
        value,
        origin: Origin::Klog,
        since,
        until,
        joinguard: Use::Ignored("joinguard logs to stderr only; see -v"),
    }
}

/// Every flag `kubeadm join` accepts in some version from 1.28 to 1.35.
pub const JOIN_FLAGS: &[KubeadmFlag] = &[
    join(
        "apiserver-advertise-address",
        ValueKind::String,
        Use::Used(
            "this node's address: it must be one of this host's addresses, and the source \
             address the kernel picks towards every etcd member must be it (etcd checks a peer's \
             certificate SANs against the address it connects from)",
        ),
    ),
    join(
        "apiserver-bind-port",
        ValueKind::Int32,
        Use::Used("validated (1-65535) and reported; the local API server is not running yet"),
    ),
    join(
        "certificate-key",
        ValueKind::String,
        Use::Used(
            "decrypts kubeadm-certs in memory for an etcd client identity (needs --token); \
             asks for the etcd checks even without --control-plane",
        ),
    ),
    join(
        "config",
        ValueKind::String,
        Use::Used("the JoinConfiguration; mixing with flags follows kubeadm's rule"),
    ),
    join(
        "control-plane",
        ValueKind::Bool,
        Use::Used(
            "a control-plane join: etcd is checked too (without it, and without etcd inputs, \
             only the API path is)",
        ),
    ),
    join(
        "cri-socket",
        ValueKind::String,
        Use::Ignored("joinguard does not talk to the container runtime"),
    ),
    join(
        "discovery-file",
        ValueKind::String,
        Use::Used(
            "file discovery: the kubeconfig's server and CA are used as they are (an https:// \
             URL exits 2: download it first)",
        ),
    ),
    join(
        "discovery-token",
        ValueKind::String,
        Use::Used("token discovery of the cluster CA (cluster-info, JWS, pins)"),
    ),
    join(
        "discovery-token-ca-cert-hash",
        ValueKind::Strings,
        Use::Used("the CA pins; checked whenever given, as kubeadm does"),
    ),
    join(
        "discovery-token-unsafe-skip-ca-verification",
        ValueKind::Bool,
        Use::Used("allows discovery without pins (warns); given pins are still checked"),
    ),
    join(
        "dry-run",
        ValueKind::Bool,
        Use::Ignored("joinguard changes nothing by default (see --write-probe)"),
    ),
    join(
        "ignore-preflight-errors",
        ValueKind::Strings,
        Use::Used(
            "joinguard's check names turn errors into warnings; kubeadm's check names are \
             accepted and noted",
        ),
    ),
    join(
        "node-name",
        ValueKind::String,
        Use::Used("names this node (write-probe key, report)"),
    ),
    join(
        "patches",
        ValueKind::String,
        Use::Ignored("patches apply to static Pod manifests, which joinguard does not write"),
    ),
    join(
        "skip-phases",
        ValueKind::Strings,
        Use::Ignored("joinguard has no phases"),
    ),
    join(
        "tls-bootstrap-token",
        ValueKind::String,
        Use::Used("validated (token format, never printed); the kubelet uses it, not joinguard"),
    ),
    join(
        "token",
        ValueKind::String,
        Use::Used("the discovery and TLS bootstrap token when those are not given"),
    ),
    KubeadmFlag {
        name: "rootfs",
        shorthand: None,
        value: ValueKind::String,
        origin: Origin::Root,
        since: 28,
        until: 35,
        joinguard: Use::Ignored("joinguard reads the files its flags name, as given"),
    },
    KubeadmFlag {
        name: "v",
        shorthand: Some('v'),
        value: ValueKind::Level,
        origin: Origin::Klog,
        since: 28,
        until: 35,
        joinguard: Use::Used("klog level mapped to joinguard's -v count (docs/kubeadm-compat.md)"),
    },
    klog("add-dir-header", ValueKind::Bool, 28, 33),
    klog("skip-headers", ValueKind::Bool, 28, 33),
    klog("vmodule", ValueKind::ModuleSpec, 28, 30),
    klog("alsologtostderr", ValueKind::Bool, 28, 30),
    klog("log-backtrace-at", ValueKind::TraceLocation, 28, 30),
    klog("log-dir", ValueKind::String, 28, 30),
    klog("log-file", ValueKind::String, 28, 30),
    klog("log-file-max-size", ValueKind::Uint, 28, 30),
    klog("logtostderr", ValueKind::Bool, 28, 30),
    klog("one-output", ValueKind::Bool, 28, 30),
    klog("skip-log-headers", ValueKind::Bool, 28, 30),
    klog("stderrthreshold", ValueKind::Severity, 28, 30),
];

/// `--vmodule` came back in 1.34 (k/k PR #131647) after 1.31-1.33 dropped it.
pub const VMODULE_SINCE_134: KubeadmFlag = klog("vmodule", ValueKind::ModuleSpec, 34, 35);

/// `-h, --help`: every version; printed help, exit 0.
pub const HELP: &str = "help";

/// The flags of `kubeadm join` in version `v`, sorted by name (`--help` not included).
pub fn join_flags(v: KubeadmVersion) -> Vec<KubeadmFlag> {
    let mut out: Vec<KubeadmFlag> = JOIN_FLAGS
        .iter()
        .chain(std::iter::once(&VMODULE_SINCE_134))
        .filter(|f| f.in_version(v))
        .copied()
        .collect();
    out.sort_by_key(|f| f.name);
    out
}

/// The flag named `name` (kubeadm's spelling, `_` or `-`) in any supported version.
pub fn lookup(name: &str) -> Option<KubeadmFlag> {
    let name = normalize(name);
    JOIN_FLAGS
        .iter()
        .chain(std::iter::once(&VMODULE_SINCE_134))
        .find(|f| f.name == name)
        .copied()
}

/// kubeadm's `WordSepNormalizeFunc`: `_` and `-` separate words alike.
pub(crate) fn normalize(name: &str) -> String {
    name.replace('_', "-")
}

/// `isAllowedFlag`: the flags kubeadm lets stand beside `--config` (any `skip-*` flag too).
/// `kubeconfig`, `kubeconfig-dir`, `upload-certs` and `print-join-command` are in kubeadm's
/// list for other commands; `join` has none of them.
pub const ALLOWED_WITH_CONFIG: &[&str] = &[
    "config",
    "ignore-preflight-errors",
    "dry-run",
    "kubeconfig",
    "node-name",
    "kubeconfig-dir",
    "upload-certs",
    "print-join-command",
    "rootfs",
    "v",
    "log-file",
];

pub fn allowed_with_config(name: &str) -> bool {
    let name = normalize(name);
    ALLOWED_WITH_CONFIG.contains(&name.as_str()) || name.starts_with("skip-")
}

/// `ValidateMixedArguments`: given the long names of the kubeadm flags on the command line,
/// kubeadm's own error when `--config` is among them with a flag it does not allow beside it.
/// pflag's `Visit` walks flags sorted by name, so the list is sorted; Go prints a `[]string`
/// as `[a b]`.
pub(crate) fn mixed_config_error(given_kubeadm_flags: &[String]) -> Option<MixedConfig> {
    if !given_kubeadm_flags.iter().any(|f| f == "config") {
        return None;
    }
    let mut bad: Vec<String> = given_kubeadm_flags
        .iter()
        .map(|f| normalize(f))
        .filter(|f| !allowed_with_config(f))
        .collect();
    bad.sort();
    bad.dedup();
    (!bad.is_empty()).then_some(MixedConfig { flags: bad })
}

/// kubeadm's `ValidateMixedArguments` error, word for word: `--config` beside flags it does
/// not allow there (the flags as kubeadm names them, sorted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("can not mix '--config' with arguments [{}]", flags.join(" "))]
pub struct MixedConfig {
    pub flags: Vec<String>,
}

/// klog's `-v` levels mapped to joinguard's verbosity count: 0 stays quiet (warnings), 1-3 info
/// (`-v`), 4-5 debug (`-vv`), 6 and more trace (`-vvv`). kubeadm logs its own steps at V(1) and
/// client details at V(5)-V(9) (kubeadm's troubleshooting guide asks for `--v=5`), so `--v=5`
/// gives joinguard's debug lines and only the very chatty levels get per-sample traces.
pub fn klog_level_to_verbosity(level: u32) -> u8 {
    match level {
        0 => 0,
        1..=3 => 1,
        4 | 5 => 2,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubeadm::SUPPORTED_VERSIONS;

    #[test]
    fn every_version_has_the_seventeen_join_flags_and_rootfs() {
        for v in SUPPORTED_VERSIONS {
            let names: Vec<&str> = join_flags(v).iter().map(|f| f.name).collect();
            for want in [
                "apiserver-advertise-address",
                "apiserver-bind-port",
                "certificate-key",
                "config",
                "control-plane",
                "cri-socket",
                "discovery-file",
                "discovery-token",
                "discovery-token-ca-cert-hash",
                "discovery-token-unsafe-skip-ca-verification",
                "dry-run",
                "ignore-preflight-errors",
                "node-name",
                "patches",
                "skip-phases",
                "tls-bootstrap-token",
                "token",
                "rootfs",
                "v",
            ] {
                assert!(names.contains(&want), "{v}: {want} missing from {names:?}");
            }
        }
    }

    #[test]
    fn klog_flags_follow_the_two_kubeadm_changes() {
        let names = |m| -> Vec<&str> {
            join_flags(KubeadmVersion(m))
                .into_iter()
                .filter(|f| f.origin == Origin::Klog)
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(names(30).len(), 13, "{:?}", names(30));
        assert_eq!(names(31), ["add-dir-header", "skip-headers", "v"]);
        assert_eq!(names(33), ["add-dir-header", "skip-headers", "v"]);
        assert_eq!(names(34), ["v", "vmodule"]);
        assert_eq!(names(35), ["v", "vmodule"]);
    }

    #[test]
    fn mixing_follows_is_allowed_flag() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(mixed_config_error(&g(&["token", "control-plane"])), None);
        assert_eq!(
            mixed_config_error(&g(&["config", "token", "control-plane", "node-name"]))
                .map(|e| e.to_string()),
            Some("can not mix '--config' with arguments [control-plane token]".into())
        );
        assert_eq!(
            mixed_config_error(&g(&[
                "config",
                "node-name",
                "ignore-preflight-errors",
                "skip-phases",
                "dry-run",
                "v",
                "rootfs",
                "log-file",
                "skip-headers"
            ])),
            None
        );
        assert_eq!(
            mixed_config_error(&g(&["config", "cri-socket", "vmodule"])).map(|e| e.to_string()),
            Some("can not mix '--config' with arguments [cri-socket vmodule]".into())
        );
        assert!(allowed_with_config("skip_log_headers"));
    }

    #[test]
    fn klog_levels_map_onto_the_count() {
        assert_eq!(klog_level_to_verbosity(0), 0);
        assert_eq!(klog_level_to_verbosity(1), 1);
        assert_eq!(klog_level_to_verbosity(5), 2);
        assert_eq!(klog_level_to_verbosity(10), 3);
    }
}
