//! `joinguard update-status`: the control-plane join's status writes, idempotent, each on its own
//! retry policy.
//!
//! Which writes depends on the cluster's era, read from `kube-system/kubeadm-config`:
//! - **ClusterStatus era** (kubeadm < 1.22, the ConfigMap has a `ClusterStatus` key): set
//!   `apiEndpoints[<node>]` in it, then create or update the Role and RoleBinding
//!   `kubeadm:nodes-kubeadm-config` (kubeadm's `uploadconfig.UploadConfiguration`).
//! - **Modern**: mark the Node as a control-plane node: the `node-role.kubernetes.io/control-plane`
//!   label and the `NoSchedule` taint (kubeadm's `markcontrolplane`).
//!
//! Every write is a read-modify-write on [`retry::run_mutation`]: a 409 re-reads and re-applies,
//! a transient failure re-reads after the backoff (so a write that landed before its answer was
//! lost is seen and not repeated), and an object already as wanted is not written at all.
//! This module decides *what* to write; [`crate::kube`] speaks HTTP and [`crate::retry`] decides
//! when to try again.

pub(crate) mod report;

use std::net::IpAddr;
use std::time::Duration;

use tokio::time::Instant;

use serde_json::{json, Value};

use crate::input::{Input, Named, Spelling};
use crate::joinconfig::{JoinConfig, DEFAULT_BIND_PORT};
use crate::kube::ApiClient;
use crate::retry::{
    self, ApiCallError, ApiError, Budgets, Changed, NotFound, Recorder, RetryError, RetryPolicy,
    WakeOnConnect,
};
use crate::spec::StatusSpec;

pub use report::{OpResult, StatusReport};

/// The ConfigMap kubeadm keeps its cluster configuration in.
pub const KUBEADM_CONFIG: &str = "kubeadm-config";
/// Role and RoleBinding that let joining nodes read it (`NodesKubeadmConfigClusterRoleName`).
pub const NODES_KUBEADM_CONFIG: &str = "kubeadm:nodes-kubeadm-config";
/// Bootstrap-token group of joining nodes (`NodeBootstrapTokenAuthGroup`).
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// Every kubelet's group.
pub const NODES_GROUP: &str = "system:nodes";
/// The control-plane label and taint key (`constants.LabelNodeRoleControlPlane`).
pub const CONTROL_PLANE_ROLE: &str = "node-role.kubernetes.io/control-plane";

const CONFIG_MAP_PATH: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
const ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles";
const ROLE_BINDINGS: &str =
    "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings";

/// Which generation of kubeadm laid out the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    ClusterStatus,
    Modern,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::ClusterStatus => "cluster-status",
            Era::Modern => "modern",
        }
    }
}

/// What update-status works with, validated.
#[derive(Debug)]
pub struct StatusInput {
    pub(crate) client: ApiClient,
    pub(crate) node_name: String,
    pub(crate) advertise_address: Option<IpAddr>,
    pub(crate) bind_port: u16,
    pub(crate) budgets: Budgets,
    /// The whole command's deadline.
    pub(crate) timeout: Duration,
    /// How the user spelled the inputs, for a message about them.
    pub(crate) spelling: Spelling,
}

/// How one operation ended.
#[derive(Debug)]
pub enum OpOutcome {
    Changed,
    AlreadyInPlace,
    Failed(RetryError<ApiCallError>),
}

/// The run: the era (when it was learned) and each operation's outcome.
#[derive(Debug)]
pub struct Run {
    pub era: Option<Era>,
    pub ops: Vec<OpResult>,
    pub elapsed: Duration,
    /// Input the cluster turned out to need but that was not given (exit 2).
    pub input_error: Option<String>,
}

