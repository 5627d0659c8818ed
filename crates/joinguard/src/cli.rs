//! The command line: flag definitions only (kubeadm's names where kubeadm has the concept,
//! etcdctl's for etcd TLS). Parsing into validated inputs happens in the command modules, so
//! that every bad value gets the same exit code (2) and a message naming the flag.
//!
//! The binary's: the core never sees a clap type. Each command's flags map onto its plain spec in
//! `joinguard_core::spec` by name (`command_args!`); completions and man pages render from here.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use joinguard_core::input::{Input, Named, Spelling};
use joinguard_core::secret::Secret;
use joinguard_core::spec;

pub use joinguard_core::duration::parse_duration;

/// "`path` in joinguard's documentation (the repository URL)": where help sends a reader who
/// has only the binary for a guide it does not carry.
macro_rules! guide {
    ($path:literal) => {
        concat!(
            $path,
            " (the .deb installs it under /usr/share/doc/joinguard/; source: ",
            env!("CARGO_PKG_REPOSITORY"),
            ")"
        )
    };
}

/// Declares a command's clap struct and its one mapping onto the core's spec (the first of the
/// two stages: flags -> `joinguard_core::spec` -> the command's validated input). Every field is
/// the spec's field of the same name (`.into()` bridges the binary's `ValueEnum`s), so a new
/// input is one field here, with its flag and help, and one in the core's spec; the compiler
/// names a field the other side lacks. A field marked `#[binary_only]` stays here (a secret's
/// `--*-file`, folded into its flag by [`parse_from`]; kubeadm's flags joinguard does not use).
/// A field marked `#[if_given]` keeps its clap default for `--help` but reaches the spec as
/// `Some` only when given on the command line (`given`): where another source (kubeadm-config)
/// may set the value, not giving the flag is not the same as giving its default.
macro_rules! command_args {
    (
        $(#[$meta:meta])*
        pub struct $name:ident => $spec:path { $($body:tt)* }
    ) => {
        command_args!(@field [$(#[$meta])* $name $spec] [] [] [] $($body)*);
    };
    (@field $head:tt [$($out:tt)*] [$($mapped:ident)*] [$($given:ident)*]
        #[binary_only] $(#[$m:meta])* pub $f:ident : $t:ty, $($rest:tt)*
    ) => {
        command_args!(@field $head [$($out)* $(#[$m])* pub $f: $t,] [$($mapped)*] [$($given)*] $($rest)*);
    };
    (@field $head:tt [$($out:tt)*] [$($mapped:ident)*] [$($given:ident)*]
        #[if_given] $(#[$m:meta])* pub $f:ident : $t:ty, $($rest:tt)*
    ) => {
        command_args!(@field $head [$($out)* $(#[$m])* pub $f: $t,] [$($mapped)*] [$($given)* $f] $($rest)*);
    };
    (@field $head:tt [$($out:tt)*] [$($mapped:ident)*] [$($given:ident)*]
        $(#[$m:meta])* pub $f:ident : $t:ty, $($rest:tt)*
    ) => {
        command_args!(@field $head [$($out)* $(#[$m])* pub $f: $t,] [$($mapped)* $f] [$($given)*] $($rest)*);
    };
    (@field [$(#[$meta:meta])* $name:ident $spec:path] [$($out:tt)*] [$($mapped:ident)*] [$($given:ident)*]) => {
        $(#[$meta])*
        pub struct $name { $($out)* }

        impl From<$name> for $spec {
            #[allow(clippy::useless_conversion)]
            fn from(a: $name) -> Self {
                Self {
                    // Given on the command line, or not at all: its default is the core's to
                    // apply, after kubeadm-config had its say.
                    $( $given: a
                        .given
                        .iter()
                        .any(|g| *g == stringify!($given).replace('_', "-"))
                        .then_some(a.$given), )*
                    $( $mapped: a.$mapped.into(), )*
                    spelling: FLAGS,
                }
            }
        }
    };
}

/// joinguard: make kubeadm control-plane joins fail fast on an unfit network, and recover by
/// themselves from transient API faults.
///
/// Run `joinguard preflight` on the joining node before `kubeadm join` (for example in Cluster
/// API's preKubeadmCommands). It measures the paths the join depends on (API endpoint, every etcd
/// member's client and peer port), judges them against etcd's own timing model and exits
/// non-zero when the node should not join. By default it writes nothing to etcd.
///
/// Exit codes: 0 fit (warnings allowed), 1 not fit, 2 invalid input, 3 trust failure.
#[derive(Parser, Debug)]
#[command(
    name = "joinguard",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Number for the log level verbosity, as kubeadm's (klog's) --v.
    ///
    /// As in `kubeadm join --v=5` (also `-v=5`, `-v 5`): 0 quiet, 1-3 as -v, 4-5 as -vv, 6 and
    /// more as -vvv. The higher of -v and --v wins.
    #[arg(
        long = "v",
        value_name = "LEVEL",
        global = true,
        hide_short_help = true
    )]
    pub klog_v: Option<u32>,
    #[command(subcommand)]
    pub command: Command,

    /// Warnings about how the arguments were given (a secret on the command line), for `main` to
    /// print once.
    #[arg(skip)]
    pub warnings: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check that this node's network can carry a control-plane join.
    Preflight(Box<PreflightArgs>),
    /// Write the control-plane join's status (idempotent, each call retried on its own policy).
    UpdateStatus(Box<UpdateStatusArgs>),
    /// Per-hop latency and loss to a target, like `mtr --report` (ICMP, UDP or TCP SYN probes).
    Trace(Box<TraceArgs>),
    /// Run the preflight probes continuously and serve Prometheus metrics, /healthz and /readyz.
    Monitor(MonitorArgs),
    /// Recover a control-plane join's etcd member: promote this node's learner, or remove a
    /// learner or unstarted member a failed join left behind.
    #[command(subcommand)]
    Etcd(EtcdCommand),
    /// Print build information (version, commit, target, rustc, static or dynamic).
    Version(VersionArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_long_help = COMPLETION_EXAMPLES)]
    Completion(CompletionArgs),
    /// Print the man page of joinguard or of one of its commands (roff, for `man -l -`).
    #[command(after_long_help = MAN_EXAMPLES)]
    Man(ManArgs),
}

/// `joinguard version`.
#[derive(Args, Debug)]
pub struct VersionArgs {
    /// Output format: one line, or JSON with `schemaVersion` (like `kubectl version -o json`).
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// `joinguard completion SHELL`.
#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell to generate for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `joinguard man [COMMAND]`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// The command whose page to print: `preflight`, `etcd promote`, ... (default: the
    /// top-level page, joinguard(1)).
    #[arg(value_name = "COMMAND", num_args = 0..=2)]
    pub command: Vec<String>,

    /// Write every page (joinguard.1, joinguard-preflight.1, joinguard-etcd-promote.1, ...) into
    /// this directory instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out_dir: Option<PathBuf>,
}

const COMPLETION_EXAMPLES: &str = "\
Examples:
  # bash, for the current shell and for every new one:
  source <(joinguard completion bash)
  joinguard completion bash > /etc/bash_completion.d/joinguard

  # zsh (a directory on $fpath):
  joinguard completion zsh > \"${fpath[1]}/_joinguard\"

  # fish:
  joinguard completion fish > ~/.config/fish/completions/joinguard.fish";

const MAN_EXAMPLES: &str = "\
Examples:
  joinguard man | man -l -
  joinguard man preflight | man -l -
  joinguard man etcd promote | man -l -
  joinguard man --out-dir /usr/local/share/man/man1";

/// `joinguard monitor`.
///
/// Runs the preflight probes (TCP connect, /readyz, etcd Status and quorum read, etcd peer
/// /raft/probing) continuously, each target on its own schedule, judges sliding windows with
/// preflight's checks and thresholds, and serves the result: /metrics (Prometheus or OpenMetrics
/// text), /healthz, and /readyz (503 while a check is in error). Targets come from a static list,
/// from preflight's inputs (including token discovery) and from etcd MemberList, refreshed.
#[derive(Args, Debug)]
#[command(after_long_help = MONITOR_EXAMPLES)]
pub struct MonitorArgs {
    /// The monitor's configuration (YAML; the examples below show its sections).
    #[arg(long, value_name = "monitor.yaml",
          long_help = concat!("The monitor's configuration (YAML; the examples below show its \
              sections, and ", guide!("docs/monitor.md"), " describes every field)."))]
    pub config: PathBuf,

    /// Address to serve /metrics, /healthz and /readyz on (overrides `listen:`; default
    /// 127.0.0.1:9810: give the node's address, as the DaemonSet does, for a scraper elsewhere).
    /// A bare IP (IPv4 or IPv6, as the downward API's status.hostIP gives it) takes port 9810:
    /// `$(HOST_IP):9810` is ambiguous for an IPv6 address.
    #[arg(long, value_name = "IP[:PORT]", value_parser = parse_listen)]
    pub listen: Option<std::net::SocketAddr>,
}

/// `joinguard etcd ...`.
#[derive(Subcommand, Debug)]
pub enum EtcdCommand {
    /// Promote this node's etcd learner once etcd will accept it (the learner has caught up with
    /// the leader). A promotion whose answer is lost is confirmed by re-reading the member list,
    /// never retried blindly. Already a voter: exit 0, nothing to do.
    #[command(after_long_help = PROMOTE_EXAMPLES)]
    Promote(Box<PromoteArgs>),
    /// Remove this node's etcd learner or unstarted member, so that the join can start over.
    /// Never removes a started voter, another node's member unless --member-id names it, or a
    /// member whose removal would lose quorum.
    #[command(after_long_help = CLEANUP_EXAMPLES)]
    Cleanup(Box<CleanupArgs>),
}

/// The etcd connection and this node's identity, shared by `etcd promote` and `etcd cleanup`.
#[derive(Args, Debug)]
pub struct EtcdMemberArgs {
    /// The API endpoint or load balancer, as `kubeadm join` takes it (host:port): with --token,
    /// token discovery finds the etcd members and the etcd CA, as preflight does.
    #[arg(value_name = "API_SERVER_ENDPOINT", conflicts_with_all = ["config", "etcd_endpoints"])]
    pub api_server_endpoint: Option<String>,

    /// Bootstrap token for discovery, as `kubeadm join --token`.
    #[arg(value_parser = parse_secret,
        long,
        value_name = "TOKEN",
        requires = "api_server_endpoint",
        env = "JOINGUARD_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<Secret>,

    /// Read --token from FILE (its first line) instead of the command line.
    #[arg(long, value_name = "FILE", conflicts_with = "token", requires = "api_server_endpoint",
          value_parser = read_secret_file)]
    pub token_file: Option<Secret>,

    /// Pin(s) of the cluster CA's public key, `sha256:<hex>`, as kubeadm join takes them.
    #[arg(
        long,
        value_name = "sha256:HEX",
        value_delimiter = ',',
        requires = "token"
    )]
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Allow discovery without a pin (as kubeadm; joinguard warns).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          hide_possible_values = true)]
    pub discovery_token_unsafe_skip_ca_verification: bool,

    /// The key from `kubeadm init phase upload-certs --upload-certs`, as `kubeadm join
    /// --certificate-key`: with the join line, it decrypts kubeadm-certs in memory for the etcd
    /// client identity.
    #[arg(value_parser = parse_secret, long, value_name = "HEX",
          conflicts_with_all = ["etcd_cacert", "etcd_cert", "etcd_key"],
          env = "JOINGUARD_CERTIFICATE_KEY", hide_env_values = true)]
    pub certificate_key: Option<Secret>,

    /// Read --certificate-key from FILE (its first line) instead of the command line.
    #[arg(long, value_name = "FILE",
          conflicts_with_all = ["certificate_key", "etcd_cacert", "etcd_cert", "etcd_key"],
          value_parser = read_secret_file)]
    pub certificate_key_file: Option<Secret>,

    /// The cluster's etcd client endpoints (the existing members, as preflight takes them).
    /// Without them, --config or the join line (API_SERVER_ENDPOINT --token ...) is required:
    /// token discovery finds the members and the etcd CA, as preflight does.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    pub etcd_endpoints: Vec<String>,

    /// CA bundle that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt).
    #[arg(long, value_name = "FILE")]
    pub etcd_cacert: Option<PathBuf>,

    /// Client certificate for etcd (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt).
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,

    /// Private key of --etcd-cert (PKCS#1, SEC1 or PKCS#8).
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,

    /// kubeadm's certificate directory: takes etcd/ca.crt and apiserver-etcd-client.{crt,key}
    /// from it, the identity kubeadm's own etcd client uses during a join; without that pair
    /// (a node before its join, as Cluster API leaves it), mints an in-memory client
    /// certificate from etcd/ca.crt and etcd/ca.key, as preflight does.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["etcd_cacert", "etcd_cert", "etcd_key"])]
    pub cert_dir: Option<PathBuf>,

    /// The join's kubeadm config (a JoinConfiguration, v1beta3 or v1beta4; Cluster API writes
    /// /run/kubeadm/kubeadm-join-config.yaml): this node's name (nodeRegistration.name), its
    /// address (controlPlane.localAPIEndpoint.advertiseAddress) and the budget
    /// (timeouts.etcdAPICall). --node-name, --apiserver-advertise-address and --timeout override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// This node's name: its etcd member has this name (kubeadm: nodeRegistration.name).
    #[arg(long, value_name = "NAME")]
    pub node_name: Option<String>,

    /// This node's address: its etcd member's peer URL is https://ADDRESS:2380 (kubeadm:
    /// --apiserver-advertise-address, controlPlane.localAPIEndpoint.advertiseAddress).
    #[arg(long, value_name = "IP")]
    pub apiserver_advertise_address: Option<std::net::IpAddr>,

    /// The whole run's budget [default: timeouts.etcdAPICall of --config, else 2m, kubeadm's
    /// default].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Output format: text, one `[etcd promote]` or `[etcd cleanup]` line with the result
    /// (progress goes to stderr); json, one object with `schemaVersion`, the result, the member
    /// and every etcd call.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// `joinguard etcd promote`.
#[derive(Args, Debug)]
pub struct PromoteArgs {
    #[command(flatten)]
    pub member: EtcdMemberArgs,

    /// The learner's own metrics listener, for catch-up progress (kubeadm runs etcd with
    /// --listen-metrics-urls=http://127.0.0.1:2381). Unreachable: progress is estimated from the
    /// leader alone and etcd decides when the promotion is accepted.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:2381")]
    pub learner_metrics_url: String,
}

/// `joinguard etcd cleanup`.
#[derive(Args, Debug)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub member: EtcdMemberArgs,

    /// Remove this member (hex, as `etcdctl member list` prints it) even if it is not this
    /// node's: allowed only for a learner or an unstarted member.
    #[arg(long, value_name = "HEX", value_parser = parse_member_id)]
    pub member_id: Option<u64>,

    /// Say what would be removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_member_id(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| {
        format!("`{s}` is not a member id: etcdctl prints them in hex, e.g. 8e9e05c52164694d")
    })
}

