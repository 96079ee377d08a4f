//! steady's controller runtime: a level-triggered reconciliation loop on `kube::Client`.
//!
//! Owns: caches of watched kinds, triggers (primary, owned, mapped, resync, requeue), the
//! work queue, per-key backoff, bounded concurrency, leader election, metrics, probes, and
//! the [`Operator`] runner that serves them around a controller.
//! Must not know: any particular operator, or whether the server is steady's embedded one
//! or a real cluster — it speaks only the Kubernetes API through `kube::Client`.
//!
//! # A small operator
//!
//! For every ConfigMap, keep a Secret `<name>-copy` holding the same data. The reconciler
//! reads the desired state (the ConfigMap) and the actual state (the Secret, from the
//! runtime's cache) and writes only when they differ. The Secret is *owned* (controller
//! ownerReference), so deleting it — or the ConfigMap — triggers the right reconcile; the
//! garbage collector removes copies of deleted ConfigMaps.
//!
//! - `owns_with` returns the typed handle of the Secrets' cache, which the reconciler gets
//!   as its data: no lookup that could find nothing at reconcile time. Its
//!   `watcher::Config` narrows the watch (and the cache) to labelled copies; `owns` watches
//!   every Secret.
//! - Writes go through [`Context::api`], which puts what the server returned into the
//!   cache, so the next reconcile reads its own write even before the watch event arrives.
//!   With [`Config::skip_unchanged`] set, that event does not run the reconciler again
//!   either: a reconciler that reaches its fixed point in one run needs no confirming run.
//! - Each kind has one source: a second `owns`/`watches` of one kind, or a `trim` of a
//!   kind never watched, makes `run` fail at start ([`Controller::validate`] says so
//!   earlier).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
//! use k8s_openapi::ByteString;
//! use kube::api::{Api, PostParams};
//! use kube::runtime::watcher;
//! use steady_runtime::{Action, Config, Context, Controller, ObjectCache, ObjectKey};
//!
//! #[derive(Debug, thiserror::Error)]
//! #[error(transparent)]
//! struct Error(#[from] kube::Error);
//!
//! async fn reconcile(
//!     cm: Arc<ConfigMap>,
//!     ctx: Arc<Context<ObjectCache<Secret>>>,
//! ) -> Result<Action, Error> {
//!     let ns = cm.metadata.namespace.clone().unwrap_or_default();
//!     let name = format!("{}-copy", cm.metadata.name.clone().unwrap_or_default());
//!     let want: std::collections::BTreeMap<String, ByteString> = cm
//!         .data
//!         .iter()
//!         .flatten()
//!         .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
//!         .collect();
//!     let secrets = ctx.data();
//!     let have = secrets.get(&ObjectKey::new(Some(&ns), &name));
//!     if have.as_ref().and_then(|s| s.data.as_ref()) == Some(&want) {
//!         return Ok(Action::done()); // the fixed point: no write at all
//!     }
//!     let mut secret = Secret::default();
//!     secret.metadata.name = Some(name.clone());
//!     secret.metadata.labels =
//!         Some([("app.kubernetes.io/managed-by".to_string(), "copier".to_string())].into());
//!     secret.metadata.owner_references = Some(vec![OwnerReference {
//!         api_version: "v1".into(),
//!         kind: "ConfigMap".into(),
//!         name: cm.metadata.name.clone().unwrap_or_default(),
//!         uid: cm.metadata.uid.clone().unwrap_or_default(),
//!         controller: Some(true),
//!         block_owner_deletion: Some(true),
//!     }]);
//!     secret.data = Some(want);
//!     let api = ctx.api::<Secret>(&ns); // successful writes update the cache
//!     match have {
//!         None => api.create(&PostParams::default(), &secret).await?,
//!         Some(existing) => {
//!             secret.metadata.resource_version = existing.metadata.resource_version.clone();
//!             api.replace(&name, &PostParams::default(), &secret).await?
//!         }
//!     };
//!     Ok(Action::done())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // An embedded API server with no socket (a real cluster's client works the same way).
//! let store = steady_store::Store::in_memory(Default::default()).await?;
//! let server = steady_apiserver::ApiServer::start(store, Default::default()).await?;
//! let client = server.client();
//!
//! let mut controller = Controller::new(Api::<ConfigMap>::all(client.clone()), Config::default());
//! // Only Secrets labelled as copies are watched and cached (`owns` watches them all).
//! let copies = watcher::Config::default().labels("app.kubernetes.io/managed-by=copier");
//! let secrets = controller.owns_with(Api::<Secret>::all(client.clone()), copies);
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(controller.run(reconcile, Arc::new(secrets), async move {
//!     let _ = stopped.await;
//! }));
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cm.data = Some([("mode".to_string(), "fast".to_string())].into());
//! Api::<ConfigMap>::namespaced(client.clone(), "default").create(&PostParams::default(), &cm).await?;
//!
//! let copies: Api<Secret> = Api::namespaced(client.clone(), "default");
//! let copy = loop {
//!     if let Some(copy) = copies.get_opt("settings-copy").await? {
//!         break copy;
//!     }
//!     tokio::time::sleep(Duration::from_millis(10)).await;
//! };
//! assert_eq!(copy.data.unwrap()["mode"].0, b"fast");
//! let _ = stop.send(());
//! running.await??;
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

pub mod apply;
pub mod backoff;
pub mod conditions;
pub mod controller;
mod error;
pub mod event_log;
pub mod events;
pub mod finalizer;
mod inputs;
pub mod leader;
pub mod metrics;
pub mod object_cache;
pub mod observe;
pub mod operator;
pub mod projection;
pub mod queue;
mod source;
mod unmanaged;
pub mod unread;
pub mod write_through;

pub use controller::{Action, Config, Context, Controller, Error};
pub use object_cache::{Cached, ObjectCache, ObjectKey};
pub use observe::Recorder;
pub use operator::{Operator, OperatorError};
pub use projection::{Projected, Projection};
pub use queue::Trigger;
pub use write_through::{CachingApi, Writable};