/// Runs update-status to its end. Stops at the first failed operation: later writes assume the
/// earlier ones (kubeadm's phases do too).
pub async fn update_status(input: &StatusInput, recorder: &Recorder) -> Run {
    let started = Instant::now();
    let deadline = started + input.timeout;
    let wake = input.client.socket_addr().map(WakeOnConnect::new);
    let wake = wake.as_ref();
    let with_deadline = |p: RetryPolicy| p.with_deadline(deadline);
    let mut ops = Vec::new();

    // The era: one read. It belongs to a group with writes, so it runs on the write policy
    // (docs/retries.md: "groups with at least one write"): a 20 s outage must not end the join at the
    // read policy's 15 s. A missing kubeadm-config is not something to wait for.
    let op = "kube-system/kubeadm-config get";
    let read = with_deadline(input.budgets.write());
    let t0 = Instant::now();
    let config = retry::run(&read, op, recorder, wake, |ctx| {
        input.client.get(CONFIG_MAP_PATH, ctx.timeout)
    })
    .await;
    let cm = match config {
        Ok(cm) => cm,
        Err(e) => {
            let n = calls(recorder, op);
            ops.push(OpResult::new(
                op,
                "read the cluster's layout",
                t0,
                n,
                OpOutcome::Failed(e),
            ));
            return Run {
                era: None,
                ops,
                elapsed: started.elapsed(),
                input_error: None,
            };
        }
    };
    let era = if cm.pointer("/data/ClusterStatus").is_some() {
        Era::ClusterStatus
    } else {
        Era::Modern
    };
    ops.push(OpResult::new(
        op,
        match era {
            Era::ClusterStatus => "ClusterStatus present (kubeadm < 1.22 layout)",
            Era::Modern => "no ClusterStatus (kubeadm >= 1.22 layout)",
        },
        t0,
        calls(recorder, op),
        OpOutcome::AlreadyInPlace,
    ));

    let write = with_deadline(input.budgets.write());
    match era {
        Era::ClusterStatus => {
            let Some(addr) = input.advertise_address else {
                return Run {
                    era: Some(era),
                    ops,
                    elapsed: started.elapsed(),
                    input_error: Some(format!(
                        "this cluster keeps a ClusterStatus (kubeadm < 1.22): give {} (or \
                         controlPlane.localAPIEndpoint in {}) so its apiEndpoints entry can be \
                         written",
                        input.spelling.spell(Input::ApiserverAdvertiseAddress),
                        input.spelling.spell(Input::Config),
                    )),
                };
            };
            let endpoint =
                json!({"advertiseAddress": addr.to_string(), "bindPort": input.bind_port});
            let steps: [(&str, String, Step); 3] = [
                (
                    "kube-system/kubeadm-config update",
                    format!(
                        "ClusterStatus.apiEndpoints[{}] = {addr}:{}",
                        input.node_name, input.bind_port
                    ),
                    Step::Endpoint(&endpoint),
                ),
                (
                    "kube-system/role kubeadm:nodes-kubeadm-config",
                    "Role: get configmaps/kubeadm-config".to_string(),
                    Step::Role,
                ),
                (
                    "kube-system/rolebinding kubeadm:nodes-kubeadm-config",
                    format!("RoleBinding to {BOOTSTRAP_GROUP} and {NODES_GROUP}"),
                    Step::RoleBinding,
                ),
            ];
            for (op, what, step) in steps {
                let t0 = Instant::now();
                let outcome = step.run(input, &write, op, recorder, wake).await;
                let failed = matches!(outcome, OpOutcome::Failed(_));
                ops.push(OpResult::new(op, &what, t0, calls(recorder, op), outcome));
                if failed {
                    break;
                }
            }
        }
        Era::Modern => {
            let op = "node mark-control-plane";
            let what = format!(
                "Node {}: label {CONTROL_PLANE_ROLE}, taint {CONTROL_PLANE_ROLE}:NoSchedule",
                input.node_name
            );
            let t0 = Instant::now();
            // The kubelet may not have registered the Node yet: wait for it (kubeadm does too).
            let policy = write.clone().on_not_found(NotFound::Transient);
            let outcome = Step::MarkNode.run(input, &policy, op, recorder, wake).await;
            ops.push(OpResult::new(op, &what, t0, calls(recorder, op), outcome));
        }
    }
    Run {
        era: Some(era),
        ops,
        elapsed: started.elapsed(),
        input_error: None,
    }
}

