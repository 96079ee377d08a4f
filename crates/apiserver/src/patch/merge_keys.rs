//! How the lists of the built-in kinds merge in a strategic merge patch (and a
//! server-side apply): by a merge key, as a set of scalars, or replaced whole — the
//! `patchStrategy`/`patchMergeKey` tags of kube's Go types, as a table.

/// How a list field merges in a strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListStrategy {
    /// The list is replaced atomically by the patch's list.
    Replace,
    /// A list of objects merged element-by-element on this key.
    MergeKey(&'static str),
    /// A list of primitives merged as a set union (`patchStrategy:"merge"`
    /// without a merge key, e.g. `metadata.finalizers`).
    Set,
}

/// Kinds that embed a pod template at `spec.template`.
const POD_TEMPLATE_KINDS: &[&str] = &[
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
    "Job",
];

/// Kinds whose `status.conditions` list merges on `type`: these, and every kind of
/// [`POD_TEMPLATE_KINDS`].
const OTHER_CONDITION_KINDS: &[&str] = &[
    "Pod",
    "Node",
    "Namespace",
    "PersistentVolumeClaim",
    "Service",
];

fn conditions_merge_on_type(kind: &str) -> bool {
    OTHER_CONDITION_KINDS.contains(&kind) || POD_TEMPLATE_KINDS.contains(&kind)
}

pub(super) fn list_strategy(kind: &str, path: &[&str]) -> ListStrategy {
    use ListStrategy::{MergeKey, Replace};
    match path {
        ["metadata", rest @ ..] => return object_meta_strategy(rest),
        ["status", "conditions"] if conditions_merge_on_type(kind) => return MergeKey("type"),
        _ => {}
    }
    match kind {
        "Pod" => pod_strategy(path),
        "PodTemplate" => match path {
            ["template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        "CronJob" => match path {
            ["spec", "jobTemplate", "spec", "template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        k if POD_TEMPLATE_KINDS.contains(&k) => match path {
            ["spec", "template", rest @ ..] => pod_strategy(rest),
            _ => Replace,
        },
        "Service" => match path {
            ["spec", "ports"] => MergeKey("port"),
            _ => Replace,
        },
        "Node" => match path {
            ["status", "addresses"] => MergeKey("type"),
            ["spec", "podCIDRs"] => ListStrategy::Set,
            _ => Replace,
        },
        _ => Replace,
    }
}

/// List strategies inside an `ObjectMeta` (path relative to `metadata`).
fn object_meta_strategy(path: &[&str]) -> ListStrategy {
    match path {
        ["ownerReferences"] => ListStrategy::MergeKey("uid"),
        ["finalizers"] => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

/// List strategies of a pod (or pod template) object, path relative to it.
fn pod_strategy(path: &[&str]) -> ListStrategy {
    use ListStrategy::{MergeKey, Replace};
    match path {
        ["metadata", rest @ ..] => object_meta_strategy(rest),
        [
            "spec",
            "containers" | "initContainers" | "ephemeralContainers",
            rest @ ..,
        ] => match rest {
            [] => MergeKey("name"),
            ["ports"] => MergeKey("containerPort"),
            ["env"] => MergeKey("name"),
            ["volumeMounts"] => MergeKey("mountPath"),
            ["volumeDevices"] => MergeKey("devicePath"),
            _ => Replace,
        },
        [
            "spec",
            "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims",
        ] => MergeKey("name"),
        ["spec", "hostAliases"] => MergeKey("ip"),
        ["spec", "topologySpreadConstraints"] => MergeKey("topologyKey"),
        ["status", "conditions"] => MergeKey("type"),
        ["status", "podIPs" | "hostIPs"] => MergeKey("ip"),
        ["status", "resourceClaimStatuses"] => MergeKey("name"),
        _ => Replace,
    }
}

/// How lists of a kind merge in a strategic merge patch: returns the merge key
/// for the list at `path` (field names from the object root, array levels
/// skipped, e.g. `["spec", "containers"]` -> `Some("name")` for `Pod`).
/// `None` means the list is not merged by key: it is either replaced
/// atomically or, for primitive lists such as `metadata.finalizers`, merged as
/// a set union.
///
/// Kinds that are not known built-ins have no merge keys (all lists replace).
pub fn strategic_merge_key(kind: &str, path: &[&str]) -> Option<&'static str> {
    match list_strategy(kind, path) {
        ListStrategy::MergeKey(key) => Some(key),
        ListStrategy::Replace | ListStrategy::Set => None,
    }
}

/// Whether the list at `path` merges as a set of scalars (`metadata.finalizers`).
pub fn strategic_set_list(kind: &str, path: &[&str]) -> bool {
    list_strategy(kind, path) == ListStrategy::Set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_key_table() {
        let cases: [(&str, &[&str], Option<&str>); 16] = [
            ("Pod", &["spec", "containers"], Some("name")),
            (
                "Pod",
                &["spec", "initContainers", "ports"],
                Some("containerPort"),
            ),
            (
                "Pod",
                &["spec", "ephemeralContainers", "volumeMounts"],
                Some("mountPath"),
            ),
            (
                "Pod",
                &["spec", "containers", "volumeDevices"],
                Some("devicePath"),
            ),
            ("Pod", &["spec", "hostAliases"], Some("ip")),
            ("Pod", &["spec", "tolerations"], None),
            ("Pod", &["status", "containerStatuses"], None),
            ("Pod", &["status", "conditions"], Some("type")),
            ("Service", &["spec", "ports"], Some("port")),
            ("Node", &["status", "addresses"], Some("type")),
            ("Node", &["status", "conditions"], Some("type")),
            ("Widget", &["metadata", "ownerReferences"], Some("uid")),
            ("Widget", &["metadata", "managedFields"], None),
            ("Widget", &["spec", "containers"], None),
            ("Service", &["spec", "containers"], None),
            (
                "Deployment",
                &["spec", "template", "spec", "containers"],
                Some("name"),
            ),
        ];
        for (kind, path, key) in cases {
            assert_eq!(strategic_merge_key(kind, path), key, "{kind} {path:?}");
        }
    }
}
