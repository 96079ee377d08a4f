//! kube-controller-manager's ClusterRole aggregation: a ClusterRole with an
//! `aggregationRule` holds the rules of every other ClusterRole its selectors match, in
//! name order, each rule once. This is how `admin`, `edit` and `view` gain the rules of the
//! `system:aggregate-to-*` roles, and of the `aggregate-to-*`-labelled ClusterRoles an
//! operator ships so that namespace users may read and edit its custom resources.
//!
//! As kube's controller, it recomputes every aggregated role on any ClusterRole change
//! (the set is small and the dependencies unknown: `admin` aggregates `edit`, which
//! aggregates `view`) and writes only a role whose rules differ, by server-side apply as
//! the field manager `clusterrole-aggregation-controller`. Unlike kube's, the apply
//! carries the resourceVersion it computed from, so a role deleted or changed meanwhile is
//! never recreated or overwritten: its next event recomputes it.

use std::collections::{BTreeMap, HashSet};

use serde::Deserialize;
use serde_json::{Value, json};
use steady_store::{Change, ChangeKind, Follow, Followed, Labels, Revision, Snapshot};
use tokio::time::Instant;

use super::RETRY_INTERVAL;
use crate::ApiServer;
use crate::objects::Target;
use crate::patch::DecodedPatch;
use crate::rbac::{PolicyRule, RBAC_GROUP, null_as_empty};
use crate::request::WriteOptions;
use crate::selector::LabelSelector;

const CLUSTER_ROLES: &str = "/rbac.authorization.k8s.io/clusterroles/";
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";
/// Aggregation levels settled before the server answers (bootstrap has three).
const START_PASSES: usize = 4;

/// The fields of a stored ClusterRole aggregation reads; everything else is skipped
/// unread (each server start reads every ClusterRole).
#[derive(Deserialize)]
struct StoredRole {
    #[serde(default, deserialize_with = "null_as_empty")]
    rules: Vec<PolicyRule>,
    #[serde(default, rename = "aggregationRule")]
    aggregation_rule: Option<StoredAggregation>,
}

#[derive(Deserialize)]
struct StoredAggregation {
    #[serde(
        default,
        rename = "clusterRoleSelectors",
        deserialize_with = "null_as_empty"
    )]
    selectors: Vec<Value>,
}

/// What aggregation reads of one ClusterRole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Role {
    revision: Revision,
    labels: Labels,
    rules: Vec<PolicyRule>,
    /// The `aggregationRule`'s selectors, when the role has one.
    selectors: Option<Vec<LabelSelector>>,
}

impl Role {
    fn read(revision: Revision, labels: &Labels, bytes: &[u8]) -> Option<Role> {
        let stored: StoredRole = steady_store::json::from_bytes(bytes).ok()?;
        let selectors = stored.aggregation_rule.map(|rule| {
            rule.selectors
                .iter()
                // Validation refuses a selector that does not parse; one stored before
                // that selects nothing rather than everything.
                .filter_map(|s| LabelSelector::from_label_selector_json(s).ok())
                .collect()
        });
        Some(Role {
            revision,
            labels: labels.clone(),
            rules: stored.rules,
            selectors,
        })
    }
}

/// The rules `name`'s aggregation rule gathers from `roles`, or `None` when it has none.
fn aggregated_rules<'r>(
    roles: &'r BTreeMap<String, Role>,
    name: &str,
) -> Option<Vec<&'r PolicyRule>> {
    let selectors = roles.get(name)?.selectors.as_ref()?;
    let mut rules: Vec<&PolicyRule> = Vec::new();
    // Each rule once, found in constant time: a role may hold very many.
    let mut seen: HashSet<&PolicyRule> = HashSet::new();
    for selector in selectors {
        let selected = roles
            .iter()
            .filter(|(other, role)| *other != name && selector.matches(&role.labels));
        for (_, role) in selected {
            rules.extend(role.rules.iter().filter(|rule| seen.insert(rule)));
        }
    }
    Some(rules)
}

/// Every aggregated role whose rules are not what its selectors gather, with the rules it
/// should hold, in name order.
fn outdated(roles: &BTreeMap<String, Role>) -> Vec<(String, Vec<PolicyRule>)> {
    roles
        .iter()
        .filter_map(|(name, role)| {
            let wanted = aggregated_rules(roles, name)?;
            let current = role.rules.iter();
            (!wanted.iter().copied().eq(current))
                .then(|| (name.clone(), wanted.into_iter().cloned().collect()))
        })
        .collect()
}

pub(super) struct RoleAggregator {
    server: ApiServer,
    roles: BTreeMap<String, Role>,
}

impl RoleAggregator {
    pub(super) fn new(server: ApiServer) -> Self {
        RoleAggregator {
            server,
            roles: BTreeMap::new(),
        }
    }

    /// Follow the ClusterRoles, with every aggregated role brought up to date first: the
    /// server answers no request before `admin`, `edit` and `view` hold their rules.
    pub(super) async fn start(server: ApiServer) -> Option<(RoleAggregator, Follow)> {
        let mut aggregator = RoleAggregator::new(server);
        // Each pass settles one level of aggregation (`admin` gathers `edit`, which
        // gathers `view`); a failing write is left to the running loop's retries.
        for _ in 0..START_PASSES {
            let (snapshot, follow) = aggregator.follow()?;
            aggregator.rebuild(snapshot);
            if outdated(&aggregator.roles).is_empty() || !aggregator.aggregate().await {
                return Some((aggregator, follow));
            }
        }
        let (snapshot, follow) = aggregator.follow()?;
        aggregator.rebuild(snapshot);
        Some((aggregator, follow))
    }