/// Why `update-status`'s inputs cannot be used (exit 2). Each names its input as the user gave
/// it.
#[derive(Debug, thiserror::Error)]
pub enum StatusInputError {
    #[error(transparent)]
    Mixed(#[from] crate::kubeadm::flags::MixedConfig),
    #[error("{input} {source}")]
    Config {
        input: Named,
        #[source]
        source: crate::joinconfig::JoinConfigError,
    },
    #[error(
        "{input} {}: the JoinConfiguration has no controlPlane section: this is a worker join, \
         which has no status to write",
        path.display()
    )]
    Worker {
        input: Named,
        path: std::path::PathBuf,
    },
    #[error("{0}: not given and the hostname cannot be read; give the node's name")]
    NoHostname(Named),
    #[error(
        "{input} {name:?}: not a valid node name (lowercase letters, digits, '-' and '.', at \
         most 253 characters)"
    )]
    NodeName { input: Named, name: String },
    #[error("{0}: must be more than 0")]
    ZeroTimeout(Named),
    #[error(transparent)]
    Client(#[from] crate::kube::ClientError),
    /// A proxy variable in the environment that Go would refuse too.
    #[error("the environment's {0}")]
    Proxy(#[from] crate::proxy::ProxyEnvError),
}

impl StatusInput {
    /// The API server the writes go to, as `https://host:port`.
    pub fn server(&self) -> String {
        self.client.server()
    }

    /// The node whose status is written.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Validates the flags (and the files they name) into an input. Every error names its flag.
    pub fn from_spec(
        a: &StatusSpec,
        notes: &dyn crate::notes::Notes,
    ) -> Result<StatusInput, StatusInputError> {
        let mut node_name = a.node_name.clone();
        let mut advertise_address = a.apiserver_advertise_address;
        let mut bind_port = a.apiserver_bind_port;
        let mut budgets = Budgets::default();
        let name = |i: Input| a.spelling.name(i);
        if let Some(path) = &a.config {
            // kubeadm's rule for --config beside flags (`ValidateMixedArguments`): --node-name
            // may stand beside it, the local API endpoint flags may not.
            let given: Vec<String> = a
                .given
                .iter()
                .filter(|f| crate::kubeadm::flags::lookup(f).is_some())
                .cloned()
                .collect();
            if let Some(e) = crate::kubeadm::flags::mixed_config_error(&given) {
                return Err(e.into());
            }
            let c = JoinConfig::load(path).map_err(|source| StatusInputError::Config {
                input: name(Input::Config),
                source,
            })?;
            for w in &c.warnings {
                notes.note(&format!(
                    "[update-status] WARNING: {} {}: {w}",
                    name(Input::Config),
                    path.display()
                ));
            }
            let Some((addr, port)) = c.local_api_endpoint else {
                return Err(StatusInputError::Worker {
                    input: name(Input::Config),
                    path: path.clone(),
                });
            };
            // --node-name overrides the file, as in kubeadm's newJoinData.
            if node_name.is_none() {
                node_name = c.node_name;
            }
            advertise_address = addr;
            bind_port = Some(port);
            budgets = Budgets::from_v1beta4(c.kubernetes_api_call, c.etcd_api_call);
        }
        let node_name = match node_name {
            Some(n) => n,
            None => {
                hostname().ok_or_else(|| StatusInputError::NoHostname(name(Input::NodeName)))?
            }
        };
        if !is_dns_subdomain(&node_name) {
            return Err(StatusInputError::NodeName {
                input: name(Input::NodeName),
                name: node_name,
            });
        }
        if a.timeout.is_zero() {
            return Err(StatusInputError::ZeroTimeout(name(Input::Timeout)));
        }
        // The API calls go where kubeadm's client-go calls go: through the proxy the
        // environment names for the kubeconfig's server, if any.
        let proxy = crate::proxy::ProxyEnv::from_env(&|k| std::env::var(k).ok())?;
        let client = ApiClient::from_kubeconfig(
            &name(Input::Kubeconfig),
            &a.kubeconfig,
            a.context.as_deref(),
        )?
        .through_env(&proxy);
        Ok(StatusInput {
            client,
            node_name,
            advertise_address,
            bind_port: bind_port.unwrap_or(DEFAULT_BIND_PORT),
            budgets,
            timeout: a.timeout,
            spelling: a.spelling,
        })
    }
}

fn hostname() -> Option<String> {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let h = h.trim().to_ascii_lowercase();
    (!h.is_empty()).then_some(h)
}

/// RFC 1123 subdomain, as Node names must be.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

enum Step<'a> {
    Endpoint(&'a Value),
    Role,
    RoleBinding,
    MarkNode,
}

impl Step<'_> {
    async fn run(
        &self,
        input: &StatusInput,
        policy: &RetryPolicy,
        op: &str,
        recorder: &Recorder,
        wake: Option<&WakeOnConnect>,
    ) -> OpOutcome {
        let c = &input.client;
        let result = match self {
            Step::Endpoint(endpoint) => retry::run_mutation(
                policy,
                op,
                recorder,
                wake,
                || c.get(CONFIG_MAP_PATH, policy.per_attempt),
                |cm: &mut Value| {
                    require_resource_version(cm, "kube-system/kubeadm-config")?;
                    set_api_endpoint(cm, &input.node_name, endpoint)
                },
                |cm| async move { c.update(CONFIG_MAP_PATH, &cm, policy.per_attempt).await },
            )
            .await
            .map(|m| m.changed),
            Step::Role => {
                let path = format!("{ROLES}/{}", crate::kube::segment(NODES_KUBEADM_CONFIG));
                create_or_update(
                    c,
                    policy,
                    op,
                    recorder,
                    wake,
                    ROLES,
                    &path,
                    desired_role(),
                    |have, want| have.get("rules") == want.get("rules"),
                )
                .await
                .map(|m| m.changed)
            }
            Step::RoleBinding => {
                let path = format!(
                    "{ROLE_BINDINGS}/{}",
                    crate::kube::segment(NODES_KUBEADM_CONFIG)
                );
                create_or_update(
                    c,
                    policy,
                    op,
                    recorder,
                    wake,
                    ROLE_BINDINGS,
                    &path,
                    desired_role_binding(),
                    |have, want| {
                        have.get("roleRef") == want.get("roleRef")
                            && have.get("subjects") == want.get("subjects")
                    },
                )
                .await
                .map(|m| m.changed)
            }
            Step::MarkNode => {
                let path = format!("/api/v1/nodes/{}", crate::kube::segment(&input.node_name));
                let path = path.as_str();
                retry::run_mutation(
                    policy,
                    op,
                    recorder,
                    wake,
                    || c.get(path, policy.per_attempt),
                    |node: &mut Value| {
                        require_resource_version(node, path)?;
                        mark_control_plane(node)
                    },
                    |node| async move { c.update(path, &node, policy.per_attempt).await },
                )
                .await
                .map(|m| m.changed)
            }
        };
        match result {
            Ok(true) => OpOutcome::Changed,
            Ok(_) => OpOutcome::AlreadyInPlace,
            Err(e) => OpOutcome::Failed(e),
        }
    }
}

