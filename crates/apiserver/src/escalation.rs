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
use crate::rbac::{self, Access, PolicyRule, RBAC_GROUP, Target};
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
        .with_details(json!({"name": name, "group": RBAC_GROUP, "kind": rt.plural}))
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

fn rules_of(role: &Value) -> Vec<PolicyRule> {
    let rules = role.get("rules").and_then(Value::as_array);
    rules.into_iter().flatten().map(PolicyRule::of).collect()
}

fn aggregates(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|selectors| !selectors.is_empty())
}

/// Everything: what only `cluster-admin` holds.
fn full_authority() -> Vec<PolicyRule> {
    let all = || vec!["*".to_string()];
    vec![
        PolicyRule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all(),
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// kube's `ConfirmNoEscalation`: every piece of `rules` is covered by one rule `identity`
/// holds in `namespace`; otherwise kube's message naming what is missing.
///
/// Bounded where kube is not: a write whose rules break down into more than
/// [`MAX_PIECES`] permissions is refused unexamined (one body could otherwise hold a
/// product of lists big enough to stall the server), and at most [`MAX_LINES`] missing
/// permissions are listed.
fn confirm_no_escalation(
    server: &ApiServer,
    identity: &Identity,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let granting = |why: String| {
        format!(
            "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{why}",
            quote(&identity.user),
            quote_list(&identity.groups),
        )
    };
    let pieces: usize = rules
        .iter()
        .map(Piece::count)
        .fold(0, usize::saturating_add);
    if pieces > MAX_PIECES {
        return Err(granting(format!(
            "{pieces} permissions, more than the {MAX_PIECES} steady checks in one write"
        )));
    }
    let held = rbac::rules_held(server, identity, namespace);
    let held_rules: Vec<PolicyRule> = held.rules.iter().map(PolicyRule::of).collect();
    let missing: Vec<Piece> = rules
        .iter()
        .flat_map(Piece::breakdown)
        .filter(|piece| !held_rules.iter().any(|rule| piece.covered_by(rule)))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = compact(missing).iter().map(Compacted::describe).collect();
    lines.sort();
    lines.dedup();
    let more = lines.len().saturating_sub(MAX_LINES);
    lines.truncate(MAX_LINES);
    let mut message = granting(lines.join("\n"));
    if more > 0 {
        message.push_str(&format!("\n… and {more} more"));
    }
    if !held.unresolved.is_empty() {
        message.push_str(&format!(
            "; resolution errors: [{}]",
            go_aggregate(&held.unresolved)
        ));
    }
    Err(message)
}

/// The most permissions one RBAC write's rules may break down into.
const MAX_PIECES: usize = 1_000_000;
/// The most missing permissions a refusal lists.
const MAX_LINES: usize = 1_000;

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
#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece<'r> {
    Resource {
        group: &'r str,
        resource: &'r str,
        name: Option<&'r str>,
        verb: &'r str,
    },
    Url {
        url: &'r str,
        verb: &'r str,
    },
}

fn has_or_star(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

impl<'r> Piece<'r> {
    /// How many pieces [`Piece::breakdown`] yields, without yielding them.
    fn count(rule: &PolicyRule) -> usize {
        let names = rule.resource_names.len().max(1);
        let resources = [
            rule.api_groups.len(),
            rule.resources.len(),
            rule.verbs.len(),
            names,
        ]
        .into_iter()
        .fold(1, usize::saturating_mul);
        let urls = rule
            .non_resource_urls
            .len()
            .saturating_mul(rule.verbs.len());
        resources.saturating_add(urls)
    }

    fn breakdown(rule: &'r PolicyRule) -> impl Iterator<Item = Piece<'r>> + 'r {
        let names: Vec<Option<&'r str>> = match rule.resource_names.is_empty() {
            true => vec![None],
            false => rule
                .resource_names
                .iter()
                .map(|n| Some(n.as_str()))
                .collect(),
        };
        let resources = rule.api_groups.iter().flat_map(move |group| {
            let names = names.clone();
            rule.resources.iter().flat_map(move |resource| {
                let names = names.clone();
                rule.verbs.iter().flat_map(move |verb| {
                    names.clone().into_iter().map(move |name| Piece::Resource {
                        group,
                        resource,
                        name,
                        verb,
                    })
                })
            })
        });
        let urls = rule
            .non_resource_urls
            .iter()
            .flat_map(move |url| rule.verbs.iter().map(move |verb| Piece::Url { url, verb }));
        resources.chain(urls)
    }

    /// kube's `ruleCovers` for one piece: every field of the piece allowed by `rule`.
    fn covered_by(&self, rule: &PolicyRule) -> bool {
        let names = &rule.resource_names;
        match *self {
            Piece::Resource {
                group,
                resource,
                name,
                verb,
            } => {
                has_or_star(&rule.verbs, verb)
                    && has_or_star(&rule.api_groups, group)
                    && covers_resource(&rule.resources, resource)
                    && match name {
                        None => names.is_empty(),
                        Some(name) => names.is_empty() || names.iter().any(|n| n == name),
                    }
            }
            Piece::Url { url, verb } => {
                has_or_star(&rule.verbs, verb)
                    && names.is_empty()
                    && rule.non_resource_urls.iter().any(|allowed| {
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
            .is_some_and(|(_, sub)| allowed.iter().any(|a| a.strip_prefix("*/") == Some(sub)))
}

/// Missing pieces as kube prints them: the verbs of one group, resource and name merged.
struct Compacted<'r> {
    piece: Piece<'r>,
    verbs: Vec<&'r str>,
}

fn compact(missing: Vec<Piece<'_>>) -> Vec<Compacted<'_>> {
    let mut compacted: Vec<Compacted> = Vec::new();
    for piece in missing {
        let verb = match piece {
            Piece::Resource { verb, .. } | Piece::Url { verb, .. } => verb,
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

impl Compacted<'_> {
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
    use serde_json::json;

    use super::*;

    fn covered(owner: Value, requested: Value) -> Vec<String> {
        let (owner, requested) = (PolicyRule::of(&owner), PolicyRule::of(&requested));
        let missing: Vec<Piece> = Piece::breakdown(&requested)
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
    fn pieces_are_counted_without_being_made() {
        let strings = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>();
        let rule = PolicyRule {
            verbs: strings(3),
            api_groups: strings(2),
            resources: strings(5),
            resource_names: strings(7),
            non_resource_urls: strings(11),
        };
        assert_eq!(Piece::count(&rule), Piece::breakdown(&rule).count());
        assert_eq!(Piece::count(&rule), 3 * 2 * 5 * 7 + 11 * 3);
        let huge = PolicyRule {
            verbs: strings(100_000),
            api_groups: strings(100_000),
            resources: strings(100_000),
            resource_names: strings(100_000),
            ..PolicyRule::default()
        };
        assert!(
            Piece::count(&huge) > MAX_PIECES,
            "saturates, never overflows"
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
