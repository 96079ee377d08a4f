//! Finalizer helper: make sure a reconciler gets to clean up before an object goes away.
//!
//! [`finalizer`] looks at the object a reconcile was triggered for and:
//! 1. object live, finalizer missing: adds the finalizer and returns `Ok(None)`; the write
//!    triggers the next reconcile, which then applies.
//! 2. object live, finalizer present: runs `handle(FinalizerEvent::Apply(obj))`.
//! 3. object being deleted, finalizer present: runs `handle(FinalizerEvent::Cleanup(obj))`
//!    and, if it succeeded, removes the finalizer (the API server then deletes the object
//!    once no finalizers remain).
//! 4. object being deleted, finalizer missing: nothing to do, `Ok(None)`.
//!
//! Writes are optimistic: adding sends a merge patch with the complete finalizer list and
//! the observed `metadata.resourceVersion`, so any concurrent change of the object makes it
//! fail with 409 Conflict instead of overwriting someone else's finalizers. Removing sends a
//! JSON patch that `test`s the object's uid and that our finalizer is still at the index
//! observed, then removes that index, so a recreated object or a shifted list makes it fail
//! (422) instead of removing the wrong entry. Either failure surfaces as
//! [`FinalizerError::Kube`]; the caller retries with a fresh object. Cleanup may therefore
//! run more than once and must be idempotent.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// What the handler passed to [`finalizer`] is asked to do.
pub enum FinalizerEvent<K> {
    /// The object is live (and carries the finalizer): reconcile it.
    Apply(Arc<K>),
    /// The object is being deleted: release whatever it holds. The finalizer is removed
    /// once this returns `Ok`.
    Cleanup(Arc<K>),
}

impl<K: fmt::Debug> fmt::Debug for FinalizerEvent<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinalizerEvent::Apply(k) => f.debug_tuple("Apply").field(k).finish(),
            FinalizerEvent::Cleanup(k) => f.debug_tuple("Cleanup").field(k).finish(),
        }
    }
}

/// Failure of [`finalizer`].
#[derive(Debug, thiserror::Error)]
pub enum FinalizerError<E> {
    /// The handler failed on [`FinalizerEvent::Apply`].
    #[error("apply failed: {0}")]
    Apply(#[source] E),
    /// The handler failed on [`FinalizerEvent::Cleanup`]; the finalizer stays.
    #[error("cleanup failed: {0}")]
    Cleanup(#[source] E),
    /// Adding or removing the finalizer failed (409 Conflict or 422 Invalid on a
    /// concurrent change).
    #[error("patching the finalizer failed: {0}")]
    Kube(#[source] kube::Error),
    /// The object has no `metadata.name`, so it cannot be patched.
    #[error("object has no name")]
    UnnamedObject,
}

/// Run `handle` on `obj` under the finalizer `name`: see the [module docs](self).
///
/// Returns `Ok(None)` when the handler did not run (the finalizer was just added, or the
/// object is being deleted without our finalizer) and `Ok(Some(t))` with the handler's
/// result when it ran (and, for cleanup, the finalizer was removed).
pub async fn finalizer<K, F, Fut, T, E>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    handle: F,
) -> Result<Option<T>, FinalizerError<E>>
where
    K: Resource + Clone + DeserializeOwned + Serialize + fmt::Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let meta = obj.meta();
    let obj_name = meta
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or(FinalizerError::UnnamedObject)?;
    let finalizers: &[String] = meta.finalizers.as_deref().unwrap_or_default();
    let index = finalizers.iter().position(|f| f == name);
    let deleting = meta.deletion_timestamp.is_some();

    match (deleting, index) {
        (false, None) => {
            let mut list = finalizers.to_vec();
            list.push(name.to_string());
            let mut metadata = json!({ "finalizers": list });
            if let Some(rv) = &meta.resource_version {
                metadata["resourceVersion"] = Value::String(rv.clone());
            }
            let patch = Patch::Merge(json!({ "metadata": metadata }));
            tracing::debug!(object = %obj_name, finalizer = name, "adding finalizer");
            api.patch(&obj_name, &PatchParams::default(), &patch)
                .await
                .map_err(FinalizerError::Kube)?;
            Ok(None)
        }
        (false, Some(_)) => handle(FinalizerEvent::Apply(obj))
            .await
            .map(Some)
            .map_err(FinalizerError::Apply),
        (true, Some(index)) => {
            let mut ops = Vec::with_capacity(3);
            if let Some(uid) = &meta.uid {
                ops.push(json!({ "op": "test", "path": "/metadata/uid", "value": uid }));
            }
            let path = format!("/metadata/finalizers/{index}");
            ops.push(json!({ "op": "test", "path": path, "value": name }));
            ops.push(json!({ "op": "remove", "path": path }));
            let patch: Patch<()> = Patch::Json(
                serde_json::from_value(Value::Array(ops))
                    .map_err(|e| FinalizerError::Kube(kube::Error::SerdeError(e)))?,
            );

            let result = handle(FinalizerEvent::Cleanup(obj))
                .await
                .map_err(FinalizerError::Cleanup)?;

            tracing::debug!(object = %obj_name, finalizer = name, "removing finalizer");
            match api.patch(&obj_name, &PatchParams::default(), &patch).await {
                Ok(_) => Ok(Some(result)),
                // Gone already: nothing holds it any more, so neither does our finalizer.
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(Some(result)),
                Err(e) => Err(FinalizerError::Kube(e)),
            }
        }
        (true, None) => Ok(None),
    }
}