/// Create-or-update of an object we own entirely: read it (404 is an answer), create it when
/// missing, replace its spec fields when they differ, leave it alone when they match. A create
/// that meets AlreadyExists (another joiner won the race) re-reads, like a 409 on an update.
#[allow(clippy::too_many_arguments)]
async fn create_or_update(
    c: &ApiClient,
    policy: &RetryPolicy,
    op: &str,
    recorder: &Recorder,
    wake: Option<&WakeOnConnect>,
    collection: &str,
    path: &str,
    want: Value,
    same: impl Fn(&Value, &Value) -> bool,
) -> Result<retry::Mutation<Option<Value>>, RetryError<ApiCallError>> {
    let want = &want;
    let same = &same;
    retry::run_mutation(
        policy,
        op,
        recorder,
        wake,
        || async move {
            match c.get(path, policy.per_attempt).await {
                Ok(v) => Ok(Some(v)),
                Err(ApiCallError::Status(e)) if e.status == 404 => Ok(None),
                Err(e) => Err(e),
            }
        },
        |have: &mut Option<Value>| {
            match have {
                Some(h) if same(h, want) => return Ok(Changed::No),
                Some(h) => {
                    require_resource_version(h, path)?;
                    let h = h
                        .as_object_mut()
                        .ok_or_else(|| malformed(path, "the server's answer is not an object"))?;
                    for (k, v) in want.as_object().into_iter().flatten() {
                        if k != "metadata" && k != "apiVersion" && k != "kind" {
                            h.insert(k.clone(), v.clone());
                        }
                    }
                }
                None => *have = Some(want.clone()),
            }
            Ok(Changed::Yes)
        },
        |obj| async move {
            let obj = obj.unwrap_or_default();
            let exists = obj.pointer("/metadata/resourceVersion").is_some();
            let r = if exists {
                c.update(path, &obj, policy.per_attempt).await
            } else {
                c.create(collection, &obj, policy.per_attempt).await
            };
            match r {
                Ok(v) => Ok(Some(v)),
                // Someone created it between our read and our create: read it again.
                Err(ApiCallError::Status(e)) if e.is_already_exists() => {
                    Err(ApiCallError::Status(ApiError {
                        status: 409,
                        reason: Some("Conflict".into()),
                        message: format!("{} (created concurrently; reading it again)", e.message),
                        retry_after: None,
                    }))
                }
                Err(e) => Err(e),
            }
        },
    )
    .await
}

