//! Writes that update the controller's cache on success (read-your-own-writes without
//! bookkeeping).
//!
//! A reconcile that writes through [`crate::Context::api`] sees its write in the cache of
//! that kind as soon as the call returns, before the watch event arrives: the next
//! reconcile cannot act on the older state and write again. controller-runtime leaves
//! this to the author (its cache lags its client); kube-runtime too (its `Store` is
//! read-only).

use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::inputs::Written;
use crate::object_cache::{Cached, ObjectCache, ObjectKey, Stamps};
use crate::observe::{self, WriteVerb};
use crate::projection::{Projected, ProjectingWrites, Projection};
use crate::unread::deserialize_skipping;

/// A kind a reconciler writes through the context: any k8s-openapi type or
/// `#[derive(CustomResource)]` type (implemented for every type that qualifies).
pub trait Writable:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + 'static
{
}

impl<C> Writable for C where
    C: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + 'static
{
}

/// Where a successful write of a `C` is remembered: a cache of `C` itself, or of a
/// projection of it.
pub(crate) trait Remembers<C>: Send + Sync {
    /// The server answered a write with `written`. Returns the stamps of the cached state
    /// (see [`Stamps`]), `None` when the cache already held a newer one.
    fn remember(&self, written: &C) -> Option<Stamps>;
    /// [`Self::remember`], unless `changed(cached, written)` says the cached state and
    /// the written one differ in what the write could not have changed (a status write's
    /// reply showing someone else's change, see [`changed_by_others`]): that change is
    /// left to its watch event, which then wakes the controller.
    fn remember_unless(&self, written: &C, _changed: fn(&C, &C) -> bool) -> Option<Stamps> {
        self.remember(written)
    }
    /// The object `key` is gone.
    fn forget(&self, key: &ObjectKey);
    /// The fields this sink never keeps of a written object, which its reply is decoded
    /// without.
    fn unread(&self) -> &'static [&'static str];
}

/// Whether the reply to a status write shows the object changed by someone else since the
/// cache last saw it: a status write changes neither `generation` (a spec change) nor
/// `deletionTimestamp`. Such a reply is not remembered. Cached, it would hold the change at
/// a resourceVersion its own watch event is older than (or equal to, when the status write
/// changed nothing), and a relist would report the object unchanged: when that event is
/// lost (a watch that expires, and the controller relists), nothing would reconcile the
/// change until the next resync.
fn changed_by_others<C: Resource>(cached: &C, written: &C) -> bool {
    let (cached, written) = (cached.meta(), written.meta());
    cached.uid == written.uid
        && (cached.generation != written.generation
            || cached.deletion_timestamp != written.deletion_timestamp)
}

/// Where a kind's writes are remembered, as the controller keeps it (type-erased by kind).
pub(crate) type WriteSink<C> = Arc<dyn Remembers<C>>;

impl<C: Cached + Clone + Send + Sync> Remembers<C> for ObjectCache<C> {
    fn remember(&self, written: &C) -> Option<Stamps> {
        self.remember_stamped(written.clone())
    }

    fn remember_unless(&self, written: &C, changed: fn(&C, &C) -> bool) -> Option<Stamps> {
        let cached = self.get(&written.cache_key());
        if cached.is_some_and(|cached| changed(cached.as_ref(), written)) {
            return None;
        }
        self.remember_stamped(written.clone())
    }

    fn forget(&self, key: &ObjectKey) {
        ObjectCache::forget(self, key);
    }

    fn unread(&self) -> &'static [&'static str] {
        ObjectCache::unread(self)
    }
}

/// An [`Api`] whose successful writes update the controller's cache of `C`, if it has one
/// (the primary kind, an owned or a watched kind); reads go to the cache handle instead.
///
/// The cache keeps what a write returned until a newer state arrives from the watch. Write
/// through this only objects the kind's watch would see: an object its selectors exclude
/// stays cached (as written) because no watch event will ever replace or remove it.
///
/// A write returns the object the server answered with, decoded as the cache keeps it:
/// without `metadata.managedFields` unless
/// [`Config::keep_managed_fields`](crate::Config::keep_managed_fields) is set (or the
/// projection reads them). Without a cache, it is decoded whole, as `Api` does.
pub struct CachingApi<C> {
    api: Api<C>,
    cache: Option<WriteSink<C>>,
    /// For the reconcile's record of its writes ([`crate::observe`]).
    kind: String,
}

/// Writes that update no cache: for a reconciler shared with a runtime that has none.
impl<C: Resource<DynamicType = ()>> From<Api<C>> for CachingApi<C> {
    fn from(api: Api<C>) -> Self {
        let kind = C::kind(&()).to_string();
        CachingApi {
            api,
            cache: None,
            kind,
        }
    }
}