const PROMOTE_EXAMPLES: &str = "\
Examples:
  # After `kubeadm join` failed at or before \"promoting the learner\", from the join's own
  # config (Cluster API writes it; the members and the etcd CA come from token discovery):
  joinguard etcd promote --config /run/kubeadm/kubeadm-join-config.yaml
  # The same from kubeadm's join line:
  joinguard etcd promote 10.0.0.10:6443 --token abcdef.0123456789abcdef \\
      --discovery-token-ca-cert-hash sha256:<hex> --certificate-key <hex> --node-name cp-2
  # Or with the members and an identity given:
  joinguard etcd promote --cert-dir /etc/kubernetes/pki --node-name cp-2 \\
      --etcd-endpoints https://10.0.0.11:2379,https://10.0.0.12:2379
  # then: kubeadm join phase control-plane-join mark-control-plane

Exit codes: 0 promoted or already a voter, 1 not promoted (the message says why),
2 invalid input, 3 trust failure.";

const CLEANUP_EXAMPLES: &str = "\
Examples:
  # Before a retried join (Cluster API preKubeadmCommands), from the join's own config:
  joinguard etcd cleanup --config /run/kubeadm/kubeadm-join-config.yaml
  # What would be removed (nothing is changed):
  joinguard etcd cleanup --dry-run --cert-dir /etc/kubernetes/pki --node-name cp-2 \\
      --etcd-endpoints https://10.0.0.11:2379
  # Remove it, then run a fresh kubeadm join:
  joinguard etcd cleanup --cert-dir /etc/kubernetes/pki --node-name cp-2 \\
      --etcd-endpoints https://10.0.0.11:2379

