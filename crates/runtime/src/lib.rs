//! steady's controller runtime: a level-triggered reconciliation loop on `kube::Client`.
//!
//! Owns: caches of watched kinds, triggers (primary, owned, mapped, resync, requeue), the
//! work queue, per-key backoff, bounded concurrency, leader election, metrics, probes.
//! Must not know: any particular operator, or whether the server is steady's embedded one
//! or a real cluster — it speaks only the Kubernetes API through `kube::Client`.

pub mod backoff;
pub mod cache;
pub mod conditions;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod leader;
pub mod metrics;
pub mod queue;

pub use cache::{Cache, ObjectKey};
pub use controller::{Action, Config, Context, Controller, Error};
pub use queue::Trigger;
