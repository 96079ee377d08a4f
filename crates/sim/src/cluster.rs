//! The simulated cluster's workload controllers (`steady_cluster::CONTROLLERS`) running
//! beside the node, for a scenario that asked for them with
//! [`Scenario::with_workloads`](crate::Scenario::with_workloads).
//!
//! They are the cluster, not what is under test: they reach the API server on a client of
//! their own that bypasses the fault layer (no fault touches them and their writes are not
//! counted as the operator's), they start with the API server and stop at the end of the
//! run, as the node does (an operator crash does not restart them), and they draw every
//! random number from the run's seed, read the time from the run's simulated clock (the
//! API server's and the node's) and reconcile at a fixed concurrency, so a seed replays
//! the same run.
//!
//! Must not know: what the controllers do (that is `steady-cluster`'s) or the operator
//! under test.

use kube::Client;
use steady_cluster::{Clock, Setup};
use tokio::task::JoinHandle;

use crate::fault::Trace;

/// Reconciles each cluster controller runs at once: fixed, not the machine's CPU count, so
/// the task order (and the trace) does not depend on the machine.
const CONCURRENCY: usize = 2;

/// The workload controllers of one run.
pub(crate) struct Workloads {
    running: JoinHandle<()>,
}

impl Workloads {
    /// Start every controller of [`steady_cluster::CONTROLLERS`] on `client` (the API
    /// server's own, without faults) and `clock` (the run's). A controller that stops
    /// before the end of the run is traced: the scenario's goals then show what it left
    /// undone.
    pub(crate) fn start(client: Client, seed: u64, clock: Clock, trace: &Trace) -> Workloads {
        let config = steady_runtime::Config {
            concurrency: CONCURRENCY,
            seed: Some(seed),
            ..steady_runtime::Config::named("cluster")
        };
        let setup = Setup {
            client,
            config,
            clock,
        };
        let trace = trace.clone();
        let running = tokio::spawn(async move {
            let shutdown = std::future::pending::<()>();
            if let Err(e) = steady_cluster::run_with(setup, shutdown).await {
                trace.log(format!("cluster: {e}"));
            }
        });
        Workloads { running }
    }
}

impl Drop for Workloads {
    /// The run is over: the controllers stop with it, as the node does.
    fn drop(&mut self) {
        self.running.abort();
    }
}
