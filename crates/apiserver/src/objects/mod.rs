//! The object operations: get, list, create, update, patch, delete, with Kubernetes'
//! rules for metadata, generation, the status and scale subresources, finalizers and
//! graceful deletion. HTTP-free, so the controllers inside the server use them too.
//!
//! One file per concern: [`read`] (get, list, paging, freshness), [`write`] (create,
//! update, patch and the rules every write goes through), [`delete`] (preconditions,
//! finalizers, propagation, grace periods), [`scale`] (the scale subresource) and
//! [`ownership`] (the glue to `apply/`'s field ownership). Built-in defaulting lives in
//! `defaults.rs`, conversion in `webhook/conversion.rs`; what is here is shared by them all.

mod delete;
mod ownership;
mod read;
mod recent;
pub(crate) mod scale;
mod write;

use bytes::Bytes;
use serde_json::{Value, json};
use steady_store::{Object, Revision};

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceType;
use crate::request::WriteOptions;

pub(crate) use delete::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN, check_uid_and_revision};
pub(crate) use read::selects;
pub(crate) use recent::RecentWrites;
pub(crate) use write::{Written, patch_error};

/// The object a request is addressed to, as its URL names it: the resource type, namespace,
/// name and, for a subresource (`status`, `scale`, `finalize`…), its name.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub rt: &'a ResourceType,
    pub ns: Option<&'a str>,
    pub name: &'a str,
    pub sub: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// The object itself.
    pub fn object(rt: &'a ResourceType, ns: Option<&'a str>, name: &'a str) -> Self {
        Target {
            rt,
            ns,
            name,
            sub: None,
        }
    }

    /// Its subresource `sub` (none when `None`).
    pub fn subresource(self, sub: Option<&'a str>) -> Self {
        Target { sub, ..self }
    }
}

/// How long a write without a resourceVersion precondition (a patch, a delete, a scale)
/// keeps re-reading after losing a race to a concurrent writer. kube-apiserver's
/// `GuaranteedUpdate` retries until the write applies, bounded only by the request timeout
/// (60 s); kubectl, kopf and controllers rely on an unconditioned patch never failing with
/// 409 just because others write the same object.
const CONFLICT_RETRY_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// One first attempt, then another for as long as the retry window lasts.
pub(crate) fn attempts_until_applied() -> impl Iterator<Item = ()> {
    let deadline = tokio::time::Instant::now() + CONFLICT_RETRY_WINDOW;
    std::iter::once(()).chain(std::iter::from_fn(move || {
        (tokio::time::Instant::now() < deadline).then_some(())
    }))
}

const DEFAULT_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

fn parse_stored(object: &Object) -> ApiResult<Value> {
    steady_store::json::from_bytes(&object.value)
        .map_err(|e| ApiError::internal(format!("stored object {} is corrupt: {e}", object.key)))
}

impl ApiServer {
    /// The object `stored` decoded, for a write that replaces it: taken from the objects
    /// this server wrote last ([`RecentWrites`], when `Config::keep_recent_writes`) when it
    /// is one of them, else parsed and given the defaults kube gives what it decodes (it
    /// may have been stored before they existed).
    fn decoded_for_write(&self, rt: &ResourceType, stored: &Object) -> ApiResult<Value> {
        let kept = self
            .recent_writes()
            .and_then(|recent| recent.take(&stored.key, stored.revision));
        let Some(kept) = kept else {
            let mut parsed = parse_stored(stored)?;
            if rt.builtin {
                crate::defaults::as_decoded(&rt.group, &rt.plural, &mut parsed);
            }
            return Ok(parsed);
        };
        debug_assert_eq!(
            Some(&kept),
            parse_stored(stored).ok().as_ref(),
            "the object kept for {} differs from its stored bytes",
            stored.key
        );
        Ok(kept)
    }

    /// Keep `value`, the object just written as `stored`, for the next write of it.
    fn keep_written(&self, stored: &Object, value: Value) {
        if let Some(recent) = self.recent_writes() {
            recent.keep(&stored.key, stored.revision, value, stored.value.len());
        }
    }
}

fn to_bytes(value: &Value) -> ApiResult<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| ApiError::internal(format!("encoding failed: {e}")))
}

impl ApiServer {
    /// [`Self::present_converted`] for an object the store has just committed: the write succeeded, so the
    /// client gets a success whatever happens here. The store holds only objects it can read
    /// back (see [`steady_store::MAX_DEPTH`]), so this only logs (a conversion webhook may also fail); the
    /// stored bytes are valid JSON either way.
    async fn present_committed(&self, rt: &ResourceType, stored: Bytes) -> Bytes {
        match self.present_converted(rt, stored.clone()).await {
            Ok(presented) => presented,
            Err(e) => {
                tracing::error!(kind = %rt.kind, error = %e, "a committed object could not be presented");
                stored
            }
        }
    }
}

/// Create the namespaces every cluster starts with.
pub(crate) async fn ensure_default_namespaces(server: &ApiServer) -> ApiResult<()> {
    let Some(rt) = server.registry().builtin("", "namespaces") else {
        return Ok(());
    };
    for name in DEFAULT_NAMESPACES {
        if server.get_stored(&rt, None, name).is_ok() {
            continue;
        }
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match server.create(&rt, None, ns, &WriteOptions::default()).await {
            Err(e) if e.reason != "AlreadyExists" => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn parse_revision(rv: &str) -> ApiResult<Revision> {
    rv.parse::<Revision>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))
}
