//! What every workload controller asks of its pods: are they running, ready, finished;
//! and how a pod is made from a template for an owner.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::api::{DeleteParams, Preconditions};
use steady_runtime::CachingApi;

/// The controller ownerReference kube-controller-manager puts on what `owner` creates
/// (blocking the owner's foreground deletion).
pub fn controller_reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
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

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Its containers exited for good: phase Succeeded or Failed.
pub fn is_finished(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

pub fn succeeded(pod: &Pod) -> bool {
    phase(pod) == "Succeeded"
}

pub fn failed(pod: &Pod) -> bool {
    phase(pod) == "Failed"
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Neither finished nor being deleted: it counts towards what the owner wants running.
pub fn is_active(pod: &Pod) -> bool {
    !is_finished(pod) && !is_terminating(pod)
}

pub fn is_running(pod: &Pod) -> bool {
    phase(pod) == "Running"
}

/// Its Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// A pod of `template` controlled by `owner`; `name` is its name, or with
/// `generate_name` a prefix the server completes.
pub fn from_template(
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

/// How a new pod is named.
pub enum PodName {
    /// Exactly this (a StatefulSet's ordinal names).
    Exact(String),
    /// `generateName`: the server appends a random suffix.
    Prefix(String),
}

/// A key's namespace and name, for the writes of a reconcile.
pub fn namespace_of<K: Resource>(obj: &K) -> String {
    obj.meta().namespace.clone().unwrap_or_default()
}

/// Delete `pod` if it is still the same pod (a uid precondition: never its replacement
/// under the same name). False when someone else deleted or replaced it first.
pub async fn delete_exact(api: &CachingApi<Pod>, pod: &Pod) -> Result<bool, kube::Error> {
    let params = DeleteParams {
        preconditions: pod.metadata.uid.clone().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let name = pod.metadata.name.clone().unwrap_or_default();
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
