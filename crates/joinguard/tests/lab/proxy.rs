//! The join behind an egress proxy: the real tinyproxy in a lab host, `HTTPS_PROXY` and
//! `NO_PROXY` in the joiner's environment, `joinguard preflight` from the join line. What an
//! operator sees: the proxy the join's calls would meet, what it answered, and the `NO_PROXY`
//! that sends them direct. Needs root and Debian's tinyproxy (scripts/setup installs it).

use std::time::Duration;

use netlab::harness::{self, EnvBuilder, LabEnv, Layout, Run, CERT_KEY, RUN_TIMEOUT, TOKEN};
use netlab::labtest;
use netlab::proxy::Proxy;
use serde_json::Value;

/// api, joiner, m1..m3 (etcd on the etcd pods, kubeadm-certs uploaded) and a `proxy` host.
fn lab() -> EnvBuilder {
    crate::lab()
        .members(3)
        .layout(Layout::EtcdPods)
        .upload_certs()
        .extra_hosts(["proxy"])
        .joiner_delay(Duration::from_millis(1))
}

fn start_proxy(env: &LabEnv, deny: &[String]) -> Proxy {
    Proxy::start(env.lab().host("proxy"), &env.dir().join("proxy"), deny).expect("tinyproxy")
}

/// preflight from the join line (`-o json`) with `vars` in the environment.
fn preflight_with(env: &LabEnv, vars: &[(&str, &str)]) -> (Run, Value) {
    let run = preflight_args(env, vars, &["-o", "json"]);
    let v = run.json();
    (run, v)
}

/// preflight from the join line, human output, with `vars` in the environment.
fn preflight_plain(env: &LabEnv, vars: &[(&str, &str)]) -> Run {
    preflight_args(env, vars, &[])
}

fn preflight_args(env: &LabEnv, vars: &[(&str, &str)], extra: &[&str]) -> Run {
    let api = env.api().addr().to_string();
    let mut cmd = env.command([
        "preflight",
        &api,
        "--token",
        TOKEN,
        "--discovery-token-ca-cert-hash",
        &env.fixture().ca_pin,
        "--control-plane",
        "--certificate-key",
        CERT_KEY,
    ]);
    cmd.args(extra);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    harness::run(&mut cmd, RUN_TIMEOUT)
}

fn proxy_checks(v: &Value) -> Vec<Value> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "HTTPProxy")
        .cloned()
        .collect()
}