    fn follow(&self) -> Option<(Snapshot, Follow)> {
        self.server.store().follow(CLUSTER_ROLES, None).ok()
    }

    pub(super) async fn run(mut self, mut follow: Follow) {
        loop {
            let retry_at = (!self.aggregate().await).then(|| Instant::now() + RETRY_INTERVAL);
            let next = match retry_at {
                None => follow.next_or_relist().await,
                Some(at) => tokio::select! {
                    biased;
                    next = follow.next_or_relist() => next,
                    () = tokio::time::sleep_until(at) => continue,
                },
            };
            match next {
                Some(Ok(Followed::Change(change))) => self.take(&change),
                Some(Ok(Followed::Snapshot(snapshot))) => self.rebuild(snapshot),
                Some(Err(_)) | None => return,
            }
        }
    }

    fn take(&mut self, change: &Change) {
        let event = &change.event;
        let name = event.key.strip_prefix(CLUSTER_ROLES).unwrap_or_default();
        let read = (change.kind != ChangeKind::Deleted)
            .then(|| Role::read(event.revision, &event.labels, &event.value))
            .flatten();
        match read {
            Some(role) => self.roles.insert(name.to_string(), role),
            None => self.roles.remove(name),
        };
    }

    fn rebuild(&mut self, snapshot: Snapshot) {
        self.roles = snapshot
            .objects
            .iter()
            .filter_map(|object| {
                let name = object.key.strip_prefix(CLUSTER_ROLES)?;
                let role = Role::read(object.revision, &object.labels, &object.value)?;
                Some((name.to_string(), role))
            })
            .collect();
    }

    /// Write every outdated aggregated role; false when a write failed for a reason its
    /// next event will not bring (a conflict will).
    async fn aggregate(&self) -> bool {
        let mut settled = true;
        for (name, rules) in outdated(&self.roles) {
            let revision = self.roles.get(&name).map_or(0, |role| role.revision);
            if let Err(e) = self.apply(&name, revision, rules).await
                && e.code != 409
                && e.code != 404
            {
                tracing::warn!(role = %name, error = %e.message, "could not aggregate a ClusterRole");
                settled = false;
            }
        }
        settled
    }

    async fn apply(
        &self,
        name: &str,
        revision: Revision,
        rules: Vec<PolicyRule>,
    ) -> crate::error::ApiResult<()> {
        let Some(rt) = self.server.registry().builtin(RBAC_GROUP, "clusterroles") else {
            return Ok(());
        };
        let mut applied = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "resourceVersion": revision.to_string()},
        });
        if !rules.is_empty() {
            applied["rules"] = json!(rules);
        }
        let options = WriteOptions {
            field_manager: Some(FIELD_MANAGER.to_string()),
            force: true,
            ..Default::default()
        };
        self.server
            .patch(
                Target::object(&rt, None, name),
                &DecodedPatch::Apply(applied),
                &options,
            )
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(labels: &[(&str, &str)], rules: &[&str], aggregates: Option<&str>) -> Role {
        let labels: Value = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let mut object = json!({"metadata": {"labels": labels},
            "rules": rules.iter().map(|r| json!({"verbs": ["get"], "resources": [r]})).collect::<Vec<_>>()});
        if let Some(label) = aggregates {
            object["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
        }
        let bytes = serde_json::to_vec(&object).expect("json");
        Role::read(1, &Labels::of_json_bytes(&bytes), &bytes).expect("a role")
    }

    fn resources(rules: &[&PolicyRule]) -> Vec<String> {
        rules.iter().map(|r| r.resources.join(",")).collect()
    }

    fn roles(list: Vec<(&str, Role)>) -> BTreeMap<String, Role> {
        list.into_iter()
            .map(|(name, role)| (name.to_string(), role))
            .collect()
    }

    #[test]
    fn gathers_selected_roles_in_name_order_each_rule_once_never_itself() {
        let roles = roles(vec![
            (
                "b-second",
                role(&[("agg", "true")], &["pods", "secrets"], None),
            ),
            (
                "a-first",
                role(&[("agg", "true")], &["pods", "nodes"], None),
            ),
            ("c-other", role(&[], &["leases"], None)),
            // Labelled as what it gathers: its own rules are not gathered back.
            (
                "z-gatherer",
                role(&[("agg", "true")], &["stale"], Some("agg")),
            ),
        ]);
        let wanted = aggregated_rules(&roles, "z-gatherer").expect("aggregated");
        assert_eq!(resources(&wanted), ["pods", "nodes", "secrets"]);
        assert!(aggregated_rules(&roles, "a-first").is_none());
        let outdated = outdated(&roles);
        assert_eq!(outdated.len(), 1);
        assert_eq!(outdated[0].0, "z-gatherer");
        // Written as kube writes a rule: verbs first, empty lists left out.
        assert_eq!(
            serde_json::to_string(&outdated[0].1[0]).expect("json"),
            r#"{"verbs":["get"],"resources":["pods"]}"#
        );
    }

    #[test]
    fn an_aggregated_role_that_holds_its_gathered_rules_is_not_outdated() {
        let mut roles = roles(vec![
            ("edit", role(&[], &["pods"], Some("to-edit"))),
            ("pods", role(&[("to-edit", "true")], &["pods"], None)),
        ]);
        assert!(outdated(&roles).is_empty());
        roles.insert("none".into(), role(&[], &[], Some("to-nothing")));
        assert!(outdated(&roles).is_empty(), "no rules gathered, none held");
        // A missing list and an empty one are the same rule.
        let bytes = br#"{"rules": [{"verbs": ["get"], "resources": ["pods"], "apiGroups": null}]}"#;
        let read = Role::read(1, &Labels::default(), bytes).expect("a role");
        assert_eq!(read.rules, roles["pods"].rules);
    }
}
