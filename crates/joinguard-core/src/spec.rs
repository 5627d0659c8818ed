//! The commands' inputs as plain values: what the binary's flags (or the monitor's YAML) say,
//! with no clap in sight. Stage one of two: the binary fills a spec from its flags by field name
//! (`command_args!` in its cli.rs, where each input's help text lives), the monitor from its
//! YAML; stage two validates a spec into the command's input (`PreflightInput`, `StatusInput`,
//! `TraceInput`), whose errors name each input as the user spelled it ([`crate::input`]).
//!
//! Owns no parsing of command lines. Defaults are stated once, here ([`PreflightSpec::new`] and
//! the constants); the binary's test checks its flags' defaults against them.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// Which probes a trace sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceProtocol {
    /// ICMP echo requests (as `ping`, mtr's default).
    Icmp,
    /// UDP datagrams (as `traceroute`): to --port, or to 33434 and up.
    Udp,
    /// TCP SYNs to --port (as `mtr -T`, `tcptraceroute`): follows the path a connection to the
    /// service takes through firewalls that treat ICMP differently. Never completes a handshake.
    Tcp,
}

impl TraceProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceProtocol::Icmp => "icmp",
            TraceProtocol::Udp => "udp",
            TraceProtocol::Tcp => "tcp",
        }
    }
}

/// The report format `-o` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

/// etcd's default heartbeat interval (`--heartbeat-interval`, 100 ms), preflight's default for
/// the cluster's until kubeadm-config says otherwise.
pub const DEFAULT_ETCD_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);
/// etcd's default election timeout (`--election-timeout`, 1 s).
pub const DEFAULT_ETCD_ELECTION_TIMEOUT: Duration = Duration::from_secs(1);
/// preflight's default deadline for one whole run.
pub const DEFAULT_PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(60);

/// `joinguard preflight`'s inputs as given (flags, or a monitor's `cluster:` section), before
/// [`crate::preflight::PreflightInput::from_spec`] validates them. `given` lists the kubeadm flag names set.
#[derive(Debug, Clone)]
pub struct PreflightSpec {
    /// The API endpoint or load balancer (kubeadm join's API_SERVER_ENDPOINT).
    pub api_server_endpoint: Option<String>,

    /// The CA bundle that signs the API server's certificate; without it /readyz is not verified.
    pub apiserver_cacert: Option<PathBuf>,

    /// A kubeadm JoinConfiguration (v1beta3 or v1beta4); mixed with flags under kubeadm's rule.
    pub config: Option<PathBuf>,

    /// The bootstrap token (kubeadm's --token): the default for the two below.
    pub token: Option<crate::secret::Secret>,

    /// The token for token discovery (kubeadm's --discovery-token).
    pub discovery_token: Option<crate::secret::Secret>,

    /// The TLS bootstrap token: the kubelet's; only checked for its form, never printed.
    pub tls_bootstrap_token: Option<crate::secret::Secret>,

    /// File discovery: a kubeconfig whose server and CA are trusted as they are.
    pub discovery_file: Option<String>,

    /// A control-plane join: the etcd paths are judged too.
    pub control_plane: bool,

    /// This node's address; its etcd member will advertise https://ADDR:2380.
    pub apiserver_advertise_address: Option<String>,

    /// The port this node's API server will bind (validated and reported).
    pub apiserver_bind_port: Option<u16>,

    /// Pins of the cluster CA's public key, `sha256:<hex>`.
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Discovery without a pin (as kubeadm, with a warning); given pins are still checked.
    pub discovery_token_unsafe_skip_ca_verification: bool,

    /// kubeadm's upload-certs key: decrypts kubeadm-certs in memory for an etcd identity.
    pub certificate_key: Option<crate::secret::Secret>,

    /// kubeadm's certificate directory (etcd/ca.crt, etcd/ca.key, ...): an etcd identity
    /// without kubeadm-certs.
    pub cert_dir: Option<PathBuf>,

    /// etcd client URLs.
    pub etcd_endpoints: Vec<String>,

    /// etcd peer URLs; from MemberList when an identity is given.
    pub etcd_peer_endpoints: Vec<String>,

    /// The CA that signs the etcd server certificates.
    pub etcd_cacert: Option<PathBuf>,

    /// An etcd client certificate, signed by the etcd CA.
    pub etcd_cert: Option<PathBuf>,

    /// The private key of `etcd_cert`.
    pub etcd_key: Option<PathBuf>,

    /// The cluster's etcd heartbeat interval, when given: latency thresholds scale with it.
    /// `None`: kubeadm-config's, if discovery reads one, else etcd's default
    /// ([`DEFAULT_ETCD_HEARTBEAT_INTERVAL`]). A given value wins over kubeadm-config.
    pub etcd_heartbeat_interval: Option<Duration>,

    /// The cluster's etcd election timeout, when given: the RTT must stay below a tenth of it.
    /// `None` as for the heartbeat ([`DEFAULT_ETCD_ELECTION_TIMEOUT`]).
    pub etcd_election_timeout: Option<Duration>,

    /// Checks whose errors become warnings, or `all`; kubeadm's own check names are noted.
    pub ignore_preflight_errors: Vec<String>,

    /// Also write to etcd: a lease, one key bound to it, a read and a revoke.
    pub write_probe: bool,

    /// Run the snapshot stream for up to 20 s instead of 5 s.
    pub bandwidth: bool,

    /// Skip the bandwidth probe.
    pub no_bandwidth: bool,