Exit codes: 0 removed or nothing to remove, 1 refused (the message says why),
2 invalid input, 3 trust failure.";

const MONITOR_EXAMPLES: &str = concat!(
    "\
Examples:
  # On a control-plane node (the DaemonSet in deploy/ does this), monitor.yaml:
  #   interval: 10s
  #   cluster:
  #     etcdEndpoints: [https://127.0.0.1:2379]
  #     etcdCacert: /etc/kubernetes/pki/etcd/ca.crt
  #     etcdCert: /etc/kubernetes/pki/apiserver-etcd-client.crt
  #     etcdKey: /etc/kubernetes/pki/apiserver-etcd-client.key
  #     apiServerEndpoint: 10.0.0.10:6443
  #     apiserverCacert: /etc/kubernetes/pki/ca.crt
  joinguard monitor --config /etc/joinguard/monitor.yaml

  # A fleet from a management cluster: static API endpoints, 3 replicas sharing them:
  #   targets:
  #     - {name: cluster-a, kind: api-server, endpoint: cluster-a.example:6443}
  #   shard: {replicas: 3}        # index from $POD_NAME (StatefulSet ordinal)
  joinguard monitor --config monitor.yaml --listen 0.0.0.0:9810

  curl -s localhost:9810/metrics | grep joinguard_check_status
  curl -s localhost:9810/readyz

Exit codes: 0 stopped by SIGTERM/SIGINT, 2 invalid configuration (the message names the field),
3 trust failure during discovery. Every field of monitor.yaml: ",
    guide!("docs/monitor.md"),
    "."
);

/// Output format of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Lines for people (the flag's description says what they hold).
    Text,
    /// One JSON object with `schemaVersion`, for programs.
    Json,
}

