//! Projected caches: an owned or watched kind cached as a compact type the controller's
//! author declares, holding only what the reconciler reads, instead of the decoded object.
//!
//! A decoded `Pod` is ~2 KB before any of its strings (its `PodSpec` and `PodStatus` are
//! stored inline even when empty), so no trim of a `Pod` goes below ~3 KB a cached pod. A
//! [`Projection`] of a few fields, plus the [`ProjectedMeta`] the runtime keeps for keys,
//! versions and owners, is a few hundred bytes. The watch projects each object as it
//! arrives (the decoded object is dropped at once), and a write through the context
//! ([`crate::Context::api`]) caches the projection of the server's reply.
//!
//! Must not know: any particular kind or projection.

use std::fmt::Debug;
use std::ops::Deref;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::controller::{Controller, watched_mapper};
use crate::object_cache::{CacheMeta, Cached, ObjectCache, ObjectKey, OwnerView, Stamps};
use crate::observe::Role;
use crate::source::{CachedAs, decoded_form_of, retyped};
use crate::unread::deserialize_skipping;
use crate::write_through::Remembers;

/// A compact form of objects of kind [`Kind`](Projection::Kind) that a controller caches
/// instead of the objects themselves: only what its reconciler reads of them.
///
/// Comparing two projections decides whether an update wakes anyone: an update whose
/// projection is unchanged (the same [`ProjectedMeta`] but for the resourceVersion, and an
/// equal projection) is cached but triggers no reconcile, since the reconciler cannot see
/// it.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use steady_runtime::projection::Projection;
///
/// /// What a reconciler reads of a pod, besides its name, owners and deletion.
/// #[derive(Debug, Clone, PartialEq)]
/// struct PodSummary {
///     phase: Option<Box<str>>,
///     ready: bool,
/// }
///
/// impl Projection for PodSummary {
///     type Kind = Pod;
///
///     fn project(pod: &Pod) -> Self {
///         let status = pod.status.as_ref();
///         let conditions = status.and_then(|s| s.conditions.as_ref());
///         PodSummary {
///             phase: status.and_then(|s| s.phase.as_deref()).map(Box::from),
///             ready: conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True"),
///         }
///     }
/// }
/// ```
///
/// A controller then owns pods as `controller.owns_projected::<PodSummary>(api)` (see
/// [`Controller::owns_projected`]), which returns the handle of an
/// `ObjectCache<Projected<PodSummary>>`.
///
/// The watch decodes each object only to project it; the fields named in
/// [`UNREAD`](Projection::UNREAD) are skipped while decoding, never built. The projection
/// above reads neither the spec nor the managed fields of a pod, so it would declare
/// `const UNREAD: &'static [&'static str] = &["metadata.managedFields", "spec"];`.
pub trait Projection: Clone + PartialEq + Debug + Send + Sync + 'static {
    /// The kind projected: what the watch lists and what writes of it return.
    type Kind: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static;

    /// Dotted paths of fields [`project`](Projection::project) never reads, skipped while
    /// the watch decodes an object (never allocated): saves the time and the allocator's
    /// fragmentation of decoding, per event. Paths go through objects, not arrays
    /// (`status.podIP`, not `status.conditions.message`); each must be a field its type
    /// may lack (an `Option`, a collection). A projection that reads a field named here
    /// sees it absent on watched objects (but present on its own writes' replies), so
    /// name only what it never reads. The default skips the managed fields, which the
    /// runtime's own metadata never keeps either.
    const UNREAD: &'static [&'static str] = &["metadata.managedFields"];

    /// The projection of `obj` (its metadata is kept apart, as [`ProjectedMeta`]).
    fn project(obj: &Self::Kind) -> Self;
}

/// The metadata the runtime keeps of a projected object: key, uid, resourceVersion,
/// deletionTimestamp and ownerReferences. Equality ignores the resourceVersion, which
/// changes on every write and which no level-triggered decision may depend on.
///
/// Every string is kept in one buffer (and the owner references in one slice), so a
/// projected object's metadata is two allocations, not one per string: each allocation
/// costs the allocator's header and rounding on top of its bytes, which at tens of
/// thousands of cached objects is a large part of their memory.
#[derive(Debug, Clone)]
pub struct ProjectedMeta {
    /// namespace, name, uid, resourceVersion, then each owner's apiVersion, kind, name
    /// and uid, back to back.
    text: Box<str>,
    /// Where namespace, name, uid and resourceVersion end in `text`.
    ends: [u32; 4],
    /// Which of namespace, uid and resourceVersion are set (an empty one may be).
    present: u8,
    deletion_timestamp: Option<Time>,
    owners: Box<[PackedOwner]>,
}

