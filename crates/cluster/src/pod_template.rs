//! What the workload controllers share about pods and their templates: controller
//! ownerReferences, a pod made from a template for its owner, a pod's lifecycle as a
//! controller counts it (active, finished, ready, available), its uid-preconditioned
//! deletion, the hash that names a template, and what of a pod a counting cache keeps.
//!
//! Must not know any one workload kind's rules: those live in the controller's module.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{DeleteParams, Preconditions};
use steady_runtime::CachingApi;

use crate::Error;

/// The label (on ReplicaSets, their selectors and their pods) naming the pod template.
pub const TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The namespace, name and uid of a stored object, which every controller needs to act on
/// it (a stored namespaced object always has them).
pub struct Identity {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (what children's ownerReferences name).
    pub uid: String,
}

impl Identity {
    /// The identity of `obj`, or why it has none.
    pub fn of<K: Resource>(obj: &K) -> Result<Identity, Error> {
        let meta = obj.meta();
        let missing = |what: &str| Error::Incomplete(format!("object without a {what}"));
        Ok(Identity {
            namespace: meta.namespace.clone().ok_or_else(|| missing("namespace"))?,
            name: meta.name.clone().ok_or_else(|| missing("name"))?,
            uid: meta.uid.clone().ok_or_else(|| missing("uid"))?,
        })
    }
}

/// The ownerReference a controller puts on what `owner` (of kind `K`) creates:
/// `controller: true` (it alone manages the child) and `blockOwnerDeletion` (a foreground
/// deletion of the owner waits for the child).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// How a new pod is named.
pub enum PodName {
    /// Exactly this (a StatefulSet's ordinal names).
    Exact(String),
    /// `generateName`: the server appends a random suffix.
    Prefix(String),
}

/// A pod of `template` controlled by `owner` (its metadata and spec, no status).
pub fn pod_from_template(
    template: &PodTemplateSpec,
    owner: OwnerReference,
    namespace: &str,
    name: PodName,
) -> Pod {
    let template_meta = template.metadata.clone().unwrap_or_default();
    let (name, generate_name) = match name {
        PodName::Exact(name) => (Some(name), None),
        PodName::Prefix(prefix) => (None, Some(prefix)),
    };
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            namespace: Some(namespace.to_string()),
            labels: template_meta.labels,
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The object's namespace (empty for a cluster-scoped one).
pub fn namespace_of<K: Resource>(obj: &K) -> String {
    obj.meta().namespace.clone().unwrap_or_default()
}

/// Delete `obj` if it is still the same object (a uid precondition: never its
/// replacement under the same name). False when someone else deleted or replaced it first.
pub async fn delete_exact<K>(api: &CachingApi<K>, obj: &K) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let meta = obj.meta();
    let params = DeleteParams {
        preconditions: meta.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let name = meta.name.clone().unwrap_or_default();
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `meta`'s controller ownerReference names `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// A pod a controller counts as one of its replicas: not being deleted, not finished.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminating(pod) && !is_finished(pod)
}

/// Being deleted (it has a deletionTimestamp).
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Its containers exited for good: phase Succeeded or Failed.
pub fn is_finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Phase Succeeded.
pub fn succeeded(pod: &Pod) -> bool {
    phase(pod) == "Succeeded"
}

/// Phase Failed.
pub fn failed(pod: &Pod) -> bool {
    phase(pod) == "Failed"
}

/// Phase Running.
pub fn is_running(pod: &Pod) -> bool {
    phase(pod) == "Running"
}

/// The pod's phase (`Pending` until a node reports one).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Since when the pod has been Ready, if it is.
pub fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map(|t| t.0))
}

/// Whether the pod is Ready.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Whether a pod counts as available at `now`, as kube-controller-manager judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Not Ready.
    Unready,
    /// Ready, but not yet for `minReadySeconds`: available after this much longer.
    ReadyFor(Duration),
    /// Ready for at least `minReadySeconds`.
    Available,
}