command_args! {
    #[derive(Args, Debug)]
    #[command(after_long_help = PREFLIGHT_EXAMPLES)]
    pub struct PreflightArgs => spec::PreflightSpec {
        /// The API endpoint or load balancer, as in `kubeadm join`: host:port or https://host:port.
        #[arg(value_name = "API_SERVER_ENDPOINT")]
        pub api_server_endpoint: Option<String>,

        /// CA bundle that signs the API server's certificate (kubeadm: /etc/kubernetes/pki/ca.crt).
        /// Without it, the API is probed up to the TLS handshake and /readyz is not verified.
        #[arg(long, value_name = "FILE")]
        pub apiserver_cacert: Option<PathBuf>,

        /// kubeadm JoinConfiguration (v1beta3 or v1beta4), e.g. Cluster API's
        /// /run/kubeadm/kubeadm-join-config.yaml: the API endpoint, tokens, CA pins, control plane,
        /// certificate key, node name, ignorePreflightErrors and timeouts come from it. As in kubeadm,
        /// it cannot be mixed with kubeadm's flags except --node-name (overrides the file),
        /// --ignore-preflight-errors (merged with the file's list), --dry-run, --rootfs, --v,
        /// --log-file and --skip-* (`can not mix '--config' with arguments [...]`, exit 2); kubeadm
        /// ignores the API endpoint argument beside it, and so does joinguard. joinguard's own
        /// flags (--timeout, --wait, -o, --etcd-*, --cert-dir, ...) may be given beside it.
        #[arg(long, value_name = "JOIN.yaml")]
        pub config: Option<PathBuf>,

        /// Bootstrap token for discovery and TLS bootstrap, as `kubeadm join --token`: the token
        /// for --discovery-token and --tls-bootstrap-token when those are not given. With
        /// discovery, the cluster CA is learned from kube-public/cluster-info, verified with the
        /// token's JWS and the --discovery-token-ca-cert-hash pins, and used to verify the API
        /// server.
        #[arg(value_parser = parse_secret,
            long,
            value_name = "TOKEN",
            conflicts_with = "apiserver_cacert",
            env = "JOINGUARD_TOKEN",
            hide_env_values = true
        )]
        pub token: Option<Secret>,

        #[binary_only]
        /// Read --token from FILE (its first line) instead: a token on the command line can be read
        /// by every user of this host while joinguard runs.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["token", "apiserver_cacert"],
              value_parser = read_secret_file)]
        pub token_file: Option<Secret>,

        /// The token for token-based discovery (kubeadm's --discovery-token; default --token).
        #[arg(value_parser = parse_secret, long, value_name = "TOKEN", conflicts_with = "apiserver_cacert")]
        pub discovery_token: Option<Secret>,

        /// The TLS bootstrap token (kubeadm's --tls-bootstrap-token; default --token). The kubelet
        /// uses it, not joinguard: it is only checked for its form and never printed.
        #[arg(value_parser = parse_secret, long, value_name = "TOKEN")]
        pub tls_bootstrap_token: Option<Secret>,

        /// File-based discovery, as `kubeadm join --discovery-file`: a kubeconfig whose server and
        /// CA are trusted as they are. An https:// URL is refused (exit 2): download it first.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["discovery_token", "apiserver_cacert"])]
        pub discovery_file: Option<String>,

        /// A control-plane join (kubeadm's --control-plane): the etcd paths are checked too. Without
        /// it (and without controlPlane in --config) this is a worker join: only the API path is
        /// checked, unless etcd inputs (--etcd-endpoints, --certificate-key, --cert-dir, ...) are
        /// given.
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
              default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
              hide_possible_values = true)]
        pub control_plane: bool,

        /// This node's address (kubeadm's --apiserver-advertise-address; its etcd member will
        /// advertise https://ADDR:2380). It must be one of this host's addresses, and the route to
        /// every etcd member must leave from it: etcd checks a peer certificate's SANs against the
        /// address the peer connects from.
        #[arg(long, value_name = "IP")]
        pub apiserver_advertise_address: Option<String>,

        /// The port this node's API server will bind (kubeadm's --apiserver-bind-port, default
        /// 6443): validated and reported.
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        pub apiserver_bind_port: Option<u16>,

        /// Pin(s) of the cluster CA's public key, `sha256:<hex>`, as kubeadm join takes them.
        #[arg(long, value_name = "sha256:HEX", value_delimiter = ',')]
        pub discovery_token_ca_cert_hash: Vec<String>,

        /// Allow discovery without a pin (as kubeadm; joinguard warns). Pins that are given are
        /// checked all the same, as kubeadm checks them.
        #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
              default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
              hide_possible_values = true)]
        pub discovery_token_unsafe_skip_ca_verification: bool,

        /// The key from `kubeadm init phase upload-certs --upload-certs` (64 hex digits), as
        /// `kubeadm join --certificate-key`. With --token, it decrypts kubeadm-certs in memory to get
        /// an etcd client identity: the external etcd client certificate, or one minted from the
        /// stacked etcd CA. Nothing is written to disk.
        #[arg(value_parser = parse_secret, long, value_name = "HEX", conflicts_with_all = ["etcd_cert", "etcd_key"],
              env = "JOINGUARD_CERTIFICATE_KEY", hide_env_values = true)]
        pub certificate_key: Option<Secret>,

        #[binary_only]
        /// Read --certificate-key from FILE (its first line) instead of the command line.
        #[arg(long, value_name = "FILE",
              conflicts_with_all = ["certificate_key", "etcd_cert", "etcd_key"],
              value_parser = read_secret_file)]
        pub certificate_key_file: Option<Secret>,

        /// Directory holding the CA certificates and keys that kubeadm's manual certificate
        /// distribution (and Cluster API) places on a joining control-plane node before `kubeadm
        /// join`: etcd/ca.crt and etcd/ca.key, and optionally ca.crt and ca.key (kubeadm:
        /// /etc/kubernetes/pki). With --token, it gives preflight the etcd client identity that
        /// --certificate-key would, without reading kubeadm-certs. Keys are only read into memory.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["certificate_key", "etcd_cert", "etcd_key"])]
        pub cert_dir: Option<PathBuf>,

        /// etcd client URLs, comma-separated: https://10.0.0.11:2379,https://10.0.0.12:2379.
        #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
        pub etcd_endpoints: Vec<String>,

        /// etcd peer URLs (port 2380). Optional: taken from MemberList when an identity is given.
        #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
        pub etcd_peer_endpoints: Vec<String>,

        /// CA that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt).
        #[arg(long, value_name = "FILE")]
        pub etcd_cacert: Option<PathBuf>,

        /// Client certificate for etcd, signed by the etcd CA
        /// (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt).
        #[arg(long, value_name = "FILE", requires = "etcd_key")]
        pub etcd_cert: Option<PathBuf>,

        /// Private key of --etcd-cert.
        #[arg(long, value_name = "FILE", requires = "etcd_cert")]
        pub etcd_key: Option<PathBuf>,

        #[if_given]
        /// The cluster's etcd --heartbeat-interval. Latency thresholds scale with it.
        #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
        pub etcd_heartbeat_interval: Duration,

        #[if_given]
        /// The cluster's etcd --election-timeout. Peer RTT warns above a tenth of it and fails above
        /// a quarter.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
        pub etcd_election_timeout: Duration,

        /// Checks whose errors become warnings, comma-separated, or `all` (e.g.
        /// EtcdPeerLatency,PacketLoss). kubeadm's own check names (NumCPU, Mem, Port-6443, ...) are
        /// accepted and noted, so the kubeadm join line works unchanged; with --config the file's
        /// nodeRegistration.ignorePreflightErrors is merged in, as kubeadm merges them.
        #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
        pub ignore_preflight_errors: Vec<String>,

        /// Also write to etcd: a lease (TTL <= 10 s), one key under /joinguard/preflight/ bound to it,
        /// a read, and a revoke. Nothing outlives the lease, even after kill -9.
        #[arg(long)]
        pub write_probe: bool,

        /// Measure member-to-joiner throughput for longer. With an etcd identity, preflight reads
        /// the first 8 MiB of a snapshot from the leader, for at most 5 s, to predict the learner's
        /// catch-up (EtcdSnapshotTransfer); this allows 20 s (and fails without an identity).
        #[arg(long)]
        pub bandwidth: bool,

        /// Skip the bandwidth probe (the bounded snapshot read behind EtcdSnapshotTransfer).
        #[arg(long, conflicts_with = "bandwidth")]
        pub no_bandwidth: bool,

        /// Probe every path direct, as if HTTPS_PROXY, HTTP_PROXY and NO_PROXY were unset. By
        /// default joinguard takes the path kubeadm join takes: through the proxy the environment
        /// names for the API endpoint (HTTPProxy judges each proxied call). Use this only when
        /// joinguard runs with another environment than the join.
        #[arg(long)]
        pub ignore_proxy_env: bool,

        /// Instead of failing at once, re-check with backoff until fit or until this long has passed
        /// (e.g. 5m): covers a load balancer that is reloading.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        pub wait: Option<Duration>,

        /// Deadline for one whole check run. The run ends by then, with a verdict.
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
        pub timeout: Duration,

        /// Name of this node, used in the write probe's key (default: the hostname).
        #[arg(long, value_name = "NAME")]
        pub node_name: Option<String>,

        /// Report format: text, kubeadm-style `[preflight]` lines (notes, a table of measurements,
        /// then warnings and errors by check name, as kubeadm prints them); json, one object with
        /// `schemaVersion`, every check and every measurement.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        pub output: Output,

        /// The long names of the flags given on the command line (filled by the binary from clap's
        /// matches; the monitor fills it from its cluster section). kubeadm's `--config` rule and
        /// the `-v` list of unused flags are judged from it.
        #[arg(skip)]
        pub given: Vec<String>,

        #[binary_only]
        #[command(flatten)]
        pub kubeadm: KubeadmIgnored,
    }
}

/// kubeadm join's flags that joinguard accepts and does not use, so that the kubeadm join
/// line runs unchanged (docs/kubeadm-compat.md lists them per version, with their sources).
/// At -v, the ones given are listed on stderr.
#[derive(Args, Debug, Default, Clone)]
#[command(next_help_heading = "kubeadm flags accepted and not used by joinguard")]
pub struct KubeadmIgnored {
    /// kubeadm: the CRI socket. joinguard does not talk to the container runtime.
    #[arg(long, value_name = "SOCKET")]
    pub cri_socket: Option<String>,

    /// kubeadm: phases to skip. joinguard has no phases.
    #[arg(long, value_name = "PHASE[,PHASE...]", value_delimiter = ',')]
    pub skip_phases: Vec<String>,

    /// kubeadm: a directory of patches for static Pod manifests. joinguard writes none.
    #[arg(long, value_name = "DIR")]
    pub patches: Option<String>,

    /// kubeadm: change nothing. joinguard changes nothing by default (see --write-probe).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true)]
    pub dry_run: Option<bool>,

    /// kubeadm: the host root filesystem to chroot into. joinguard reads its files as given.
    #[arg(long, value_name = "PATH")]
    pub rootfs: Option<String>,

    /// klog (kubeadm 1.28-1.30, 1.34+): per-file log levels.
    #[arg(long, value_name = "PATTERN=N,...", hide_short_help = true)]
    pub vmodule: Option<String>,

    /// klog (kubeadm 1.28-1.33).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub add_dir_header: Option<bool>,

    /// klog (kubeadm 1.28-1.33).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub skip_headers: Option<bool>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub alsologtostderr: Option<bool>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "FILE:N", hide_short_help = true)]
    pub log_backtrace_at: Option<String>,

    /// klog (kubeadm 1.28-1.30). joinguard writes no log files.
    #[arg(long, value_name = "DIR", hide_short_help = true)]
    pub log_dir: Option<String>,

    /// klog (kubeadm 1.28-1.30). joinguard writes no log files.
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub log_file: Option<String>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "MB", hide_short_help = true)]
    pub log_file_max_size: Option<u64>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub logtostderr: Option<bool>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub one_output: Option<bool>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = parse_go_bool, hide_possible_values = true,
          hide_short_help = true)]
    pub skip_log_headers: Option<bool>,

    /// klog (kubeadm 1.28-1.30).
    #[arg(long, value_name = "SEVERITY", hide_short_help = true)]
    pub stderrthreshold: Option<String>,
}

