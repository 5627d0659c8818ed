//! The resources the stand-in serves, and the facts about each that kube-apiserver's registry
//! holds: group, version, kind, scope, the etcd key segment (Nodes live under `minions`), short
//! names for discovery, and how names are validated.
//!
//! This module owns that table and the key layout derived from it. It must not answer requests or
//! touch etcd: the verbs, discovery and the Status bodies read it.

/// How a resource's names are validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NameRule {
    /// RFC 1123 subdomain (ConfigMaps, Secrets, Nodes).
    Subdomain,
    /// A path segment (RBAC objects: `kubeadm:nodes-kubeadm-config` is valid).
    PathSegment,
}

/// A resource the stand-in serves.
#[derive(Debug)]
pub(super) struct ResourceDef {
    pub(super) group: &'static str,
    pub(super) version: &'static str,
    pub(super) resource: &'static str,
    pub(super) singular: &'static str,
    pub(super) kind: &'static str,
    pub(super) namespaced: bool,
    /// The etcd key segment (kube-apiserver stores Nodes under `minions`).
    etcd: &'static str,
    pub(super) short_names: &'static [&'static str],
    pub(super) names: NameRule,
}

/// The RBAC API group.
pub(super) const RBAC: &str = "rbac.authorization.k8s.io";

/// Every resource the stand-in serves, in discovery order.
pub(super) const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        etcd: "configmaps",
        short_names: &["cm"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        etcd: "minions",
        short_names: &["no"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        etcd: "pods",
        short_names: &["po"],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: "",
        version: "v1",
        resource: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        etcd: "secrets",
        short_names: &[],
        names: NameRule::Subdomain,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        etcd: "clusterrolebindings",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        etcd: "clusterroles",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        etcd: "rolebindings",
        short_names: &[],
        names: NameRule::PathSegment,
    },
    ResourceDef {
        group: RBAC,
        version: "v1",
        resource: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        etcd: "roles",
        short_names: &[],
        names: NameRule::PathSegment,
    },
];

/// The verbs every resource supports, as discovery lists them.
pub(super) const VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update"];

impl ResourceDef {
    /// `v1`, `rbac.authorization.k8s.io/v1`.
    pub(super) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
    /// `schema.GroupResource.String()`: `configmaps`, `roles.rbac.authorization.k8s.io`.
    pub(super) fn qualified_resource(&self) -> String {
        qualify(self.resource, self.group)
    }
    /// `schema.GroupKind.String()`: `ConfigMap`, `Role.rbac.authorization.k8s.io`.
    pub(super) fn qualified_kind(&self) -> String {
        qualify(self.kind, self.group)
    }
    /// The etcd key of an object.
    pub(super) fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("/registry/{}/{namespace}/{name}", self.etcd)
        } else {
            format!("/registry/{}/{name}", self.etcd)
        }
    }
    /// The etcd key prefix of a list (one namespace, or all).
    pub(super) fn prefix(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("/registry/{}/{namespace}/", self.etcd)
        } else {
            format!("/registry/{}/", self.etcd)
        }
    }
}

/// `what.group`, or `what` for the core group.
pub(super) fn qualify(what: &str, group: &str) -> String {
    if group.is_empty() {
        what.to_string()
    } else {
        format!("{what}.{group}")
    }
}

/// The resource a URL names.
pub(super) fn find_resource(
    group: &str,
    version: &str,
    resource: &str,
) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.group == group && d.version == version && d.resource == resource)
}

/// The resource of an object's `apiVersion` and `kind`.
pub(super) fn find_kind(api_version: &str, kind: &str) -> Option<&'static ResourceDef> {
    RESOURCES
        .iter()
        .find(|d| d.kind == kind && d.api_version() == api_version)
}

/// A resource request, as the router parses it (kube-apiserver's `RequestInfoFactory`) and the verbs serve it.
/// It lives here, beside the resource table both use, so that router -> verbs is the only
/// direction between those two.
#[derive(Debug)]
pub(super) struct ResourceRequest {
    pub(super) group: String,
    pub(super) version: String,
    pub(super) resource: String,
    pub(super) subresource: String,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) verb: &'static str,
}
