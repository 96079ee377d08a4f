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

use std::collections::BTreeMap;

use serde_json::{Value, json};
use steady_store::{Change, ChangeKind, Follow, Followed, Labels, Revision, Snapshot};
use tokio::time::Instant;

use super::RETRY_INTERVAL;
use crate::ApiServer;
use crate::objects::Target;
use crate::patch::DecodedPatch;
use crate::rbac::RBAC_GROUP;
use crate::request::WriteOptions;
use crate::selector::LabelSelector;

const CLUSTER_ROLES: &str = "/rbac.authorization.k8s.io/clusterroles/";
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";
/// Aggregation levels settled before the server answers (bootstrap has three).
const START_PASSES: usize = 4;

/// What aggregation reads of one ClusterRole.
#[derive(Debug, Clone, Default)]
pub(crate) struct Role {
    revision: Revision,
    labels: Labels,
    rules: Vec<Value>,
    /// The `aggregationRule`'s selectors, when the role has one.
    selectors: Option<Vec<LabelSelector>>,
}

impl Role {
    fn read(revision: Revision, labels: &Labels, bytes: &[u8]) -> Option<Role> {
        let object: Value = serde_json::from_slice(bytes).ok()?;
        Some(Role::of(revision, labels.clone(), &object))
    }

    pub(crate) fn of(revision: Revision, labels: Labels, object: &Value) -> Role {
        let rules = object
            .get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let selectors = object.get("aggregationRule").map(|rule| {
            let selectors = rule.get("clusterRoleSelectors").and_then(Value::as_array);
            selectors
                .into_iter()
                .flatten()
                // Validation refuses a selector that does not parse; one stored before
                // that selects nothing rather than everything.
                .filter_map(|s| LabelSelector::from_label_selector_json(s).ok())
                .collect()
        });
        Role {
            revision,
            labels,
            rules,
            selectors,
        }
    }
}

/// The rules `name`'s aggregation rule gathers from `roles`, or `None` when it has none.
pub(crate) fn aggregated_rules(roles: &BTreeMap<String, Role>, name: &str) -> Option<Vec<Value>> {
    let selectors = roles.get(name)?.selectors.as_ref()?;
    let mut rules: Vec<Value> = Vec::new();
    for selector in selectors {
        let selected = roles
            .iter()
            .filter(|(other, role)| *other != name && selector.matches(&role.labels));
        for (_, role) in selected {
            for rule in &role.rules {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Every aggregated role whose rules are not what its selectors gather, with the rules it
/// should hold, in name order.
pub(crate) fn outdated(roles: &BTreeMap<String, Role>) -> Vec<(String, Vec<Value>)> {
    roles
        .iter()
        .filter_map(|(name, role)| {
            let wanted = aggregated_rules(roles, name)?;
            (wanted != role.rules).then(|| (name.clone(), wanted))
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
        rules: Vec<Value>,
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
            applied["rules"] = Value::Array(rules);
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
        let labels = Labels::of_json_bytes(&serde_json::to_vec(&object).expect("json"));
        Role::of(1, labels, &object)
    }

    fn resources(rules: &[Value]) -> Vec<&str> {
        rules
            .iter()
            .filter_map(|r| r["resources"][0].as_str())
            .collect()
    }

    #[test]
    fn gathers_selected_roles_in_name_order_each_rule_once_never_itself() {
        let roles: BTreeMap<String, Role> = [
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
        ]
        .into_iter()
        .map(|(name, role)| (name.to_string(), role))
        .collect();
        let wanted = aggregated_rules(&roles, "z-gatherer").expect("aggregated");
        assert_eq!(resources(&wanted), ["pods", "nodes", "secrets"]);
        assert_eq!(aggregated_rules(&roles, "a-first"), None);
        let outdated = outdated(&roles);
        assert_eq!(outdated.len(), 1);
        assert_eq!(outdated[0].0, "z-gatherer");
    }

    #[test]
    fn an_aggregated_role_that_holds_its_gathered_rules_is_not_outdated() {
        let mut roles: BTreeMap<String, Role> = BTreeMap::new();
        roles.insert("edit".into(), role(&[], &["pods"], Some("to-edit")));
        roles.insert("pods".into(), role(&[("to-edit", "true")], &["pods"], None));
        assert!(outdated(&roles).is_empty());
        roles.insert("none".into(), role(&[], &[], Some("to-nothing")));
        assert!(outdated(&roles).is_empty(), "no rules gathered, none held");
    }
}
