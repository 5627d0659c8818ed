//! The commands' inputs as plain values: what the binary's flags (or the monitor's YAML) say,
//! with no clap in sight. The binary maps its clap structs onto these one field at a time; each
//! command validates its spec into its own input type and keeps its error wording, so a bad
//! value still gets exit 2 and a message naming the flag.
//!
//! Owns no parsing of command lines and no defaults: the flags' defaults live with the flags.

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
/// [`crate::preflight::resolve_input`] validates them. `given` lists the kubeadm flag names set.
#[derive(Debug, Clone)]
pub struct PreflightSpec {
    /// The API endpoint or load balancer, as in `kubeadm join`: host:port or https://host:port.
    pub api_server_endpoint: Option<String>,

    /// CA bundle that signs the API server's certificate (kubeadm: /etc/kubernetes/pki/ca.crt).
    /// Without it, the API is probed up to the TLS handshake and /readyz is not verified.
    pub apiserver_cacert: Option<PathBuf>,

    /// kubeadm JoinConfiguration (v1beta3 or v1beta4), e.g. Cluster API's
    /// /run/kubeadm/kubeadm-join-config.yaml: the API endpoint, tokens, CA pins, control plane,
    /// certificate key, node name, ignorePreflightErrors and timeouts come from it. As in kubeadm,
    /// it cannot be mixed with kubeadm's flags except --node-name (overrides the file),
    /// --ignore-preflight-errors (merged with the file's list), --dry-run, --rootfs, --v,
    /// --log-file and --skip-* (`can not mix '--config' with arguments [...]`, exit 2); kubeadm
    /// ignores the API endpoint argument beside it, and so does joinguard. joinguard's own
    /// flags (--timeout, --wait, -o, --etcd-*, --cert-dir, ...) may be given beside it.
    pub config: Option<PathBuf>,

    /// Bootstrap token for discovery and TLS bootstrap, as `kubeadm join --token`: the token
    /// for --discovery-token and --tls-bootstrap-token when those are not given. With
    /// discovery, the cluster CA is learned from kube-public/cluster-info, verified with the
    /// token's JWS and the --discovery-token-ca-cert-hash pins, and used to verify the API
    /// server.
    pub token: Option<crate::secret::Secret>,

    /// The token for token-based discovery (kubeadm's --discovery-token; default --token).
    pub discovery_token: Option<crate::secret::Secret>,

    /// The TLS bootstrap token (kubeadm's --tls-bootstrap-token; default --token). The kubelet
    /// uses it, not joinguard: it is only checked for its form and never printed.
    pub tls_bootstrap_token: Option<crate::secret::Secret>,

    /// File-based discovery, as `kubeadm join --discovery-file`: a kubeconfig whose server and
    /// CA are trusted as they are. An https:// URL is refused (exit 2): download it first.
    pub discovery_file: Option<String>,

    /// A control-plane join (kubeadm's --control-plane): the etcd paths are checked too. Without
    /// it (and without controlPlane in --config) this is a worker join: only the API path is
    /// checked, unless etcd inputs (--etcd-endpoints, --certificate-key, --cert-dir, ...) are
    /// given.
    pub control_plane: bool,

    /// This node's address (kubeadm's --apiserver-advertise-address; its etcd member will
    /// advertise https://ADDR:2380). It must be one of this host's addresses, and the route to
    /// every etcd member must leave from it: etcd checks a peer certificate's SANs against the
    /// address the peer connects from.
    pub apiserver_advertise_address: Option<String>,

    /// The port this node's API server will bind (kubeadm's --apiserver-bind-port, default
    /// 6443): validated and reported.
    pub apiserver_bind_port: Option<u16>,

    /// Pin(s) of the cluster CA's public key, `sha256:<hex>`, as kubeadm join takes them.
    pub discovery_token_ca_cert_hash: Vec<String>,

