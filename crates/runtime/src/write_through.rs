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
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::inputs::Version;
use crate::object_cache::{Cached, ObjectCache, ObjectKey};
use crate::observe::{self, WriteVerb};
use crate::projection::{Projected, ProjectingWrites, Projection};

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
    /// The server answered a write with `written`. Returns the stamp the cached state
    /// got, `None` when the cache already held a newer one.
    fn remember(&self, written: &C) -> Option<u64>;
    /// The object `key` is gone.
    fn forget(&self, key: &ObjectKey);
}

/// Where a kind's writes are remembered, as the controller keeps it (type-erased by kind).
pub(crate) type WriteSink<C> = Arc<dyn Remembers<C>>;

impl<C: Cached + Clone + Send + Sync> Remembers<C> for ObjectCache<C> {
    fn remember(&self, written: &C) -> Option<u64> {
        self.remember_stamped(written.clone())
    }

    fn forget(&self, key: &ObjectKey) {
        ObjectCache::forget(self, key);
    }
}

/// An [`Api`] whose successful writes update the controller's cache of `C`, if it has one
/// (the primary kind, an owned or a watched kind); reads go to the cache handle instead.
///
/// The cache keeps what a write returned until a newer state arrives from the watch. Write
/// through this only objects the kind's watch would see: an object its selectors exclude
/// stays cached (as written) because no watch event will ever replace or remove it.
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
        let key = ObjectKey::of(written);
        observe::record_write(verb, &self.kind, key.clone());
        if let Some(stamp) = self
            .cache
            .as_ref()
            .and_then(|cache| cache.remember(written))
        {
            observe::record_written(&self.kind, key, Some(Version::of(written, stamp)));
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

    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(self.api.namespace(), name)
    }

    /// Create `obj`; the created object is cached.
    pub async fn create(&self, pp: &PostParams, obj: &C) -> Result<C, kube::Error> {
        self.remembered(WriteVerb::Created, self.api.create(pp, obj))
            .await
    }

    /// Replace the object `name` with `obj`; the stored result is cached.
    pub async fn replace(&self, name: &str, pp: &PostParams, obj: &C) -> Result<C, kube::Error> {
        self.remembered(WriteVerb::Replaced, self.api.replace(name, pp, obj))
            .await
    }

    /// Patch the object `name`; the patched object is cached.
    pub async fn patch<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<C, kube::Error> {
        self.remembered(WriteVerb::Patched, self.api.patch(name, pp, patch))
            .await
    }

    /// Patch the status of the object `name`; the patched object is cached.
    pub async fn patch_status<P: Serialize + Debug>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<C, kube::Error> {
        let write = self.api.patch_status(name, pp, patch);
        self.remembered(WriteVerb::PatchedStatus, write).await
    }

    /// Delete the object `name`. `Ok(Some(obj))`: it is terminating (finalizers or a grace
    /// period keep it, and `obj` carries its deletionTimestamp), so `obj` is cached — it
    /// still exists, e.g. a terminating pod still holds its name. `Ok(None)`: it is gone,
    /// and is forgotten. A 404 forgets it too (someone else deleted it first) and is
    /// returned as the error it is.
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> Result<Option<C>, kube::Error> {
        match self.api.delete(name, dp).await {
            Ok(deleted) => match deleted.left() {
                Some(terminating) if terminating.meta().deletion_timestamp.is_some() => {
                    self.remember(WriteVerb::Deleted, &terminating);
                    Ok(Some(terminating))
                }
                _ => {
                    observe::record_write(WriteVerb::Deleted, &self.kind, self.key(name));
                    observe::record_written(&self.kind, self.key(name), None);
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
