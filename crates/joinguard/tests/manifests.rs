//! The deploy/ manifests as a cluster would take them (no lab needed).
//!
//! Owns: rendering each kustomize overlay of deploy/ (`kubectl kustomize deploy/overlays/NAME`)
//! and turning the result into objects with the real `kubectl create --dry-run=client -o json`,
//! validating them offline against the Kubernetes 1.32 schemas (`kubernetes-validate
//! --strict`), evaluating the Pod Security Standards on their pod templates, and checking the
//! least-privilege rules of docs/hardening.md ("Manifest review"). Must not start a cluster or a
//! monitor, or reach the network beyond its own loopback discovery stand-in.
//!
//! `JOINGUARD_MANIFESTS_DIR=DIR` runs the same checks on another copy of deploy/ (DIR holds
//! `overlays/control-plane` and `overlays/fleet`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The kustomize overlays under deploy/overlays: the DaemonSet on control-plane nodes and the
/// fleet StatefulSet.
const OVERLAYS: [&str; 2] = ["control-plane", "fleet"];

fn deploy_dir() -> PathBuf {
    match std::env::var_os("JOINGUARD_MANIFESTS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy"),
    }
}

/// kubectl 1.32 needs the server's discovery even for a client-side dry run (it maps kinds to
/// resources), so this serves discovery only: `/api`, `/apis` and the resource lists of the kinds
/// deploy/ uses, the ServiceMonitor's CRD group included. Nothing else (no OpenAPI: the schema
/// check is kubernetes-validate's).
fn discovery_stand_in() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let res = |name: &str, kind: &str, namespaced: bool| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
    };
    let list = |gv: &str, resources: Vec<Value>| json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources});
    let core = list(
        "v1",
        vec![
            res("namespaces", "Namespace", false),
            res("configmaps", "ConfigMap", true),
            res("services", "Service", true),
            res("serviceaccounts", "ServiceAccount", true),
        ],
    );
    let apps = list(
        "apps/v1",
        vec![
            res("daemonsets", "DaemonSet", true),
            res("statefulsets", "StatefulSet", true),
            res("deployments", "Deployment", true),
        ],
    );
    let policy = list(
        "policy/v1",
        vec![res("poddisruptionbudgets", "PodDisruptionBudget", true)],
    );
    let monitoring = list(
        "monitoring.coreos.com/v1",
        vec![
            res("servicemonitors", "ServiceMonitor", true),
            res("prometheusrules", "PrometheusRule", true),
        ],
    );
    let api = json!({"kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]});
    let group = |name: &str| {
        let gv = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
        json!({"name": name, "versions": [gv], "preferredVersion": gv})
    };
    let apis = json!({"kind": "APIGroupList", "apiVersion": "v1",
        "groups": [group("apps"), group("policy"), group("monitoring.coreos.com")]});
    let h = std::thread::spawn(move || {
        l.set_nonblocking(true).unwrap();
        let end = Instant::now() + Duration::from_secs(60);
        while Instant::now() < end {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 8192];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .split('?')
                .next()
                .unwrap_or("");
            let (status, body) = match path {
                "/api" => (200, api.to_string()),
                "/apis" => (200, apis.to_string()),
                "/api/v1" => (200, core.to_string()),
                "/apis/apps/v1" => (200, apps.to_string()),
                "/apis/policy/v1" => (200, policy.to_string()),
                "/apis/monitoring.coreos.com/v1" => (200, monitoring.to_string()),
                _ => (404, "{}".to_string()),
            };
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    (addr, h)
}

/// What `kubectl kustomize deploy/overlays/<overlay>` renders (multi-document YAML).
fn kustomize(overlay: &str) -> Vec<u8> {
    let dir = deploy_dir().join("overlays").join(overlay);
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("kubectl (scripts/setup installs it)");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `kubectl create --dry-run=client` of `yaml` (read from stdin), with `extra` arguments.
fn kubectl_create(addr: SocketAddr, yaml: &[u8], extra: &[&str]) -> std::process::Output {
    let mut child = Command::new("kubectl")
        .args(["create", "--dry-run=client", "--validate=false"])
        .args(extra)
        .arg("-s")
        .arg(format!("http://{addr}"))
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl (scripts/setup installs it)");
    child.stdin.take().unwrap().write_all(yaml).unwrap();
    child.wait_with_output().unwrap()
}

/// The objects of an overlay as kubectl reads them (`kubectl kustomize`, then `create
/// --dry-run=client -o json`).
fn kubectl_objects(addr: SocketAddr, overlay: &str) -> Vec<Value> {
    let out = kubectl_create(addr, &kustomize(overlay), &["-o", "json"]);
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/overlays/{overlay} | kubectl create --dry-run=client -f -: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One JSON object per document, one after the other (a `List` only for `kubectl get`).
    let mut objs = Vec::new();
    for v in serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>() {
        let v = v.expect("kubectl -o json");
        match v["kind"].as_str() {
            Some("List") => objs.extend(arr(&v["items"]).iter().cloned()),
            _ => objs.push(v),
        }
    }
    objs
}

fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or("")
}

fn find<'a>(objs: &'a [Value], k: &str) -> Option<&'a Value> {
    objs.iter().find(|o| kind(o) == k)
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

// ---------------------------------------------------------------------------------------------
// Pod Security Standards, evaluated as the pod-security-admission library does for a Linux pod
// at version "latest". Source: kubernetes/kubernetes staging/src/k8s.io/pod-security-admission/
// policy/check_*.go (read: check_capabilities_baseline.go @ c004d3b8a27d, check_sysctls.go @
// abd60651f20b, check_restrictedVolumes.go @ b8ff6a459bc3; the other checks' rules as
// documented in kubernetes/website content/en/docs/concepts/security/pod-security-standards.md).
// Each check has the policy library's check ID, so a failure reads like an admission warning.
// ---------------------------------------------------------------------------------------------

/// Containers, init containers and ephemeral containers (policy/visitor.go visits all three).
fn all_containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| arr(&pod[*k]).iter())
        .collect()
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or("?").to_string()
}

