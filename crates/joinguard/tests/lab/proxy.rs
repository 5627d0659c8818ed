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
        "-o",
        "json",
    ]);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let run = harness::run(&mut cmd, RUN_TIMEOUT);
    let v = run.json();
    (run, v)
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
    /// The proxy refuses CONNECT to the API endpoint: unfit, naming the proxy, its answer and
    /// the NO_PROXY fix; kubectl with the same environment fails the same way. The proxy
    /// tunnelling everything: fit, with kubeadm's HTTPProxy warning per proxied target.
    preflight_behind_a_proxy_names_what_it_refuses_and_the_no_proxy_fix,
    lab(),
    |env| {
        let api_ip = env.api().host().ip().to_string();
        let proxy = start_proxy(&env, std::slice::from_ref(&api_ip));
        let url = proxy.url();
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &url)]);
        assert_eq!(run.code, 1, "{run}");
        crate::schema::assert_valid("preflight", &run);
        let checks = proxy_checks(&v);
        let api = env.api().addr().to_string();
        let refused = checks
            .iter()
            .find(|c| c["target"] == api.as_str())
            .unwrap_or_else(|| panic!("no HTTPProxy check for {api}: {run}"));
        assert_eq!(refused["status"], "error", "{refused}");
        let m = refused["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("go through the proxy {url} (HTTPS_PROXY)"))
                && m.contains("403 Filtered")
                && m.ends_with(&format!("NO_PROXY={api_ip}")),
            "{m}"
        );
        // The members' etcd calls go through the proxy too, which tunnels them: warnings.
        for m in env.etcd().members() {
            let ep = format!("{}:2379", m.ip());
            let c = checks
                .iter()
                .find(|c| c["target"] == ep.as_str())
                .unwrap_or_else(|| panic!("no HTTPProxy check for {ep}: {run}"));
            assert_eq!(c["status"], "warning", "{c}");
            assert!(
                c["message"].as_str().unwrap().starts_with(&format!(
                    "Connection to \"https://{ep}\" uses proxy \"{url}\". If that is not intended"
                )),
                "{c}"
            );
        }
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

        drop(proxy);
        let proxy = start_proxy(&env, &[]);
        let (run, v) = preflight_with(&env, &[("HTTPS_PROXY", &proxy.url())]);
        assert_eq!(run.code, 0, "{run}");
        let checks = proxy_checks(&v);
        assert_eq!(checks.len(), 4, "the API and three members: {run}");
        assert!(checks.iter().all(|c| c["status"] == "warning"), "{run}");
        assert!(
            checks.iter().all(|c| c["message"]
                .as_str()
                .is_some_and(|m| m.contains("opened a tunnel in"))),
            "{run}"
        );
    }
);

labtest!(
    /// NO_PROXY with a CIDR that covers the API and every member: no proxy finding, the calls
    /// go direct. A NO_PROXY that misses one member: the finding names that member alone.
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