/// An ownerReference: where its apiVersion, kind, name and uid end in the `text` of its
/// [`ProjectedMeta`].
#[derive(Debug, Clone)]
struct PackedOwner {
    ends: [u32; 4],
    controller: bool,
}

const HAS_NAMESPACE: u8 = 1;
const HAS_UID: u8 = 2;
const HAS_RESOURCE_VERSION: u8 = 4;

impl PartialEq for ProjectedMeta {
    fn eq(&self, other: &Self) -> bool {
        self.namespace() == other.namespace()
            && self.name() == other.name()
            && self.uid() == other.uid()
            && self.deletion_timestamp == other.deletion_timestamp
            && self.owners().eq(other.owners())
    }
}

/// Appends strings to one buffer, recording where each ends.
struct Packer(String);

impl Packer {
    fn push(&mut self, s: &str) -> u32 {
        self.0.push_str(s);
        // Object metadata is bounded far below 4 GiB by the API server's request limits.
        u32::try_from(self.0.len()).unwrap_or(u32::MAX)
    }

    fn push_all(&mut self, strings: [&str; 4]) -> [u32; 4] {
        strings.map(|s| self.push(s))
    }
}

impl ProjectedMeta {
    /// What the runtime keeps of `meta`.
    pub fn of(meta: &ObjectMeta) -> Self {
        let owners = meta.owner_references.as_deref().unwrap_or_default();
        let identity = [
            meta.namespace.as_deref(),
            meta.name.as_deref(),
            meta.uid.as_deref(),
            meta.resource_version.as_deref(),
        ];
        let length = identity.iter().flatten().map(|s| s.len()).sum::<usize>()
            + owners
                .iter()
                .map(|r| r.api_version.len() + r.kind.len() + r.name.len() + r.uid.len())
                .sum::<usize>();
        let mut text = Packer(String::with_capacity(length));
        let ends = text.push_all(identity.map(Option::unwrap_or_default));
        let owners = owners
            .iter()
            .map(|r| PackedOwner {
                ends: text.push_all([&r.api_version, &r.kind, &r.name, &r.uid]),
                controller: r.controller == Some(true),
            })
            .collect();
        let flag = |set: bool, flag: u8| if set { flag } else { 0 };
        ProjectedMeta {
            text: text.0.into_boxed_str(),
            ends,
            present: flag(meta.namespace.is_some(), HAS_NAMESPACE)
                | flag(meta.uid.is_some(), HAS_UID)
                | flag(meta.resource_version.is_some(), HAS_RESOURCE_VERSION),
            deletion_timestamp: meta.deletion_timestamp.clone(),
            owners,
        }
    }

    /// The `i`-th of the strings ending at `ends`, the first starting at `start`.
    fn span(&self, start: u32, ends: &[u32; 4], i: usize) -> &str {
        let from = if i == 0 { start } else { ends[i - 1] };
        self.text
            .get(from as usize..ends[i] as usize)
            .unwrap_or_default()
    }

    fn identity(&self, i: usize, flag: Option<u8>) -> Option<&str> {
        match flag {
            Some(flag) if self.present & flag == 0 => None,
            _ => Some(self.span(0, &self.ends, i)),
        }
    }

    /// `metadata.namespace` (`None`: cluster-scoped).
    pub fn namespace(&self) -> Option<&str> {
        self.identity(0, Some(HAS_NAMESPACE))
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.identity(1, None).unwrap_or_default()
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> Option<&str> {
        self.identity(2, Some(HAS_UID))
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> Option<&str> {
        self.identity(3, Some(HAS_RESOURCE_VERSION))
    }

    /// `metadata.deletionTimestamp`: set once the object is being deleted.
    pub fn deletion_timestamp(&self) -> Option<&Time> {
        self.deletion_timestamp.as_ref()
    }

    /// `metadata.ownerReferences`.
    pub fn owners(&self) -> impl Iterator<Item = OwnerView<'_>> {
        let mut start = self.ends[3];
        self.owners.iter().map(move |r| {
            let field = |i| self.span(start, &r.ends, i);
            let view = OwnerView {
                api_version: field(0),
                kind: field(1),
                name: field(2),
                uid: field(3),
                controller: r.controller,
            };
            start = r.ends[3];
            view
        })
    }

    /// Whether the object's controller (ownerReference with `controller: true`) has `uid`.
    pub fn is_controlled_by(&self, uid: &str) -> bool {
        self.owners().any(|r| r.controller && r.uid == uid)
    }
}

/// A projected object as a projected cache holds it: the runtime's [`ProjectedMeta`] and
/// the author's projection `P`, which it dereferences to.
#[derive(Debug, Clone, PartialEq)]
pub struct Projected<P> {
    meta: ProjectedMeta,
    value: P,
}

impl<P: Projection> Projected<P> {
    /// The projection of `obj`, as the cache would hold it: for a reconciler that reads
    /// objects from elsewhere too (a LIST), or a test.
    pub fn of(obj: &P::Kind) -> Self {
        Projected {
            meta: ProjectedMeta::of(obj.meta()),
            value: P::project(obj),
        }
    }
}

impl<P> Projected<P> {
    /// The object's metadata, as the runtime keeps it.
    pub fn meta(&self) -> &ProjectedMeta {
        &self.meta
    }
}

impl<P> Deref for Projected<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.value
    }
}