    /// Allow discovery without a pin (as kubeadm; joinguard warns). Pins that are given are
    /// checked all the same, as kubeadm checks them.
    pub discovery_token_unsafe_skip_ca_verification: bool,

    /// The key from `kubeadm init phase upload-certs --upload-certs` (64 hex digits), as
    /// `kubeadm join --certificate-key`. With --token, it decrypts kubeadm-certs in memory to get
    /// an etcd client identity: the external etcd client certificate, or one minted from the
    /// stacked etcd CA. Nothing is written to disk.
    pub certificate_key: Option<crate::secret::Secret>,

    /// Directory holding the CA certificates and keys that kubeadm's manual certificate
    /// distribution (and Cluster API) places on a joining control-plane node before `kubeadm
    /// join`: etcd/ca.crt and etcd/ca.key, and optionally ca.crt and ca.key (kubeadm:
    /// /etc/kubernetes/pki). With --token, it gives preflight the etcd client identity that
    /// --certificate-key would, without reading kubeadm-certs. Keys are only read into memory.
    pub cert_dir: Option<PathBuf>,

    /// etcd client URLs, comma-separated: https://10.0.0.11:2379,https://10.0.0.12:2379.
    pub etcd_endpoints: Vec<String>,

    /// etcd peer URLs (port 2380). Optional: taken from MemberList when an identity is given.
    pub etcd_peer_endpoints: Vec<String>,

    /// CA that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt).
    pub etcd_cacert: Option<PathBuf>,

    /// Client certificate for etcd, signed by the etcd CA
    /// (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt).
    pub etcd_cert: Option<PathBuf>,

    /// Private key of --etcd-cert.
    pub etcd_key: Option<PathBuf>,

    /// The cluster's etcd --heartbeat-interval. Latency thresholds scale with it.
    pub etcd_heartbeat_interval: Duration,

    /// The cluster's etcd --election-timeout. The RTT must stay below a tenth of it.
    pub etcd_election_timeout: Duration,

    /// Checks whose errors become warnings, comma-separated, or `all` (e.g.
    /// EtcdPeerLatency,PacketLoss). kubeadm's own check names (NumCPU, Mem, Port-6443, ...) are
    /// accepted and noted, so the kubeadm join line works unchanged; with --config the file's
    /// nodeRegistration.ignorePreflightErrors is merged in, as kubeadm merges them.
    pub ignore_preflight_errors: Vec<String>,

    /// Also write to etcd: a lease (TTL <= 10 s), one key under /joinguard/preflight/ bound to it,
    /// a read, and a revoke. Nothing outlives the lease, even after kill -9.
    pub write_probe: bool,

    /// Measure member-to-joiner throughput for longer: the snapshot stream that predicts the
    /// learner's catch-up runs for up to 20 s instead of 5 s (it runs by default).
    pub bandwidth: bool,

    /// Skip the bandwidth probe (a bounded snapshot stream from the leader).
    pub no_bandwidth: bool,

    /// Instead of failing at once, re-check with backoff until fit or until this long has passed
    /// (e.g. 5m): covers a load balancer that is reloading.
    pub wait: Option<Duration>,

    /// Deadline for one whole check run. The run ends by then, with a verdict.
    pub timeout: Duration,

    /// Name of this node, used in the write probe's key (default: the hostname).
    pub node_name: Option<String>,

    /// Report format.
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
            etcd_heartbeat_interval: DEFAULT_ETCD_HEARTBEAT_INTERVAL,
            etcd_election_timeout: DEFAULT_ETCD_ELECTION_TIMEOUT,
            ignore_preflight_errors: Vec::new(),
            write_probe: false,
            bandwidth: false,
            no_bandwidth: false,
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

/// `joinguard trace`'s inputs as given; [`crate::trace::command::spec_from_request`] validates
/// and resolves them into a [`crate::trace::TraceSpec`].
#[derive(Debug, Clone)]
pub struct TraceRequest {
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
