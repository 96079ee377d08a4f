//! steady-sim: prove an operator converges under faults, from `cargo test`.
//!
//! An operator author describes a [`Scenario`] — the CRDs to install, the objects "the
//! user" creates and changes at simulated times ([`Step`]), how to build and run the
//! controller from a `kube::Client` ([`Launch`]), and optionally invariants and goals over a
//! [`World`] snapshot. A [`Simulation`] runs it, seed by seed: steady's API server in
//! memory with a simulated node, on a paused current-thread tokio runtime; the controller
//! behind a fault layer ([`fault`]) that drops, duplicates, delays and cuts watch events,
//! serves stale lists, fails and loses writes, crashes and restarts the controller, and
//! fails or deletes owned pods. Every run is checked against properties that need nothing
//! from the author ([`PROPERTIES`]):
//!
//! - **eventually-stable**: after the faults stop, the controller's writes stop within a
//!   bound;
//! - **idempotent**: at that fixed point a resync writes nothing, and neither does a
//!   controller restarted cold;
//! - **same-end-state**: the world ends as in the fault-free run of the same seed
//!   (normalised: uids, resourceVersions, timestamps, generated names);
//! - **runtime-invariants**: never two reconciles of one key at once;
//!
//! plus the scenario's own invariants (checked every simulated second) and goals (checked
//! at the end). Every random draw comes from the seed: a failing seed replays the same
//! trace, in the test binary and in `steady sim`.
//!
//! A scenario that owns Deployments, StatefulSets, Jobs or DaemonSets asks for the
//! cluster's workload controllers with [`Scenario::with_workloads`]: they run beside the
//! node, outside the fault layer, on the run's simulated clock, and their writes are not
//! the operator's ([`web`] is such a scenario).
//!
//! ```no_run
//! // tests/converges.rs of an operator crate
//! #[test]
//! fn converges_under_faults() {
//!     let scenario = steady_sim::cache::scenario(); // or your own Scenario::new(..)
//!     steady_sim::Simulation::default().check(&scenario, 0..20);
//! }
//! ```
//!
//! Must not know the CLI; it drives the real runtime and a real reconciler through the
//! Kubernetes API only, like any client.

#![deny(missing_docs)]

pub mod cache;
mod cluster;
pub mod fault;
pub mod scenario;
pub mod simulation;
pub mod web;
pub mod world;
pub mod wrong;

pub use fault::{FaultKind, FaultRates};
pub use scenario::{Check, Launch, Scenario, Step};
pub use simulation::{PROPERTIES, Report, Simulation, Violation};
pub use world::World;

/// The scenarios compiled into `steady sim` (`--scenario NAME`): the Cache operator, the
/// Cache scenario with each deliberately wrong reconciler of [`wrong`], and the [`web`]
/// operator owning a Deployment (and its wrong variant).
pub fn scenarios() -> Vec<Scenario> {
    vec![
        cache::scenario(),
        cache::quota_scenario(),
        cache::rescale_scenario(),
        cache::rbac_scenario(steady_cache_operator::manifests::cluster_role_rules()),
        cache::scenario_with(
            "cache-generate-name",
            wrong::generate_name_trusting_stale_cache(),
        ),
        cache::scenario_with("cache-edge-triggered", wrong::edge_triggered()),
        cache::scenario_with("cache-record-then-create", wrong::record_then_create()),
        cache::scenario_with(
            "cache-status-every-reconcile",
            wrong::status_on_every_reconcile(),
        ),
        cache::scenario_with(
            "cache-status-counter",
            wrong::status_counter_on_every_reconcile(),
        ),
        cache::scenario_with(
            "cache-drift-on-dropped-field",
            wrong::drift_check_on_a_dropped_field(),
        ),
        cache::scenario_with(
            "cache-same-status-applied",
            wrong::same_status_applied_every_reconcile(),
        ),
        web::scenario(),
        web::fighting_scenario(),
    ]
}

/// The compiled-in scenario called `name`.
pub fn scenario(name: &str) -> Option<Scenario> {
    scenarios().into_iter().find(|s| s.name() == name)
}
