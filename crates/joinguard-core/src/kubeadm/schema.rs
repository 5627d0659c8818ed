//! kubeadm's configuration documents as field tables (json names and value shapes), and a
//! walker that checks a parsed document against them.
//!
//! The tables are the json tags of kubeadm's Go types. Sources:
//! - v1beta3: kubernetes/kubernetes `cmd/kubeadm/app/apis/kubeadm/v1beta3/types.go` at
//!   008b3652959ca58af8be3fb5b6ecfe9ae7638282 (v1beta3 has been frozen since 1.22).
//! - v1beta4: kubernetes/website `content/en/docs/reference/config-api/kubeadm-config.v1beta4.md`
//!   at 020646fa057776539a3b80b598fda1946406c6f4 (generated from the 1.31 types: `timeouts`,
//!   `imagePullSerial`, `extraEnvs`, `encryptionAlgorithm`, the validity periods, `dns.disabled`,
//!   `proxy.disabled`); the stored `v1beta4/types.go` (017b1e4b, 2023) predates those fields and
//!   was used for the json tags they share.
//! - `bootstrapTokens[]`: `cmd/kubeadm/app/apis/bootstraptoken/v1/types.go` at 2d350a35.
//! - `taints[]`: k8s.io/api `core/v1` `Taint` (`key`, `value`, `effect`, `timeAdded`).
//! - `extraEnvs[]`: core/v1 `EnvVar` (`name`, `value`, `valueFrom`); `valueFrom` is core/v1's own
//!   tree and is not walked.
//!
//! kubeadm decodes with sigs.k8s.io/json, which matches keys case-sensitively, and warns about
//! unknown fields without failing (strict decoding errors are printed as warnings). The walker
//! does the same: an unknown field is a warning naming its path and the nearest known field,
//! never an error; a value of the wrong type is an error, as kubeadm's decoder fails on it.
//!
//! The walker works on [`Node`], a YAML-crate-independent tree, so the YAML parser can be
//! replaced without touching the tables. It reads no files and prints nothing.

use super::nearest;

/// A parsed YAML/JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The child at `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The node at a dotted path of mapping keys.
    pub fn at(&self, path: &[&str]) -> Option<&Node> {
        path.iter().try_fold(self, |n, k| n.get(k))
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::Seq(_) => "a list",
            Node::Map(_) => "a mapping",
        }
    }
}

