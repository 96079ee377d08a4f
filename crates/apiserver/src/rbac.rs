//! RBAC: whether the stored Roles, ClusterRoles and their bindings allow a subject an
//! action, as kube-apiserver's RBAC authorizer decides it (bindings of the subject's user,
//! groups or service account; rules matching verb, API group, resource/subresource and
//! name, or a non-resource URL). It answers SubjectAccessReviews, and it authorizes every
//! request of an identity outside `system:masters` (a service account's token, or a user
//! impersonated with `kubectl --as`), refusing with kube's 403. Aggregation rules are not
//! evaluated: a ClusterRole's own rules count.

use std::sync::Arc;

use crate::meta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ApiServer;
use crate::auth::Identity;
use crate::error::{ApiError, ApiResult};
use crate::per_revision::PerRevision;

/// The RBAC API group.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What an action is on: a resource (or one of its subresources), or a non-resource path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
    pub namespace: &'a str,
    /// Set for a non-resource request (`/healthz`, `/apis`).
    pub path: Option<&'a str>,
}

impl<'a> Target<'a> {
    pub fn named(group: &'a str, resource: &'a str, name: &'a str) -> Target<'a> {
        Target {
            group,
            resource,
            name,
            ..Target::default()
        }
    }

    pub fn in_namespace(self, namespace: &'a str) -> Target<'a> {
        Target { namespace, ..self }
    }

    pub fn path(path: &'a str) -> Target<'a> {
        Target {
            path: Some(path),
            ..Target::default()
        }
    }
}

/// Who asks to do what, on what.
pub struct Access<'a> {
    pub user: &'a str,
    pub groups: Vec<&'a str>,
    pub verb: &'a str,
    pub target: Target<'a>,
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
            target: Target {
                group: text("/resourceAttributes/group"),
                resource: text("/resourceAttributes/resource"),
                subresource: text("/resourceAttributes/subresource"),
                name: text("/resourceAttributes/name"),
                namespace: text("/resourceAttributes/namespace"),
                path: non_resource.map(|_| text("/nonResourceAttributes/path")),
            },
        }
    }

