//! `netlab`: stand up a joinguard test lab by hand, change it while it runs, and clean up.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use netlab::control::{self, Request};
use netlab::etcd::{EtcdCluster, EtcdSpec};
use netlab::measure;
use netlab::{Impairment, Lab};

/// netlab: network namespaces joined by an impairing userspace forwarder, with real etcd.
///
/// Hosts live in network namespaces named <prefix>-<host> (prefix `jg` + 4 hex digits), with
/// addresses 198.18.0.1, .2, ... Every packet between hosts crosses one forwarder, which can
/// delay, jitter, drop, rate-limit or black out each direction of each pair.
#[derive(Parser, Debug)]
#[command(name = "netlab", version, propagate_version = true)]
struct Cli {
    /// More logs on stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start a lab with an etcd cluster and keep it running until Ctrl-C.
    ///
    /// Example: netlab up --members 3 --joiner --delay 20ms
    Up(UpArgs),
    /// Change an impairment of a running lab: netlab impair jg1a2b joiner m2 delay=40ms
    Impair {
        /// Lab prefix (see `netlab list`).
        prefix: String,
        /// From host.
        from: String,
        /// To host, or `*` for every other host (both directions).
        to: String,
        /// Impairment: delay=D, jitter=D, ujitter=D, loss=P%, burst-loss=P%/LEN, rate=Nmbit,
        /// queue=SIZE, blackout, none (comma-separated).
        spec: String,
        /// Only from -> to (default: both directions).
        #[arg(long)]
        one_way: bool,
        /// Only this family's packets, in a dual-stack lab (default: both families).
        #[arg(long, value_parser = ["ipv4", "ipv6"])]
        family: Option<String>,
    },
    /// Show the forwarder's counters of a running lab.
    Stats {
        /// Lab prefix (see `netlab list`).
        prefix: String,
    },
    /// List running labs (those started by `netlab up`).
    List,
    /// Remove namespaces, processes, TUN devices and temp dirs left by killed runs.
    Sweep {
        /// Only what starts with this prefix (default: everything of netlab's, `jg`).
        #[arg(long, default_value = "jg")]
        prefix: String,
        /// Report what would be removed, remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Exit 1 if anything was left behind (for CI, after the test suite).
        #[arg(long)]
        check: bool,
    },
    /// Measure what the forwarder itself adds, at 0, 0.5, 5, 25 and 100 ms one-way delay.
    Accuracy {
        /// Samples per delay.
        #[arg(long, default_value_t = 60)]
        samples: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("netlab: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn out(s: impl AsRef<str>) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{}", s.as_ref());
}

/// `netlab up` flags.
#[derive(clap::Args, Debug)]
struct UpArgs {
    /// etcd members, each in its own host (m1, m2, ...). 0 starts no etcd.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=7))]
    members: u8,
    /// Add a `joiner` host: the node that is about to join.
    #[arg(long)]
    joiner: bool,
    /// One-way delay on every joiner <-> member link (so RTT = 2 x delay).
    #[arg(long, value_parser = humantime::parse_duration)]
    delay: Option<Duration>,
    /// Full impairment on every joiner <-> member link, e.g. `delay=20ms,jitter=2ms,loss=1%`.
    #[arg(long, conflicts_with = "delay")]
    impair: Option<Impairment>,
    /// etcd binary (default: $JOINGUARD_ETCD_BIN, else /usr/bin/etcd).
    #[arg(long, env = "JOINGUARD_ETCD_BIN")]
    etcd_bin: Option<PathBuf>,
    /// Use this prefix instead of a random one (must start with `jg`, at most 6 chars).
    #[arg(long)]
    prefix: Option<String>,
    /// Exit after this long instead of waiting for Ctrl-C.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Add an `api` host running the API server stand-in over the etcd cluster, with what
    /// `kubeadm init` leaves behind (cluster-info, a bootstrap token, kubeadm-config, RBAC),
    /// and an admin kubeconfig. Needs --members 1 or more.
    #[arg(long)]
    api: bool,
    /// With --api: write kubeadm-config in the kubeadm < 1.22 layout (a ClusterStatus with
    /// one endpoint, cp-1) instead of registering a Node named `joiner`.
    #[arg(long, requires = "api")]
    cluster_status: bool,
    /// Put N router hosts (r1, r2, ...) between the joiner and every other host: the joiner's
    /// traffic crosses joiner -> r1 -> ... -> rN -> member, with real TTL decrements and ICMP
    /// Time Exceeded from each router. --delay/--impair then apply to the joiner <-> r1 link;
    /// impair another hop with `netlab impair <prefix> r1 r2 delay=30ms`.
    #[arg(long, default_value_t = 0, requires = "joiner", value_parser = clap::value_parser!(u8).range(0..=8))]
    routers: u8,
    /// Address families of the hosts: `ipv4` (198.18.0.0/24), `ipv6` (fd00:198:18::/64 only:
    /// etcd and the API stand-in listen and advertise on IPv6), or `dual` (both addresses on
    /// every host; the services use IPv4, as a node whose node IP lists IPv4 first).
    #[arg(long, default_value = "ipv4", value_parser = ["ipv4", "ipv6", "dual"])]
    ip_family: String,
    /// Add a `proxy` host running tinyproxy on port 3128: an egress proxy that tunnels TLS with
    /// CONNECT (give it to joinguard and kubectl as HTTPS_PROXY).
    #[arg(long)]
    proxy: bool,
    /// With --proxy: a host (a lab host's name, or an address) the proxy refuses to tunnel to
    /// (403 Filtered), as an egress proxy's deny rule does. Repeat for more.
    #[arg(long, value_name = "HOST", requires = "proxy")]
    proxy_deny: Vec<String>,
}

fn run(cmd: Cmd) -> anyhow::Result<ExitCode> {
    match cmd {
        Cmd::Up(args) => up(args),
        Cmd::Impair {
            prefix,
            from,
            to,
            spec,
            one_way,
            family,
        } => {
            spec.parse::<Impairment>()
                .map_err(|e| anyhow::anyhow!("impairment `{spec}`: {e}"))?;
            let r = control::request(
                &prefix,
                &Request::Impair {
                    from,
                    to,
                    spec,
                    both: !one_way,
                    family,
                },
            )?;
            out(&r.message);
            Ok(if r.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        Cmd::Stats { prefix } => {
            let r = control::request(&prefix, &Request::Stats)?;
            out(&r.message);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::List => {
            for p in control::running_labs() {
                out(p);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Sweep {
            prefix,
            dry_run,
            check,
        } => {
            let found = if dry_run || check {
                netlab::sweep::find(&prefix)
            } else {
                netlab::sweep::sweep(&prefix)
            };
            let verb = if dry_run || check { "found" } else { "removed" };
            if found.is_empty() {
                out(format!(
                    "netlab sweep: nothing left behind with prefix `{prefix}`"
                ));
                return Ok(ExitCode::SUCCESS);
            }
            for ns in &found.namespaces {
                out(format!("{verb} namespace {ns}"));
            }
            for p in &found.processes {
                out(format!("{verb} process {p}"));
            }
            for d in &found.devices {
                out(format!("{verb} device {d}"));
            }
            for d in &found.dirs {
                out(format!("{verb} {}", d.display()));
            }
            Ok(if check {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Cmd::Accuracy { samples } => accuracy(samples),
    }
}

fn up(args: UpArgs) -> anyhow::Result<ExitCode> {
    let UpArgs {
        members,
        joiner,
        delay,
        impair,
        etcd_bin,
        prefix,
        duration,
        api,
        cluster_status,
        routers,
        ip_family,
        proxy,
        proxy_deny,
    } = args;
    let family: netlab::IpFamily = ip_family.parse()?;
    if api && members == 0 {
        anyhow::bail!("--api stores its objects in etcd: give --members 1 or more");
    }
    let mut names: Vec<String> = Vec::new();
    if joiner {
        names.push("joiner".into());
    }
    names.extend((1..=members).map(|i| format!("m{i}")));
    // Last, so that the members keep their addresses with or without it.
    if api {
        names.push("api".into());
    }
    if proxy {
        names.push("proxy".into());
    }
    if names.is_empty() {
        anyhow::bail!("nothing to start: give --members N and/or --joiner");
    }
    // Routers last too; every host behind them is reached from the joiner through all of them.
    let behind: Vec<String> = names.iter().filter(|n| *n != "joiner").cloned().collect();
    let router_names: Vec<String> = (1..=routers).map(|i| format!("r{i}")).collect();
    names.extend(router_names.iter().cloned());
    let mut b = Lab::builder().hosts(names.clone()).ip_family(family);
    if !router_names.is_empty() {
        for h in &behind {
            let mut path = vec!["joiner".to_string()];
            path.extend(router_names.iter().cloned());
            path.push(h.clone());
            b = b.route(&path);
        }
    }
    if let Some(p) = prefix {
        b = b.prefix(p);
    }
    let lab = b.build()?;
    let imp = impair.or(delay.map(Impairment::delay));
    if let (true, Some(imp)) = (joiner, &imp) {
        if routers > 0 {
            lab.net()
                .set_link(lab.host("joiner"), lab.host("r1"), imp.clone());
        } else {
            for m in lab.hosts().iter().filter(|h| h.name().starts_with('m')) {
                lab.net().set_link(lab.host("joiner"), m, imp.clone());
            }
        }
    }
    let cluster = if members > 0 {
        let mut spec = EtcdSpec::default();
        if let Some(bin) = etcd_bin {
            spec.bin = bin;
        }
        let hosts: Vec<_> = lab
            .hosts()
            .iter()
            .filter(|h| h.name().starts_with('m'))
            .collect();
        eprintln!(
            "netlab: starting etcd ({}) on {} members...",
            spec.bin.display(),
            hosts.len()
        );
        let c = EtcdCluster::start(&lab, &hosts, &spec)?;
        c.wait_healthy(Duration::from_secs(30))?;
        Some(c)
    } else {
        None
    };

    let api_server = match (api, &cluster) {
        (true, Some(c)) => Some(start_api(&lab, c, cluster_status)?),
        _ => None,
    };

    let p = lab.prefix().to_string();
    out(format!("lab {p} is up ({} hosts)", lab.hosts().len()));
    out("");
    let addresses: Vec<String> = lab
        .hosts()
        .iter()
        .map(|h| {
            h.ips()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let width = addresses.iter().map(String::len).max().unwrap_or(0).max(13);
    out(format!("HOST      {:<width$} ENTER WITH", "ADDRESS"));
    for (h, a) in lab.hosts().iter().zip(&addresses) {
        out(format!(
            "{:<9} {a:<width$} ip netns exec {} bash",
            h.name(),
            h.netns()
        ));
    }
    if routers > 0 {
        out("");
        out(format!(
            "routes: joiner -> {} -> every other host (trace with `joinguard trace`)",
            router_names.join(" -> ")
        ));
    }
    if let (true, Some(imp)) = (joiner, &imp) {
        out("");
        if routers > 0 {
            out(format!("joiner <-> r1: {imp}"));
        } else {
            out(format!("joiner <-> every member: {imp}"));
        }
    }
    if let Some(c) = &cluster {
        let id = c.client_identity();
        let eps = c.client_endpoints().join(",");
        out("");
        out("etcd client flags (from the joiner):");
        out(format!(
            "  --endpoints={eps} --cacert={} --cert={} --key={}",
            id.ca.display(),
            id.cert.display(),
            id.key.display()
        ));
        out(format!("  peer URLs: {}", c.peer_endpoints().join(",")));
        out("");
        out(format!(
            "kubeadm PKI ({}, kubeadm's /etc/kubernetes/pki layout; {} picks another): {}",
            c.pki().profile(),
            netlab::pki::PKI_ENV,
            c.pki_dir().display()
        ));
        out(format!(
            "  each member's own etcd/server and etcd/peer: {}",
            c.dir().join("<member>/pki/etcd").display()
        ));
        if joiner {
            out("");
            out("try:");
            out(format!(
                "  ip netns exec {p}-joiner etcdctl --endpoints={eps} --cacert={} --cert={} --key={} endpoint health",
                id.ca.display(),
                id.cert.display(),
                id.key.display()
            ));
            out(format!("  netlab impair {p} joiner m2 delay=40ms,loss=2%"));
            out(format!("  netlab stats {p}"));
        }
    }
    let _egress = if proxy {
        // A lab host's name stands for its address (the proxy sees the CONNECT's address).
        let deny: Vec<String> = proxy_deny
            .iter()
            .map(|h| match lab.hosts().iter().find(|x| x.name() == h) {
                Some(x) => x.ip().to_string(),
                None => h.clone(),
            })
            .collect();
        let p = netlab::proxy::Proxy::start(lab.host("proxy"), &lab.dir().join("proxy"), &deny)?;
        out("");
        out(format!(
            "egress proxy (tinyproxy): {} (log: {})",
            p.url(),
            lab.dir().join("proxy/tinyproxy.log").display()
        ));
        out(format!(
            "  the join's calls through it: HTTPS_PROXY={} joinguard preflight ...",
            p.url()
        ));
        if !deny.is_empty() {
            out(format!("  it refuses CONNECT to: {}", deny.join(", ")));
        }
        Some(p)
    } else {
        None
    };
    if let Some((server, kubeconfig, pin)) = &api_server {
        out("");
        out(format!(
            "API server stand-in: {} ({})",
            server.url(),
            if cluster_status {
                "kubeadm-config with a ClusterStatus, kubeadm < 1.22 layout"
            } else {
                "Node `joiner` registered, kubeadm >= 1.22 layout"
            }
        ));
        out(format!("  admin kubeconfig: {}", kubeconfig.display()));
        out(format!("  join inputs: {pin}"));
    }
    out("");
    out(match duration {
        Some(d) => format!(
            "running for {}; Ctrl-C stops it earlier",
            humantime::format_duration(d)
        ),
        None => "Ctrl-C stops the lab and removes everything it created".to_string(),
    });

    let stop = Arc::new(AtomicBool::new(false));
    {
        let s = stop.clone();
        let _ = ctrlc_like(move || s.store(true, Ordering::Relaxed));
    }
    let deadline = duration.map(|d| std::time::Instant::now() + d);
    std::thread::scope(|scope| {
        let s = stop.clone();
        let lab_ref = &lab;
        scope.spawn(move || {
            if let Err(e) = control::serve(lab_ref, s) {
                eprintln!("netlab: control socket: {e}");
            }
        });
        while !stop.load(Ordering::Relaxed) {
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    drop(api_server);
    drop(cluster);
    drop(lab);
    eprintln!("netlab: lab {p} removed");
    Ok(ExitCode::SUCCESS)
}

/// The bootstrap token `netlab up --api` creates.
const API_TOKEN: &str = "abcdef.0123456789abcdef";

/// Starts the stand-in on host `api`, writes what `kubeadm init` leaves, and an admin kubeconfig
/// in the lab directory.
fn start_api(
    lab: &Lab,
    etcd: &EtcdCluster,
    cluster_status: bool,
) -> anyhow::Result<(netlab::apiserver::ApiServer, PathBuf, String)> {
    use netlab::apiserver::{fixture, ApiServer, ApiServerOptions};
    eprintln!("netlab: starting the API server stand-in on `api`...");
    let server = ApiServer::start(lab.host("api"), etcd, ApiServerOptions::default())?;
    let mut opts = fixture::FixtureOptions::new(API_TOKEN, etcd.ca());
    // kubeadm-certs, as `kubeadm init --upload-certs` leaves it, under a fresh key.
    let key: [u8; 32] = rand::random();
    opts.etcd_pods = lab
        .hosts()
        .iter()
        .filter(|h| h.name().starts_with('m'))
        .map(|h| {
            let url = format!("https://{}", netlab::authority(h.ip(), 2379));
            (h.name().to_string(), url)
        })
        .collect();
    opts.certificate_key = Some(key.iter().map(|b| format!("{b:02x}")).collect());
    if cluster_status {
        opts.cluster_status = vec![fixture::ApiEndpoint {
            node: "cp-1".into(),
            address: lab.host("m1").ip(),
            port: netlab::apiserver::DEFAULT_PORT,
        }];
    } else if lab.try_host("joiner").is_some() {
        server.upsert(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "joiner", "labels": {"kubernetes.io/hostname": "joiner"}},
        }))?;
    }
    let f = fixture::kubeadm_init(&server, opts)?;
    let kubeconfig = lab.dir().join("admin.conf");
    std::fs::write(&kubeconfig, server.kubeconfig(Some(server.admin_token())))?;
    let inputs = format!(
        "{} --token {API_TOKEN} --discovery-token-ca-cert-hash {} --certificate-key {}",
        server.addr(),
        f.ca_pin,
        f.certificate_key.unwrap_or_default()
    );
    Ok((server, kubeconfig, inputs))
}

/// Runs `f` on SIGINT or SIGTERM, using tokio's signal handling on a small runtime thread.
fn ctrlc_like(f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        });
        f();
    });
    Ok(())
}

fn accuracy(samples: u32) -> anyhow::Result<ExitCode> {
    let lab = Lab::builder().hosts(["a", "b"]).build()?;
    let (a, b) = (lab.host("a"), lab.host("b"));
    let sink = measure::SinkListener::start(b, 7100)?;
    let gap = Duration::from_millis(5);
    let mut rows = Vec::new();
    let mut base: Option<(f64, f64)> = None;
    for (i, d_ms) in [0.0f64, 0.5, 5.0, 25.0, 100.0].into_iter().enumerate() {
        let d = Duration::from_secs_f64(d_ms / 1000.0);
        lab.net().set_link(a, b, Impairment::delay(d));
        let n = if d_ms >= 100.0 {
            samples.min(20)
        } else {
            samples
        };
        let udp = measure::udp_echo(a, b, 7200 + i as u16, n, gap)?;
        let tcp = measure::tcp_connect(a, sink.addr, n, gap)?;
        let (bu, bt) = *base.get_or_insert((udp.median_ms, tcp.median_ms));
        rows.push((d_ms, udp, tcp, bu, bt));
    }
    out("| one-way delay | UDP echo RTT p50 | error vs 2d + base | TCP connect p50 | error vs 2d + base |");
    out("|---:|---:|---:|---:|---:|");
    for (d, udp, tcp, bu, bt) in rows {
        out(format!(
            "| {d} ms | {:.3} ms | {:+.3} ms | {:.3} ms | {:+.3} ms |",
            udp.median_ms,
            udp.median_ms - (2.0 * d + bu),
            tcp.median_ms,
            tcp.median_ms - (2.0 * d + bt)
        ));
    }
    Ok(ExitCode::SUCCESS)
}
