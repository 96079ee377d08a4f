//! A workload controller's claim on the objects its selector matches, as kube's
//! `ControllerRefManager` makes it: orphans it matches are adopted, its own objects it no
//! longer matches are released, objects another controller holds are left alone. So a
//! StatefulSet, DaemonSet or Deployment deleted with `--cascade=orphan` and created again
//! takes back the pods or ReplicaSets it left, instead of making new ones beside them (or,
//! for a StatefulSet's fixed names, failing on them for ever).
//!
//! Adoption patches the object's ownerReferences with a strategic merge patch that names
//! the object's uid (so a replacement under the same name is never adopted), after a read
//! past every cache confirms the controller still exists and is not being deleted (kube's
//! `canAdopt`, made at most once per claim); release patches its reference away. The
//! patches go through the controller's [`CachingApi`], so the reconcile that claims reads
//! what it claimed from its cache at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::Resource;
use kube::api::{Patch, PatchParams};
use kube::core::{Selector, SelectorExt};
use serde_json::json;
use steady_runtime::{CachingApi, Context, Writable};
use tokio::sync::OnceCell;

use crate::Error;
use crate::pod_template;

/// What a claim does with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Ours, and still matched.
    Keep,
    /// An orphan it matches.
    Adopt,
    /// Ours, no longer matched.
    Release,
    /// Another controller's, or nothing to do now.
    Leave,
}

/// kube's `ClaimObject`: `matches` is the selector (and any membership test) applied to
/// `object`, `owner_deleting` whether the claiming controller is being deleted (it then
/// neither adopts nor releases).
fn verdict(owner_uid: &str, owner_deleting: bool, object: &ObjectMeta, matches: bool) -> Verdict {
    let controller = object
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true));
    match controller {
        Some(r) if r.uid != owner_uid => Verdict::Leave,
        Some(_) if matches => Verdict::Keep,
        Some(_) if owner_deleting => Verdict::Leave,
        Some(_) => Verdict::Release,
        None if owner_deleting || !matches || object.deletion_timestamp.is_some() => Verdict::Leave,
        None => Verdict::Adopt,
    }
}

/// A label selector read once, to match many objects. An empty or unreadable selector
/// matches nothing: the apps/v1 and batch/v1 APIs refuse them, and kube's controllers
/// claim nothing by one.
struct LabelMatcher(Option<Selector>);

impl LabelMatcher {
    fn new(selector: Option<&LabelSelector>) -> Self {
        let readable = selector.filter(|s| {
            s.match_labels.as_ref().is_some_and(|l| !l.is_empty())
                || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
        });
        LabelMatcher(readable.and_then(|s| Selector::try_from(s.clone()).ok()))
    }

    fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let no_labels = BTreeMap::new();
        self.0
            .as_ref()
            .is_some_and(|s| s.matches(labels.unwrap_or(&no_labels)))
    }
}

/// Whether `selector` matches `labels` (see [`LabelMatcher`]): for one object at a time,
/// as a watch's mapper meets them.
pub(crate) fn selects(
    selector: Option<&LabelSelector>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    LabelMatcher::new(selector).matches(labels)
}

/// The claim of `owner` (a namespaced controller object of kind `O`) on objects of kind
/// `C` in its namespace.
pub(crate) struct Claim<'a, O, T> {
    owner: &'a O,
    ctx: &'a Context<T>,
    /// A finalizer the controller keeps on what it holds (the Job's tracking one): added
    /// on adoption, removed on release, as kube's `PodControllerRefManager` with
    /// finalizers does.
    finalizer: Option<&'static str>,
    /// kube's `canAdopt`, asked at most once: the first adoption reads the owner again.
    can_adopt: OnceCell<Result<(), String>>,
}

