//! The Cache operator: steady's reference operator, built on `steady-runtime`.
//!
//! Owns: the `Cache` custom resource (`steady.dev/v1alpha1`) as Rust types that are the one
//! source of truth for its CRD ([`crd`], [`crd_yaml`]); its reconciler ([`reconcile`],
//! wired into a [`controller`] that owns Pods and Services), which keeps pods
//! `<cache>-<ordinal>` and a Service `<cache>` in line with the spec, rolls template
//! changes one pod at a time and reports status with conditions; and the manifests that
//! install it on a real cluster ([`manifests`]).
//!
//! Must not know: steady's embedded API server, store or simulated node, nor the CLI. It
//! speaks only the Kubernetes API through `kube::Client`, so it runs the same against
//! `steady up` and a real cluster.

pub mod manifests;
pub mod reconcile;
pub mod resources;
pub mod types;

pub use reconcile::{
    CONCURRENCY, Clock, DEBOUNCE, Error, LIST_PAGE_SIZE, Ledger, OperatorContext, Outcome, View,
    Writes, controller, default_config, reconcile, reconcile_with, system_clock,
};
pub use types::{Cache, CacheSpec, CacheStatus, crd, crd_yaml};