/// The pod's availability with `min_ready_seconds` at `now`. A Ready pod without a
/// transition time counts as available, as kube does.
pub fn availability(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Availability {
    let Some(since) = ready_since(pod) else {
        return Availability::Unready;
    };
    let wanted = Duration::from_secs(u64::try_from(min_ready_seconds).unwrap_or(0));
    let Some(since) = since.filter(|_| !wanted.is_zero()) else {
        return Availability::Available;
    };
    let ready_for = Duration::from_millis(
        u64::try_from(now.as_millisecond() - since.as_millisecond()).unwrap_or(0),
    );
    match wanted.checked_sub(ready_for) {
        Some(left) if !left.is_zero() => Availability::ReadyFor(left),
        _ => Availability::Available,
    }
}

/// How long until the first of `pods` that is Ready, but not yet for `min_ready_seconds`,
/// becomes available; `None` when none is waiting.
pub fn next_available<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Option<Duration> {
    pods.into_iter()
        .filter_map(|pod| match availability(pod, min_ready_seconds, now) {
            Availability::ReadyFor(left) => Some(left),
            _ => None,
        })
        .min()
}

/// The characters kube's generated suffixes use (no vowels, no look-alikes), so a hash
/// never spells a word.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of `template` (with the Deployment's collision count, which
/// changes the hash when the name it gives is taken): FNV-1a (32 bit) of the template's
/// JSON, its decimal digits spelt in kube's safe alphabet, so it looks like kube's
/// (`7c5ddbdf54`) and is stable across processes.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(&count.to_le_bytes());
    }
    let hash = bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    });
    hash.to_string()
        .bytes()
        .map(|digit| char::from(SAFE_ALPHABET[usize::from(digit) % SAFE_ALPHABET.len()]))
        .collect()
}

/// `template` without its `pod-template-hash` label: what a Deployment's template is
/// compared with.
pub fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(TEMPLATE_HASH_LABEL);
    }
    template
}

/// Whether two templates are equal apart from their `pod-template-hash` labels.
pub fn equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// Keep of a cached pod only what the ReplicaSet and Deployment controllers count and
/// rank by: metadata (owners, labels, times), the node it is bound to, its phase and
/// conditions.
pub(crate) fn trim_for_counting(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    let node_name = pod.spec.take().and_then(|s| s.node_name);
    pod.spec = Some(PodSpec {
        node_name,
        ..PodSpec::default()
    });
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            conditions: status.conditions,
            ..PodStatus::default()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodCondition};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn template(image: &str) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "nginx".into(),
                    image: Some(image.into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        }
    }

    #[test]
    fn the_hash_names_the_template_and_the_collision_count() {
        let hash = template_hash(&template("nginx"), None);
        assert!(!hash.is_empty() && hash.len() <= 10, "{hash}");
        assert!(hash.bytes().all(|b| SAFE_ALPHABET.contains(&b)), "{hash}");
        assert_eq!(hash, template_hash(&template("nginx"), None));
        assert_ne!(hash, template_hash(&template("nginx:1.27"), None));
        assert_ne!(hash, template_hash(&template("nginx"), Some(1)));
    }

    #[test]
    fn templates_compare_without_their_hash_label() {
        let mut labelled = template("nginx");
        if let Some(labels) = labelled.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            labels.insert(TEMPLATE_HASH_LABEL.into(), "abc".into());
        }
        assert!(equal_ignoring_hash(&labelled, &template("nginx")));
        assert!(!equal_ignoring_hash(&labelled, &template("nginx:1.27")));
    }

    fn ready_pod(since: Option<Timestamp>) -> Pod {
        Pod {
            status: Some(PodStatus {
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: since.map(Time),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn a_pod_is_available_after_min_ready_seconds_of_readiness() {
        let now = Timestamp::from_second(1_000).expect("a valid time");
        let ready_at = Timestamp::from_second(996).expect("a valid time");
        let pod = ready_pod(Some(ready_at));
        assert_eq!(availability(&pod, 0, now), Availability::Available);
        assert_eq!(availability(&pod, 4, now), Availability::Available);
        assert_eq!(
            availability(&pod, 10, now),
            Availability::ReadyFor(Duration::from_secs(6))
        );
        assert_eq!(
            availability(&ready_pod(None), 10, now),
            Availability::Available
        );
        assert_eq!(availability(&Pod::default(), 0, now), Availability::Unready);
    }
}