fn desired_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": NODES_KUBEADM_CONFIG, "namespace": "kube-system"},
        "rules": [{
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [KUBEADM_CONFIG],
            "verbs": ["get"],
        }],
    })
}

fn desired_role_binding() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": NODES_KUBEADM_CONFIG, "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NODES_KUBEADM_CONFIG},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BOOTSTRAP_GROUP},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": NODES_GROUP},
        ],
    })
}

/// Sets `apiEndpoints[node]` in the ConfigMap's ClusterStatus, keeping every other key, entry and
/// field. The ClusterStatus is YAML inside a string; it is re-serialised only when it changes.
pub fn set_api_endpoint(
    cm: &mut Value,
    node: &str,
    endpoint: &Value,
) -> Result<Changed, ApiCallError> {
    let bad = |why: String| {
        ApiCallError::Status(ApiError {
            status: 422,
            reason: Some("Invalid".into()),
            message: format!("kube-system/kubeadm-config: {why}; not changing it"),
            retry_after: None,
        })
    };
    let text = cm
        .pointer("/data/ClusterStatus")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("the ClusterStatus key is gone".into()))?;
    let mut status: Value =
        crate::yaml::from_str(text).map_err(|e| bad(format!("ClusterStatus is not YAML ({e})")))?;
    let want = endpoint.clone();
    let map = status
        .get_mut("apiEndpoints")
        .and_then(Value::as_object_mut)
        // kubeadm's mutator errors on a nil map too: the object is not what kubeadm wrote.
        .ok_or_else(|| bad("ClusterStatus has no apiEndpoints map".into()))?;
    if map.get(node) == Some(&want) {
        return Ok(Changed::No);
    }
    map.insert(node.to_string(), want);
    let text = crate::yaml::to_string(&status).map_err(|e| bad(e.to_string()))?;
    cm["data"]["ClusterStatus"] = Value::String(text);
    Ok(Changed::Yes)
}

/// An object the server sent that is not what Kubernetes writes: a permanent error (422), never
/// retried, never "fixed" by writing over it.
fn malformed(what: &str, why: &str) -> ApiCallError {
    ApiCallError::Status(ApiError {
        status: 422,
        reason: Some("Invalid".into()),
        message: format!("{what}: {why}; not changing it"),
        retry_after: None,
    })
}