impl<C> CachingApi<C>
where
    C: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    pub(crate) fn new(api: Api<C>, cache: Option<WriteSink<C>>) -> Self
    where
        C: Resource<DynamicType = ()>,
    {
        let kind = C::kind(&()).to_string();
        CachingApi { api, cache, kind }
    }

    /// Writes through `api` that update `cache` on success: for a reconciler that holds
    /// the handle [`Controller::owns`](crate::Controller::owns) (or `watches`) returned.
    pub fn with_cache(api: Api<C>, cache: ObjectCache<C>) -> Self
    where
        C: Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        CachingApi::new(api, Some(Arc::new(cache)))
    }

    /// Writes through `api` that update the projected `cache` on success, with the
    /// projection of what the server returned: for a reconciler that holds the handle
    /// [`Controller::owns_projected`](crate::Controller::owns_projected) returned.
    pub fn with_projection<P>(api: Api<C>, cache: ObjectCache<Projected<P>>) -> Self
    where
        P: Projection<Kind = C>,
        C: Resource<DynamicType = ()>,
    {
        CachingApi::new(api, Some(Arc::new(ProjectingWrites(cache))))
    }

    /// The plain `Api`, for calls whose results are not cached (get, list, subresources).
    pub fn inner(&self) -> &Api<C> {
        &self.api
    }

    fn remember(&self, verb: WriteVerb, written: &C) {
        self.record(verb, written, |cache| cache.remember(written));
    }

    /// Record the write of `written` for the reconcile, and cache it as `cache_it` says
    /// (the stamp the cached state got, or `None`: not cached).
    fn record(
        &self,
        verb: WriteVerb,
        written: &C,
        cache_it: impl FnOnce(&dyn Remembers<C>) -> Option<Stamps>,
    ) {
        observe::record_write(verb, &self.kind, ObjectKey::of(written));
        if let Some(stamps) = self.cache.as_deref().and_then(cache_it) {
            observe::record_written(Written::cached(&self.kind, written, stamps));
        }
    }

    /// Await `write` and remember what the server returned.
    async fn remembered(
        &self,
        verb: WriteVerb,
        write: impl Future<Output = Result<C, kube::Error>>,
    ) -> Result<C, kube::Error> {
        let written = write.await?;
        self.remember(verb, &written);
        Ok(written)
    }

    fn forget(&self, name: &str) {
        if let Some(cache) = &self.cache {
            cache.forget(&self.key(name));
        }
    }

    /// Requests to `C`'s URL, as `Api` builds them.
    fn request(&self) -> kube::core::Request {
        kube::core::Request::new(self.api.resource_url())
    }

    /// The fields a write's reply is decoded without: those the cache never keeps (see
    /// [`Config::keep_managed_fields`](crate::Config::keep_managed_fields)).
    fn unread(&self) -> &'static [&'static str] {
        self.cache.as_ref().map_or(&[], |cache| cache.unread())
    }

    /// Send a write as `Api`'s method `verb` would, and the text of its reply.
    async fn reply_to(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        verb: &'static str,
    ) -> Result<String, kube::Error> {
        let mut request = request.map_err(kube::Error::BuildRequest)?;
        request.extensions_mut().insert(verb);
        self.api.clone().into_client().request_text(request).await
    }

    /// A reply decoded as the object written, without what the cache never keeps.
    fn decode(&self, reply: &str) -> Result<C, kube::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(reply);
        let written = deserialize_skipping(&mut deserializer, self.unread())
            .and_then(|written| deserializer.end().map(|()| written));
        written.map_err(kube::Error::SerdeError)
    }

    /// [`Self::reply_to`], decoded.
    async fn send(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        verb: &'static str,
    ) -> Result<C, kube::Error> {
        self.decode(&self.reply_to(request, verb).await?)
    }

    /// `Api::delete`. `None`: the server answered with a `Status`, the object is gone.
    /// (kube decodes a delete's reply twice: into a `Value` to read its `kind`, then again.)
    async fn send_delete(&self, name: &str, dp: &DeleteParams) -> Result<Option<C>, kube::Error> {
        /// Only the `kind` of a reply.
        #[derive(Deserialize)]
        struct KindOnly {
            #[serde(default)]
            kind: String,
        }
        let reply = self
            .reply_to(self.request().delete(name, dp), "delete")
            .await?;
        let head: KindOnly = serde_json::from_str(&reply).map_err(kube::Error::SerdeError)?;
        if head.kind == "Status" {
            return Ok(None);
        }
        self.decode(&reply).map(Some)
    }

    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(self.api.namespace(), name)
    }

    /// Create `obj`; the created object is cached.
    pub async fn create(&self, pp: &PostParams, obj: &C) -> Result<C, kube::Error> {
        let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
        let request = self.request().create(pp, body);
        self.remembered(WriteVerb::Created, self.send(request, "create"))
            .await
    }

    /// Replace the object `name` with `obj`; the stored result is cached.
    pub async fn replace(&self, name: &str, pp: &PostParams, obj: &C) -> Result<C, kube::Error> {
        let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
        let request = self.request().replace(name, pp, body);
        self.remembered(WriteVerb::Replaced, self.send(request, "replace"))
            .await
    }

    /// Patch the object `name`; the patched object is cached.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<C, kube::Error> {
        let request = self.request().patch(name, pp, patch);
        self.remembered(WriteVerb::Patched, self.send(request, "patch"))
            .await
    }

    /// Patch the status of the object `name`; the patched object is cached.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<C, kube::Error> {
        let request = self.request().patch_subresource("status", name, pp, patch);
        self.status_written(WriteVerb::PatchedStatus, self.send(request, "patch_status"))
            .await
    }

    /// Replace the status of the object `name` with `obj`'s (`Api::replace_status`: a
    /// conflict if `obj`'s resourceVersion is not the stored one); the result is cached.
    pub async fn replace_status(
        &self,
        name: &str,
        pp: &PostParams,
        obj: &C,
    ) -> Result<C, kube::Error> {
        let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
        let request = self.request().replace_subresource("status", name, pp, body);
        self.status_written(
            WriteVerb::ReplacedStatus,
            self.send(request, "replace_status"),
        )
        .await
    }

    /// Record a status write and cache its result, unless the reply shows a change made by
    /// someone else meanwhile (see [`changed_by_others`]): that is left to the watch.
    async fn status_written(
        &self,
        verb: WriteVerb,
        write: impl Future<Output = Result<C, kube::Error>>,
    ) -> Result<C, kube::Error> {
        let written = write.await?;
        self.record(verb, &written, |cache| {
            cache.remember_unless(&written, changed_by_others::<C>)
        });
        Ok(written)
    }

    /// Delete the object `name`. `Ok(Some(obj))`: the server answered with the object,
    /// which carries its deletionTimestamp, and `obj` is cached as terminating (finalizers
    /// or a grace period keep it; a terminating pod still holds its name). kube-apiserver
    /// answers a delete that ended the object with its last state as well, and with the
    /// same 200: the cache holds that state until the object's DELETED event, never after
    /// it (the cache refuses a written state the watch has seen deleted, and one older
    /// than a successor of the same name). `Ok(None)`: it is gone (the server answered
    /// with a `Status`, as it does for custom resources), and is forgotten. A 404 forgets
    /// it too (someone else deleted it first) and is returned as the error it is.
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<Option<C>, kube::Error> {
        match self.send_delete(name, dp).await {
            Ok(deleted) => match deleted {
                Some(terminating) if terminating.meta().deletion_timestamp.is_some() => {
                    self.remember(WriteVerb::Deleted, &terminating);
                    Ok(Some(terminating))
                }
                _ => {
                    observe::record_write(WriteVerb::Deleted, &self.kind, self.key(name));
                    observe::record_written(Written::gone(&self.kind, self.key(name)));
                    self.forget(name);
                    Ok(None)
                }
            },
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.forget(name);
                Err(kube::Error::Api(status))
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn deployment(rv: &str, generation: i64) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                uid: Some("uid-web".into()),
                resource_version: Some(rv.into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn cached_version(cache: &ObjectCache<Deployment>) -> Option<String> {
        let key = ObjectKey::new(Some("ns"), "web");
        cache.get(&key)?.metadata.resource_version.clone()
    }

    /// Someone changes the spec (rv 6, generation 2) while the controller writes status
    /// from what it read at rv 5: the status reply (rv 7) carries generation 2. Cached, it
    /// would make the spec change's own event stale, and no reconcile would see it.
    #[test]
    fn a_status_reply_showing_someone_elses_change_is_left_to_the_watch() {
        let cache = ObjectCache::<Deployment>::default();
        cache.remember(deployment("5", 1));
        let sink: &dyn Remembers<Deployment> = &cache;
        let changed = changed_by_others::<Deployment>;

        assert_eq!(sink.remember_unless(&deployment("7", 2), changed), None);
        assert_eq!(cached_version(&cache).as_deref(), Some("5"));
        let event = cache.update(deployment("6", 2), |old, new| old != new);
        assert!(
            event.is_ok_and(|update| update.woke),
            "the spec change wakes"
        );

        // A reply that shows only what the write did is remembered.
        assert!(sink.remember_unless(&deployment("8", 2), changed).is_some());
        assert_eq!(cached_version(&cache).as_deref(), Some("8"));
    }
}