impl<P> Cached for Projected<P> {
    fn cache_meta(&self) -> CacheMeta<'_> {
        CacheMeta {
            namespace: self.meta.namespace(),
            name: self.meta.name(),
            uid: self.meta.uid(),
            resource_version: self.meta.resource_version(),
        }
    }

    fn cached_owners(&self) -> impl Iterator<Item = OwnerView<'_>> {
        self.meta.owners()
    }
}

/// An object of `P::Kind` as a projected watch decodes it: decoded skipping
/// [`Projection::UNREAD`], projected, and the object dropped at once. The watch keeps
/// only its resourceVersion (to resume from) in `resume`.
#[derive(Debug, Clone)]
pub(crate) struct Decoded<P> {
    resume: ObjectMeta,
    projected: Projected<P>,
}

impl<P> Decoded<P> {
    fn into_projected(self) -> Projected<P> {
        self.projected
    }
}

impl<'de, P: Projection> Deserialize<'de> for Decoded<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let obj: P::Kind = deserialize_skipping(deserializer, P::UNREAD)?;
        let resume = ObjectMeta {
            resource_version: obj.meta().resource_version.clone(),
            ..ObjectMeta::default()
        };
        Ok(Decoded {
            resume,
            projected: Projected::of(&obj),
        })
    }
}

// The URL, kind and scope of `P::Kind`, for the watch; only the metadata is of its own.
decoded_form_of!(impl<P: Projection> for Decoded<P>, kind P::Kind, |this| &this.resume, &mut this.resume);

/// A projected cache, where writes of `P::Kind` are remembered as their projections.
pub(crate) struct ProjectingWrites<P>(pub(crate) ObjectCache<Projected<P>>);

impl<P: Projection> Remembers<P::Kind> for ProjectingWrites<P> {
    fn remember(&self, written: &P::Kind) -> Option<Stamps> {
        self.0.remember_stamped(Projected::of(written))
    }

    fn forget(&self, key: &ObjectKey) {
        self.0.forget(key);
    }

    /// The managed fields when the projection leaves them unread: the reply is returned to
    /// the reconciler as the kind it wrote, so nothing else it could read is skipped.
    fn unread(&self) -> &'static [&'static str] {
        if P::UNREAD.contains(&crate::unmanaged::MANAGED_FIELDS_PATH) {
            crate::unmanaged::MANAGED_FIELDS
        } else {
            &[]
        }
    }
}

/// Every change of a projection wakes (its resourceVersion is not part of it).
fn projection_changed<P: PartialEq>(old: &Projected<P>, new: &Projected<P>) -> bool {
    old != new
}

fn projected<P: Projection>(
    cache: ObjectCache<Projected<P>>,
) -> CachedAs<P::Kind, Decoded<P>, Projected<P>> {
    CachedAs {
        convert: Decoded::into_projected,
        writes: Arc::new(ProjectingWrites(cache.clone())),
        cache,
    }
}