command_args! {
    /// `joinguard update-status`.
    ///
    /// Performs the status writes of a control-plane join, the step where joins die on one transient
    /// API error. Clusters whose kubeadm-config has a ClusterStatus (kubeadm < 1.22): set this node's
    /// apiEndpoints entry and ensure the Role and RoleBinding kubeadm:nodes-kubeadm-config. Newer
    /// clusters: mark the Node as control plane (label and NoSchedule taint). Every call is retried on
    /// the write or read policy (40 s / 15 s budgets, docs/retries.md); a 409 re-reads and re-applies;
    /// a second run changes nothing and says so.
    #[derive(Args, Debug)]
    #[command(after_long_help = UPDATE_STATUS_EXAMPLES)]
    pub struct UpdateStatusArgs => spec::StatusSpec {
        /// kubeconfig with the credentials to write with (kubeadm: /etc/kubernetes/admin.conf).
        #[arg(
            long,
            value_name = "FILE",
            default_value = "/etc/kubernetes/admin.conf"
        )]
        pub kubeconfig: PathBuf,

        /// kubeconfig context to use (default: its current-context).
        #[arg(long, value_name = "NAME")]
        pub context: Option<String>,

        /// kubeadm JoinConfiguration (v1beta3 or v1beta4): node name, local API endpoint and
        /// timeouts.kubernetesAPICall are read from it. As in kubeadm, --node-name may be given
        /// beside it (and overrides the file); --apiserver-advertise-address and
        /// --apiserver-bind-port may not (`can not mix '--config' with arguments [...]`, exit 2).
        #[arg(long, value_name = "JOIN.yaml")]
        pub config: Option<PathBuf>,

        /// This node's name (default: the hostname, as kubeadm).
        #[arg(long, value_name = "NAME")]
        pub node_name: Option<String>,

        /// The address this node's API server advertises (needed for ClusterStatus clusters).
        #[arg(long, value_name = "IP")]
        pub apiserver_advertise_address: Option<std::net::IpAddr>,

        /// The port this node's API server binds (default 6443).
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        pub apiserver_bind_port: Option<u16>,

        /// Deadline for the whole command; each call's own budget also applies.
        #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
        pub timeout: Duration,

        /// Report format: text, `[update-status]` lines (the API server and node, each status
        /// write with what it changed and its attempts, then the result); json, one object with
        /// `schemaVersion` and every write.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        pub output: Output,

        /// The long names of the flags given on the command line (see [`PreflightArgs::given`]).
        #[arg(skip)]
        pub given: Vec<String>,
    }
}

command_args! {
    /// `joinguard trace`.
    ///
    /// Sends probes with increasing TTL and reports, per hop: the address, probes sent and answered,
    /// loss, RTT last/avg/best/worst and jitter (mtr's: the mean difference between consecutive
    /// RTTs). Then it says whether the target was reached and at which hop latency or loss first
    /// appears: a figure counts only if it persists to the hops behind it, because routers answer
    /// traces on a slow, rate-limited path. Raw sockets need root or CAP_NET_RAW.
    #[derive(Args, Debug)]
    #[command(after_long_help = TRACE_EXAMPLES)]
    pub struct TraceArgs => spec::TraceSpec {
        /// Host to trace: an IPv4 address or a name, optionally with :PORT (sets --port).
        #[arg(value_name = "TARGET")]
        pub target: String,

        /// Probe type. `tcp` sends SYNs to --port and never completes a handshake: it follows the
        /// path a service's connections take, through firewalls that treat ICMP differently.
        #[arg(long, value_enum, default_value_t = TraceProtocol::Icmp)]
        pub protocol: TraceProtocol,

        /// Destination port: required for tcp; for udp a fixed port instead of 33434 and up.
        #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
        pub port: Option<u16>,

        /// Probes per hop (mtr's --report-cycles).
        #[arg(short = 'c', long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
        pub cycles: u32,

        /// Highest TTL probed.
        #[arg(long, value_name = "N", default_value_t = 30, value_parser = clap::value_parser!(u8).range(1..=64))]
        pub max_hops: u8,

        /// Time between two cycles. Routers rate-limit their answers (Linux: about one per second
        /// per source after a burst of 6), so faster cycles can show loss at a router that is not on
        /// the path.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
        pub interval: Duration,

        /// How long one probe waits for its answer before it counts as lost.
        #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
        pub probe_timeout: Duration,

        /// Deadline for the whole trace; it then ends with the hops it saw.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        pub timeout: Duration,

        /// Look up hop names by reverse DNS (off by default: lookups can be slow and leak the trace).
        #[arg(long)]
        pub dns: bool,

        /// Size of each probe in bytes, IP header included (mtr's -s), sent with DF set. A router
        /// that answers "fragmentation needed" puts its MTU in the MTU column, and later probes
        /// shrink to it; where larger packets vanish silently, the hops past that point go dark.
        /// At most the MTU of the interface toward TARGET.
        #[arg(short = 's', long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(28..=9000))]
        pub size: Option<u16>,

        /// Report format: text, the per-hop table (like `mtr --report`) and `[trace]` lines that
        /// say whether the target was reached and at which hop latency or loss first appears;
        /// json, one object with `schemaVersion` and every hop.
        #[arg(short, long, value_enum, default_value_t = Output::Text)]
        pub output: Output,
    }
}

const TRACE_EXAMPLES: &str = "\
Examples:
  # The path to an etcd member's peer port, as a TCP connection to it would take it:
  joinguard trace 10.0.0.12 --protocol tcp --port 2380

  # The same as JSON, 20 cycles half a second apart:
  joinguard trace 10.0.0.12:2380 --protocol tcp --cycles 20 --interval 500ms -o json

  # ICMP echo (the default), with reverse DNS names:
  joinguard trace api.example.internal --dns

  # Full-size packets (DF set) to an etcd member: where does the path MTU drop, or where do
  # large packets vanish?
  joinguard trace 10.0.0.12 --size 1500

  # Without root: raw sockets need CAP_NET_RAW, once per installed binary:
  sudo setcap cap_net_raw+ep \"$(command -v joinguard)\"

Exit codes: 0 target reached with no loss to it, 1 not reached or lossy, 2 invalid input or no
CAP_NET_RAW. `joinguard preflight` runs a TCP trace by itself for a target that fails a latency
or loss check.";

const UPDATE_STATUS_EXAMPLES: &str = concat!(
    "\
Examples:
  # After `kubeadm join --control-plane ... --skip-phases control-plane-join/update-status`:
  joinguard update-status --kubeconfig /etc/kubernetes/admin.conf --node-name cp-2 \\
    --apiserver-advertise-address 10.0.0.12 --apiserver-bind-port 6443

  # The same from the join's config file, as JSON for Cluster API:
  joinguard update-status --config /run/kubeadm/kubeadm-join-config.yaml -o json

Exit codes: 0 done (or nothing to do), 1 failed (budget exhausted or a permanent error),
2 invalid input, 3 trust failure. The retry policies and the errors each one retries: ",
    guide!("docs/retries.md"),
    "."
);

