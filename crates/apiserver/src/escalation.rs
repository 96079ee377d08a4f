//! kube-apiserver's escalation prevention for RBAC writes: a Role or ClusterRole may
//! only be written by whoever already holds every permission it grants, and a binding
//! only by whoever holds every permission of the role it binds. Without it an identity
//! allowed to create Roles could grant itself anything; with it, an operator whose
//! manifests forgot to give it what it hands out fails on steady as on a cluster.
//!
//! The shortcuts are kube's: `system:masters` (and steady's in-process writers), the
//! `escalate` verb on the role (named as in the URL, so no name on a create), the `bind`
//! verb on the bound role; an update that changes nothing but ownerReferences or
//! finalizers is not checked. Held permissions are the requester's bindings in the
//! write's namespace and cluster-wide, compared rule piece by rule piece as kube's
//! `Covers` does; the refusal lists what is missing as kube prints it.

use serde_json::{Value, json};

use crate::ApiServer;
use crate::auth::Identity;
use crate::error::{ApiError, ApiResult};
use crate::go_text::{quote, quote_list};
use crate::meta;
use crate::rbac::{self, Access, RBAC_GROUP, Target};
use crate::registry::ResourceType;

/// Refuse a write of `new` (replacing `old`, on an update) that would grant `requester`
/// more than it holds. `url_name` is the name in the request's URL ("" on a create).
pub(crate) fn check_write(
    server: &ApiServer,
    rt: &ResourceType,
    namespace: Option<&str>,
    url_name: &str,
    new: &Value,
    old: Option<&Value>,
    requester: Option<&Identity>,
) -> ApiResult<()> {
    let Some(identity) = requester.filter(|identity| !identity.is_master()) else {
        return Ok(());
    };
    if !rt.builtin || rt.group != RBAC_GROUP {
        return Ok(());
    }
    if old.is_some_and(|old| only_collector_fields_differ(old, new)) {
        return Ok(());
    }
    let namespace = namespace.unwrap_or("");
    let refused = |why: String| {
        let name = meta::name(new).unwrap_or("");
        ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: {why}",
            rt.qualified_name()
        ))
    };
    match rt.plural.as_str() {
        plural @ ("roles" | "clusterroles") => {
            let escalate = Target::named(RBAC_GROUP, plural, url_name).in_namespace(namespace);
            if rbac::allowed_by(server, &Access::of(identity, "escalate", escalate)).is_some() {
                return Ok(());
            }
            let rules = rules_of(new);
            confirm_no_escalation(server, identity, namespace, &rules).map_err(refused)?;
            if plural == "clusterroles"
                && (aggregates(new) || old.is_some_and(aggregates))
                && confirm_no_escalation(server, identity, namespace, &full_authority()).is_err()
            {
                return Err(refused(
                    "must have cluster-admin privileges to use the aggregationRule".into(),
                ));
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_kind = meta::str_at(new, "/roleRef/kind").unwrap_or("");
            let role_name = meta::str_at(new, "/roleRef/name").unwrap_or("");
            let role_plural = match role_kind {
                "Role" => "roles",
                "ClusterRole" => "clusterroles",
                other => {
                    return Err(ApiError::internal(format!(
                        "unsupported role reference kind: {}",
                        quote(other)
                    )));
                }
            };
            let bind = Target::named(RBAC_GROUP, role_plural, role_name).in_namespace(namespace);
            if rbac::allowed_by(server, &Access::of(identity, "bind", bind)).is_some() {
                return Ok(());
            }
            let rules = rbac::role_rules(server, role_plural, role_name, namespace)?;
            confirm_no_escalation(server, identity, namespace, &rules).map_err(refused)
        }
        _ => Ok(()),
    }
}

/// What garbage collection changes (owners, finalizers) and what the server records of
/// the write itself are all that differ.
fn only_collector_fields_differ(old: &Value, new: &Value) -> bool {
    let mut new = new.clone();
    let metadata = meta::metadata_mut(&mut new);
    for field in ["ownerReferences", "finalizers", "managedFields", "selfLink"] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
    meta::same_content(old, &new)
}

fn rules_of(role: &Value) -> Vec<Value> {
    role.get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn aggregates(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|selectors| !selectors.is_empty())
}