impl<K> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// [`owns_projected_with`](Self::owns_projected_with) the default watch.
    pub fn owns_projected<P: Projection>(
        &mut self,
        api: Api<P::Kind>,
    ) -> ObjectCache<Projected<P>> {
        self.owns_projected_with(api, self.default_watch())
    }

    /// [`owns_with`](Self::owns_with), caching each object as its projection `P`
    /// (see [`Projection`]) instead of the object: the same triggers (a change wakes the
    /// primary its controller ownerReference names, unless the projection is unchanged),
    /// the same owner index ([`ObjectCache::owned_by`]), and writes through
    /// [`Context::api`](crate::Context::api) cache the projection of the server's reply.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    /// # use kube::Api;
    /// # use steady_runtime::{Config, Controller};
    /// # use steady_runtime::projection::Projection;
    /// #[derive(Debug, Clone, PartialEq)]
    /// struct Phase(Option<String>);
    ///
    /// impl Projection for Phase {
    ///     type Kind = Pod;
    ///     fn project(pod: &Pod) -> Self {
    ///         Phase(pod.status.as_ref().and_then(|s| s.phase.clone()))
    ///     }
    /// }
    ///
    /// # fn build(client: kube::Client) {
    /// let mut controller = Controller::new(Api::<ConfigMap>::all(client.clone()), Config::named("c"));
    /// let pods = controller.owns_projected::<Phase>(Api::all(client));
    /// // In a reconcile: the phases of the pods a ConfigMap of uid "u" controls.
    /// let phases: Vec<Option<String>> = pods.owned_by("u").iter().map(|p| p.0.clone()).collect();
    /// # }
    /// ```
    pub fn owns_projected_with<P: Projection>(
        &mut self,
        api: Api<P::Kind>,
        watch: watcher::Config,
    ) -> ObjectCache<Projected<P>> {
        let mapper = self.controller_mapper(P::Kind::kind(&()).to_string());
        self.add_source(
            Role::Owned,
            retyped(api),
            watch,
            projected(ObjectCache::default()),
            mapper,
            projection_changed,
        )
    }

    /// [`watches_with`](Self::watches_with), caching each object as its projection `P`:
    /// `mapper` names the primaries to reconcile when a projection changes.
    pub fn watches_projected_with<P, F>(
        &mut self,
        api: Api<P::Kind>,
        watch: watcher::Config,
        mapper: F,
    ) -> ObjectCache<Projected<P>>
    where
        P: Projection,
        F: Fn(&Projected<P>) -> Vec<ObjectKey> + Send + Sync + 'static,
    {
        self.add_source(
            Role::Watched,
            retyped(api),
            watch,
            projected(ObjectCache::default()),
            watched_mapper(P::Kind::kind(&()).to_string(), mapper),
            projection_changed,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::object_cache::Listed;

    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    /// The one data key a reconciler reads.
    #[derive(Debug, Clone, PartialEq)]
    struct Mode(Option<String>);

    impl Projection for Mode {
        type Kind = ConfigMap;
        const UNREAD: &'static [&'static str] = &["metadata.managedFields", "binaryData"];

        fn project(cm: &ConfigMap) -> Self {
            Mode(cm.data.as_ref().and_then(|d| d.get("mode").cloned()))
        }
    }

    fn cm(name: &str, rv: &str, owner: &str, mode: &str, other: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "resourceVersion": rv,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Thing", "name": "t",
                                     "uid": owner, "controller": true}],
            },
            "data": {"mode": mode, "other": other},
        }))
        .expect("a ConfigMap")
    }

    fn mode(cache: &ObjectCache<Projected<Mode>>, name: &str) -> Option<String> {
        cache.get(&ObjectKey::new(Some("ns"), name))?.0.clone()
    }

    #[test]
    fn packed_metadata_reads_back_every_string_and_tells_absent_from_empty() {
        let meta: ObjectMeta = serde_json::from_value(json!({
            "name": "p", "namespace": "", "resourceVersion": "12",
            "deletionTimestamp": "2026-12-03T10:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "u-a"},
                {"apiVersion": "steady.dev/v1alpha1", "kind": "Cache", "name": "c",
                 "uid": "u-c", "controller": true},
            ],
        }))
        .expect("metadata");
        let packed = ProjectedMeta::of(&meta);
        assert_eq!(packed.name(), "p");
        assert_eq!(packed.namespace(), Some(""), "empty, not absent");
        assert_eq!(packed.uid(), None);
        assert_eq!(packed.resource_version(), Some("12"));
        assert!(packed.deletion_timestamp().is_some());
        let owners: Vec<(&str, &str, &str, &str, bool)> = packed
            .owners()
            .map(|o| (o.api_version, o.kind, o.name, o.uid, o.controller))
            .collect();
        assert_eq!(
            owners,
            [
                ("v1", "A", "a", "u-a", false),
                ("steady.dev/v1alpha1", "Cache", "c", "u-c", true)
            ]
        );
        assert!(packed.is_controlled_by("u-c") && !packed.is_controlled_by("u-a"));
        let bare = ProjectedMeta::of(&ObjectMeta::default());
        assert_eq!(
            (bare.namespace(), bare.name(), bare.owners().count()),
            (None, "", 0)
        );
        let mut newer = meta.clone();
        newer.resource_version = Some("13".into());
        assert_eq!(
            ProjectedMeta::of(&newer),
            packed,
            "the version is not compared"
        );
        newer.owner_references = None;
        assert_ne!(ProjectedMeta::of(&newer), packed);
    }

    #[test]
    fn the_watch_decodes_projections_skipping_what_they_never_read() {
        let mut served = serde_json::to_value(cm("a", "5", "o1", "fast", "x")).expect("json");
        served["binaryData"] = json!({"blob": "AAAA"});
        served["metadata"]["managedFields"] = json!([{"manager": "m", "operation": "Apply"}]);
        let decoded: Decoded<Mode> = serde_json::from_value(served).expect("decodes");
        assert_eq!(decoded.meta().resource_version.as_deref(), Some("5"));
        let projected = decoded.into_projected();
        assert_eq!(projected, Projected::of(&cm("a", "5", "o1", "fast", "x")));
        assert_eq!(projected.meta().resource_version(), Some("5"));
        assert_eq!(
            Decoded::<Mode>::url_path(&(), Some("ns")),
            ConfigMap::url_path(&(), Some("ns")),
            "watched where the kind lives"
        );
    }

    #[test]
    fn writes_are_remembered_as_projections_and_never_undone_by_older_events() {
        let cache = ObjectCache::<Projected<Mode>>::default();
        let writes = ProjectingWrites(cache.clone());
        writes.remember(&cm("a", "10", "o1", "fast", "x"));
        assert_eq!(mode(&cache, "a").as_deref(), Some("fast"));
        assert_eq!(
            cache
                .apply(Projected::of(&cm("a", "9", "o1", "slow", "x")))
                .err(),
            Some(crate::object_cache::Stale)
        );
        assert_eq!(mode(&cache, "a").as_deref(), Some("fast"));
        writes.forget(&ObjectKey::new(Some("ns"), "a"));
        assert!(cache.is_empty());
    }

    #[test]
    fn the_owner_index_follows_projected_objects() {
        let cache = ObjectCache::<Projected<Mode>>::default();
        cache.remember(Projected::of(&cm("a", "1", "o1", "fast", "x")));
        cache.remember(Projected::of(&cm("b", "2", "o1", "fast", "x")));
        assert_eq!(cache.owned_by("o1").len(), 2);
        cache.remember(Projected::of(&cm("a", "3", "o2", "fast", "x")));
        assert_eq!(cache.owned_by("o1").len(), 1);
        let moved = cache.owned_by("o2");
        assert_eq!(moved.len(), 1);
        assert!(moved[0].meta().is_controlled_by("o2"));
        assert_eq!(moved[0].meta().resource_version(), Some("3"));
    }

    #[test]
    fn only_a_change_of_the_projection_or_its_metadata_wakes() {
        let cached =
            |rv, owner, mode, other| Projected::<Mode>::of(&cm("a", rv, owner, mode, other));
        let first = cached("1", "o1", "fast", "x");
        assert!(
            !projection_changed(&first, &cached("2", "o1", "fast", "y")),
            "unread data, new version"
        );
        assert!(
            projection_changed(&first, &cached("3", "o1", "slow", "x")),
            "the projected field"
        );
        assert!(
            projection_changed(&first, &cached("4", "o2", "fast", "x")),
            "the owner"
        );
    }

    #[test]
    fn a_relist_of_projections_reports_changes_and_removals() {
        let cache = ObjectCache::<Projected<Mode>>::default();
        for obj in [
            cm("keep", "1", "o1", "a", "x"),
            cm("gone", "1", "o1", "a", "x"),
        ] {
            cache.apply_listed(
                Projected::of(&obj),
                &mut Listed::default(),
                projection_changed,
            );
        }
        let kept = cache
            .get(&ObjectKey::new(Some("ns"), "keep"))
            .expect("cached");
        let relisted = [
            cm("keep", "1", "o1", "a", "x"),
            cm("new", "2", "o1", "a", "x"),
        ];
        let mut listed = Listed::default();
        let mut changed: Vec<Arc<Projected<Mode>>> = relisted
            .iter()
            .flat_map(|obj| cache.apply_listed(Projected::of(obj), &mut listed, projection_changed))
            .collect();
        changed.extend(cache.retain_listed(listed));
        let mut changed: Vec<String> = changed
            .iter()
            .map(|p| p.meta().name().to_string())
            .collect();
        changed.sort();
        assert_eq!(changed, ["gone", "new"]);
        let still = cache
            .get(&ObjectKey::new(Some("ns"), "keep"))
            .expect("cached");
        assert!(
            Arc::ptr_eq(&kept, &still),
            "an unchanged object is not replaced"
        );
        assert_eq!(cache.owned_by("o1").len(), 2);
    }
}