labtest!(
    /// The proxy refuses CONNECT to the API endpoint: token discovery goes through it as kubeadm
    /// join's does and stops there, naming the proxy, its answer and the NO_PROXY fix; kubectl
    /// with the same environment fails the same way. The proxy refusing one member: unfit by
    /// HTTPProxy for that member. The proxy tunnelling everything: fit, with kubeadm's HTTPProxy
    /// warning per proxied target, the API's /readyz measured through the tunnel.
    preflight_behind_a_proxy_names_what_it_refuses_and_the_no_proxy_fix,
    lab(),
    |env| {
        let api_ip = env.api().host().ip().to_string();
        let proxy = start_proxy(&env, std::slice::from_ref(&api_ip));
        let url = proxy.url();
        let run = preflight_plain(&env, &[("HTTPS_PROXY", &url)]);
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.stderr.contains(&format!(
                "token discovery: cluster-info get (unverified): the proxy {} answered CONNECT \
                 {api_ip}:6443 with `HTTP/1.1 403 Filtered`",
                url.trim_start_matches("http://")
            )) && run.stderr.contains(&format!(
                "kubeadm join's discovery reaches {api_ip}:6443 through the same proxy ({url}, \
                 from HTTPS_PROXY) and fails the same way; to send it direct: NO_PROXY={api_ip}"
            )),
            "{run}"
        );
        assert!(proxy.log().contains("Proxying refused on filtered domain"), "{}", proxy.log());

        // kubectl, with the same environment, meets the same refusal.
        let home = env.dir().join("home-proxy");
        std::fs::create_dir_all(&home).unwrap();
        let mut kubectl = env.joiner().command("kubectl");
        kubectl
            .env("HOME", &home)
            .env("HTTPS_PROXY", &url)
            .arg("--kubeconfig")
            .arg(env.admin_kubeconfig())
            .args(["--request-timeout=10s", "get", "--raw", "/readyz"]);
        let k = harness::run(&mut kubectl, RUN_TIMEOUT);
        assert_ne!(k.code, 0, "{k}");
        // client-go prints the proxy's reason phrase: "Unable to connect to the server: Filtered".
        assert!(
            k.stderr.contains("Unable to connect to the server: Filtered"),
            "{k}"
        );

        // The proxy refuses one member: kubeadm's etcd calls to it would fail.
        drop(proxy);
        let m2 = env.etcd().member(1).ip().to_string();
        let proxy = start_proxy(&env, std::slice::from_ref(&m2));
        let url = proxy.url();
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &url)]);
        assert_eq!(run.code, 1, "{run}");
        crate::schema::assert_valid("preflight", &run);
        let checks = proxy_checks(&v);
        let ep = format!("{m2}:2379");
        let refused = checks
            .iter()
            .find(|c| c["target"] == ep.as_str())
            .unwrap_or_else(|| panic!("no HTTPProxy check for {ep}: {run}"));
        assert_eq!(refused["status"], "error", "{refused}");
        let m = refused["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("go through the proxy {url} (HTTPS_PROXY)"))
                && m.contains("403 Filtered")
                && m.ends_with(&format!("NO_PROXY={m2}")),
            "{m}"
        );
        let others: Vec<&Value> = checks.iter().filter(|c| c["target"] != ep.as_str()).collect();
        assert_eq!(others.len(), 3, "the API and two members: {run}");
        assert!(others.iter().all(|c| c["status"] == "warning"), "{run}");

        // Tunnelling all: fit; the API's /readyz went through the tunnel (the proxy's log has
        // its CONNECTs), and the warning says what the proxy adds to each new connection.
        drop(proxy);
        let proxy = start_proxy(&env, &[]);
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &proxy.url())]);
        assert_eq!(run.code, 0, "{run}");
        let checks = proxy_checks(&v);
        assert_eq!(checks.len(), 4, "the API and three members: {run}");
        assert!(checks.iter().all(|c| c["status"] == "warning"), "{run}");
        assert!(
            checks.iter().all(|c| c["message"].as_str().is_some_and(|m| m
                .contains("opened a tunnel in")
                && m.contains("so the proxy adds"))),
            "{run}"
        );
        let api = env.api().addr().to_string();
        let w = checks.iter().find(|c| c["target"] == api.as_str()).unwrap();
        assert!(
            w["message"]
                .as_str()
                .unwrap()
                .contains("joinguard's own probes of it go through the proxy too"),
            "{w}"
        );
        let readyz = v["measurements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["target"] == api.as_str() && m["probe"] == "api-readyz")
            .unwrap_or_else(|| panic!("no api-readyz row: {run}"));
        assert!(
            readyz["samples"].as_u64().unwrap() > readyz["lost"].as_u64().unwrap()
                && readyz["p50Ms"].as_f64().is_some(),
            "{readyz}"
        );
        let connects = proxy.log().matches(api.as_str()).count();
        assert!(connects >= 3, "the proxy saw {connects} requests for the API\n{}", proxy.log());
    }
);

labtest!(
    /// The joiner has no direct path to the API endpoint (blackout on that link), only the one
    /// through the proxy, as on a node whose egress must go through it: token discovery and the
    /// API's probes go through the proxy, as kubeadm join's calls do, so the verdict is fit and
    /// the warning says the proxy is the only way there. Measured direct, as before this round,
    /// the same node was unfit (discovery could not reach the API).
    preflight_through_the_only_path_to_the_api_is_fit,
    lab(),
    |env| {
        let proxy = start_proxy(&env, &[]);
        let url = proxy.url();
        let lab = env.lab();
        lab.net()
            .set_link(env.joiner(), env.api().host(), netlab::Impairment::blackout());
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &url)]);
        assert_eq!(run.code, 0, "{run}");
        let api = env.api().addr().to_string();
        let checks = proxy_checks(&v);
        let w = checks
            .iter()
            .find(|c| c["target"] == api.as_str())
            .unwrap_or_else(|| panic!("no HTTPProxy check for {api}: {run}"));
        assert_eq!(w["status"], "warning", "{w}");
        assert!(
            w["message"].as_str().unwrap().contains(&format!(
                "direct, {api} does not answer (3 of 3 TCP connects failed): the proxy is the \
                 join's only way there, keep it"
            )),
            "{w}"
        );
        // The direct path, as if the environment had no proxy (--ignore-proxy-env): unfit,
        // discovery cannot reach the API, and nothing goes through the proxy.
        let before = proxy.log().matches(&api).count();
        let run = preflight_args(&env, &[("HTTPS_PROXY", &url)], &["--ignore-proxy-env"]);
        assert_eq!(run.code, 1, "{run}");
        assert!(
            run.stderr.contains("token discovery") && !run.stderr.contains("through the proxy"),
            "{run}"
        );
        assert_eq!(proxy.log().matches(&api).count(), before, "{}", proxy.log());
    }
);