    /// `identity` doing `verb` on `target`.
    pub fn of(identity: &'a Identity, verb: &'a str, target: Target<'a>) -> Access<'a> {
        Access {
            user: &identity.user,
            groups: identity.groups.iter().map(String::as_str).collect(),
            verb,
            target,
        }
    }
}

/// Whether `identity` may do `verb` on `target`: `system:masters` always, anyone else as
/// the stored RBAC objects allow; otherwise kube's 403 (`pods is forbidden: User "…"
/// cannot list resource "pods" in API group "" in the namespace "default"`).
pub fn authorize(
    server: &ApiServer,
    identity: &Identity,
    verb: &str,
    target: &Target,
) -> ApiResult<()> {
    if identity.is_master() || allowed_by(server, &Access::of(identity, verb, *target)).is_some() {
        return Ok(());
    }
    Err(forbidden(identity, verb, target))
}

/// kube-apiserver's refusal of an unauthorized request (`responsewriters.Forbidden`).
fn forbidden(identity: &Identity, verb: &str, target: &Target) -> ApiError {
    let user = &identity.user;
    if let Some(path) = target.path {
        return ApiError::forbidden(format!(
            "forbidden: User \"{user}\" cannot {verb} path \"{path}\""
        ));
    }
    let resource = match target.subresource {
        "" => target.resource.to_string(),
        sub => format!("{}/{sub}", target.resource),
    };
    let group = target.group;
    let scope = match target.namespace {
        "" => "at the cluster scope".to_string(),
        ns => format!("in the namespace \"{ns}\""),
    };
    let why = format!(
        "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" {scope}"
    );
    let qualified = match group {
        "" => target.resource.to_string(),
        group => format!("{}.{group}", target.resource),
    };
    let refused = match target.name {
        "" => format!("{qualified} is forbidden: {why}"),
        name => format!("{qualified} \"{name}\" is forbidden: {why}"),
    };
    let mut details = serde_json::json!({"kind": target.resource});
    if !group.is_empty() {
        details["group"] = serde_json::json!(group);
    }
    if !target.name.is_empty() {
        details["name"] = serde_json::json!(target.name);
    }
    ApiError::forbidden(refused).with_details(details)
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
    let target = &access.target;
    if let Some(path) = target.path {
        return strings(rule, "nonResourceURLs").iter().any(|url| {
            url == "*" || url == path || url.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    let names = strings(rule, "resourceNames");
    allows_value(&strings(rule, "apiGroups"), target.group)
        && strings(rule, "resources")
            .iter()
            .any(|allowed| resource_matches(allowed, target))
        && (names.is_empty() || names.iter().any(|n| n == target.name))
}

/// kube's `ResourceMatches`: `*`, the resource (with its subresource, if any), or
/// `*/<subresource>` for that subresource of every resource.
fn resource_matches(allowed: &str, target: &Target) -> bool {
    match (allowed, target.subresource) {
        ("*", _) => true,
        (allowed, "") => allowed == target.resource,
        (allowed, sub) => match allowed.split_once('/') {
            Some((resource, allowed_sub)) => {
                allowed_sub == sub && (resource == "*" || resource == target.resource)
            }
            None => false,
        },
    }
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

/// One policy rule, compared as kube's `Semantic.DeepEqual` compares them (a missing
/// list and an empty one are the same), written in kube's field order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicyRule {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub verbs: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_groups: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<String>,
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    #[serde(
        default,
        rename = "nonResourceURLs",
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// A list that may be `null`, read as empty.
pub(crate) fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

impl PolicyRule {
    /// Read from a stored rule; a malformed one grants nothing.
    pub(crate) fn of(rule: &Value) -> PolicyRule {
        PolicyRule::deserialize(rule).unwrap_or_default()
    }
}

/// RBAC objects decoded once per revision: every request of an identity outside
/// `system:masters` reads every role and binding that can apply to it, and decoding them
/// each time would cost more than most requests.
pub(crate) type DecodedObjects = PerRevision<Value>;

fn stored(server: &ApiServer, plural: &str, ns: Option<&str>) -> Vec<Arc<Value>> {
    let Some(rt) = server.registry().builtin(RBAC_GROUP, plural) else {
        return Vec::new();
    };
    let listed = server
        .store()
        .list(&rt.list_prefix(ns), &Default::default(), &|_| true);
    match listed {
        Ok(page) => server
            .rbac_objects()
            .of(&page.items, |o| serde_json::from_slice(&o.value).ok()),
        Err(_) => Vec::new(),
    }
}

fn find_named<'v>(objects: &'v [Arc<Value>], name: &str) -> Option<&'v Value> {
    objects
        .iter()
        .map(|o| &**o)
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
}

/// One binding that names the subject asking, with the role it grants.
struct Grant<'v> {
    binding: &'v Value,
    subject: &'v Value,
    role: Option<&'v Value>,
}

impl Grant<'_> {
    /// kube's resolution error for a binding whose role does not exist.
    fn missing_role(&self) -> String {
        let name = meta::str_at(self.binding, "/roleRef/name").unwrap_or("");
        let plural = match meta::str_at(self.binding, "/roleRef/kind") {
            Some("Role") => "roles",
            _ => "clusterroles",
        };
        format!("{plural}.{RBAC_GROUP} \"{name}\" not found")
    }

    fn rules(&self) -> impl Iterator<Item = &Value> {
        self.role
            .and_then(|r| r["rules"].as_array())
            .into_iter()
            .flatten()
    }

    /// kube's reason for an allowed review: which binding of which role to whom.
    fn reason(&self) -> String {
        let binding = self.binding;
        let binding_kind = binding["kind"].as_str().unwrap_or("RoleBinding");
        let binding_name = meta::str_at(binding, "/metadata/name").unwrap_or("");
        let role_kind = meta::str_at(binding, "/roleRef/kind").unwrap_or("");
        let role_name = meta::str_at(binding, "/roleRef/name").unwrap_or("");
        let subject_kind = self.subject["kind"].as_str().unwrap_or("");
        let subject_name = self.subject["name"].as_str().unwrap_or("");
        let scope = match meta::str_at(binding, "/metadata/namespace").unwrap_or("") {
            "" => String::new(),
            ns => format!(" in namespace \"{ns}\""),
        };
        format!(
            "RBAC: allowed by {binding_kind} \"{binding_name}\"{scope} of {role_kind} \"{role_name}\" to {subject_kind} \"{subject_name}\""
        )
    }
}

/// The RBAC objects that can apply in one namespace (or cluster-wide, for `""`).
struct Stored {
    cluster_roles: Vec<Arc<Value>>,
    cluster_bindings: Vec<Arc<Value>>,
    roles: Vec<Arc<Value>>,
    bindings: Vec<Arc<Value>>,
}

impl Stored {
    fn read(server: &ApiServer, namespace: &str) -> Stored {
        let (roles, bindings) = match namespace {
            "" => (Vec::new(), Vec::new()),
            ns => (
                stored(server, "roles", Some(ns)),
                stored(server, "rolebindings", Some(ns)),
            ),
        };
        Stored {
            cluster_roles: stored(server, "clusterroles", None),
            cluster_bindings: stored(server, "clusterrolebindings", None),
            roles,
            bindings,
        }
    }

