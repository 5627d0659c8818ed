//! The command line: flag definitions only (kubeadm's names where kubeadm has the concept,
//! etcdctl's for etcd TLS). Parsing into validated inputs happens in the command modules, so
//! that every bad value gets the same exit code (2) and a message naming the flag.
//!
//! Kept in the library so that completions and the man page can be generated from it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    #[command(subcommand)]
    pub command: Command,
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
    /// The command whose page to print (default: the top-level page, joinguard(1)).
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,

    /// Write every page (joinguard.1, joinguard-preflight.1, ...) into this directory instead.
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
  joinguard man --out-dir /usr/local/share/man/man1";

/// Arguments of a command that is planned but not built yet: it accepts anything, says so and
/// exits 2.
#[derive(Args, Debug)]
pub struct Unbuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

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
    /// The monitor's configuration (YAML; see docs/monitor.md for every field).
    #[arg(long, value_name = "monitor.yaml")]
    pub config: PathBuf,

    /// Address to serve /metrics, /healthz and /readyz on (overrides `listen:`; default
    /// 0.0.0.0:9810).
    #[arg(long, value_name = "IP:PORT")]
    pub listen: Option<std::net::SocketAddr>,
}

const MONITOR_EXAMPLES: &str = "\
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
3 trust failure during discovery. See docs/monitor.md.";

/// Output format of a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// kubeadm-style `[preflight]` lines and a table of measurements.
    Text,
    /// One JSON object with `schemaVersion`.
    Json,
}

#[derive(Args, Debug)]
#[command(after_long_help = PREFLIGHT_EXAMPLES)]
pub struct PreflightArgs {
    /// The API endpoint or load balancer, as in `kubeadm join`: host:port or https://host:port.
    #[arg(value_name = "API_SERVER_ENDPOINT")]
    pub api_server_endpoint: Option<String>,

    /// CA bundle that signs the API server's certificate (kubeadm: /etc/kubernetes/pki/ca.crt).
    /// Without it, the API is probed up to the TLS handshake and /readyz is not verified.
    #[arg(long, value_name = "FILE")]
    pub apiserver_cacert: Option<PathBuf>,

    /// kubeadm JoinConfiguration (v1beta3 or v1beta4), e.g. Cluster API's
    /// /run/kubeadm/kubeadm-join-config.yaml: the API endpoint, token, CA pins, certificate key,
    /// node name and ignorePreflightErrors come from it. Flags override the file, as in kubeadm.
    #[arg(long, value_name = "JOIN.yaml")]
    pub config: Option<PathBuf>,

    /// Bootstrap token for discovery, as `kubeadm join --token` (or --discovery-token): the
    /// cluster CA is then learned from kube-public/cluster-info, verified with the token's JWS
    /// and the --discovery-token-ca-cert-hash pin, and used to verify the API server.
    #[arg(
        long,
        value_name = "TOKEN",
        visible_alias = "discovery-token",
        conflicts_with = "apiserver_cacert"
    )]
    pub token: Option<String>,

    /// Pin(s) of the cluster CA's public key, `sha256:<hex>`, as kubeadm join takes them.
    #[arg(long, value_name = "sha256:HEX", value_delimiter = ',')]
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Trust the discovered CA without a pin (as kubeadm; joinguard warns).
    #[arg(long, conflicts_with = "discovery_token_ca_cert_hash")]
    pub discovery_token_unsafe_skip_ca_verification: bool,

    /// The key from `kubeadm init phase upload-certs --upload-certs` (64 hex digits), as
    /// `kubeadm join --certificate-key`. With --token, it decrypts kubeadm-certs in memory to get
    /// an etcd client identity: the external etcd client certificate, or one minted from the
    /// stacked etcd CA. Nothing is written to disk.
    #[arg(long, value_name = "HEX", conflicts_with_all = ["etcd_cert", "etcd_key"])]
    pub certificate_key: Option<String>,

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

    /// The cluster's etcd --heartbeat-interval. Latency thresholds scale with it.
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration)]
    pub etcd_heartbeat_interval: Duration,

    /// The cluster's etcd --election-timeout. The RTT must stay below a tenth of it.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub etcd_election_timeout: Duration,

    /// Checks whose errors become warnings, comma-separated, or `all`
    /// (e.g. EtcdPeerLatency,PacketLoss).
    #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
    pub ignore_preflight_errors: Vec<String>,

    /// Also write to etcd: a lease (TTL <= 10 s), one key under /joinguard/preflight/ bound to it,
    /// a read, and a revoke. Nothing outlives the lease, even after kill -9.
    #[arg(long)]
    pub write_probe: bool,

    /// Also measure member-to-joiner throughput with a bounded snapshot stream (first 8 MiB),
    /// to predict learner catch-up time.
    #[arg(long)]
    pub bandwidth: bool,

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

    /// Report format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

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
pub struct UpdateStatusArgs {
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
    /// timeouts.kubernetesAPICall are read from it.
    #[arg(long, value_name = "JOIN.yaml", conflicts_with_all = ["node_name", "apiserver_advertise_address", "apiserver_bind_port"])]
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