labtest!(
    /// NO_PROXY with a CIDR that covers the API and every member: no HTTPProxy finding, the
    /// calls go direct; the service subnet (kubeadm-config's 10.96.0.0/12) is not in it:
    /// kubeadm's HTTPProxyCIDR warning, gone once NO_PROXY lists it. A NO_PROXY that misses one
    /// member: the finding names that member alone.
    preflight_no_proxy_cidrs_send_the_join_direct_and_a_miss_is_named,
    lab(),
    |env| {
        let proxy = start_proxy(&env, &[]);
        let url = proxy.url();
        let (run, v) = preflight_with(
            &env,
            &[("HTTPS_PROXY", &url), ("NO_PROXY", "198.18.0.0/24")],
        );
        assert_eq!(run.code, 0, "{run}");
        assert!(proxy_checks(&v).is_empty(), "{run}");
        let cidr: Vec<&Value> = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "HTTPProxyCIDR")
            .collect();
        assert_eq!(cidr.len(), 1, "{run}");
        assert_eq!(
            (cidr[0]["target"].as_str(), cidr[0]["status"].as_str()),
            (Some("10.96.0.0/12"), Some("warning"))
        );
        assert!(
            cidr[0]["message"].as_str().unwrap().starts_with(&format!(
                "connection to \"10.96.0.0/12\" uses proxy \"{url}\". This may lead to \
                 malfunctional cluster setup."
            )) && cidr[0]["message"]
                .as_str()
                .unwrap()
                .ends_with("NO_PROXY=198.18.0.0/24,10.96.0.0/12)"),
            "{}",
            cidr[0]
        );
        let (run, v) = preflight_with(
            &env,
            &[("HTTPS_PROXY", &url), ("NO_PROXY", "198.18.0.0/24,10.96.0.0/12")],
        );
        assert_eq!(run.code, 0, "{run}");
        assert!(
            v["checks"].as_array().unwrap().iter().all(|c| c["name"] != "HTTPProxyCIDR"),
            "{run}"
        );

        let members: Vec<String> = env.etcd().members().iter().map(|m| m.ip().to_string()).collect();
        let api_ip = env.api().host().ip().to_string();
        let no_proxy = format!("{api_ip},{},{}", members[0], members[1]);
        let (run, v) = preflight_with(&env, &[("https_proxy", &url), ("no_proxy", &no_proxy)]);
        assert_eq!(run.code, 0, "{run}");
        let checks = proxy_checks(&v);
        assert_eq!(checks.len(), 1, "{run}");
        let missed = format!("{}:2379", members[2]);
        assert_eq!(checks[0]["target"], missed.as_str());
        assert!(
            checks[0]["message"]
                .as_str()
                .unwrap()
                .ends_with(&format!("no_proxy={no_proxy},{})", members[2])),
            "{}",
            checks[0]
        );
    }
);

labtest!(
    /// An API endpoint that drops pings, probed from the join line (so only /readyz, an
    /// application-level stream, answers): its loss cannot be judged from transport-level probes,
    /// and the report says so in a PacketLoss warning instead of leaving the lost echoes unjudged.
    preflight_an_api_endpoint_that_filters_icmp_is_named_not_passed_silently,
    lab(),
    |env| {
        env.lab().net().set_link(
            env.joiner(),
            env.api().host(),
            netlab::Impairment::delay(Duration::from_millis(1)).with_drop_ping(),
        );
        let (run, v) = preflight_with(&env, &[]);
        assert_eq!(run.code, 0, "{run}");
        let api_ip = env.api().host().ip().to_string();
        let c = v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["name"] == "PacketLoss"
                    && c["target"].as_str().is_some_and(|t| t.starts_with(&api_ip))
            })
            .unwrap_or_else(|| panic!("no PacketLoss finding for {api_ip}: {run}"));
        assert_eq!(c["status"], "warning", "{c}");
        assert!(
            c["message"].as_str().unwrap().contains(
                "filters ICMP: none of"
            ) && c["message"].as_str().unwrap().contains("its packet loss and the ICMP side of PathMTU are not measured"),
            "{c}"
        );
    }
);