/// The API server's defaulting that admission sees: under hostNetwork every container port's
/// hostPort defaults to its containerPort (kubernetes/kubernetes pkg/apis/core/v1/defaults.go,
/// `defaultHostNetworkPorts`). kubectl's client-side dry run does not default.
fn apply_server_defaults(pod: &mut Value) {
    if pod["hostNetwork"].as_bool() != Some(true) {
        return;
    }
    for k in ["initContainers", "containers"] {
        if let Some(cs) = pod[k].as_array_mut() {
            for c in cs {
                if let Some(ports) = c["ports"].as_array_mut() {
                    for p in ports {
                        if p["hostPort"].as_i64().unwrap_or(0) == 0 {
                            p["hostPort"] = p["containerPort"].clone();
                        }
                    }
                }
            }
        }
    }
}

/// Baseline checks: (check ID, violation detail) for each failing check.
fn baseline_violations(meta: &Value, pod: &Value) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let cs = all_containers(pod);
    // check_hostNamespaces.go
    let host: Vec<&str> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| pod[*k].as_bool() == Some(true))
        .collect();
    if !host.is_empty() {
        v.push(("hostNamespaces", format!("{}=true", host.join(", "))));
    }
    // check_privileged.go
    let bad: Vec<String> = cs
        .iter()
        .filter(|c| c["securityContext"]["privileged"].as_bool() == Some(true))
        .map(|c| name(c))
        .collect();
    if !bad.is_empty() {
        v.push(("privileged", format!("containers {bad:?} privileged=true")));
    }
    // check_capabilities_baseline.go: the default set.
    const ALLOWED: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut caps = BTreeSet::new();
    for c in &cs {
        for a in arr(&c["securityContext"]["capabilities"]["add"]) {
            let a = a.as_str().unwrap_or("");
            if !ALLOWED.contains(&a) {
                caps.insert(format!("{}: {a}", name(c)));
            }
        }
    }
    if !caps.is_empty() {
        v.push((
            "capabilities_baseline",
            format!("non-default capabilities added: {caps:?}"),
        ));
    }
    // check_hostPathVolumes.go
    let hp: Vec<String> = arr(&pod["volumes"])
        .iter()
        .filter(|vol| vol.get("hostPath").is_some())
        .map(name)
        .collect();
    if !hp.is_empty() {
        v.push(("hostPathVolumes", format!("hostPath volumes {hp:?}")));
    }
    // check_hostPorts.go
    let mut ports = Vec::new();
    for c in &cs {
        for p in arr(&c["ports"]) {
            if let Some(n) = p["hostPort"].as_i64().filter(|n| *n != 0) {
                ports.push(format!("{}: {n}", name(c)));
            }
        }
    }
    if !ports.is_empty() {
        v.push(("hostPorts", format!("hostPort {ports:?}")));
    }
    // check_appArmorProfile.go: field and (deprecated) annotation.
    let apparmor_ok = |sc: &Value| {
        matches!(
            sc["appArmorProfile"]["type"].as_str(),
            None | Some("RuntimeDefault") | Some("Localhost")
        )
    };
    let mut aa = !apparmor_ok(&pod["securityContext"])
        || cs.iter().any(|c| !apparmor_ok(&c["securityContext"]));
    if let Some(anns) = meta["annotations"].as_object() {
        for (k, val) in anns {
            if k.starts_with("container.apparmor.security.beta.kubernetes.io/") {
                let val = val.as_str().unwrap_or("");
                aa |= !(val == "runtime/default" || val.starts_with("localhost/"));
            }
        }
    }
    if aa {
        v.push(("appArmorProfile", "forbidden AppArmor profile".into()));
    }
    // check_seLinuxOptions.go
    let selinux_ok = |sc: &Value| {
        let o = &sc["seLinuxOptions"];
        matches!(
            o["type"].as_str(),
            None | Some("")
                | Some("container_t")
                | Some("container_init_t")
                | Some("container_kvm_t")
                | Some("container_engine_t")
        ) && o["user"].as_str().unwrap_or("").is_empty()
            && o["role"].as_str().unwrap_or("").is_empty()
    };
    if !selinux_ok(&pod["securityContext"]) || cs.iter().any(|c| !selinux_ok(&c["securityContext"]))
    {
        v.push(("seLinuxOptions", "forbidden seLinuxOptions".into()));
    }
    // check_procMount.go
    if cs.iter().any(|c| {
        !matches!(
            c["securityContext"]["procMount"].as_str(),
            None | Some("Default")
        )
    }) {
        v.push(("procMount", "procMount other than Default".into()));
    }
    // check_seccompProfile_baseline.go
    let unconfined = |sc: &Value| sc["seccompProfile"]["type"].as_str() == Some("Unconfined");
    if unconfined(&pod["securityContext"]) || cs.iter().any(|c| unconfined(&c["securityContext"])) {
        v.push((
            "seccompProfile_baseline",
            "seccompProfile Unconfined".into(),
        ));
    }
    // check_sysctls.go (the 1.0 safe set; later versions allow more, none of which deploy/ sets).
    const SAFE: [&str; 5] = [
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ];
    let bad: Vec<&str> = arr(&pod["securityContext"]["sysctls"])
        .iter()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| !SAFE.contains(n))
        .collect();
    if !bad.is_empty() {
        v.push(("sysctls", format!("forbidden sysctls {bad:?}")));
    }
    // check_windowsHostProcess.go
    let hp = |sc: &Value| sc["windowsOptions"]["hostProcess"].as_bool() == Some(true);
    if hp(&pod["securityContext"]) || cs.iter().any(|c| hp(&c["securityContext"])) {
        v.push(("windowsHostProcess", "hostProcess=true".into()));
    }
    // check_hostProbesAndhostLifecycle.go: probe and lifecycle handlers must not name a host.
    let mut hosts = Vec::new();
    for c in &cs {
        let handlers = [
            &c["livenessProbe"],
            &c["readinessProbe"],
            &c["startupProbe"],
            &c["lifecycle"]["postStart"],
            &c["lifecycle"]["preStop"],
        ];
        for h in handlers {
            for a in ["httpGet", "tcpSocket"] {
                if !h[a]["host"].as_str().unwrap_or("").is_empty() {
                    hosts.push(name(c));
                }
            }
        }
    }
    if !hosts.is_empty() {
        v.push(("probe_or_lifecycle_host", format!("host set in {hosts:?}")));
    }
    v
}