    /// Probe every path direct, whatever the proxy environment says.
    pub ignore_proxy_env: bool,

    /// Re-check with backoff until fit or until this long has passed.
    pub wait: Option<Duration>,

    /// The deadline for one whole check run.
    pub timeout: Duration,

    /// This node's name (default: the hostname).
    pub node_name: Option<String>,

    /// The report format.
    pub output: Output,

    /// The long names of the flags given on the command line (filled by the binary from clap's
    /// matches; the monitor fills it from its cluster section). kubeadm's `--config` rule and
    /// the `-v` list of unused flags are judged from it; the values of the kubeadm flags
    /// joinguard accepts and does not use stay in the binary.
    pub given: Vec<String>,
    /// How the user spelled these inputs (flags, or the monitor's YAML keys): errors name an
    /// input through it, never by a flag the core assumes.
    pub spelling: crate::input::Spelling,
}

impl PreflightSpec {
    /// Nothing given: every input unset or at its default, the defaults stated here once. The
    /// binary's flags (their clap defaults are checked against these), the monitor's `cluster:`
    /// section and `etcd promote|cleanup` start from it.
    pub fn new(spelling: crate::input::Spelling) -> PreflightSpec {
        PreflightSpec {
            api_server_endpoint: None,
            apiserver_cacert: None,
            config: None,
            token: None,
            discovery_token: None,
            tls_bootstrap_token: None,
            discovery_file: None,
            control_plane: false,
            apiserver_advertise_address: None,
            apiserver_bind_port: None,
            discovery_token_ca_cert_hash: Vec::new(),
            discovery_token_unsafe_skip_ca_verification: false,
            certificate_key: None,
            cert_dir: None,
            etcd_endpoints: Vec::new(),
            etcd_peer_endpoints: Vec::new(),
            etcd_cacert: None,
            etcd_cert: None,
            etcd_key: None,
            etcd_heartbeat_interval: None,
            etcd_election_timeout: None,
            ignore_preflight_errors: Vec::new(),
            write_probe: false,
            bandwidth: false,
            no_bandwidth: false,
            ignore_proxy_env: false,
            wait: None,
            timeout: DEFAULT_PREFLIGHT_TIMEOUT,
            node_name: None,
            output: Output::Text,
            given: Vec::new(),
            spelling,
        }
    }
}

/// `joinguard update-status`'s inputs as given, before `StatusInput::from_spec` validates them.
#[derive(Debug, Clone)]
pub struct StatusSpec {
    /// kubeconfig with the credentials to write with (kubeadm: /etc/kubernetes/admin.conf).
    pub kubeconfig: PathBuf,

    /// kubeconfig context to use (default: its current-context).
    pub context: Option<String>,

    /// kubeadm JoinConfiguration (v1beta3 or v1beta4): node name, local API endpoint and
    /// timeouts.kubernetesAPICall are read from it. As in kubeadm, --node-name may be given
    /// beside it (and overrides the file); --apiserver-advertise-address and
    /// --apiserver-bind-port may not (`can not mix '--config' with arguments [...]`, exit 2).
    pub config: Option<PathBuf>,

    /// This node's name (default: the hostname, as kubeadm).
    pub node_name: Option<String>,

    /// The address this node's API server advertises (needed for ClusterStatus clusters).
    pub apiserver_advertise_address: Option<std::net::IpAddr>,

    /// The port this node's API server binds (default 6443).
    pub apiserver_bind_port: Option<u16>,

    /// Deadline for the whole command; each call's own budget also applies.
    pub timeout: Duration,

    /// Report format.
    pub output: Output,

    /// The long names of the flags given on the command line (see [`PreflightArgs::given`]).
    pub given: Vec<String>,
    /// How the user spelled these inputs (flags, or the monitor's YAML keys): errors name an
    /// input through it, never by a flag the core assumes.
    pub spelling: crate::input::Spelling,
}

/// `joinguard trace`'s inputs as given; [`crate::trace::TraceInput::from_spec`] validates
/// and resolves them into a [`crate::trace::TraceInput`].
#[derive(Debug, Clone)]
pub struct TraceSpec {
    /// Host to trace: an IPv4 address or a name, optionally with :PORT (sets --port).
    pub target: String,

    /// Probe type. `tcp` sends SYNs to --port and never completes a handshake: it follows the
    /// path a service's connections take, through firewalls that treat ICMP differently.
    pub protocol: TraceProtocol,

    /// Destination port: required for tcp; for udp a fixed port instead of 33434 and up.
    pub port: Option<u16>,

    /// Probes per hop (mtr's --report-cycles).
    pub cycles: u32,

    /// Highest TTL probed.
    pub max_hops: u8,

    /// Time between two cycles. Routers rate-limit their answers (Linux: about one per second
    /// per source after a burst of 6), so faster cycles can show loss at a router that is not on
    /// the path.
    pub interval: Duration,

    /// How long one probe waits for its answer before it counts as lost.
    pub probe_timeout: Duration,

    /// Deadline for the whole trace; it then ends with the hops it saw.
    pub timeout: Duration,

    /// Look up hop names by reverse DNS (off by default: lookups can be slow and leak the trace).
    pub dns: bool,

    /// Size of each probe in bytes, IP header included (mtr's --psize), sent with DF set.
    pub size: Option<u16>,

    /// Report format.
    pub output: Output,

    /// How the user spelled these inputs; errors name an input through it.
    pub spelling: crate::input::Spelling,
}