/// A replace (PUT) is conditional on the `resourceVersion` read: without one it would overwrite
/// whatever is there now, so an object that came back without it is not written.
fn require_resource_version(obj: &Value, what: &str) -> Result<(), ApiCallError> {
    match obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(rv) if !rv.is_empty() => Ok(()),
        _ => Err(malformed(
            what,
            "the server's answer has no metadata.resourceVersion, so a replace could overwrite a \
             concurrent change",
        )),
    }
}

/// `obj[key]` as a JSON object, made when missing or null; an error (never a panic) when the
/// server put something else there.
fn object_field<'a>(
    obj: &'a mut Value,
    key: &str,
    what: &str,
) -> Result<&'a mut serde_json::Map<String, Value>, ApiCallError> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| malformed(what, "the server's answer is not an object"))?;
    let field = map.entry(key).or_insert(Value::Null);
    if field.is_null() {
        *field = json!({});
    }
    field
        .as_object_mut()
        .ok_or_else(|| malformed(what, &format!("`{key}` is not an object")))
}

/// Adds the control-plane label and `NoSchedule` taint to a Node, keeping every other label and
/// taint (kubeadm's `markControlPlaneNode`). A Node whose fields are not what Kubernetes writes
/// is an error, not a panic.
pub(crate) fn mark_control_plane(node: &mut Value) -> Result<Changed, ApiCallError> {
    const WHAT: &str = "the Node";
    let mut changed = Changed::No;
    let metadata = object_field(node, "metadata", WHAT)?;
    let labels = metadata.entry("labels").or_insert(Value::Null);
    if labels.is_null() {
        *labels = json!({});
    }
    let labels = labels
        .as_object_mut()
        .ok_or_else(|| malformed(WHAT, "metadata.labels is not an object"))?;
    if labels.get(CONTROL_PLANE_ROLE) != Some(&json!("")) {
        labels.insert(CONTROL_PLANE_ROLE.to_string(), json!(""));
        changed = Changed::Yes;
    }
    let spec = object_field(node, "spec", WHAT)?;
    let taints = spec.entry("taints").or_insert(Value::Null);
    if taints.is_null() {
        *taints = json!([]);
    }
    let list = taints
        .as_array_mut()
        .ok_or_else(|| malformed(WHAT, "spec.taints is not a list"))?;
    let has = list.iter().any(|t| {
        t.get("key") == Some(&json!(CONTROL_PLANE_ROLE))
            && t.get("effect") == Some(&json!("NoSchedule"))
    });
    if !has {
        list.push(json!({"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"}));
        changed = Changed::Yes;
    }
    Ok(changed)
}