const PREFLIGHT_EXAMPLES: &str = concat!(
    "\
Examples:
  # Stacked etcd, certificates copied from an existing control-plane node:
  joinguard preflight 10.0.0.10:6443 --apiserver-cacert /etc/kubernetes/pki/ca.crt \\
    --etcd-endpoints https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.13:2379 \\
    --etcd-cacert /etc/kubernetes/pki/etcd/ca.crt \\
    --etcd-cert /etc/kubernetes/pki/apiserver-etcd-client.crt \\
    --etcd-key /etc/kubernetes/pki/apiserver-etcd-client.key

  # Cluster API: everything from the join's config file:
  joinguard preflight --config /run/kubeadm/kubeadm-join-config.yaml

  # The kubeadm join line itself (kubeadm 1.28-1.35), `kubeadm join` replaced: the CA comes
  # from token discovery, verified by the pin; the etcd members and an in-memory etcd client
  # certificate from kubeadm-certs:
  joinguard preflight 10.0.0.10:6443 --token abcdef.0123456789abcdef \\
    --discovery-token-ca-cert-hash sha256:<hex> --control-plane --certificate-key <hex> \\
    --apiserver-advertise-address 10.0.0.12 --cri-socket unix:///run/containerd/containerd.sock \\
    --v=5

  # A worker's line (no --control-plane) checks only the API path.

  # Wait up to 3 minutes for the network to become fit, report as JSON:
  joinguard preflight 10.0.0.10:6443 --etcd-endpoints https://10.0.0.11:2379 --wait 3m -o json

Exit codes: 0 fit (warnings allowed), 1 not fit, 2 invalid input, 3 trust failure.
Every check, its threshold and what to do when it fails: ",
    guide!("docs/preflight.md"),
    ";
kubeadm's flags, check names and config fields: docs/kubeadm-compat.md there."
);

/// A Go bool as pflag parses it (`strconv.ParseBool`): 1, t, T, TRUE, true, True, 0, f, F,
/// FALSE, false, False.
pub fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("`{s}` is not a boolean (true or false)")),
    }
}

/// Rewrites kubeadm's spellings on the command line into joinguard's, before clap sees it:
/// klog's `-v=5`, `-v 5` and `-v5` become `--v=5` (joinguard's own `-v`, `-vv`, `-vvv` stay a
/// count), and `_` in a long flag name becomes `-`, as kubeadm's `WordSepNormalizeFunc`
/// treats `--node_name` as `--node-name`. Everything after `--` is left alone.
pub fn kubeadm_argv<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    let mut it = args.into_iter().peekable();
    let mut done = false;
    let is_level = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    while let Some(arg) = it.next() {
        let Some(s) = arg.to_str().map(str::to_string) else {
            out.push(arg);
            continue;
        };
        if done {
            out.push(arg);
            continue;
        }
        if s == "--" {
            done = true;
            out.push(arg);
        } else if let Some(level) = s.strip_prefix("-v=") {
            out.push(format!("--v={level}").into());
        } else if s == "-v" && it.peek().and_then(|n| n.to_str()).is_some_and(is_level) {
            let level = it.next().unwrap_or_default();
            out.push(format!("--v={}", level.to_string_lossy()).into());
        } else if s.len() > 2 && s.starts_with("-v") && is_level(&s[2..]) {
            out.push(format!("--v={}", &s[2..]).into());
        } else if let Some(rest) = s.strip_prefix("--") {
            let (name, value) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (rest, None),
            };
            let name = name.replace('_', "-");
            out.push(match value {
                Some(v) => format!("--{name}={v}").into(),
                None => format!("--{name}").into(),
            });
        } else {
            out.push(arg);
        }
    }
    out
}

/// Joins a duration flag and a value that starts with a minus (`--timeout -1s`) into one
/// argument (`--timeout=-1s`), so that the value parser refuses it as negative instead of clap
/// reading `-1s` as an unknown flag and suggesting `-- -1s`. A flag name after a duration flag
/// (`--wait --dns`) is left alone: clap then says the value is missing.
fn negative_durations(
    cmd: &clap::Command,
    argv: Vec<std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    fn duration_flags(cmd: &clap::Command, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let takes_duration = a
                .get_value_names()
                .is_some_and(|v| v.iter().any(|n| n.as_str() == "DURATION"));
            if let (true, Some(long)) = (takes_duration, a.get_long()) {
                out.push(format!("--{long}"));
            }
        }
        for sub in cmd.get_subcommands() {
            duration_flags(sub, out);
        }
    }
    let mut flags = Vec::new();
    duration_flags(cmd, &mut flags);
    let negative = |s: &str| {
        s.strip_prefix('-')
            .and_then(|r| r.chars().next())
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
    };
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.into_iter().peekable();
    while let Some(arg) = it.next() {
        if arg == "--" {
            out.push(arg);
            out.extend(it);
            break;
        }
        let is_duration_flag = arg.to_str().is_some_and(|s| flags.iter().any(|f| f == s));
        match it.peek().and_then(|n| n.to_str()) {
            Some(value) if is_duration_flag && negative(value) => {
                out.push(format!("{}={value}", arg.to_string_lossy()).into());
                it.next();
            }
            _ => out.push(arg),
        }
    }
    out
}

/// The long names of the arguments of `sub` given on the command line.
pub fn given_flags(sub: &clap::Command, m: &clap::ArgMatches) -> Vec<String> {
    sub.get_arguments()
        .filter(|a| {
            m.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// Parses joinguard's command line as the binary does: kubeadm's spellings first
/// ([`kubeadm_argv`]), then clap, then the given flags recorded into the command's arguments.
pub fn parse_from<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let cmd = Cli::command();
    let argv = negative_durations(&cmd, kubeadm_argv(args));
    let matches = cmd.clone().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((name, sub_m)) = matches.subcommand() {
        if let Some(sub) = cmd.find_subcommand(name) {
            let mut given = given_flags(sub, sub_m);
            match &mut cli.command {
                Command::Preflight(a) => {
                    secrets_from_files(&mut a.token, &mut a.token_file, &mut given, "token");
                    secrets_from_files(
                        &mut a.certificate_key,
                        &mut a.certificate_key_file,
                        &mut given,
                        "certificate-key",
                    );
                    a.given = given;
                }
                Command::UpdateStatus(a) => a.given = given,
                _ => {}
            }
        }
        // `etcd promote|cleanup`: one level deeper.
        if let (Command::Etcd(e), Some((_, leaf_m))) = (&mut cli.command, sub_m_of(&matches)) {
            let a = match e {
                EtcdCommand::Promote(p) => &mut p.member,
                EtcdCommand::Cleanup(c) => &mut c.member,
            };
            let mut unused = Vec::new();
            secrets_from_files(&mut a.token, &mut a.token_file, &mut unused, "token");
            secrets_from_files(
                &mut a.certificate_key,
                &mut a.certificate_key_file,
                &mut unused,
                "certificate-key",
            );
            cli.warnings.extend(secrets_on_argv(leaf_m));
        } else {
            cli.warnings.extend(secrets_on_argv(sub_m));
        }
    }
    Ok(cli)
}

/// The matches of `etcd`'s subcommand (`promote`, `cleanup`).
fn sub_m_of(m: &clap::ArgMatches) -> Option<(&str, &clap::ArgMatches)> {
    match m.subcommand() {
        Some(("etcd", etcd)) => etcd.subcommand(),
        _ => None,
    }
}

/// A secret read from its file takes the place of the flag (and counts as the flag for kubeadm's
/// rule on `--config` beside flags).
fn secrets_from_files(
    value: &mut Option<Secret>,
    file: &mut Option<Secret>,
    given: &mut Vec<String>,
    flag: &str,
) {
    if let Some(v) = file.take() {
        *value = Some(v);
        given.push(flag.to_string());
    }
}

/// One warning per secret given as a flag's value on the command line, where every user of the
/// host can read it (`ps`, `/proc/PID/cmdline`) for as long as joinguard runs.
fn secrets_on_argv(m: &clap::ArgMatches) -> Vec<String> {
    let on_argv = |id: &str| {
        m.try_get_raw(id).ok().flatten().is_some()
            && m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
    };
    [
        ("token", "--token", "--token-file FILE or JOINGUARD_TOKEN"),
        (
            "certificate_key",
            "--certificate-key",
            "--certificate-key-file FILE or JOINGUARD_CERTIFICATE_KEY",
        ),
    ]
    .into_iter()
    .filter(|(id, _, _)| on_argv(id))
    .map(|(_, flag, instead)| {
        format!(
            "joinguard: WARNING: {flag} on the command line can be read by every user of this \
             host (ps, /proc/PID/cmdline) while joinguard runs; give it in --config, {instead}"
        )
    })
    .collect()
}

/// `--listen`: `IP:PORT`, `[IPv6]:PORT`, or a bare IP (IPv4 or IPv6) on the monitor's port 9810.
pub fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return Ok(a);
    }
    // `::1:9810` is one address, but likely typed for port 9810 of `::1`: unbracketed, an address
    // whose last group could be a port is refused with both readings.
    if let Some((a, p)) = s.rsplit_once(':').filter(|(a, p)| {
        s.parse::<std::net::Ipv6Addr>().is_ok()
            && p.parse::<u16>().is_ok()
            && a.parse::<std::net::Ipv6Addr>().is_ok()
    }) {
        return Err(format!(
            "`{s}` reads as one IPv6 address whose last group could be a port; write [{a}]:{p} to \
             listen on port {p}, or [{s}] for that address on port 9810"
        ));
    }
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .map(|ip| std::net::SocketAddr::new(ip, 9810))
        .map_err(|_| {
            format!(
                "`{s}` is not an address to listen on; expected IP:PORT, [IPv6]:PORT or a bare IP \
                 (port 9810)"
            )
        })
}

