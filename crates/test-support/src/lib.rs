//! What steady's integration tests share, so each test file states only what it checks.
//!
//! Owns the waiting rule (poll a condition, bounded by a limit on tokio's clock, which is
//! virtual under a paused runtime and real otherwise), the reading of API errors and the
//! few client calls every suite spells the same way (get, create, merge patch, list). Knows
//! nothing of steady's crates: servers are started by each suite through
//! `steady_apiserver::ApiServer::in_memory` or the binary, so this crate sits below all of
//! them and any crate's tests can use it.

pub mod pods;

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How often a condition is checked again (on tokio's clock).
const POLL: Duration = Duration::from_millis(10);

/// Poll `check` until it returns `Some`, and return that value; panic naming `what` once
/// `limit` has passed on tokio's clock. Between attempts the task yields a few times
/// (so spawned tasks run under a paused clock without advancing it) and then sleeps
/// [`POLL`], which costs no real time when the clock is paused.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let wait = async {
        loop {
            if let Some(value) = check().await {
                return value;
            }
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(POLL).await;
        }
    };
    match tokio::time::timeout(limit, wait).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for {what}"),
    }
}

/// The code and reason of a `kube::Error::Api`; panics on success or any other error.
pub fn api_code<T: Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Remove every finalizer from `name`, as the controller that set them would once done, so
/// that a deletion waiting on them can finish.
pub async fn clear_finalizers<K>(api: &kube::Api<K>, name: &str)
where
    K: Clone + DeserializeOwned + Debug,
{
    merge_patch(
        api,
        name,
        serde_json::json!({"metadata": {"finalizers": null}}),
    )
    .await
    .unwrap_or_else(|e| panic!("clearing the finalizers of {name}: {e}"));
}

/// Create `object` (JSON as a user writes it) through `api`; returns what the server stored.
pub async fn create_json<K>(api: &kube::Api<K>, object: serde_json::Value) -> K
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    let typed: K = serde_json::from_value(object)
        .unwrap_or_else(|e| panic!("not a {}: {e}", std::any::type_name::<K>()));
    api.create(&kube::api::PostParams::default(), &typed)
        .await
        .unwrap_or_else(|e| panic!("create {typed:?}: {e}"))
}

/// `name` as `api` reads it; panics naming it when it cannot be read (it must exist).
pub async fn get_existing<K>(api: &kube::Api<K>, name: &str) -> K
where
    K: Clone + DeserializeOwned + Debug,
{
    api.get(name)
        .await
        .unwrap_or_else(|e| panic!("get {name}: {e}"))
}

/// Send `patch` to `name` as a JSON merge patch with default parameters: the patch most
/// tests write, successful or not.
pub async fn merge_patch<K, P>(api: &kube::Api<K>, name: &str, patch: P) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
    P: Serialize + Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// [`merge_patch`] of the `subresource` of `name` (`"status"`, or `"scale"` as `kubectl
/// scale` writes it); the answer is read as `T` (the object for `status`, a `Scale` for
/// `scale`).
pub async fn merge_patch_subresource<T, K>(
    api: &kube::Api<K>,
    subresource: &str,
    name: &str,
    patch: impl Serialize + Debug,
) -> kube::Result<T>
where
    T: Clone + DeserializeOwned + Debug,
    K: kube::Resource + Clone,
{
    let request = kube::core::Request::new(api.resource_url())
        .patch_subresource(
            subresource,
            name,
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    api.clone().into_client().request(request).await
}

/// How many objects `api` lists with `params`.
pub async fn list_count<K>(api: &kube::Api<K>, params: &kube::api::ListParams) -> usize
where
    K: Clone + DeserializeOwned + Debug,
{
    api.list(params)
        .await
        .unwrap_or_else(|e| panic!("list {params:?}: {e}"))
        .items
        .len()
}

/// The stdout of a finished command `what` (kubectl, steady), which must have succeeded:
/// otherwise panic with both its outputs.
pub fn successful_stdout(what: impl std::fmt::Display, output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_the_first_value_the_condition_yields() {
        let mut calls = 0;
        let value = eventually("the third call", Duration::from_secs(1), || {
            calls += 1;
            let now = calls;
            async move { (now == 3).then_some(now) }
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    #[should_panic(expected = "timed out after 1s waiting for nothing")]
    async fn panics_naming_the_condition_after_the_limit() {
        eventually("nothing", Duration::from_secs(1), || async { None::<()> }).await;
    }
}