/// Restricted checks beyond Baseline (Restricted also includes every Baseline check).
fn restricted_violations(pod: &Value) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let cs = all_containers(pod);
    // check_restrictedVolumes.go: only these inline volume sources.
    const VOLUMES: [&str; 8] = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    let bad: Vec<String> = arr(&pod["volumes"])
        .iter()
        .filter(|vol| !VOLUMES.iter().any(|k| vol.get(*k).is_some()))
        .map(name)
        .collect();
    if !bad.is_empty() {
        v.push((
            "restrictedVolumes",
            format!("restricted volume types in {bad:?}"),
        ));
    }
    // check_allowPrivilegeEscalation.go: every container must set false.
    let bad: Vec<String> = cs
        .iter()
        .filter(|c| c["securityContext"]["allowPrivilegeEscalation"].as_bool() != Some(false))
        .map(|c| name(c))
        .collect();
    if !bad.is_empty() {
        v.push((
            "allowPrivilegeEscalation",
            format!("containers {bad:?} must set allowPrivilegeEscalation=false"),
        ));
    }
    // check_runAsNonRoot.go: true at pod level (and no container false), or true in every
    // container.
    let pod_nr = pod["securityContext"]["runAsNonRoot"].as_bool();
    let bad: Vec<String> = cs
        .iter()
        .filter(|c| match c["securityContext"]["runAsNonRoot"].as_bool() {
            Some(b) => !b,
            None => pod_nr != Some(true),
        })
        .map(|c| name(c))
        .collect();
    if pod_nr == Some(false) || !bad.is_empty() {
        v.push((
            "runAsNonRoot",
            format!("pod or containers {bad:?} must set runAsNonRoot=true"),
        ));
    }
    // check_runAsUser.go: uid 0 nowhere.
    let root = |sc: &Value| sc["runAsUser"].as_i64() == Some(0);
    if root(&pod["securityContext"]) || cs.iter().any(|c| root(&c["securityContext"])) {
        v.push(("runAsUser", "runAsUser=0".into()));
    }
    // check_seccompProfile_restricted.go: RuntimeDefault or Localhost, at pod level or in
    // every container, and no container Unconfined.
    let ok = |t: Option<&str>| matches!(t, Some("RuntimeDefault") | Some("Localhost"));
    let pod_ok = ok(pod["securityContext"]["seccompProfile"]["type"].as_str());
    let bad: Vec<String> = cs
        .iter()
        .filter(
            |c| match c["securityContext"]["seccompProfile"]["type"].as_str() {
                None => !pod_ok,
                t => !ok(t),
            },
        )
        .map(|c| name(c))
        .collect();
    if !bad.is_empty() {
        v.push((
            "seccompProfile_restricted",
            format!("containers {bad:?} need seccompProfile RuntimeDefault or Localhost"),
        ));
    }
    // check_capabilities_restricted.go: drop ALL, add at most NET_BIND_SERVICE.
    let mut bad = Vec::new();
    for c in &cs {
        let caps = &c["securityContext"]["capabilities"];
        if !arr(&caps["drop"]).iter().any(|d| d == "ALL") {
            bad.push(format!("{}: must drop ALL", name(c)));
        }
        for a in arr(&caps["add"]) {
            if a != "NET_BIND_SERVICE" {
                bad.push(format!("{}: must not add {a}", name(c)));
            }
        }
    }
    if !bad.is_empty() {
        v.push(("capabilities_restricted", format!("{bad:?}")));
    }
    v
}