    /// Every binding naming the asking subject, cluster-wide ones first.
    fn grants<'v>(&'v self, access: &'v Access<'v>) -> impl Iterator<Item = Grant<'v>> {
        let cluster = self
            .cluster_bindings
            .iter()
            .map(|b| (b, &self.cluster_roles));
        let local = self.bindings.iter().map(|b| (b, &self.roles));
        cluster.chain(local).filter_map(move |(binding, roles)| {
            let binding: &Value = binding;
            let binding_ns = meta::str_at(binding, "/metadata/namespace").unwrap_or("");
            let subject = binding["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| subject_matches(s, binding_ns, access))?;
            let role_name = meta::str_at(binding, "/roleRef/name").unwrap_or("");
            let role = match meta::str_at(binding, "/roleRef/kind").unwrap_or("") {
                "ClusterRole" => find_named(&self.cluster_roles, role_name),
                "Role" => find_named(roles, role_name),
                _ => None,
            };
            Some(Grant {
                binding,
                subject,
                role,
            })
        })
    }
}

/// The reason the stored RBAC objects allow `access`, or None when they do not.
pub fn allowed_by(server: &ApiServer, access: &Access) -> Option<String> {
    let namespace = match access.target.path {
        Some(_) => "",
        None => access.target.namespace,
    };
    let stored = Stored::read(server, namespace);
    stored
        .grants(access)
        .find(|grant| grant.rules().any(|rule| rule_allows(rule, access)))
        .map(|grant| grant.reason())
}

/// The rules an identity holds in one namespace (cluster-wide ones included), and the
/// bindings whose role could not be found, as kube's rule resolver reports them.
pub(crate) struct Held {
    pub rules: Vec<Value>,
    pub unresolved: Vec<String>,
}

/// What `identity`'s bindings grant it in `namespace` ("" for cluster-wide only).
pub(crate) fn rules_held(server: &ApiServer, identity: &Identity, namespace: &str) -> Held {
    let access = Access::of(identity, "", Target::default().in_namespace(namespace));
    let stored = Stored::read(server, namespace);
    let mut held = Held {
        rules: Vec::new(),
        unresolved: Vec::new(),
    };
    for grant in stored.grants(&access) {
        if grant.role.is_none() {
            held.unresolved.push(grant.missing_role());
        }
        held.rules.extend(grant.rules().cloned());
    }
    held
}

/// The rules of the role a binding in `namespace` names (`roles` or `clusterroles`);
/// kube's 404 when it does not exist.
pub(crate) fn role_rules(
    server: &ApiServer,
    plural: &str,
    name: &str,
    namespace: &str,
) -> ApiResult<Vec<PolicyRule>> {
    let namespace = (plural == "roles").then_some(namespace);
    let roles = stored(server, plural, namespace);
    let role = find_named(&roles, name)
        .ok_or_else(|| ApiError::not_found(&format!("{plural}.{RBAC_GROUP}"), name))?;
    let rules = role["rules"].as_array().into_iter().flatten();
    Ok(rules.map(PolicyRule::of).collect())
}

/// A SelfSubjectRulesReview's status: every rule granted to `identity` in `namespace`.
pub fn rules_review(server: &ApiServer, identity: &Identity, namespace: &str) -> Value {
    if identity.is_master() {
        return serde_json::json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let access = Access::of(identity, "", Target::default().in_namespace(namespace));
    let stored = Stored::read(server, namespace);
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for grant in stored.grants(&access) {
        for rule in grant.rules() {
            let field = |name: &str| rule.get(name).cloned();
            if let Some(urls) = field("nonResourceURLs") {
                non_resource_rules
                    .push(serde_json::json!({"verbs": field("verbs"), "nonResourceURLs": urls}));
            } else {
                let mut granted = serde_json::json!({
                    "verbs": field("verbs"),
                    "apiGroups": field("apiGroups"),
                    "resources": field("resources"),
                });
                if let Some(names) = field("resourceNames") {
                    granted["resourceNames"] = names;
                }
                resource_rules.push(granted);
            }
        }
    }
    serde_json::json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    })
}

impl ApiServer {
    fn rbac_objects(&self) -> &DecodedObjects {
        &self.inner.rbac_objects
    }
}