/// A secret given as a flag's value or in the environment.
pub fn parse_secret(value: &str) -> Result<Secret, String> {
    Ok(Secret::new(value))
}

/// The first line of a secret's file. The error names the file, never its content.
pub fn read_secret_file(path: &str) -> Result<Secret, String> {
    const MAX: u64 = 64 * 1024;
    let f = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX {
        return Err(format!(
            "{path} is {len} bytes; a token or key file holds one line"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err(format!(
            "{path} is empty; expected the secret on its first line"
        ));
    }
    Ok(Secret::new(line))
}

impl Cli {
    /// The tag of the command's plain stderr lines (`[etcd promote] ...`); `None` for the
    /// monitor, a daemon whose log lines keep their timestamps.
    pub fn log_tag(&self) -> Option<&'static str> {
        match &self.command {
            Command::Preflight(_) => Some("preflight"),
            Command::UpdateStatus(_) => Some("update-status"),
            Command::Trace(_) => Some("trace"),
            Command::Etcd(EtcdCommand::Promote(_)) => Some("etcd promote"),
            Command::Etcd(EtcdCommand::Cleanup(_)) => Some("etcd cleanup"),
            Command::Monitor(_) => None,
            Command::Version(_) | Command::Completion(_) | Command::Man(_) => Some("joinguard"),
        }
    }

    /// The verbosity count: the larger of `-v` repeats and klog's `--v` mapped onto it.
    pub fn verbosity(&self) -> u8 {
        let klog = self
            .klog_v
            .map(joinguard_core::kubeadm::flags::klog_level_to_verbosity)
            .unwrap_or(0);
        self.verbose.max(klog)
    }
}

impl From<Output> for spec::Output {
    fn from(o: Output) -> Self {
        match o {
            Output::Text => spec::Output::Text,
            Output::Json => spec::Output::Json,
        }
    }
}

impl From<TraceProtocol> for joinguard_core::trace::TraceProtocol {
    fn from(p: TraceProtocol) -> Self {
        match p {
            TraceProtocol::Icmp => joinguard_core::trace::TraceProtocol::Icmp,
            TraceProtocol::Udp => joinguard_core::trace::TraceProtocol::Udp,
            TraceProtocol::Tcp => joinguard_core::trace::TraceProtocol::Tcp,
        }
    }
}

/// Which probes a trace sends (`--protocol`); the core's `trace::TraceProtocol` without clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceProtocol {
    /// ICMP echo requests (as `ping`, mtr's default).
    Icmp,
    /// UDP datagrams (as `traceroute`): to --port, or to 33434 and up.
    Udp,
    /// TCP SYNs to --port (as `mtr -T`, `tcptraceroute`): follows the path a connection to the
    /// service takes through firewalls that treat ICMP differently. Never completes a handshake.
    Tcp,
}

/// The command line's spelling of the core's inputs: the flags (and positional arguments) the
/// core's messages name. The core names inputs by meaning ([`Input`]); this table is the one place
/// a flag's name meets it, so renaming a flag changes its `#[arg]` and one line here.
pub fn flag(i: Input) -> &'static str {
    match i {
        Input::ApiServerEndpoint => "API_SERVER_ENDPOINT",
        Input::ApiserverCacert => "--apiserver-cacert",
        Input::ApiserverAdvertiseAddress => "--apiserver-advertise-address",
        Input::Kubeconfig => "--kubeconfig",
        Input::Config => "--config",
        Input::ControlPlane => "--control-plane",
        Input::Token => "--token",
        Input::TlsBootstrapToken => "--tls-bootstrap-token",
        Input::DiscoveryTokenCaCertHash => "--discovery-token-ca-cert-hash",
        Input::DiscoveryTokenUnsafeSkipCaVerification => {
            "--discovery-token-unsafe-skip-ca-verification"
        }
        Input::DiscoveryFile => "--discovery-file",
        Input::CertificateKey => "--certificate-key",
        Input::CertDir => "--cert-dir",
        Input::EtcdEndpoints => "--etcd-endpoints",
        Input::EtcdPeerEndpoints => "--etcd-peer-endpoints",
        Input::EtcdCacert => "--etcd-cacert",
        Input::EtcdCert => "--etcd-cert",
        Input::EtcdKey => "--etcd-key",
        Input::EtcdHeartbeatInterval => "--etcd-heartbeat-interval",
        Input::EtcdElectionTimeout => "--etcd-election-timeout",
        Input::IgnorePreflightErrors => "--ignore-preflight-errors",
        Input::WriteProbe => "--write-probe",
        Input::Bandwidth => "--bandwidth",
        Input::NodeName => "--node-name",
        Input::Timeout => "--timeout",
        Input::Wait => "--wait",
        Input::TraceTarget => "TARGET",
        Input::Port => "--port",
        Input::Protocol => "--protocol",
        Input::Size => "--size",
        Input::Interval => "--interval",
        Input::ProbeTimeout => "--probe-timeout",
    }
}

/// The command line's [`Spelling`], handed to the core in every spec.
pub const FLAGS: Spelling = Spelling::new(flag);