/// The strictest Pod Security level the pod template passes, and the violations of the next
/// stricter one.
fn pod_security_level(template: &Value) -> (&'static str, Vec<(&'static str, String)>) {
    let mut pod = template["spec"].clone();
    apply_server_defaults(&mut pod);
    let base = baseline_violations(&template["metadata"], &pod);
    if !base.is_empty() {
        return ("privileged", base);
    }
    let restricted = restricted_violations(&pod);
    if !restricted.is_empty() {
        return ("baseline", restricted);
    }
    ("restricted", vec![])
}

// ---------------------------------------------------------------------------------------------
// The least-privilege rules for joinguard's own manifests.
// ---------------------------------------------------------------------------------------------

/// Every private key kubeadm writes under /etc/kubernetes/pki: kubernetes/kubernetes
/// cmd/kubeadm/app/constants/constants.go @ 00886ac01fec (CAKeyName, APIServerKeyName,
/// APIServerKubeletClientKeyName, EtcdCAKeyName, EtcdServerKeyName, EtcdPeerKeyName,
/// EtcdHealthcheckClientKeyName, APIServerEtcdClientKeyName, ServiceAccountPrivateKeyName,
/// FrontProxyCAKeyName, FrontProxyClientKeyName).
const KUBEADM_KEYS: [&str; 11] = [
    "ca.key",
    "apiserver.key",
    "apiserver-kubelet-client.key",
    "etcd/ca.key",
    "etcd/server.key",
    "etcd/peer.key",
    "etcd/healthcheck-client.key",
    "apiserver-etcd-client.key",
    "sa.key",
    "front-proxy-ca.key",
    "front-proxy-client.key",
];
const PKI: &str = "/etc/kubernetes/pki";