labtest!(
    /// `update-status` makes its API calls where kubeadm's client-go makes them: through the
    /// proxy the environment names for the kubeconfig's server. With the joiner's direct link to
    /// the API dark it writes through the proxy (the proxy's log has the CONNECTs); the proxy
    /// refusing the API fails it with the proxy's answer.
    update_status_goes_through_the_proxy_the_environment_names,
    lab(),
    |env| {
        let proxy = start_proxy(&env, &[]);
        let url = proxy.url();
        env.api()
            .upsert(serde_json::json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "cp-2", "labels": {"kubernetes.io/hostname": "cp-2"}},
            }))
            .expect("node");
        env.lab()
            .net()
            .set_link(env.joiner(), env.api().host(), netlab::Impairment::blackout());
        let status = |url: &str| {
            let mut cmd = env.command(["update-status", "--kubeconfig"]);
            cmd.arg(env.admin_kubeconfig())
                .args(["--node-name", "cp-2", "--timeout", "20s"])
                .args(["--apiserver-advertise-address", "198.18.1.7"])
                .env("HTTPS_PROXY", url);
            harness::run(&mut cmd, RUN_TIMEOUT)
        };
        let run = status(&url);
        assert_eq!(run.code, 0, "{run}");
        let api = env.api().addr().to_string();
        assert!(proxy.log().contains(&api), "{}", proxy.log());

        drop(proxy);
        let api_ip = env.api().host().ip().to_string();
        let proxy = start_proxy(&env, std::slice::from_ref(&api_ip));
        let run = status(&proxy.url());
        assert_ne!(run.code, 0, "{run}");
        assert!(run.stderr.contains("403 Filtered"), "{run}");
    }
);

labtest!(
    /// kubeadm 1.34 (kubeadm-config's kubernetesVersion) links grpc-go 1.72.1, whose etcd client
    /// decides the proxy once, for its first endpoint: with NO_PROXY listing every member but
    /// the first, all three members' calls go through the proxy (three findings, each naming the
    /// rule and the first endpoint as the fix); listing only the first, none. (On the 1.32
    /// fixture each member is judged alone: `preflight_no_proxy_cidrs_...` names the one
    /// NO_PROXY misses.)
    preflight_kubeadm_1_34_etcd_calls_follow_the_first_endpoint,
    lab().fixture(|opts| opts.kubernetes_version = "v1.34.2".into()),
    |env| {
        let proxy = start_proxy(&env, &[]);
        let url = proxy.url();
        let api_ip = env.api().host().ip().to_string();
        // The first endpoint kubeadm's client is given: the first of the etcd pods' URLs.
        let (run, _) = preflight_with(&env, &[]);
        let first = run
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("[preflight] etcd endpoints from the etcd pods: https://"))
            .and_then(|l| l.split(':').next())
            .unwrap_or_else(|| panic!("no etcd endpoints line: {run}"))
            .to_string();
        let others: Vec<String> = env
            .etcd()
            .members()
            .iter()
            .map(|m| m.ip().to_string())
            .filter(|ip| *ip != first)
            .collect();
        let no_proxy = format!("{api_ip},{}", others.join(","));
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &url), ("NO_PROXY", &no_proxy)]);
        assert_eq!(run.code, 0, "{run}");
        let checks = proxy_checks(&v);
        assert_eq!(checks.len(), 3, "every member through the proxy: {run}");
        eprintln!("kubeadm 1.34: {}", checks[0]["message"]);
        for c in &checks {
            let m = c["message"].as_str().unwrap();
            assert!(
                m.contains(&format!("once its first endpoint, {first}:2379, is proxied"))
                    && m.ends_with(&format!("NO_PROXY={no_proxy},{first})")),
                "{c}"
            );
        }
        let (run, v) = preflight_with(
            &env,
            &[("HTTPS_PROXY", &url), ("NO_PROXY", &format!("{api_ip},{first}"))],
        );
        assert_eq!(run.code, 0, "{run}");
        assert!(proxy_checks(&v).is_empty(), "first endpoint direct, all direct: {run}");
    }
);
