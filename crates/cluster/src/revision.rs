//! Revisions of a pod template, as StatefulSets and DaemonSets keep them: a
//! `ControllerRevision` named `<owner>-<hash>` holding the template, and the
//! `controller-revision-hash` label on every pod made from it.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use steady_runtime::{Context, ObjectCache, ObjectKey};

/// The label naming the revision a pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// `<owner>-<hash>`: the revision's name and the pods' label value.
pub fn revision_name(owner: &str, template: &PodTemplateSpec) -> String {
    format!(
        "{owner}-{}",
        crate::pod_template::template_hash(template, None)
    )
}

/// The revision a pod was made from, by its label.
pub fn of_pod(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_LABEL)
        .map(String::as_str)
}

/// A ControllerRevision holding `template` (as kube stores it: the template under
/// `spec`, to be applied with `$patch: replace`).
pub fn controller_revision(
    name: &str,
    namespace: &str,
    owner: OwnerReference,
    labels: Option<std::collections::BTreeMap<String, String>>,
    template: &PodTemplateSpec,
    number: i64,
) -> ControllerRevision {
    let mut template_json = serde_json::to_value(template).unwrap_or_default();
    template_json["$patch"] = json!("replace");
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(json!({"spec": {"template": template_json}}))),
        revision: number,
    }
}

/// The template a revision holds, if it holds one.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut template = revision.data.as_ref()?.0.pointer("/spec/template")?.clone();
    if let Some(fields) = template.as_object_mut() {
        fields.remove("$patch");
    }
    serde_json::from_value(template).ok()
}

/// Delete the oldest revisions `owner_uid` owns beyond `limit` (its
/// `revisionHistoryLimit`), never one named in `in_use` (the current and update
/// revisions, and those live pods were made from).
pub async fn prune<T>(
    ctx: &Context<T>,
    revisions: &ObjectCache<ControllerRevision>,
    owner_uid: &str,
    namespace: &str,
    in_use: &BTreeSet<String>,
    limit: Option<i32>,
) -> Result<(), kube::Error> {
    let limit = usize::try_from(limit.unwrap_or(10)).unwrap_or(0);
    let mut unused: Vec<_> = revisions
        .owned_by(owner_uid)
        .into_iter()
        .filter(|r| !in_use.contains(&r.name_any()) && r.metadata.deletion_timestamp.is_none())
        .collect();
    if unused.len() <= limit {
        return Ok(());
    }
    unused.sort_by_key(|r| r.revision);
    let api = ctx.api::<ControllerRevision>(namespace);
    for revision in &unused[..unused.len() - limit] {
        match api
            .delete(&revision.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Create the ControllerRevision `name` holding `template`, owned by `owner` and numbered
/// after its others, unless the cache already has it.
pub async fn ensure<T, K: Resource<DynamicType = ()>>(
    ctx: &Context<T>,
    revisions: &ObjectCache<ControllerRevision>,
    owner: &K,
    name: &str,
    template: &PodTemplateSpec,
) -> Result<(), kube::Error> {
    let namespace = owner.meta().namespace.clone().unwrap_or_default();
    if revisions
        .get(&ObjectKey::new(Some(&namespace), name))
        .is_some()
    {
        return Ok(());
    }
    let owner_uid = owner.meta().uid.clone().unwrap_or_default();
    let number = revisions
        .owned_by(&owner_uid)
        .iter()
        .map(|r| r.revision)
        .max()
        .unwrap_or(0)
        + 1;
    let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
    let revision = controller_revision(
        name,
        &namespace,
        crate::pod_template::controller_ref(owner),
        labels,
        template,
        number,
    );
    let api = ctx.api::<ControllerRevision>(&namespace);
    match api.create(&PostParams::default(), &revision).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
