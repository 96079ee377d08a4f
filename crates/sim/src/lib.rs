//! steady's deterministic simulation harness.
//!
//! Owns: the fault layer between a controller's `kube::Client` and the API server's Router,
//! the scripted Cache scenario, and the properties every run is checked against
//! (eventually stable, idempotent, no duplicates, same end state as the fault-free run,
//! the runtime's own invariants). Everything runs on a current-thread tokio runtime with a
//! paused clock and one seed, so a failing seed replays byte for byte.
//!
//! Must not know the CLI; it drives the real runtime and a real reconciler through the
//! Kubernetes API only, like any client.

#![deny(missing_docs)]

pub mod fault;
pub mod harness;
pub mod wrong;

pub use fault::{FaultKind, FaultRates};
pub use harness::{
    Options, PROPERTIES, Report, Violation, cache_reconciler, reference_run, run_seed,
    run_seed_against, systematic_crashes,
};