    /// Report format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// `joinguard trace`.
///
/// Sends probes with increasing TTL and reports, per hop: the address, probes sent and answered,
/// loss, RTT last/avg/best/worst and jitter (mtr's: the mean difference between consecutive
/// RTTs). Then it says whether the target was reached and at which hop latency or loss first
/// appears: a figure counts only if it persists to the hops behind it, because routers answer
/// traces on a slow, rate-limited path. Raw sockets need root or CAP_NET_RAW.
#[derive(Args, Debug)]
#[command(after_long_help = TRACE_EXAMPLES)]
pub struct TraceArgs {
    /// Host to trace: an IPv4 address or a name, optionally with :PORT (sets --port).
    #[arg(value_name = "TARGET")]
    pub target: String,

    /// Probe type. `tcp` sends SYNs to --port and never completes a handshake: it follows the
    /// path a service's connections take, through firewalls that treat ICMP differently.
    #[arg(long, value_enum, default_value_t = crate::trace::TraceProtocol::Icmp)]
    pub protocol: crate::trace::TraceProtocol,

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

    /// Report format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

const TRACE_EXAMPLES: &str = "\
Examples:
  # The path to an etcd member's peer port, as a TCP connection to it would take it:
  joinguard trace 10.0.0.12 --protocol tcp --port 2380

  # The same as JSON, 20 cycles half a second apart:
  joinguard trace 10.0.0.12:2380 --protocol tcp --cycles 20 --interval 500ms -o json

  # ICMP echo (the default), with reverse DNS names:
  joinguard trace api.example.internal --dns

Without root: sudo setcap cap_net_raw+ep \"$(command -v joinguard)\"
Exit codes: 0 target reached with no loss to it, 1 not reached or lossy, 2 invalid input or no
CAP_NET_RAW. `joinguard preflight` runs a TCP trace by itself for a target that fails a latency
or loss check. See docs/trace.md.";

const UPDATE_STATUS_EXAMPLES: &str = "\
Examples:
  # After `kubeadm join --control-plane ... --skip-phases control-plane-join/update-status`:
  joinguard update-status --kubeconfig /etc/kubernetes/admin.conf --node-name cp-2 \\
    --apiserver-advertise-address 10.0.0.12 --apiserver-bind-port 6443

  # The same from the join's config file, as JSON for Cluster API:
  joinguard update-status --config /run/kubeadm/kubeadm-join-config.yaml -o json

Exit codes: 0 done (or nothing to do), 1 failed (budget exhausted or a permanent error),
2 invalid input, 3 trust failure. See docs/retries.md for the policies and the error table.";

const PREFLIGHT_EXAMPLES: &str = "\
Examples:
  # Stacked etcd, certificates copied from an existing control-plane node:
  joinguard preflight 10.0.0.10:6443 --apiserver-cacert /etc/kubernetes/pki/ca.crt \\
    --etcd-endpoints https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.13:2379 \\
    --etcd-cacert /etc/kubernetes/pki/etcd/ca.crt \\
    --etcd-cert /etc/kubernetes/pki/apiserver-etcd-client.crt \\
    --etcd-key /etc/kubernetes/pki/apiserver-etcd-client.key

  # Cluster API: everything from the join's config file:
  joinguard preflight --config /run/kubeadm/kubeadm-join-config.yaml

  # Only the join's own inputs: the CA comes from token discovery, verified by the pin:
  joinguard preflight 10.0.0.10:6443 --token abcdef.0123456789abcdef \\
    --discovery-token-ca-cert-hash sha256:<hex> --etcd-endpoints https://10.0.0.11:2379

  # Wait up to 3 minutes for the network to become fit, report as JSON:
  joinguard preflight 10.0.0.10:6443 --etcd-endpoints https://10.0.0.11:2379 --wait 3m -o json

Exit codes: 0 fit (warnings allowed), 1 not fit, 2 invalid input, 3 trust failure.
See docs/preflight.md for every check, its threshold and what to do when it fails.";

/// Durations like kubeadm's: `100ms`, `1s`, `5m`, `1m30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration like 100ms, 30s or 5m ({e})"))
}
