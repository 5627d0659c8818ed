# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_joinguard_global_optspecs
    string join \n v/verbose v= h/help V/version
end

function __fish_joinguard_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_joinguard_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_joinguard_using_subcommand
    set -l cmd (__fish_joinguard_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c joinguard -n "__fish_joinguard_needs_command" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_needs_command" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_needs_command" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "preflight" -d 'Check that this node\'s network can carry a control-plane join'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "update-status" -d 'Write the control-plane join\'s status (idempotent, each call retried on its own policy)'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "trace" -d 'Per-hop latency and loss to a target, like `mtr --report` (ICMP, UDP or TCP SYN probes)'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "monitor" -d 'Run the preflight probes continuously and serve Prometheus metrics, /healthz and /readyz'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "etcd" -d 'Recover a control-plane join\'s etcd member: promote this node\'s learner, or remove a learner or unstarted member a failed join left behind'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "version" -d 'Print build information (version, commit, target, rustc, static or dynamic)'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "completion" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "man" -d 'Print the man page of joinguard or of one of its commands (roff, for `man -l -`)'
complete -c joinguard -n "__fish_joinguard_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l apiserver-cacert -d 'CA bundle that signs the API server\'s certificate (kubeadm: /etc/kubernetes/pki/ca.crt). Without it, the API is probed up to the TLS handshake and /readyz is not verified' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l config -d 'kubeadm JoinConfiguration (v1beta3 or v1beta4), e.g. Cluster API\'s /run/kubeadm/kubeadm-join-config.yaml: the API endpoint, tokens, CA pins, control plane, certificate key, node name, ignorePreflightErrors and timeouts come from it. As in kubeadm, it cannot be mixed with kubeadm\'s flags except --node-name (overrides the file), --ignore-preflight-errors (merged with the file\'s list), --dry-run, --rootfs, --v, --log-file and --skip-* (`can not mix \'--config\' with arguments [...]`, exit 2); kubeadm ignores the API endpoint argument beside it, and so does joinguard. joinguard\'s own flags (--timeout, --wait, -o, --etcd-*, --cert-dir, ...) may be given beside it' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l token -d 'Bootstrap token for discovery and TLS bootstrap, as `kubeadm join --token`: the token for --discovery-token and --tls-bootstrap-token when those are not given. With discovery, the cluster CA is learned from kube-public/cluster-info, verified with the token\'s JWS and the --discovery-token-ca-cert-hash pins, and used to verify the API server' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l token-file -d 'Read --token from FILE (its first line) instead: a token on the command line can be read by every user of this host while joinguard runs' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l discovery-token -d 'The token for token-based discovery (kubeadm\'s --discovery-token; default --token)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l tls-bootstrap-token -d 'The TLS bootstrap token (kubeadm\'s --tls-bootstrap-token; default --token). The kubelet uses it, not joinguard: it is only checked for its form and never printed' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l discovery-file -d 'File-based discovery, as `kubeadm join --discovery-file`: a kubeconfig whose server and CA are trusted as they are. An https:// URL is refused (exit 2): download it first' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l control-plane -d 'A control-plane join (kubeadm\'s --control-plane): the etcd paths are checked too. Without it (and without controlPlane in --config) this is a worker join: only the API path is checked, unless etcd inputs (--etcd-endpoints, --certificate-key, --cert-dir, ...) are given' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l apiserver-advertise-address -d 'This node\'s address (kubeadm\'s --apiserver-advertise-address; its etcd member will advertise https://ADDR:2380). It must be one of this host\'s addresses, and the route to every etcd member must leave from it: etcd checks a peer certificate\'s SANs against the address the peer connects from' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l apiserver-bind-port -d 'The port this node\'s API server will bind (kubeadm\'s --apiserver-bind-port, default 6443): validated and reported' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l discovery-token-ca-cert-hash -d 'Pin(s) of the cluster CA\'s public key, `sha256:<hex>`, as kubeadm join takes them' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l discovery-token-unsafe-skip-ca-verification -d 'Allow discovery without a pin (as kubeadm; joinguard warns). Pins that are given are checked all the same, as kubeadm checks them' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l certificate-key -d 'The key from `kubeadm init phase upload-certs --upload-certs` (64 hex digits), as `kubeadm join --certificate-key`. With --token, it decrypts kubeadm-certs in memory to get an etcd client identity: the external etcd client certificate, or one minted from the stacked etcd CA. Nothing is written to disk' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l certificate-key-file -d 'Read --certificate-key from FILE (its first line) instead of the command line' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l cert-dir -d 'Directory holding the CA certificates and keys that kubeadm\'s manual certificate distribution (and Cluster API) places on a joining control-plane node before `kubeadm join`: etcd/ca.crt and etcd/ca.key, and optionally ca.crt and ca.key (kubeadm: /etc/kubernetes/pki). With --token, it gives preflight the etcd client identity that --certificate-key would, without reading kubeadm-certs. Keys are only read into memory' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-endpoints -d 'etcd client URLs, comma-separated: https://10.0.0.11:2379,https://10.0.0.12:2379' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-peer-endpoints -d 'etcd peer URLs (port 2380). Optional: taken from MemberList when an identity is given' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-cacert -d 'CA that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-cert -d 'Client certificate for etcd, signed by the etcd CA (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-key -d 'Private key of --etcd-cert' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-heartbeat-interval -d 'The cluster\'s etcd --heartbeat-interval. Latency thresholds scale with it' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l etcd-election-timeout -d 'The cluster\'s etcd --election-timeout. Peer RTT warns above a tenth of it and fails above a quarter' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l ignore-preflight-errors -d 'Checks whose errors become warnings, comma-separated, or `all` (e.g. EtcdPeerLatency,PacketLoss). kubeadm\'s own check names (NumCPU, Mem, Port-6443, ...) are accepted and noted, so the kubeadm join line works unchanged; with --config the file\'s nodeRegistration.ignorePreflightErrors is merged in, as kubeadm merges them' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l wait -d 'Instead of failing at once, re-check with backoff until fit or until this long has passed (e.g. 5m): covers a load balancer that is reloading' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l timeout -d 'Deadline for one whole check run. The run ends by then, with a verdict' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l node-name -d 'Name of this node, used in the write probe\'s key (default: the hostname)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -s o -l output -d 'Report format: text, kubeadm-style `[preflight]` lines (notes, a table of measurements, then warnings and errors by check name, as kubeadm prints them); json, one object with `schemaVersion`, every check and every measurement' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l cri-socket -d 'kubeadm: the CRI socket. joinguard does not talk to the container runtime' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l skip-phases -d 'kubeadm: phases to skip. joinguard has no phases' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l patches -d 'kubeadm: a directory of patches for static Pod manifests. joinguard writes none' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l dry-run -d 'kubeadm: change nothing. joinguard changes nothing by default (see --write-probe)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l rootfs -d 'kubeadm: the host root filesystem to chroot into. joinguard reads its files as given' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l vmodule -d 'klog (kubeadm 1.28-1.30, 1.34+): per-file log levels' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l add-dir-header -d 'klog (kubeadm 1.28-1.33)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l skip-headers -d 'klog (kubeadm 1.28-1.33)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l alsologtostderr -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l log-backtrace-at -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l log-dir -d 'klog (kubeadm 1.28-1.30). joinguard writes no log files' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l log-file -d 'klog (kubeadm 1.28-1.30). joinguard writes no log files' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l log-file-max-size -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l logtostderr -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l one-output -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l skip-log-headers -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l stderrthreshold -d 'klog (kubeadm 1.28-1.30)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l write-probe -d 'Also write to etcd: a lease (TTL <= 10 s), one key under /joinguard/preflight/ bound to it, a read, and a revoke. Nothing outlives the lease, even after kill -9'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l bandwidth -d 'Measure member-to-joiner throughput for longer. With an etcd identity, preflight reads the first 8 MiB of a snapshot from the leader, for at most 5 s, to predict the learner\'s catch-up (EtcdSnapshotTransfer); this allows 20 s (and fails without an identity)'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l no-bandwidth -d 'Skip the bandwidth probe (the bounded snapshot read behind EtcdSnapshotTransfer)'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -l ignore-proxy-env -d 'Probe every path direct, as if HTTPS_PROXY, HTTP_PROXY and NO_PROXY were unset. By default joinguard takes the path kubeadm join takes: through the proxy the environment names for the API endpoint (HTTPProxy judges each proxied call). Use this only when joinguard runs with another environment than the join'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand preflight" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l kubeconfig -d 'kubeconfig with the credentials to write with (kubeadm: /etc/kubernetes/admin.conf)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l context -d 'kubeconfig context to use (default: its current-context)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l config -d 'kubeadm JoinConfiguration (v1beta3 or v1beta4): node name, local API endpoint and timeouts.kubernetesAPICall are read from it. As in kubeadm, --node-name may be given beside it (and overrides the file); --apiserver-advertise-address and --apiserver-bind-port may not (`can not mix \'--config\' with arguments [...]`, exit 2)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l node-name -d 'This node\'s name (default: the hostname, as kubeadm)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l apiserver-advertise-address -d 'The address this node\'s API server advertises (needed for ClusterStatus clusters)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l apiserver-bind-port -d 'The port this node\'s API server binds (default 6443)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l timeout -d 'Deadline for the whole command; each call\'s own budget also applies' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -s o -l output -d 'Report format: text, `[update-status]` lines (the API server and node, each status write with what it changed and its attempts, then the result); json, one object with `schemaVersion` and every write' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand update-status" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l protocol -d 'Probe type. `tcp` sends SYNs to --port and never completes a handshake: it follows the path a service\'s connections take, through firewalls that treat ICMP differently' -r -f -a "icmp\t'ICMP echo requests (as `ping`, mtr\'s default)'
udp\t'UDP datagrams (as `traceroute`): to --port, or to 33434 and up'
tcp\t'TCP SYNs to --port (as `mtr -T`, `tcptraceroute`): follows the path a connection to the service takes through firewalls that treat ICMP differently. Never completes a handshake'"
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l port -d 'Destination port: required for tcp; for udp a fixed port instead of 33434 and up' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s c -l cycles -d 'Probes per hop (mtr\'s --report-cycles)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l max-hops -d 'Highest TTL probed' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l interval -d 'Time between two cycles. Routers rate-limit their answers (Linux: about one per second per source after a burst of 6), so faster cycles can show loss at a router that is not on the path' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l probe-timeout -d 'How long one probe waits for its answer before it counts as lost' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l timeout -d 'Deadline for the whole trace; it then ends with the hops it saw' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s s -l size -d 'Size of each probe in bytes, IP header included (mtr\'s -s), sent with DF set. A router that answers "fragmentation needed" puts its MTU in the MTU column, and later probes shrink to it; where larger packets vanish silently, the hops past that point go dark. At most the MTU of the interface toward TARGET' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s o -l output -d 'Report format: text, the per-hop table (like `mtr --report`) and `[trace]` lines that say whether the target was reached and at which hop latency or loss first appears; json, one object with `schemaVersion` and every hop' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -l dns -d 'Look up hop names by reverse DNS (off by default: lookups can be slow and leak the trace)'
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand trace" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -l config -d 'The monitor\'s configuration (YAML; the examples below show its sections)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -l listen -d 'Address to serve /metrics, /healthz and /readyz on (overrides `listen:`; default 127.0.0.1:9810: give the node\'s address, as the DaemonSet does, for a scraper elsewhere). A bare IP (IPv4 or IPv6, as the downward API\'s status.hostIP gives it) takes port 9810: `$(HOST_IP):9810` is ambiguous for an IPv6 address' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand monitor" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -f -a "promote" -d 'Promote this node\'s etcd learner once etcd will accept it (the learner has caught up with the leader). A promotion whose answer is lost is confirmed by re-reading the member list, never retried blindly. Already a voter: exit 0, nothing to do'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -f -a "cleanup" -d 'Remove this node\'s etcd learner or unstarted member, so that the join can start over. Never removes a started voter, another node\'s member unless --member-id names it, or a member whose removal would lose quorum'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and not __fish_seen_subcommand_from promote cleanup help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l token -d 'Bootstrap token for discovery, as `kubeadm join --token`' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l token-file -d 'Read --token from FILE (its first line) instead of the command line' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l discovery-token-ca-cert-hash -d 'Pin(s) of the cluster CA\'s public key, `sha256:<hex>`, as kubeadm join takes them' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l discovery-token-unsafe-skip-ca-verification -d 'Allow discovery without a pin (as kubeadm; joinguard warns)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l certificate-key -d 'The key from `kubeadm init phase upload-certs --upload-certs`, as `kubeadm join --certificate-key`: with the join line, it decrypts kubeadm-certs in memory for the etcd client identity' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l certificate-key-file -d 'Read --certificate-key from FILE (its first line) instead of the command line' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l etcd-endpoints -d 'The cluster\'s etcd client endpoints (the existing members, as preflight takes them). Without them, --config or the join line (API_SERVER_ENDPOINT --token ...) is required: token discovery finds the members and the etcd CA, as preflight does' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l etcd-cacert -d 'CA bundle that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l etcd-cert -d 'Client certificate for etcd (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l etcd-key -d 'Private key of --etcd-cert (PKCS#1, SEC1 or PKCS#8)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l cert-dir -d 'kubeadm\'s certificate directory: takes etcd/ca.crt and apiserver-etcd-client.{crt,key} from it, the identity kubeadm\'s own etcd client uses during a join; without that pair (a node before its join, as Cluster API leaves it), mints an in-memory client certificate from etcd/ca.crt and etcd/ca.key, as preflight does' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l config -d 'The join\'s kubeadm config (a JoinConfiguration, v1beta3 or v1beta4; Cluster API writes /run/kubeadm/kubeadm-join-config.yaml): this node\'s name (nodeRegistration.name), its address (controlPlane.localAPIEndpoint.advertiseAddress) and the budget (timeouts.etcdAPICall). --node-name, --apiserver-advertise-address and --timeout override it' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l node-name -d 'This node\'s name: its etcd member has this name (kubeadm: nodeRegistration.name)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l apiserver-advertise-address -d 'This node\'s address: its etcd member\'s peer URL is https://ADDRESS:2380 (kubeadm: --apiserver-advertise-address, controlPlane.localAPIEndpoint.advertiseAddress)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l timeout -d 'The whole run\'s budget [default: timeouts.etcdAPICall of --config, else 2m, kubeadm\'s default]' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -s o -l output -d 'Output format: text, one `[etcd promote]` or `[etcd cleanup]` line with the result (progress goes to stderr); json, one object with `schemaVersion`, the result, the member and every etcd call' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l learner-metrics-url -d 'The learner\'s own metrics listener, for catch-up progress (kubeadm runs etcd with --listen-metrics-urls=http://127.0.0.1:2381). Unreachable: progress is estimated from the leader alone and etcd decides when the promotion is accepted' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from promote" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l token -d 'Bootstrap token for discovery, as `kubeadm join --token`' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l token-file -d 'Read --token from FILE (its first line) instead of the command line' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l discovery-token-ca-cert-hash -d 'Pin(s) of the cluster CA\'s public key, `sha256:<hex>`, as kubeadm join takes them' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l discovery-token-unsafe-skip-ca-verification -d 'Allow discovery without a pin (as kubeadm; joinguard warns)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l certificate-key -d 'The key from `kubeadm init phase upload-certs --upload-certs`, as `kubeadm join --certificate-key`: with the join line, it decrypts kubeadm-certs in memory for the etcd client identity' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l certificate-key-file -d 'Read --certificate-key from FILE (its first line) instead of the command line' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l etcd-endpoints -d 'The cluster\'s etcd client endpoints (the existing members, as preflight takes them). Without them, --config or the join line (API_SERVER_ENDPOINT --token ...) is required: token discovery finds the members and the etcd CA, as preflight does' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l etcd-cacert -d 'CA bundle that signs the etcd server certificates (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l etcd-cert -d 'Client certificate for etcd (kubeadm: /etc/kubernetes/pki/apiserver-etcd-client.crt)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l etcd-key -d 'Private key of --etcd-cert (PKCS#1, SEC1 or PKCS#8)' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l cert-dir -d 'kubeadm\'s certificate directory: takes etcd/ca.crt and apiserver-etcd-client.{crt,key} from it, the identity kubeadm\'s own etcd client uses during a join; without that pair (a node before its join, as Cluster API leaves it), mints an in-memory client certificate from etcd/ca.crt and etcd/ca.key, as preflight does' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l config -d 'The join\'s kubeadm config (a JoinConfiguration, v1beta3 or v1beta4; Cluster API writes /run/kubeadm/kubeadm-join-config.yaml): this node\'s name (nodeRegistration.name), its address (controlPlane.localAPIEndpoint.advertiseAddress) and the budget (timeouts.etcdAPICall). --node-name, --apiserver-advertise-address and --timeout override it' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l node-name -d 'This node\'s name: its etcd member has this name (kubeadm: nodeRegistration.name)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l apiserver-advertise-address -d 'This node\'s address: its etcd member\'s peer URL is https://ADDRESS:2380 (kubeadm: --apiserver-advertise-address, controlPlane.localAPIEndpoint.advertiseAddress)' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l timeout -d 'The whole run\'s budget [default: timeouts.etcdAPICall of --config, else 2m, kubeadm\'s default]' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -s o -l output -d 'Output format: text, one `[etcd promote]` or `[etcd cleanup]` line with the result (progress goes to stderr); json, one object with `schemaVersion`, the result, the member and every etcd call' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l member-id -d 'Remove this member (hex, as `etcdctl member list` prints it) even if it is not this node\'s: allowed only for a learner or an unstarted member' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -l dry-run -d 'Say what would be removed; change nothing'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from cleanup" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from help" -f -a "promote" -d 'Promote this node\'s etcd learner once etcd will accept it (the learner has caught up with the leader). A promotion whose answer is lost is confirmed by re-reading the member list, never retried blindly. Already a voter: exit 0, nothing to do'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from help" -f -a "cleanup" -d 'Remove this node\'s etcd learner or unstarted member, so that the join can start over. Never removes a started voter, another node\'s member unless --member-id names it, or a member whose removal would lose quorum'
complete -c joinguard -n "__fish_joinguard_using_subcommand etcd; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c joinguard -n "__fish_joinguard_using_subcommand version" -s o -l output -d 'Output format: one line, or JSON with `schemaVersion` (like `kubectl version -o json`)' -r -f -a "text\t'Lines for people (the flag\'s description says what they hold)'
json\t'One JSON object with `schemaVersion`, for programs'"
complete -c joinguard -n "__fish_joinguard_using_subcommand version" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand version" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand version" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand version" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand completion" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand completion" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand completion" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand completion" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand man" -l out-dir -d 'Write every page (joinguard.1, joinguard-preflight.1, joinguard-etcd-promote.1, ...) into this directory instead' -r -F
complete -c joinguard -n "__fish_joinguard_using_subcommand man" -l v -d 'Number for the log level verbosity, as kubeadm\'s (klog\'s) --v' -r
complete -c joinguard -n "__fish_joinguard_using_subcommand man" -s v -l verbose -d 'Log verbosity on stderr: -v info, -vv debug, -vvv trace. stdout carries only the report'
complete -c joinguard -n "__fish_joinguard_using_subcommand man" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c joinguard -n "__fish_joinguard_using_subcommand man" -s V -l version -d 'Print version'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "preflight" -d 'Check that this node\'s network can carry a control-plane join'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "update-status" -d 'Write the control-plane join\'s status (idempotent, each call retried on its own policy)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "trace" -d 'Per-hop latency and loss to a target, like `mtr --report` (ICMP, UDP or TCP SYN probes)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "monitor" -d 'Run the preflight probes continuously and serve Prometheus metrics, /healthz and /readyz'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "etcd" -d 'Recover a control-plane join\'s etcd member: promote this node\'s learner, or remove a learner or unstarted member a failed join left behind'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "version" -d 'Print build information (version, commit, target, rustc, static or dynamic)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "completion" -d 'Print a shell completion script (bash, zsh, fish, elvish, powershell)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "man" -d 'Print the man page of joinguard or of one of its commands (roff, for `man -l -`)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and not __fish_seen_subcommand_from preflight update-status trace monitor etcd version completion man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and __fish_seen_subcommand_from etcd" -f -a "promote" -d 'Promote this node\'s etcd learner once etcd will accept it (the learner has caught up with the leader). A promotion whose answer is lost is confirmed by re-reading the member list, never retried blindly. Already a voter: exit 0, nothing to do'
complete -c joinguard -n "__fish_joinguard_using_subcommand help; and __fish_seen_subcommand_from etcd" -f -a "cleanup" -d 'Remove this node\'s etcd learner or unstarted member, so that the join can start over. Never removes a started voter, another node\'s member unless --member-id names it, or a member whose removal would lose quorum'
