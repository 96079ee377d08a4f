//! The simulated cluster's controllers: what kube-controller-manager runs so that
//! workloads come alive (Deployment → ReplicaSet → Pods, and the other workload kinds as
//! they are added), each a controller on steady's own runtime.
//!
//! Owns: the workload controllers' decisions (which children to create, scale or delete,
//! and the status fields and conditions kube-controller-manager 1.32 writes), one module
//! per controller, and [`run`], which runs them all.
//! Must not know: the API server's internals or the store. Like kube-controller-manager it
//! talks to the API only through `kube::Client`, so it runs unchanged against steady's
//! embedded server or a real cluster. Pods are run by whatever node serves the API (steady's
//! simulated node); this crate only creates and deletes them.

use std::future::Future;

use futures::future::{BoxFuture, FutureExt, Shared};
use kube::Client;

pub mod deployment;
pub mod pod_template;
pub mod replicaset;

/// Why a reconcile failed (the runtime logs it and retries the key with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API refused or failed a request.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// The object lacks what a controller needs to act on it (a name, a uid, a namespace).
    #[error("{0}")]
    Incomplete(String),
    /// A child's name is taken by an object the controller cannot use: it bumped the
    /// collision count and tries another name on the next reconcile.
    #[error("{0}")]
    NameCollision(String),
}

/// A stop signal every controller can wait for.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// A controller's entry point: run until `Shutdown`, with the runtime settings given.
pub type Start = fn(
    Client,
    steady_runtime::Config,
    Shutdown,
) -> BoxFuture<'static, Result<(), steady_runtime::Error>>;

/// Every controller of the simulated cluster, by name (one line per module).
pub const CONTROLLERS: &[(&str, Start)] = &[
    ("deployment", deployment::start),
    ("replicaset", replicaset::start),
];

/// Why the cluster's controllers stopped other than by shutdown.
#[derive(Debug, thiserror::Error)]
#[error("the {controller} controller stopped: {source}")]
pub struct Stopped {
    /// The controller's name in [`CONTROLLERS`].
    pub controller: &'static str,
    /// Its runtime's reason.
    pub source: steady_runtime::Error,
}

/// Run every controller in [`CONTROLLERS`] against `client` until `shutdown` completes,
/// each with the runtime's default settings under its own name.
pub async fn run(
    client: Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Stopped> {
    run_with(client, steady_runtime::Config::default(), shutdown).await
}

/// [`run`] with `config` as every controller's runtime settings (its name is replaced by
/// the controller's): tests pin the seed and the concurrency.
pub async fn run_with(
    client: Client,
    config: steady_runtime::Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Stopped> {
    let shutdown: Shutdown = shutdown.boxed().shared();
    let running = CONTROLLERS.iter().map(|(name, start)| {
        let config = steady_runtime::Config {
            name: (*name).to_string(),
            ..config.clone()
        };
        start(client.clone(), config, shutdown.clone()).map(move |result| {
            result.map_err(|source| Stopped {
                controller: name,
                source,
            })
        })
    });
    futures::future::try_join_all(running).await.map(drop)
}