/// API calls made for `op` so far: the recorder keeps one record per call.
fn calls(recorder: &Recorder, op: &str) -> u32 {
    let n = recorder.records().iter().filter(|r| r.op == op).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(status: &str) -> Value {
        json!({"data": {"ClusterConfiguration": "kind: ClusterConfiguration\n", "ClusterStatus": status}})
    }

    const STATUS: &str = "apiEndpoints:\n  cp-1:\n    advertiseAddress: 10.0.0.11\n    bindPort: 6443\napiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterStatus\n";

    /// Whatever the server sends as a Node, marking it is an answer, never a panic: the
    /// malformed shapes are refused with the field named.
    #[test]
    fn a_malformed_node_is_refused_not_a_panic() {
        for (node, field) in [
            (json!("a string"), "not an object"),
            (json!([1, 2]), "not an object"),
            (json!({"metadata": "x"}), "`metadata` is not an object"),
            (json!({"metadata": {"labels": ["a"]}}), "metadata.labels"),
            (
                json!({"metadata": {}, "spec": 7}),
                "`spec` is not an object",
            ),
            (
                json!({"metadata": {}, "spec": {"taints": "x"}}),
                "spec.taints",
            ),
        ] {
            let mut n = node.clone();
            let e = mark_control_plane(&mut n).unwrap_err();
            assert!(e.to_string().contains(field), "{node}: {e}");
        }
        // Missing or null fields are made, as kubeadm's mutator makes them.
        let mut n = json!({"metadata": {"name": "cp-2", "labels": null}});
        assert_eq!(mark_control_plane(&mut n).unwrap(), Changed::Yes);
        assert_eq!(n["spec"]["taints"][0]["effect"], "NoSchedule");
    }

    /// A replace needs the resourceVersion it read; an answer without one is not written over.
    #[test]
    fn an_object_without_a_resource_version_is_not_replaced() {
        for obj in [
            json!({"metadata": {"name": "x"}}),
            json!({"metadata": {"resourceVersion": ""}}),
            json!({"metadata": {"resourceVersion": 5}}),
            json!("x"),
        ] {
            let e = require_resource_version(&obj, "kube-system/kubeadm-config").unwrap_err();
            let ApiCallError::Status(e) = e else {
                panic!("{obj}: not a status error")
            };
            assert_eq!(e.status, 422, "{obj}");
            assert!(
                e.message.contains("no metadata.resourceVersion"),
                "{}",
                e.message
            );
        }
        assert!(
            require_resource_version(&json!({"metadata": {"resourceVersion": "1234"}}), "x")
                .is_ok()
        );
    }

    #[test]
    fn sets_one_endpoint_and_keeps_the_rest() {
        let mut c = cm(STATUS);
        let ep = json!({"advertiseAddress": "10.0.0.12", "bindPort": 6443});
        assert_eq!(set_api_endpoint(&mut c, "cp-2", &ep).unwrap(), Changed::Yes);
        let s: Value = crate::yaml::from_str(c["data"]["ClusterStatus"].as_str().unwrap()).unwrap();
        assert_eq!(s["apiEndpoints"]["cp-1"]["advertiseAddress"], "10.0.0.11");
        assert_eq!(s["apiEndpoints"]["cp-2"]["advertiseAddress"], "10.0.0.12");
        assert_eq!(s["kind"], "ClusterStatus");
        assert_eq!(
            c["data"]["ClusterConfiguration"],
            "kind: ClusterConfiguration\n"
        );
        // Idempotent: the second application changes nothing.
        let before = c.clone();
        assert_eq!(set_api_endpoint(&mut c, "cp-2", &ep).unwrap(), Changed::No);
        assert_eq!(c, before);
    }

    #[test]
    fn a_changed_address_is_updated() {
        let mut c = cm(STATUS);
        let ep = json!({"advertiseAddress": "10.0.0.99", "bindPort": 6443});
        assert_eq!(set_api_endpoint(&mut c, "cp-1", &ep).unwrap(), Changed::Yes);
        assert!(c["data"]["ClusterStatus"]
            .as_str()
            .unwrap()
            .contains("10.0.0.99"));
    }

    #[test]
    fn a_status_without_api_endpoints_is_refused() {
        let mut c = cm("kind: ClusterStatus\n");
        let e = set_api_endpoint(&mut c, "cp-2", &json!({})).unwrap_err();
        assert!(e.to_string().contains("no apiEndpoints map"), "{e}");
    }

    #[test]
    fn marking_keeps_other_labels_and_taints_and_is_idempotent() {
        let mut n = json!({
            "metadata": {"name": "cp-2", "labels": {"kubernetes.io/hostname": "cp-2"}},
            "spec": {"taints": [{"key": "example.com/gpu", "effect": "NoExecute"}]},
        });
        assert_eq!(mark_control_plane(&mut n).unwrap(), Changed::Yes);
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/hostname"], "cp-2");
        assert_eq!(n["metadata"]["labels"][CONTROL_PLANE_ROLE], "");
        let taints = n["spec"]["taints"].as_array().unwrap();
        assert_eq!(taints.len(), 2);
        assert_eq!(taints[0]["key"], "example.com/gpu");
        assert_eq!(mark_control_plane(&mut n).unwrap(), Changed::No);
        let mut bare = json!({"metadata": {"name": "cp-3"}, "spec": {}});
        assert_eq!(mark_control_plane(&mut bare).unwrap(), Changed::Yes);
        assert_eq!(bare["spec"]["taints"][0]["effect"], "NoSchedule");
    }
}