impl<'a, O, T> Claim<'a, O, T>
where
    O: Writable<Scope = NamespaceResourceScope>,
{
    pub(crate) fn new(owner: &'a O, ctx: &'a Context<T>) -> Self {
        Claim {
            owner,
            ctx,
            finalizer: None,
            can_adopt: OnceCell::new(),
        }
    }

    /// Adopt with `finalizer` added, release with it removed.
    pub(crate) fn with_finalizer(mut self, finalizer: &'static str) -> Self {
        self.finalizer = Some(finalizer);
        self
    }

    /// Adopt the orphans among `candidates` that `selector` matches and that are
    /// `member`s, release the objects the owner controls that no longer are. An object
    /// that went or changed meanwhile is left to the next reconcile, as kube leaves it;
    /// any other failure is the error.
    pub(crate) async fn run<C>(
        &self,
        candidates: &[Arc<C>],
        selector: Option<&LabelSelector>,
        member: impl Fn(&C) -> bool,
    ) -> Result<(), Error>
    where
        C: Writable<Scope = NamespaceResourceScope>,
    {
        let selector = LabelMatcher::new(selector);
        let matches =
            |object: &C| selector.matches(object.meta().labels.as_ref()) && member(object);
        let meta = self.owner.meta();
        let owner_uid = meta.uid.as_deref().unwrap_or_default();
        let owner_deleting = meta.deletion_timestamp.is_some();
        let namespace = pod_template::namespace_of(self.owner);
        let api = self.ctx.api::<C>(&namespace);
        for object in candidates {
            let object_meta = object.meta();
            let patch = match verdict(owner_uid, owner_deleting, object_meta, matches(object)) {
                Verdict::Keep | Verdict::Leave => continue,
                Verdict::Adopt => {
                    self.confirm_owner(&namespace).await.map_err(|why| {
                        Error::CannotAdopt(format!(
                            "can't adopt {} {namespace}/{} ({}): {why}",
                            C::kind(&()),
                            object_meta.name.as_deref().unwrap_or_default(),
                            object_meta.uid.as_deref().unwrap_or_default(),
                        ))
                    })?;
                    adopt_patch(self.owner, object_meta, self.finalizer)
                }
                Verdict::Release => release_patch(owner_uid, object_meta, self.finalizer),
            };
            patch_claim(&api, object_meta, patch).await?;
        }
        Ok(())
    }

    /// kube's `canAdopt`: the owner, read past every cache, is still this object (same
    /// uid) and is not being deleted.
    async fn confirm_owner(&self, namespace: &str) -> Result<(), String> {
        self.can_adopt
            .get_or_init(|| async {
                let meta = self.owner.meta();
                let (name, uid) = (
                    meta.name.as_deref().unwrap_or_default(),
                    meta.uid.as_deref().unwrap_or_default(),
                );
                let kind = O::kind(&());
                let api = self.ctx.api::<O>(namespace);
                let fresh = api.inner().get(name).await.map_err(|e| e.to_string())?;
                let fresh = fresh.meta();
                if fresh.uid.as_deref() != Some(uid) {
                    return Err(format!(
                        "original {kind} {namespace}/{name} is gone: got uid {}, wanted {uid}",
                        fresh.uid.as_deref().unwrap_or_default()
                    ));
                }
                match &fresh.deletion_timestamp {
                    Some(at) => Err(format!(
                        "{kind} {namespace}/{name} has just been deleted at {}",
                        at.0
                    )),
                    None => Ok(()),
                }
            })
            .await
            .clone()
    }
}

/// The patch that makes `owner` the controller of the object `meta` describes: kube's
/// `ownerRefControllerPatch` (the reference merged by uid, `finalizer` added to the set;
/// the object's uid makes the patch fail on a replacement).
fn adopt_patch<O: Resource<DynamicType = ()>>(
    owner: &O,
    meta: &ObjectMeta,
    finalizer: Option<&str>,
) -> serde_json::Value {
    let mut patch = json!({"metadata": {
        "ownerReferences": [pod_template::controller_ref(owner)],
        "uid": meta.uid,
    }});
    if let Some(finalizer) = finalizer {
        patch["metadata"]["finalizers"] = json!([finalizer]);
    }
    patch
}

/// The patch that drops the reference to `owner_uid` (and `finalizer`): kube's
/// `GenerateDeleteOwnerRefStrategicMergeBytes`.
fn release_patch(owner_uid: &str, meta: &ObjectMeta, finalizer: Option<&str>) -> serde_json::Value {
    let mut patch = json!({"metadata": {
        "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
        "uid": meta.uid,
    }});
    if let Some(finalizer) = finalizer {
        patch["metadata"]["$deleteFromPrimitiveList/finalizers"] = json!([finalizer]);
    }
    patch
}

/// Send a claim's patch. Gone (404) or no longer that object (the uid refused, 409/422)
/// means there is nothing to claim: kube ignores both.
async fn patch_claim<C>(
    api: &CachingApi<C>,
    meta: &ObjectMeta,
    patch: serde_json::Value,
) -> Result<(), Error>
where
    C: Writable<Scope = NamespaceResourceScope>,
{
    let name = meta.name.as_deref().unwrap_or_default();
    match api
        .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409 | 422) => Ok(()),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn controlled_by(uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            owner_references: uid.map(|uid| {
                vec![OwnerReference {
                    uid: uid.to_string(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_claim_adopts_matching_orphans_and_releases_its_own_it_no_longer_matches() {
        let orphan = controlled_by(None);
        let ours = controlled_by(Some("me"));
        let theirs = controlled_by(Some("other"));
        assert_eq!(verdict("me", false, &orphan, true), Verdict::Adopt);
        assert_eq!(verdict("me", false, &orphan, false), Verdict::Leave);
        assert_eq!(verdict("me", false, &ours, true), Verdict::Keep);
        assert_eq!(verdict("me", false, &ours, false), Verdict::Release);
        assert_eq!(verdict("me", false, &theirs, true), Verdict::Leave);
        assert_eq!(verdict("me", false, &theirs, false), Verdict::Leave);
    }

    #[test]
    fn a_deleted_controller_keeps_what_it_has_and_claims_nothing_more() {
        assert_eq!(
            verdict("me", true, &controlled_by(Some("me")), true),
            Verdict::Keep
        );
        assert_eq!(
            verdict("me", true, &controlled_by(Some("me")), false),
            Verdict::Leave
        );
        assert_eq!(
            verdict("me", true, &controlled_by(None), true),
            Verdict::Leave
        );
    }

    #[test]
    fn an_orphan_being_deleted_is_not_adopted() {
        let mut going = controlled_by(None);
        going.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(verdict("me", false, &going, true), Verdict::Leave);
    }

    #[test]
    fn an_empty_selector_selects_nothing() {
        let labels = [("app".to_string(), "web".to_string())].into();
        let by_app = LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            ..LabelSelector::default()
        };
        assert!(selects(Some(&by_app), Some(&labels)));
        assert!(!selects(Some(&by_app), None));
        assert!(!selects(Some(&LabelSelector::default()), Some(&labels)));
        assert!(!selects(None, Some(&labels)));
    }
}