/// Everything: what only `cluster-admin` holds.
fn full_authority() -> Vec<Value> {
    vec![
        json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        json!({"verbs": ["*"], "nonResourceURLs": ["*"]}),
    ]
}

/// kube's `ConfirmNoEscalation`: every piece of `rules` is covered by one rule `identity`
/// holds in `namespace`; otherwise kube's message naming what is missing.
fn confirm_no_escalation(
    server: &ApiServer,
    identity: &Identity,
    namespace: &str,
    rules: &[Value],
) -> Result<(), String> {
    let held = rbac::rules_held(server, identity, namespace);
    let missing: Vec<Piece> = rules
        .iter()
        .flat_map(Piece::breakdown)
        .filter(|piece| !held.rules.iter().any(|rule| piece.covered_by(rule)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(Compacted::describe).collect();
    lines.sort();
    lines.dedup();
    let mut message = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quote(&identity.user),
        quote_list(&identity.groups),
        lines.join("\n")
    );
    if !held.unresolved.is_empty() {
        message.push_str(&format!(
            "; resolution errors: [{}]",
            go_aggregate(&held.unresolved)
        ));
    }
    Err(message)
}

/// Go's aggregate error text: one message alone, several deduplicated in brackets.
fn go_aggregate(errors: &[String]) -> String {
    let mut distinct: Vec<&String> = Vec::new();
    for error in errors {
        if !distinct.contains(&error) {
            distinct.push(error);
        }
    }
    match distinct.as_slice() {
        [one] => one.to_string(),
        many => format!(
            "[{}]",
            many.iter()
                .map(|e| e.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One permission a rule grants: one verb on one resource of one group (and one name), or
/// one verb on one non-resource URL (kube's `BreakdownRule`).
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Resource {
        group: String,
        resource: String,
        name: Option<String>,
        verb: String,
    },
    Url {
        url: String,
        verb: String,
    },
}

fn strings(rule: &Value, field: &str) -> Vec<String> {
    meta::string_list(rule.get(field))
}

fn has_or_star(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

impl Piece {
    fn breakdown(rule: &Value) -> Vec<Piece> {
        let verbs = strings(rule, "verbs");
        let names = strings(rule, "resourceNames");
        let names: Vec<Option<String>> = match names.is_empty() {
            true => vec![None],
            false => names.into_iter().map(Some).collect(),
        };
        let mut pieces = Vec::new();
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for verb in &verbs {
                    pieces.extend(names.iter().map(|name| Piece::Resource {
                        group: group.clone(),
                        resource: resource.clone(),
                        name: name.clone(),
                        verb: verb.clone(),
                    }));
                }
            }
        }
        for url in strings(rule, "nonResourceURLs") {
            pieces.extend(verbs.iter().map(|verb| Piece::Url {
                url: url.clone(),
                verb: verb.clone(),
            }));
        }
        pieces
    }

    /// kube's `ruleCovers` for one piece: every field of the piece allowed by `rule`.
    fn covered_by(&self, rule: &Value) -> bool {
        let names = strings(rule, "resourceNames");
        match self {
            Piece::Resource {
                group,
                resource,
                name,
                verb,
            } => {
                has_or_star(&strings(rule, "verbs"), verb)
                    && has_or_star(&strings(rule, "apiGroups"), group)
                    && covers_resource(&strings(rule, "resources"), resource)
                    && match name {
                        None => names.is_empty(),
                        Some(name) => names.is_empty() || names.contains(name),
                    }
            }
            Piece::Url { url, verb } => {
                has_or_star(&strings(rule, "verbs"), verb)
                    && names.is_empty()
                    && strings(rule, "nonResourceURLs").iter().any(|allowed| {
                        allowed == url
                            || allowed
                                .strip_suffix('*')
                                .is_some_and(|prefix| url.starts_with(prefix))
                    })
            }
        }
    }
}

/// `*`, the resource itself, or `*/<subresource>` for a subresource.
fn covers_resource(allowed: &[String], resource: &str) -> bool {
    allowed.iter().any(|a| a == "*" || a == resource)
        || resource
            .split_once('/')
            .is_some_and(|(_, sub)| allowed.iter().any(|a| a == &format!("*/{sub}")))
}

/// Missing pieces as kube prints them: the verbs of one group, resource and name merged.
struct Compacted {
    piece: Piece,
    verbs: Vec<String>,
}

fn compact(missing: Vec<Piece>) -> Vec<Compacted> {
    let mut compacted: Vec<Compacted> = Vec::new();
    for piece in missing {
        let verb = match &piece {
            Piece::Resource { verb, .. } | Piece::Url { verb, .. } => verb.clone(),
        };
        let same_target = |c: &&mut Compacted| match (&c.piece, &piece) {
            (
                Piece::Resource {
                    group,
                    resource,
                    name,
                    ..
                },
                Piece::Resource {
                    group: g,
                    resource: r,
                    name: n,
                    ..
                },
            ) => group == g && resource == r && name == n,
            _ => false,
        };
        match compacted.iter_mut().find(same_target) {
            Some(existing) => existing.verbs.push(verb),
            None => compacted.push(Compacted {
                piece,
                verbs: vec![verb],
            }),
        }
    }
    compacted
}

impl Compacted {
    /// kube's `CompactString`: the non-empty fields, in its order.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        match &self.piece {
            Piece::Resource {
                group,
                resource,
                name,
                ..
            } => {
                parts.push(format!("APIGroups:{}", quote_list(&[group])));
                parts.push(format!("Resources:{}", quote_list(&[resource])));
                if let Some(name) = name {
                    parts.push(format!("ResourceNames:{}", quote_list(&[name])));
                }
            }
            Piece::Url { url, .. } => parts.push(format!("NonResourceURLs:{}", quote_list(&[url]))),
        }
        parts.push(format!("Verbs:{}", quote_list(&self.verbs)));
        format!("{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(owner: Value, requested: Value) -> Vec<String> {
        let missing: Vec<Piece> = Piece::breakdown(&requested)
            .into_iter()
            .filter(|piece| !piece.covered_by(&owner))
            .collect();
        let mut lines: Vec<String> = compact(missing).iter().map(Compacted::describe).collect();
        lines.sort();
        lines
    }

    #[test]
    fn missing_pieces_are_printed_as_kube_compacts_them() {
        let owner = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let requested = json!({"apiGroups": ["", "apps"], "resources": ["pods", "deployments"],
            "verbs": ["get", "list"]});
        assert_eq!(
            covered(owner, requested),
            [
                r#"{APIGroups:[""], Resources:["deployments"], Verbs:["get" "list"]}"#,
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["list"]}"#,
                r#"{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}"#,
                r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "list"]}"#,
            ]
        );
    }

    #[test]
    fn wildcards_subresources_names_and_urls_cover_as_in_kube() {
        let all = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(
            covered(
                all.clone(),
                json!({"apiGroups": ["x"], "resources": ["y/z"], "verbs": ["get"]})
            )
            .is_empty()
        );
        // A resource rule covers no URL, and `pods` does not cover `pods/log`.
        assert_eq!(
            covered(
                all,
                json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})
            ),
            [r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#]
        );
        let pods = json!({"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get"]});
        assert_eq!(
            covered(
                pods.clone(),
                json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
            )
            .len(),
            1
        );
        assert!(
            covered(
                pods,
                json!({"apiGroups": [""], "resources": ["deployments/status"], "verbs": ["get"]})
            )
            .is_empty()
        );
        // A named grant covers only that name; an unnamed one covers every name.
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]});
        assert_eq!(
            covered(
                named.clone(),
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]})
            ),
            [r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}"#]
        );
        assert_eq!(
            covered(
                named,
                json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["get"]})
            ),
            [r#"{APIGroups:[""], Resources:["configmaps"], ResourceNames:["b"], Verbs:["get"]}"#]
        );
        let prefix = json!({"nonResourceURLs": ["/api*"], "verbs": ["get"]});
        assert!(
            covered(
                prefix,
                json!({"nonResourceURLs": ["/apis/x"], "verbs": ["get"]})
            )
            .is_empty()
        );
    }

    #[test]
    fn resolution_errors_read_as_a_go_aggregate() {
        assert_eq!(go_aggregate(&["a".into()]), "a");
        assert_eq!(
            go_aggregate(&["a".into(), "b".into(), "a".into()]),
            "[a, b]"
        );
    }
}
