//! RBAC evaluation for SubjectAccessReviews: whether the stored Roles, ClusterRoles and
//! their bindings allow a subject an action, as kube-apiserver's RBAC authorizer decides
//! it (bindings of the subject's user, groups or service account; rules matching verb,
//! API group, resource/subresource and name, or a non-resource URL).
//!
//! steady itself does not enforce RBAC (one identity holds every request); this only
//! answers reviews. Aggregation rules are not evaluated: a ClusterRole's own rules count.

use crate::meta;
use serde_json::Value;

use crate::ApiServer;

/// What a SubjectAccessReview asks about: who, and what they want to do.
pub struct Access<'a> {
    pub user: &'a str,
    pub groups: Vec<&'a str>,
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    /// Set for a non-resource request (`/healthz`, `/apis`).
    pub path: Option<&'a str>,
}

impl<'a> Access<'a> {
    /// The attributes of a SubjectAccessReview's `spec`.
    pub fn of_spec(spec: &'a Value) -> Access<'a> {
        let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).unwrap_or("");
        let non_resource = spec.get("nonResourceAttributes").filter(|v| v.is_object());
        Access {
            user: text("/user"),
            groups: spec
                .get("groups")
                .and_then(Value::as_array)
                .map(|g| g.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default(),
            verb: match non_resource {
                Some(_) => text("/nonResourceAttributes/verb"),
                None => text("/resourceAttributes/verb"),
            },
            group: text("/resourceAttributes/group"),
            resource: text("/resourceAttributes/resource"),
            subresource: text("/resourceAttributes/subresource"),
            name: text("/resourceAttributes/name"),
            namespace: text("/resourceAttributes/namespace"),
            path: non_resource.map(|_| text("/nonResourceAttributes/path")),
        }
    }
}

fn strings(value: &Value, field: &str) -> Vec<String> {
    crate::meta::string_list(value.get(field))
}

fn allows_value(allowed: &[String], wanted: &str) -> bool {
    allowed.iter().any(|a| a == "*" || a == wanted)
}

fn rule_allows(rule: &Value, access: &Access) -> bool {
    if !allows_value(&strings(rule, "verbs"), access.verb) {
        return false;
    }
    if let Some(path) = access.path {
        return strings(rule, "nonResourceURLs").iter().any(|url| {
            url == "*" || url == path || url.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    let resource = match access.subresource {
        "" => access.resource.to_string(),
        sub => format!("{}/{sub}", access.resource),
    };
    let names = strings(rule, "resourceNames");
    allows_value(&strings(rule, "apiGroups"), access.group)
        && allows_value(&strings(rule, "resources"), &resource)
        && (names.is_empty() || names.iter().any(|n| n == access.name))
}

/// Whether `subject` (an RBAC subject of a binding in `binding_ns`) is the one asking.
fn subject_matches(subject: &Value, binding_ns: &str, access: &Access) -> bool {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match subject.get("kind").and_then(Value::as_str).unwrap_or("") {
        "User" => name == access.user,
        "Group" => access.groups.contains(&name),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .unwrap_or(binding_ns);
            access.user == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn stored(server: &ApiServer, plural: &str, ns: Option<&str>) -> Vec<Value> {
    let Some(rt) = server
        .registry()
        .builtin("rbac.authorization.k8s.io", plural)
    else {
        return Vec::new();
    };
    server.current_builtin_objects(&rt, ns).unwrap_or_default()
}

fn find_named<'v>(objects: &'v [Value], name: &str) -> Option<&'v Value> {
    objects
        .iter()
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
}

/// The reason the stored RBAC objects allow `access`, or None when they do not.
pub fn allowed_by(server: &ApiServer, access: &Access) -> Option<String> {
    let cluster_roles = stored(server, "clusterroles", None);
    let mut bindings: Vec<(Value, Vec<Value>)> = stored(server, "clusterrolebindings", None)
        .into_iter()
        .map(|b| (b, Vec::new()))
        .collect();
    if !access.namespace.is_empty() && access.path.is_none() {
        let roles = stored(server, "roles", Some(access.namespace));
        bindings.extend(
            stored(server, "rolebindings", Some(access.namespace))
                .into_iter()
                .map(|b| (b, roles.clone())),
        );
    }
    for (binding, roles) in &bindings {
        let binding_ns = meta::str_at(binding, "/metadata/namespace").unwrap_or("");
        let Some(subject) = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| subject_matches(s, binding_ns, access))
        else {
            continue;
        };
        let role_kind = meta::str_at(binding, "/roleRef/kind").unwrap_or("");
        let role_name = meta::str_at(binding, "/roleRef/name").unwrap_or("");
        let role = match role_kind {
            "ClusterRole" => find_named(&cluster_roles, role_name),
            "Role" => find_named(roles, role_name),
            _ => None,
        };
        let allows = role
            .and_then(|r| r["rules"].as_array())
            .is_some_and(|rules| rules.iter().any(|rule| rule_allows(rule, access)));
        if allows {
            let binding_kind = binding["kind"].as_str().unwrap_or("RoleBinding");
            let binding_name = meta::str_at(binding, "/metadata/name").unwrap_or("");
            let subject_kind = subject["kind"].as_str().unwrap_or("");
            let subject_name = subject["name"].as_str().unwrap_or("");
            let scope = match binding_ns {
                "" => String::new(),
                ns => format!(" in namespace \"{ns}\""),
            };
            return Some(format!(
                "RBAC: allowed by {binding_kind} \"{binding_name}\"{scope} of {role_kind} \"{role_name}\" to {subject_kind} \"{subject_name}\""
            ));
        }
    }
    None
}