/// Any YAML or JSON value as a [`Node`]; mapping keys that are not strings (`6443:`, `true:`)
/// become their text, as kubeadm's decoder (sigs.k8s.io/yaml, through JSON) sees them.
impl<'de> serde::Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> serde::de::Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
        Ok(Node::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Node, E> {
        Ok(Node::Int(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Node, E> {
        Ok(i64::try_from(u).map_or(Node::Float(u as f64), Node::Int))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Node, E> {
        Ok(Node::Float(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Node, E> {
        Ok(Node::Str(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Node, E> {
        Ok(Node::Str(s))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<Node, Node>()? {
            let key = match key {
                Node::Str(s) => s,
                Node::Null => "null".to_string(),
                Node::Bool(b) => b.to_string(),
                Node::Int(i) => i.to_string(),
                Node::Float(f) => f.to_string(),
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "a mapping key is {}, not a scalar",
                        other.type_name()
                    )))
                }
            };
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

/// The shape of a field's value.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Str,
    Bool,
    Int,
    /// A metav1.Duration string (`40s`, `2m0s`).
    Duration,
    StrList,
    /// `map[string]string` (v1beta3 extra args): any keys.
    StrMap,
    /// `map[string]bool` (feature gates): any keys.
    BoolMap,
    Struct(&'static [Field]),
    List(&'static Shape),
    /// Not walked (a core/v1 subtree).
    Any,
}

/// One json field of a Go struct.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub shape: Shape,
}

const fn f(name: &'static str, shape: Shape) -> Field {
    Field { name, shape }
}

const TYPE_META: [Field; 2] = [f("apiVersion", Shape::Str), f("kind", Shape::Str)];

const API_ENDPOINT: &[Field] = &[f("advertiseAddress", Shape::Str), f("bindPort", Shape::Int)];
const TAINT: &[Field] = &[
    f("key", Shape::Str),
    f("value", Shape::Str),
    f("effect", Shape::Str),
    f("timeAdded", Shape::Str),
];
const ARG: &[Field] = &[f("name", Shape::Str), f("value", Shape::Str)];
const ENV_VAR: &[Field] = &[
    f("name", Shape::Str),
    f("value", Shape::Str),
    f("valueFrom", Shape::Any),
];
const BOOTSTRAP_TOKEN_DISCOVERY: &[Field] = &[
    f("token", Shape::Str),
    f("apiServerEndpoint", Shape::Str),
    f("caCertHashes", Shape::StrList),
    f("unsafeSkipCAVerification", Shape::Bool),
];
const FILE_DISCOVERY: &[Field] = &[f("kubeConfigPath", Shape::Str)];
const JOIN_CONTROL_PLANE: &[Field] = &[
    f("localAPIEndpoint", Shape::Struct(API_ENDPOINT)),
    f("certificateKey", Shape::Str),
];
const PATCHES: &[Field] = &[f("directory", Shape::Str)];
const HOST_PATH_MOUNT: &[Field] = &[
    f("name", Shape::Str),
    f("hostPath", Shape::Str),
    f("mountPath", Shape::Str),
    f("readOnly", Shape::Bool),
    f("pathType", Shape::Str),
];
const NETWORKING: &[Field] = &[
    f("serviceSubnet", Shape::Str),
    f("podSubnet", Shape::Str),
    f("dnsDomain", Shape::Str),
];
const EXTERNAL_ETCD: &[Field] = &[
    f("endpoints", Shape::StrList),
    f("caFile", Shape::Str),
    f("certFile", Shape::Str),
    f("keyFile", Shape::Str),
];
const BOOTSTRAP_TOKEN: &[Field] = &[
    f("token", Shape::Str),
    f("description", Shape::Str),
    f("ttl", Shape::Duration),
    f("expires", Shape::Str),
    f("usages", Shape::StrList),
    f("groups", Shape::StrList),
];

/// v1beta3 (`cmd/kubeadm/app/apis/kubeadm/v1beta3/types.go`).
pub mod v1beta3 {
    use super::*;

    pub const NODE_REGISTRATION: &[Field] = &[
        f("name", Shape::Str),
        f("criSocket", Shape::Str),
        f("taints", Shape::List(&Shape::Struct(TAINT))),
        f("kubeletExtraArgs", Shape::StrMap),
        f("ignorePreflightErrors", Shape::StrList),
        f("imagePullPolicy", Shape::Str),
    ];
    pub const DISCOVERY: &[Field] = &[
        f("bootstrapToken", Shape::Struct(BOOTSTRAP_TOKEN_DISCOVERY)),
        f("file", Shape::Struct(FILE_DISCOVERY)),
        f("tlsBootstrapToken", Shape::Str),
        f("timeout", Shape::Duration),
    ];
    pub const JOIN_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f("nodeRegistration", Shape::Struct(NODE_REGISTRATION)),
        f("caCertPath", Shape::Str),
        f("discovery", Shape::Struct(DISCOVERY)),
        f("controlPlane", Shape::Struct(JOIN_CONTROL_PLANE)),
        f("skipPhases", Shape::StrList),
        f("patches", Shape::Struct(PATCHES)),
    ];
    pub const INIT_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f(
            "bootstrapTokens",
            Shape::List(&Shape::Struct(BOOTSTRAP_TOKEN)),
        ),
        f("nodeRegistration", Shape::Struct(NODE_REGISTRATION)),
        f("localAPIEndpoint", Shape::Struct(API_ENDPOINT)),
        f("certificateKey", Shape::Str),
        f("skipPhases", Shape::StrList),
        f("patches", Shape::Struct(PATCHES)),
    ];
    const CONTROL_PLANE_COMPONENT: &[Field] = &[
        f("extraArgs", Shape::StrMap),
        f("extraVolumes", Shape::List(&Shape::Struct(HOST_PATH_MOUNT))),
    ];
    const API_SERVER: &[Field] = &[
        f("extraArgs", Shape::StrMap),
        f("extraVolumes", Shape::List(&Shape::Struct(HOST_PATH_MOUNT))),
        f("certSANs", Shape::StrList),
        f("timeoutForControlPlane", Shape::Duration),
    ];
    const DNS: &[Field] = &[f("imageRepository", Shape::Str), f("imageTag", Shape::Str)];
    const LOCAL_ETCD: &[Field] = &[
        f("imageRepository", Shape::Str),
        f("imageTag", Shape::Str),
        f("dataDir", Shape::Str),
        f("extraArgs", Shape::StrMap),
        f("serverCertSANs", Shape::StrList),
        f("peerCertSANs", Shape::StrList),
    ];
    const ETCD: &[Field] = &[
        f("local", Shape::Struct(LOCAL_ETCD)),
        f("external", Shape::Struct(EXTERNAL_ETCD)),
    ];
    pub const CLUSTER_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f("etcd", Shape::Struct(ETCD)),
        f("networking", Shape::Struct(NETWORKING)),
        f("kubernetesVersion", Shape::Str),
        f("controlPlaneEndpoint", Shape::Str),
        f("apiServer", Shape::Struct(API_SERVER)),
        f("controllerManager", Shape::Struct(CONTROL_PLANE_COMPONENT)),
        f("scheduler", Shape::Struct(CONTROL_PLANE_COMPONENT)),
        f("dns", Shape::Struct(DNS)),
        f("certificatesDir", Shape::Str),
        f("imageRepository", Shape::Str),
        f("featureGates", Shape::BoolMap),
        f("clusterName", Shape::Str),
    ];
}

/// v1beta4 (the 1.31 types, as the generated API reference lists them).
pub mod v1beta4 {
    use super::*;

    pub const NODE_REGISTRATION: &[Field] = &[
        f("name", Shape::Str),
        f("criSocket", Shape::Str),
        f("taints", Shape::List(&Shape::Struct(TAINT))),
        f("kubeletExtraArgs", Shape::List(&Shape::Struct(ARG))),
        f("ignorePreflightErrors", Shape::StrList),
        f("imagePullPolicy", Shape::Str),
        f("imagePullSerial", Shape::Bool),
    ];
    pub const DISCOVERY: &[Field] = &[
        f("bootstrapToken", Shape::Struct(BOOTSTRAP_TOKEN_DISCOVERY)),
        f("file", Shape::Struct(FILE_DISCOVERY)),
        f("tlsBootstrapToken", Shape::Str),
    ];
    pub const TIMEOUTS: &[Field] = &[
        f("controlPlaneComponentHealthCheck", Shape::Duration),
        f("kubeletHealthCheck", Shape::Duration),
        f("kubernetesAPICall", Shape::Duration),
        f("etcdAPICall", Shape::Duration),
        f("tlsBootstrap", Shape::Duration),
        f("discovery", Shape::Duration),
        f("upgradeManifests", Shape::Duration),
    ];
    pub const JOIN_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f("dryRun", Shape::Bool),
        f("nodeRegistration", Shape::Struct(NODE_REGISTRATION)),
        f("caCertPath", Shape::Str),
        f("discovery", Shape::Struct(DISCOVERY)),
        f("controlPlane", Shape::Struct(JOIN_CONTROL_PLANE)),
        f("skipPhases", Shape::StrList),
        f("patches", Shape::Struct(PATCHES)),
        f("timeouts", Shape::Struct(TIMEOUTS)),
    ];
    pub const INIT_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f(
            "bootstrapTokens",
            Shape::List(&Shape::Struct(BOOTSTRAP_TOKEN)),
        ),
        f("dryRun", Shape::Bool),
        f("nodeRegistration", Shape::Struct(NODE_REGISTRATION)),
        f("localAPIEndpoint", Shape::Struct(API_ENDPOINT)),
        f("certificateKey", Shape::Str),
        f("skipPhases", Shape::StrList),
        f("patches", Shape::Struct(PATCHES)),
        f("timeouts", Shape::Struct(TIMEOUTS)),
    ];
    const CONTROL_PLANE_COMPONENT: &[Field] = &[
        f("extraArgs", Shape::List(&Shape::Struct(ARG))),
        f("extraVolumes", Shape::List(&Shape::Struct(HOST_PATH_MOUNT))),
        f("extraEnvs", Shape::List(&Shape::Struct(ENV_VAR))),
    ];
    const API_SERVER: &[Field] = &[
        f("extraArgs", Shape::List(&Shape::Struct(ARG))),
        f("extraVolumes", Shape::List(&Shape::Struct(HOST_PATH_MOUNT))),
        f("extraEnvs", Shape::List(&Shape::Struct(ENV_VAR))),
        f("certSANs", Shape::StrList),
    ];
    const DNS: &[Field] = &[
        f("imageRepository", Shape::Str),
        f("imageTag", Shape::Str),
        f("disabled", Shape::Bool),
    ];
    const PROXY: &[Field] = &[f("disabled", Shape::Bool)];
    const LOCAL_ETCD: &[Field] = &[
        f("imageRepository", Shape::Str),
        f("imageTag", Shape::Str),
        f("dataDir", Shape::Str),
        f("extraArgs", Shape::List(&Shape::Struct(ARG))),
        f("extraEnvs", Shape::List(&Shape::Struct(ENV_VAR))),
        f("serverCertSANs", Shape::StrList),
        f("peerCertSANs", Shape::StrList),
    ];
    const ETCD: &[Field] = &[
        f("local", Shape::Struct(LOCAL_ETCD)),
        f("external", Shape::Struct(EXTERNAL_ETCD)),
    ];
    pub const CLUSTER_CONFIGURATION: &[Field] = &[
        TYPE_META[0],
        TYPE_META[1],
        f("etcd", Shape::Struct(ETCD)),
        f("networking", Shape::Struct(NETWORKING)),
        f("kubernetesVersion", Shape::Str),
        f("controlPlaneEndpoint", Shape::Str),
        f("apiServer", Shape::Struct(API_SERVER)),
        f("controllerManager", Shape::Struct(CONTROL_PLANE_COMPONENT)),
        f("scheduler", Shape::Struct(CONTROL_PLANE_COMPONENT)),
        f("dns", Shape::Struct(DNS)),
        f("proxy", Shape::Struct(PROXY)),
        f("certificatesDir", Shape::Str),
        f("imageRepository", Shape::Str),
        f("featureGates", Shape::BoolMap),
        f("clusterName", Shape::Str),
        f("encryptionAlgorithm", Shape::Str),
        f("certificateValidityPeriod", Shape::Duration),
        f("caCertificateValidityPeriod", Shape::Duration),
    ];
}

/// The table of a kubeadm document, by apiVersion and kind; `None` for kinds joinguard does not
/// walk (ResetConfiguration, UpgradeConfiguration, component configs).
pub fn document(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("kubeadm.k8s.io/v1beta3", "JoinConfiguration") => Some(v1beta3::JOIN_CONFIGURATION),
        ("kubeadm.k8s.io/v1beta3", "InitConfiguration") => Some(v1beta3::INIT_CONFIGURATION),
        ("kubeadm.k8s.io/v1beta3", "ClusterConfiguration") => Some(v1beta3::CLUSTER_CONFIGURATION),
        ("kubeadm.k8s.io/v1beta4", "JoinConfiguration") => Some(v1beta4::JOIN_CONFIGURATION),
        ("kubeadm.k8s.io/v1beta4", "InitConfiguration") => Some(v1beta4::INIT_CONFIGURATION),
        ("kubeadm.k8s.io/v1beta4", "ClusterConfiguration") => Some(v1beta4::CLUSTER_CONFIGURATION),
        _ => None,
    }
}

/// Every field path of a table (`discovery.bootstrapToken.token`; list items as `taints[].key`),
/// for the tests that set every field.
#[cfg(test)]
pub fn paths(fields: &'static [Field]) -> Vec<String> {
    fn walk(prefix: &str, shape: &'static Shape, out: &mut Vec<String>) {
        match shape {
            Shape::Struct(fields) => {
                for fl in fields.iter() {
                    let p = if prefix.is_empty() {
                        fl.name.to_string()
                    } else {
                        format!("{prefix}.{}", fl.name)
                    };
                    out.push(p.clone());
                    walk(&p, &fl.shape, out);
                }
            }
            Shape::List(inner) => walk(&format!("{prefix}[]"), inner, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for fl in fields {
        out.push(fl.name.to_string());
        walk(fl.name, &fl.shape, &mut out);
    }
    out
}

/// What walking a document found.
#[derive(Debug, Default, PartialEq)]
pub struct Findings {
    /// Unknown fields, one sentence each.
    pub warnings: Vec<String>,
    /// Values of the wrong type; kubeadm fails to load such a file.
    pub errors: Vec<String>,
}

/// Checks `doc` against `fields`.
pub fn check(doc: &Node, fields: &'static [Field]) -> Findings {
    let mut out = Findings::default();
    walk_struct(doc, fields, "", &mut out);
    out
}

fn join_path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn walk_struct(node: &Node, fields: &'static [Field], path: &str, out: &mut Findings) {
    let Node::Map(entries) = node else {
        if *node != Node::Null {
            out.errors.push(format!(
                "{}: expected a mapping, found {}",
                if path.is_empty() {
                    "the document"
                } else {
                    path
                },
                node.type_name()
            ));
        }
        return;
    };
    for (key, value) in entries {
        let here = join_path(path, key);
        match fields.iter().find(|fl| fl.name == key) {
            Some(fl) => walk(value, &fl.shape, &here, out),
            None => {
                let hint = match nearest(key, fields.iter().map(|fl| fl.name)) {
                    Some(n) => format!("; the nearest known field is {}", join_path(path, n)),
                    None => String::new(),
                };
                out.warnings.push(format!(
                    "unknown field {here} (kubeadm ignores it too){hint}"
                ));
            }
        }
    }
}

fn walk(node: &Node, shape: &'static Shape, path: &str, out: &mut Findings) {
    let mismatch = |want: &str, out: &mut Findings| {
        out.errors.push(format!(
            "{path}: expected {want}, found {}",
            node.type_name()
        ));
    };
    match (shape, node) {
        (_, Node::Null) | (Shape::Any, _) => {}
        (Shape::Str, Node::Str(_)) | (Shape::Bool, Node::Bool(_)) | (Shape::Int, Node::Int(_)) => {}
        (Shape::Str, _) => mismatch("a string (quote the value)", out),
        (Shape::Bool, _) => mismatch("true or false", out),
        (Shape::Int, _) => mismatch("an integer", out),
        (Shape::Duration, Node::Str(s)) => {
            if crate::duration::parse_go_duration(s).is_none() {
                out.errors
                    .push(format!("{path}: {s:?} is not a duration like 40s or 2m0s"));
            }
        }
        (Shape::Duration, _) => mismatch("a duration string like 40s", out),
        (Shape::StrList, Node::Seq(items)) => {
            for (i, it) in items.iter().enumerate() {
                walk(it, &Shape::Str, &format!("{path}[{i}]"), out);
            }
        }
        (Shape::StrList, _) => mismatch("a list of strings", out),
        (Shape::StrMap, Node::Map(m)) => {
            for (k, v) in m {
                walk(v, &Shape::Str, &join_path(path, k), out);
            }
        }
        (Shape::BoolMap, Node::Map(m)) => {
            for (k, v) in m {
                walk(v, &Shape::Bool, &join_path(path, k), out);
            }
        }
        (Shape::StrMap | Shape::BoolMap, _) => mismatch("a mapping", out),
        (Shape::Struct(fields), _) => walk_struct(node, fields, path, out),
        (Shape::List(inner), Node::Seq(items)) => {
            for (i, it) in items.iter().enumerate() {
                walk(it, inner, &format!("{path}[{i}]"), out);
            }
        }
        (Shape::List(_), _) => mismatch("a list", out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(&str, Node)>) -> Node {
        Node::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    #[test]
    fn unknown_fields_warn_with_the_nearest_name() {
        let doc = map(vec![
            ("apiVersion", Node::Str("kubeadm.k8s.io/v1beta4".into())),
            ("kind", Node::Str("JoinConfiguration".into())),
            (
                "discovery",
                map(vec![(
                    "bootstrapToken",
                    map(vec![("unsafeSkipCaVerification", Node::Bool(true))]),
                )]),
            ),
            ("nodeRegistation", map(vec![])),
        ]);
        let f = check(&doc, v1beta4::JOIN_CONFIGURATION);
        assert!(f.errors.is_empty(), "{f:?}");
        assert_eq!(
            f.warnings,
            [
                "unknown field discovery.bootstrapToken.unsafeSkipCaVerification (kubeadm ignores \
                 it too); the nearest known field is discovery.bootstrapToken.unsafeSkipCAVerification",
                "unknown field nodeRegistation (kubeadm ignores it too); the nearest known field \
                 is nodeRegistration",
            ]
        );
    }

    #[test]
    fn wrong_types_are_errors_naming_the_path() {
        let doc = map(vec![(
            "controlPlane",
            map(vec![(
                "localAPIEndpoint",
                map(vec![("bindPort", Node::Str("x".into()))]),
            )]),
        )]);
        let f = check(&doc, v1beta3::JOIN_CONFIGURATION);
        assert_eq!(
            f.errors,
            ["controlPlane.localAPIEndpoint.bindPort: expected an integer, found a string"]
        );
    }

    #[test]
    fn v1beta4_moved_the_discovery_timeout() {
        let p3 = paths(v1beta3::JOIN_CONFIGURATION);
        let p4 = paths(v1beta4::JOIN_CONFIGURATION);
        assert!(p3.contains(&"discovery.timeout".to_string()));
        assert!(!p4.contains(&"discovery.timeout".to_string()));
        assert!(p4.contains(&"timeouts.discovery".to_string()));
        assert!(p4.contains(&"nodeRegistration.kubeletExtraArgs[].name".to_string()));
        assert!(p4.contains(&"nodeRegistration.imagePullSerial".to_string()));
    }
}