/// `input` named as its flag.
pub fn named(input: Input) -> Named {
    FLAGS.name(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every input the core can name is a real argument of some command, spelled as clap
    /// defines it: a flag renamed in an `#[arg]` without this table fails here.
    #[test]
    fn every_input_is_spelled_as_a_real_flag() {
        let cli = Cli::command();
        let mut args: Vec<String> = Vec::new();
        let mut stack = vec![&cli];
        while let Some(c) = stack.pop() {
            for a in c.get_arguments() {
                if let Some(l) = a.get_long() {
                    args.push(format!("--{l}"));
                }
                for v in a.get_value_names().unwrap_or_default() {
                    args.push(v.to_string());
                }
            }
            stack.extend(c.get_subcommands());
        }
        for i in Input::ALL {
            assert!(
                args.iter().any(|a| a == flag(*i)),
                "{i:?} is spelled {:?}, which no command defines",
                flag(*i)
            );
        }
    }

    fn argv(s: &str) -> Vec<String> {
        kubeadm_argv(s.split(' ').map(std::ffi::OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn klog_levels_and_underscores_are_rewritten_and_the_count_is_kept() {
        assert_eq!(
            argv("joinguard preflight -v 5 -v=3 -v7 -vv --node_name=cp-2 --log_file x -- --a_b"),
            [
                "joinguard",
                "preflight",
                "--v=5",
                "--v=3",
                "--v=7",
                "-vv",
                "--node-name=cp-2",
                "--log-file",
                "x",
                "--",
                "--a_b"
            ]
        );
        // `-v` before something that is not a level stays joinguard's count.
        assert_eq!(
            argv("joinguard -v preflight 10.0.0.10:6443"),
            ["joinguard", "-v", "preflight", "10.0.0.10:6443"]
        );
    }

    #[test]
    fn the_kubeadm_line_parses_and_records_the_given_flags() {
        let line = "joinguard preflight 10.0.0.10:6443 --token abcdef.0123456789abcdef \
                    --discovery-token-ca-cert-hash sha256:aa --control-plane \
                    --discovery-token-unsafe-skip-ca-verification=false --dry-run \
                    --skip-phases a,b --v 5 --log_file /var/log/x";
        let cli = parse_from(line.split(' ').map(std::ffi::OsString::from)).unwrap();
        assert_eq!(cli.verbosity(), 2);
        let Command::Preflight(a) = cli.command else {
            panic!("not preflight");
        };
        assert!(a.control_plane);
        assert!(!a.discovery_token_unsafe_skip_ca_verification);
        assert_eq!(a.kubeadm.dry_run, Some(true));
        assert_eq!(a.kubeadm.skip_phases, ["a", "b"]);
        assert_eq!(a.kubeadm.log_file.as_deref(), Some("/var/log/x"));
        for f in [
            "token",
            "discovery-token-ca-cert-hash",
            "control-plane",
            "discovery-token-unsafe-skip-ca-verification",
            "dry-run",
            "skip-phases",
            "log-file",
        ] {
            assert!(a.given.iter().any(|g| g == f), "{f} not in {:?}", a.given);
        }
        assert!(!a.given.iter().any(|g| g == "timeout"), "{:?}", a.given);
    }

    /// The defaults are stated once, in the core (`PreflightSpec::new`); the flags' clap
    /// defaults (which `--help` shows) must be the same values.
    #[test]
    fn the_flags_defaults_are_the_cores() {
        let cli = parse_from(["joinguard", "preflight"].map(std::ffi::OsString::from)).unwrap();
        let Command::Preflight(a) = cli.command else {
            panic!("not preflight");
        };
        // The `#[if_given]` flags' clap defaults are the core's defaults too.
        assert_eq!(
            (a.etcd_heartbeat_interval, a.etcd_election_timeout),
            (
                spec::DEFAULT_ETCD_HEARTBEAT_INTERVAL,
                spec::DEFAULT_ETCD_ELECTION_TIMEOUT
            )
        );
        assert_eq!(
            format!("{:?}", spec::PreflightSpec::from(*a)),
            format!("{:?}", spec::PreflightSpec::new(FLAGS))
        );
    }

    /// An `#[if_given]` flag reaches the spec only when given, even at its default's value: not
    /// giving `--etcd-election-timeout` lets kubeadm-config decide, giving `1s` does not.
    #[test]
    fn a_flag_given_at_its_default_value_is_given() {
        let spec_of = |line: &str| {
            let cli = parse_from(line.split(' ').map(std::ffi::OsString::from)).unwrap();
            let Command::Preflight(a) = cli.command else {
                panic!("not preflight");
            };
            spec::PreflightSpec::from(*a)
        };
        let s = spec_of("joinguard preflight --etcd-election-timeout 1s");
        assert_eq!(s.etcd_election_timeout, Some(Duration::from_secs(1)));
        assert_eq!(s.etcd_heartbeat_interval, None);
        let s = spec_of("joinguard preflight --etcd-heartbeat-interval=250ms");
        assert_eq!(s.etcd_heartbeat_interval, Some(Duration::from_millis(250)));
        assert_eq!(s.etcd_election_timeout, None);
    }

    /// A secret on the command line is warned about once, without the secret; one from a file
    /// is read, counts as the flag for kubeadm's `--config` rule, and draws no warning.
    #[test]
    fn secrets_on_argv_are_warned_about_and_files_are_read() {
        let parse = |line: &str| parse_from(line.split(' ').map(std::ffi::OsString::from));
        let cli = parse(
            "joinguard preflight 10.0.0.10:6443 --token abcdef.0123456789abcdef \
             --discovery-token-ca-cert-hash sha256:aa --control-plane --certificate-key 00ff",
        )
        .unwrap();
        assert_eq!(cli.warnings.len(), 2, "{:?}", cli.warnings);
        assert!(cli.warnings[0].contains("--token on the command line"));
        assert!(
            cli.warnings[1].contains("--certificate-key-file FILE or JOINGUARD_CERTIFICATE_KEY")
        );
        for w in &cli.warnings {
            assert!(
                !w.contains("0123456789abcdef") && !w.contains("00ff"),
                "{w}"
            );
        }

        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "abcdef.0123456789abcdef\n").unwrap();
        let line = format!(
            "joinguard preflight 10.0.0.10:6443 --token-file {} --discovery-token-ca-cert-hash \
             sha256:aa",
            token.display()
        );
        let cli = parse(&line).unwrap();
        assert!(cli.warnings.is_empty(), "{:?}", cli.warnings);
        let Command::Preflight(a) = cli.command else {
            panic!("not preflight")
        };
        assert_eq!(
            a.token.as_ref().map(Secret::expose),
            Some("abcdef.0123456789abcdef")
        );
        assert!(a.given.iter().any(|g| g == "token"), "{:?}", a.given);

        // The same for etcd promote|cleanup.
        let line = format!(
            "joinguard etcd cleanup 10.0.0.10:6443 --token-file {} --node-name cp-2",
            token.display()
        );
        let cli = parse(&line).unwrap();
        assert!(cli.warnings.is_empty(), "{:?}", cli.warnings);
        let Command::Etcd(EtcdCommand::Cleanup(c)) = cli.command else {
            panic!("not etcd cleanup")
        };
        assert_eq!(
            c.member.token.as_ref().map(Secret::expose),
            Some("abcdef.0123456789abcdef")
        );
        let cli =
            parse("joinguard etcd cleanup 10.0.0.10:6443 --token abcdef.0123456789abcdef").unwrap();
        assert_eq!(cli.warnings.len(), 1, "{:?}", cli.warnings);

        // A missing or empty file is a usage error naming the file, never a secret.
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        for f in [empty.clone(), dir.path().join("nope")] {
            let e =
                parse(&format!("joinguard preflight --token-file {}", f.display())).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(&f.display().to_string()), "{e}");
        }
    }

    #[test]
    fn listen_takes_a_bare_ip_of_either_family() {
        for (given, want) in [
            ("10.0.0.11", "10.0.0.11:9810"),
            ("fd00::11", "[fd00::11]:9810"),
            ("[fd00::11]", "[fd00::11]:9810"),
            ("[fd00::11]:9900", "[fd00::11]:9900"),
            ("127.0.0.1:0", "127.0.0.1:0"),
        ] {
            assert_eq!(parse_listen(given).unwrap().to_string(), want, "{given}");
        }
        assert!(parse_listen("node-1:9810").unwrap_err().contains("bare IP"));
        assert_eq!(
            parse_listen("::1:9810").unwrap_err(),
            "`::1:9810` reads as one IPv6 address whose last group could be a port; write \
             [::1]:9810 to listen on port 9810, or [::1:9810] for that address on port 9810"
        );
        assert_eq!(
            parse_listen("[::1:9810]").unwrap().to_string(),
            "[::1:9810]:9810"
        );
    }

    #[test]
    fn go_bools() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_go_bool(f), Ok(false));
        }
        assert!(parse_go_bool("yes").is_err());
    }
}