/// Problems of one workload file, as sentences (empty: all rules hold).
fn review(file: &str, objs: &[Value]) -> Vec<String> {
    let mut p = Vec::new();
    let Some(w) = objs
        .iter()
        .find(|o| matches!(kind(o), "DaemonSet" | "StatefulSet" | "Deployment"))
    else {
        return vec![format!("{file}: no workload")];
    };
    let wk = kind(w);
    let template = &w["spec"]["template"];
    let pod = &template["spec"];
    let cm = find(objs, "ConfigMap");
    let cfg_text = cm.and_then(|c| c["data"]["monitor.yaml"].as_str());
    let pod_env = |k: &str| (k == "POD_NAME").then(|| "joinguard-fleet-monitor-1".to_string());
    let cfg =
        match cfg_text.map(|t| joinguard_core::monitor::MonitorConfig::parse(t, file, &pod_env)) {
            Some(Ok(c)) => Some(c),
            Some(Err(e)) => {
                p.push(format!("the ConfigMap's monitor.yaml: {e}"));
                None
            }
            None => {
                p.push("no ConfigMap with monitor.yaml".into());
                None
            }
        };

    // Pod Security: the Namespace enforces exactly the strictest level the pod passes.
    let (level, next) = pod_security_level(template);
    let ns = find(objs, "Namespace");
    let labels = ns.map(|n| &n["metadata"]["labels"]);
    let enforce = labels.and_then(|l| l["pod-security.kubernetes.io/enforce"].as_str());
    if enforce != Some(level) {
        p.push(format!(
            "Namespace pod-security.kubernetes.io/enforce is {enforce:?}; the {wk} passes {level:?}"
        ));
    }
    for mode in ["warn", "audit"] {
        if labels
            .and_then(|l| l[format!("pod-security.kubernetes.io/{mode}")].as_str())
            .is_none()
        {
            p.push(format!(
                "Namespace has no pod-security.kubernetes.io/{mode} label"
            ));
        }
    }
    match wk {
        // The node monitor: Baseline fails for exactly what host-network measurement and
        // kubeadm's files need, nothing else.
        "DaemonSet" => {
            let ids: BTreeSet<&str> = next.iter().map(|(id, _)| *id).collect();
            let expected: BTreeSet<&str> = ["hostNamespaces", "hostPathVolumes", "hostPorts"]
                .into_iter()
                .collect();
            if level != "privileged" || ids != expected {
                p.push(format!(
                    "Pod Security Baseline: the DaemonSet must fail only {expected:?} (host network, \
                     kubeadm's files), it fails {next:?}"
                ));
            }
        }
        _ => {
            if level != "restricted" {
                p.push(format!(
                    "Pod Security Restricted: the {wk} fails it at level {level:?}: {next:?}"
                ));
            }
        }
    }

    // Each container: least privilege.
    for c in all_containers(pod) {
        let n = name(c);
        let sc = &c["securityContext"];
        let caps = &sc["capabilities"];
        if arr(&caps["drop"]) != [json!("ALL")] {
            p.push(format!(
                "{n}: capabilities.drop is {}, not [ALL]",
                caps["drop"]
            ));
        }
        if !arr(&caps["add"]).is_empty() {
            p.push(format!("{n}: capabilities.add is {}", caps["add"]));
        }
        if sc["readOnlyRootFilesystem"].as_bool() != Some(true) {
            p.push(format!("{n}: readOnlyRootFilesystem is not true"));
        }
        if sc["allowPrivilegeEscalation"].as_bool() != Some(false) {
            p.push(format!("{n}: allowPrivilegeEscalation is not false"));
        }
        if sc["privileged"].as_bool() == Some(true) {
            p.push(format!("{n}: privileged"));
        }
        let r = &c["resources"];
        for (what, v) in [
            ("requests.cpu", &r["requests"]["cpu"]),
            ("requests.memory", &r["requests"]["memory"]),
            ("limits.memory", &r["limits"]["memory"]),
        ] {
            if v.is_null() {
                p.push(format!("{n}: resources.{what} not set"));
            }
        }
        for probe in ["livenessProbe", "readinessProbe"] {
            let path = c[probe]["httpGet"]["path"].as_str();
            if path != Some("/healthz") {
                p.push(format!(
                    "{n}: {probe} is {path:?}, not /healthz (/readyz is the network verdict)"
                ));
            }
        }
        let image = c["image"].as_str().unwrap_or("");
        let want = format!("localhost/joinguard:{}", env!("CARGO_PKG_VERSION"));
        if image != want {
            p.push(format!(
                "{n}: image {image:?} is not what scripts/package builds ({want})"
            ));
        }
        for m in arr(&c["volumeMounts"]) {
            if m["readOnly"].as_bool() != Some(true) {
                p.push(format!("{n}: volumeMount {} is writable", m["mountPath"]));
            }
        }
    }

    // No ServiceAccount token: the monitor never calls the Kubernetes API.
    if pod["automountServiceAccountToken"].as_bool() != Some(false) {
        p.push("pod automountServiceAccountToken is not false".into());
    }
    let sa_name = pod["serviceAccountName"].as_str();
    match objs
        .iter()
        .find(|o| kind(o) == "ServiceAccount" && o["metadata"]["name"].as_str() == sa_name)
    {
        Some(sa) if sa["automountServiceAccountToken"].as_bool() == Some(false) => {}
        Some(_) => p.push("ServiceAccount automountServiceAccountToken is not false".into()),
        None => p.push(format!(
            "serviceAccountName {sa_name:?}: no such ServiceAccount in the overlay (the default one would be used)"
        )),
    }

    let c = &pod["containers"][0];
    let args: Vec<&str> = arr(&c["args"]).iter().filter_map(Value::as_str).collect();
    let listen = args
        .iter()
        .position(|a| *a == "--listen")
        .and_then(|i| args.get(i + 1));

    if wk == "DaemonSet" {
        // On the host network: serve on the node's own address (downward API), not 0.0.0.0.
        let host_ip_env = arr(&c["env"]).iter().find_map(|e| {
            (e["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP")
                .then(|| e["name"].as_str().unwrap_or(""))
        });
        match (host_ip_env, listen) {
            // The bare address: `$(VAR):9810` is ambiguous when status.hostIP is IPv6.
            (Some(var), Some(l)) if **l == format!("$({var})") => {}
            _ => p.push(format!(
                "--listen is {listen:?}; on the host network it must be $(VAR) (port 9810) with VAR from status.hostIP"
            )),
        }
        // hostPath: single files of kubeadm's layout, and no key the monitor does not read.
        let read_key = cfg
            .as_ref()
            .and_then(|c| c.cluster())
            .and_then(|c| c.etcd_key.clone());
        let mut wanted_files: Vec<PathBuf> = Vec::new();
        if let Some(cl) = cfg.as_ref().and_then(|c| c.cluster()) {
            for f in [
                &cl.etcd_cacert,
                &cl.etcd_cert,
                &cl.etcd_key,
                &cl.apiserver_cacert,
            ]
            .into_iter()
            .flatten()
            {
                wanted_files.push(f.clone());
            }
        }
        for vol in arr(&pod["volumes"]) {
            let hp = &vol["hostPath"];
            let Some(path) = hp["path"].as_str() else {
                continue;
            };
            if hp["type"].as_str() != Some("File") {
                p.push(format!(
                    "hostPath {path} has type {}, not File (mount single files)",
                    hp["type"]
                ));
            }
            let dir = format!("{}/", path.trim_end_matches('/'));
            for k in KUBEADM_KEYS {
                let key = format!("{PKI}/{k}");
                let read = read_key.as_deref() == Some(std::path::Path::new(&key));
                if key.starts_with(&dir) && !read {
                    p.push(format!(
                        "hostPath {path} holds {key}, which the monitor does not read"
                    ));
                }
                if key == path && !read {
                    p.push(format!(
                        "hostPath {path} is a key the monitor does not read"
                    ));
                }
            }
        }
        // Every file monitor.yaml names is mounted at that path, one file per mount.
        let mounts: Vec<&str> = arr(&c["volumeMounts"])
            .iter()
            .filter_map(|m| m["mountPath"].as_str())
            .collect();
        for f in &wanted_files {
            let f = f.to_string_lossy();
            if !mounts.contains(&f.as_ref()) {
                p.push(format!(
                    "monitor.yaml reads {f}, which is not mounted as a file"
                ));
            }
        }
        // kubeadm's own etcd client identity for health checks, not the API server's.
        if let Some(cl) = cfg.as_ref().and_then(|c| c.cluster()) {
            let cert = cl
                .etcd_cert
                .as_deref()
                .map(|p| p.to_string_lossy().into_owned());
            if cert.as_deref() != Some("/etc/kubernetes/pki/etcd/healthcheck-client.crt") {
                p.push(format!(
                    "etcdCert is {cert:?}, not kubeadm's etcd/healthcheck-client.crt"
                ));
            }
        }
        if pod["hostNetwork"].as_bool() != Some(true) {
            p.push("the node monitor must be on the host network".into());
        }
        if !arr(&pod["tolerations"])
            .iter()
            .any(|t| t["key"] == "node-role.kubernetes.io/control-plane")
        {
            p.push("no control-plane toleration".into());
        }
    } else {
        // The fleet: shard count, and a PodDisruptionBudget over the same pods.
        let replicas = w["spec"]["replicas"].as_u64();
        let shards = cfg.as_ref().map(|c| c.shard().replicas as u64);
        if replicas != shards {
            p.push(format!(
                "replicas {replicas:?} differ from shard.replicas {shards:?}"
            ));
        }
        let sel = &w["spec"]["selector"]["matchLabels"];
        match find(objs, "PodDisruptionBudget") {
            Some(pdb) if &pdb["spec"]["selector"]["matchLabels"] == sel => {
                if pdb["spec"]["maxUnavailable"].is_null() && pdb["spec"]["minAvailable"].is_null()
                {
                    p.push(
                        "PodDisruptionBudget sets neither maxUnavailable nor minAvailable".into(),
                    );
                }
            }
            Some(_) => p.push("PodDisruptionBudget does not select the workload's pods".into()),
            None => p.push("no PodDisruptionBudget".into()),
        }
    }

    // The Service and ServiceMonitor (a CRD kind: kubectl maps it, no schema checks it).
    let svc = find(objs, "Service");
    let sm = find(objs, "ServiceMonitor");
    match (svc, sm) {
        (Some(svc), Some(sm)) => {
            if sm["apiVersion"] != "monitoring.coreos.com/v1" {
                p.push(format!("ServiceMonitor apiVersion {}", sm["apiVersion"]));
            }
            if sm["spec"]["selector"]["matchLabels"] != svc["metadata"]["labels"] {
                p.push("the ServiceMonitor does not select the Service".into());
            }
            if sm["spec"]["endpoints"][0]["port"] != svc["spec"]["ports"][0]["name"] {
                p.push("the ServiceMonitor's port is not the Service's".into());
            }
            if svc["spec"]["publishNotReadyAddresses"].as_bool() != Some(true) {
                p.push("the Service does not publish not-ready addresses".into());
            }
        }
        _ => p.push("no Service or no ServiceMonitor".into()),
    }
    p
}

#[test]
fn deploy_manifests_are_least_privilege_and_pass_pod_security() {
    let (addr, _h) = discovery_stand_in();
    let mut problems = Vec::new();
    for overlay in OVERLAYS {
        let file = format!("overlays/{overlay}");
        let file = file.as_str();
        let objs = kubectl_objects(addr, overlay);
        // kubectl's own summary of the same dry run, for the log (docs/hardening.md quotes it).
        let out = kubectl_create(addr, &kustomize(overlay), &[]);
        eprint!(
            "$ kubectl kustomize deploy/{file} | kubectl create --dry-run=client -f -\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let template = objs
            .iter()
            .find(|o| matches!(kind(o), "DaemonSet" | "StatefulSet"))
            .map(|w| &w["spec"]["template"]);
        if let Some(t) = template {
            let (level, next) = pod_security_level(t);
            eprintln!("{file}: Pod Security level passed: {level}");
            for (id, detail) in &next {
                eprintln!("{file}:   next level fails {id}: {detail}");
            }
        }
        for pr in review(file, &objs) {
            problems.push(format!("{file}: {pr}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Schema: every field of every built-in object is known to Kubernetes 1.32 (strict, so a
/// misspelled field fails). The ServiceMonitor and the PrometheusRule are left out: a CRD kind has
/// no built-in schema.
#[test]
fn deploy_manifests_pass_the_kubernetes_1_32_schemas() {
    let (addr, _h) = discovery_stand_in();
    for overlay in OVERLAYS {
        let file = format!("overlays/{overlay}");
        let objs = kubectl_objects(addr, overlay);
        let builtin: Vec<&Value> = objs
            .iter()
            .filter(|o| !matches!(kind(o), "ServiceMonitor" | "PrometheusRule"))
            .collect();
        assert!(!builtin.is_empty(), "{file}: no built-in kinds");
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let text: String = builtin
            .iter()
            .map(|o| format!("---\n{}\n", serde_json::to_string_pretty(o).unwrap()))
            .collect();
        std::fs::write(tmp.path(), text).unwrap();
        let out = Command::new("kubernetes-validate")
            .args(["--strict", "--quiet", "-k", "1.32.0"])
            .arg(tmp.path())
            .output()
            .expect("kubernetes-validate (scripts/setup installs it)");
        assert!(
            out.status.success(),
            "{file}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The evaluator itself: each Pod Security rule it applies catches the field it is about (so a
/// passing manifest is not a checker that cannot fail).
#[test]
fn pod_security_evaluator_catches_each_rule() {
    let good = json!({"metadata": {}, "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]}}, "ports": [{"containerPort": 9810}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "x"}}]}});
    assert_eq!(pod_security_level(&good), ("restricted", vec![]));
    // `good` with the field at `ptr` set (added when absent).
    let with = |ptr: &str, v: Value| {
        let mut t = good.clone();
        let (parent, key) = ptr.rsplit_once('/').unwrap();
        let p = t.pointer_mut(parent).unwrap_or_else(|| panic!("{ptr}"));
        match p {
            Value::Array(a) => a[key.parse::<usize>().unwrap()] = v,
            _ => p[key] = v,
        }
        t
    };
    let sc = "/spec/containers/0/securityContext";
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with("/spec/securityContext/runAsNonRoot", json!(false)),
            "baseline",
            "runAsNonRoot",
        ),
        (
            with(&format!("{sc}/allowPrivilegeEscalation"), json!(true)),
            "baseline",
            "allowPrivilegeEscalation",
        ),
        (
            with(
                &format!("{sc}/capabilities"),
                json!({"drop": ["ALL"], "add": ["CHOWN"]}),
            ),
            "baseline",
            "capabilities_restricted",
        ),
        (
            with(
                &format!("{sc}/capabilities"),
                json!({"drop": ["ALL"], "add": ["NET_RAW"]}),
            ),
            "privileged",
            "capabilities_baseline",
        ),
        (
            with(
                "/spec/securityContext/seccompProfile",
                json!({"type": "Unconfined"}),
            ),
            "privileged",
            "seccompProfile_baseline",
        ),
        (
            with("/spec/securityContext/seccompProfile", json!(null)),
            "baseline",
            "seccompProfile_restricted",
        ),
        (
            with(
                "/spec/volumes/0",
                json!({"name": "h", "hostPath": {"path": "/etc"}}),
            ),
            "privileged",
            "hostPathVolumes",
        ),
        (
            with(
                "/spec/containers/0/ports/0",
                json!({"containerPort": 1, "hostPort": 1}),
            ),
            "privileged",
            "hostPorts",
        ),
        (
            with(&format!("{sc}/privileged"), json!(true)),
            "privileged",
            "privileged",
        ),
        (
            with(&format!("{sc}/procMount"), json!("Unmasked")),
            "privileged",
            "procMount",
        ),
        (
            with(&format!("{sc}/seLinuxOptions"), json!({"type": "spc_t"})),
            "privileged",
            "seLinuxOptions",
        ),
        (
            with(
                "/spec/securityContext/sysctls",
                json!([{"name": "kernel.msgmax", "value": "1"}]),
            ),
            "privileged",
            "sysctls",
        ),
        (
            with(&format!("{sc}/runAsUser"), json!(0)),
            "baseline",
            "runAsUser",
        ),
        (
            with(
                "/spec/volumes/0",
                json!({"name": "n", "nfs": {"server": "x", "path": "/"}}),
            ),
            "baseline",
            "restrictedVolumes",
        ),
    ];
    for (t, level, id) in cases {
        let (got, v) = pod_security_level(&t);
        assert_eq!(got, level, "{id}: {v:?}");
        assert!(v.iter().any(|(i, _)| *i == id), "{id}: {v:?}");
    }
    // hostNetwork alone: the defaulted hostPort makes hostPorts fail too.
    let mut t = with("/spec/securityContext/runAsNonRoot", json!(true));
    t["spec"]["hostNetwork"] = json!(true);
    let (got, v) = pod_security_level(&t);
    let ids: Vec<&str> = v.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        (got, ids),
        ("privileged", vec!["hostNamespaces", "hostPorts"])
    );
}

// ---------------------------------------------------------------------------------------------
// The alerting rules and the dashboard (deploy/prometheus, deploy/grafana).
// ---------------------------------------------------------------------------------------------

/// `promtool ARGS` in `dir`; panics with promtool's output when it fails.
fn promtool(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool (scripts/setup installs Debian's prometheus package)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {} in {}:\n{text}",
        args.join(" "),
        dir.display()
    );
    text
}

/// The rules file passes `promtool check rules` and its unit tests (`promtool test rules`), and
/// each overlay's PrometheusRule holds the same groups: the same unit tests pass on its spec.
#[test]
fn alerting_rules_pass_promtool_and_the_prometheus_rule_is_the_same() {
    let dir = deploy_dir().join("prometheus");
    eprint!(
        "{}",
        promtool(&dir, &["check", "rules", "joinguard-rules.yaml"])
    );
    eprint!(
        "{}",
        promtool(&dir, &["test", "rules", "joinguard-rules.test.yaml"])
    );
    // The plain file as JSON (PyYAML: kubernetes-validate, which scripts/setup installs, pulls
    // it in), to compare with kubectl's JSON of the PrometheusRule.
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
        ])
        .arg(dir.join("joinguard-rules.yaml"))
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (addr, _h) = discovery_stand_in();
    for overlay in OVERLAYS {
        let objs = kubectl_objects(addr, overlay);
        let rule = find(&objs, "PrometheusRule")
            .unwrap_or_else(|| panic!("overlays/{overlay}: no PrometheusRule"));
        assert_eq!(
            rule["spec"]["groups"], plain["groups"],
            "overlays/{overlay}: the PrometheusRule's groups differ from deploy/prometheus/joinguard-rules.yaml"
        );
        // The same unit tests on the PrometheusRule's own copy, as Prometheus would load it.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("joinguard-rules.yaml"),
            serde_json::to_string_pretty(&rule["spec"]).unwrap(),
        )
        .unwrap();
        std::fs::copy(
            dir.join("joinguard-rules.test.yaml"),
            tmp.path().join("joinguard-rules.test.yaml"),
        )
        .unwrap();
        promtool(tmp.path(), &["check", "rules", "joinguard-rules.yaml"]);
        promtool(tmp.path(), &["test", "rules", "joinguard-rules.test.yaml"]);
        eprintln!(
            "overlays/{overlay}: PrometheusRule {} passes the same tests",
            rule["metadata"]["name"]
        );
    }
}

/// The metric families the monitor registers, read from its registration code
/// (`joinguard-core/src/monitor/metrics.rs`: `registry.register("name", ..)` and
/// `register_with_unit("name", .., Unit::Seconds, ..)` under the `joinguard` prefix), so a
/// renamed family changes this list. A family with no series yet is left out of a scrape, so the
/// exposition alone would not list them all.
fn registered_families() -> BTreeSet<String> {
    let src = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../joinguard-core/src/monitor/metrics.rs"),
    )
    .unwrap();
    assert!(src.contains("Registry::with_prefix(\"joinguard\")"));
    let mut names = BTreeSet::new();
    for call in ["registry.register(", "registry.register_with_unit("] {
        for (i, _) in src.match_indices(call) {
            let args = &src[i + call.len()..];
            let q = args.find('"').unwrap();
            let name = &args[q + 1..];
            let name = &name[..name.find('"').unwrap()];
            let unit = if call.ends_with("with_unit(") {
                let u = &args[args.find("Unit::").unwrap() + 6..];
                match &u[..u.find(|c: char| !c.is_ascii_alphanumeric()).unwrap()] {
                    "Seconds" => "_seconds",
                    "Bytes" => "_bytes",
                    other => panic!("unit {other}: add its suffix here"),
                }
            } else {
                ""
            };
            names.insert(format!("joinguard_{name}{unit}"));
        }
    }
    names
}

/// Whether `sample` is a sample name of one of `families` (a counter's `_total`, a histogram's
/// `_bucket`, `_sum` and `_count`).
fn is_exported(sample: &str, families: &BTreeSet<String>) -> bool {
    ["", "_total", "_bucket", "_sum", "_count"].iter().any(|s| {
        sample
            .strip_suffix(s)
            .is_some_and(|base| families.contains(base))
    })
}

/// Every `joinguard_*` name in `text`.
fn joinguard_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("joinguard_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        // Not part of a longer word (`pkg_joinguard_x`).
        let before = rest[..i].chars().last();
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// The check names a `check` matcher in `text` uses (`check="X"`, `check=~"X|Y"`).
fn check_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for op in ["check=\"", "check!=\"", "check=~\"", "check!~\""] {
        for (i, _) in text.match_indices(op) {
            let v = &text[i + op.len()..];
            let v = &v[..v.find('"').unwrap_or(0)];
            names.extend(v.split('|').map(str::to_string));
        }
    }
    names
}

/// The dashboard parses as JSON, and the dashboard, the rules and the rules' unit tests use only
/// metric names the monitor exports and check names the checker has: a renamed metric or check
/// fails here.
#[test]
fn dashboard_and_rules_use_only_what_the_monitor_exports() {
    let exported = registered_families();
    // Sanity: the parse found the families, and they are what the registry exposes (every
    // family with a series in a fresh registry is one of them).
    assert!(exported.len() >= 17, "{exported:?}");
    let fresh = joinguard_core::monitor::Metrics::new().openmetrics();
    for line in fresh.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(
            exported.contains(name.trim_end_matches("_total")),
            "{name} is exposed but not found in the registration code"
        );
    }
    let checks: BTreeSet<String> = joinguard_core::check::CheckName::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    let dash_path = deploy_dir().join("grafana/joinguard-monitor.json");
    let dash_text = std::fs::read_to_string(&dash_path).unwrap();
    let dash: Value =
        serde_json::from_str(&dash_text).unwrap_or_else(|e| panic!("{}: {e}", dash_path.display()));
    let exprs: Vec<&str> = arr(&dash["panels"])
        .iter()
        .flat_map(|p| arr(&p["targets"]))
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs.len() >= 10, "dashboard has {} queries", exprs.len());
    let mut problems = Vec::new();
    for rel in [
        "grafana/joinguard-monitor.json",
        "prometheus/joinguard-rules.yaml",
        "prometheus/joinguard-rules.test.yaml",
        "components/prometheus-rules/prometheusrule.yaml",
    ] {
        let text = std::fs::read_to_string(deploy_dir().join(rel)).unwrap();
        let used = joinguard_names(&text);
        if used.is_empty() {
            problems.push(format!("{rel}: uses no joinguard_ metric"));
        }
        for n in &used {
            if !is_exported(n, &exported) {
                problems.push(format!("{rel}: {n} is not a metric the monitor exports"));
            }
        }
        for c in check_names(&text) {
            if !checks.contains(&c) {
                problems.push(format!("{rel}: check {c:?} is not a check name"));
            }
        }
        eprintln!("{rel}: {} metric names, all exported", used.len());
    }
    assert!(
        problems.is_empty(),
        "{}\nexported: {exported:?}",
        problems.join("\n")
    );
}
