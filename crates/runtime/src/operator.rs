//! The [`Operator`] runner: what a controller process needs around a [`Controller`] — the
//! /metrics, /healthz and /readyz endpoints, leader election on a Lease, leadership
//! gating (and its metric), graceful shutdown and the Lease's release — in one call, as
//! controller-runtime's manager does for its controllers.
//!
//! Owns: the order of start and stop, and what the probes and the leader metric say.
//! Must not know: any particular operator, or how the process learns it should stop (the
//! caller passes a shutdown future, e.g. on SIGTERM).
//!
//! # Lifecycle
//!
//! 1. [`Operator::run`] checks the controller ([`Controller::validate`]) and the
//!    leader-election settings, then serves the probes (if asked to).
//! 2. The controller starts watching at once, on every replica: its caches fill while it
//!    waits for the Lease, so a follower that takes over reconciles from a warm cache.
//! 3. With leader election, reconciles run only while this replica holds the Lease.
//!    `leader_election_master_status{name=<lease>}` follows leadership both ways: 0 for a
//!    follower, 1 while leading, 0 again the moment the Lease is lost or released.
//! 4. When `shutdown` resolves, no new reconcile starts; running ones may finish within
//!    [`Config::shutdown_grace`](crate::Config::shutdown_grace) (then they are cancelled).
//!    Only then is the Lease released (holder `""`), so a successor takes over at its next
//!    retry instead of waiting the lease out, and never while this replica still writes.
//!    `run` returns `Ok(())`.
//! 5. If the Lease is lost (another holder seen, or no renewal within the renew deadline),
//!    running reconciles are cancelled at once and `run` returns
//!    [`OperatorError::LostLeadership`]. As controller-runtime's manager does by default,
//!    the process should then exit (and be restarted) rather than campaign again: its
//!    in-memory state (caches, backoff, requeues) was built while it was the only writer.
//!
//! # Probes
//!
//! - `/healthz`: 200 while the process serves (liveness).
//! - `/readyz`: 200 once every cache of the controller has synced, 503 before and after
//!   shutdown. A follower with synced caches is ready too: this is controller-runtime's
//!   default (its readiness checks do not look at leader election), and it keeps a
//!   Deployment's rollout from waiting on a Lease only one replica can hold.
//! - `/metrics`: controller-runtime's series (see [`crate::metrics`]).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use steady_runtime::leader::LeaderElectionConfig;
//! use steady_runtime::operator::Operator;
//! use steady_runtime::{Action, Config, Context, Controller};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let store = steady_store::Store::in_memory(Default::default()).await?;
//! # let server = steady_apiserver::ApiServer::start(store, Default::default()).await?;
//! # let client = server.client();
//! // `client` speaks to any cluster (here, steady's embedded API server).
//! let controller = Controller::new(Api::<ConfigMap>::all(client.clone()), Config::default());
//! let (seen, mut reconciled) = tokio::sync::mpsc::unbounded_channel();
//! let reconcile = move |cm: Arc<ConfigMap>, _ctx: Arc<Context<()>>| {
//!     let _ = seen.send(cm.metadata.name.clone());
//!     async { Ok::<_, kube::Error>(Action::done()) }
//! };
//! let operator = Operator::new(client.clone())
//!     .metrics("127.0.0.1:0".parse()?)
//!     .leader_election(LeaderElectionConfig::new("default", "configmap-watcher", "replica-1"));
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let running = tokio::spawn(operator.run(controller, reconcile, Arc::new(()), async {
//!     let _ = stopped.await;
//! }));
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! Api::<ConfigMap>::namespaced(client, "default").create(&PostParams::default(), &cm).await?;
//! assert_eq!(reconciled.recv().await, Some(Some("settings".to_string())));
//!
//! let _ = stop.send(()); // e.g. on SIGTERM: drain, release the Lease, stop serving
//! running.await??;
//! # Ok(())
//! # }
//! ```

use std::convert::Infallible;
use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use crate::controller::{Action, Context, Controller, Error};
use crate::leader::{LeaderElectionConfig, LeaderElectionError, LeaderElector};
use crate::metrics::{self, Health, Metrics};

/// Why [`Operator::run`] stopped, or refused to start, other than by shutdown.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The leader-election settings are invalid (see [`LeaderElectionConfig::validate`]).
    #[error(transparent)]
    LeaderElection(#[from] LeaderElectionError),
    /// The metrics and probes endpoint could not be served.
    #[error("cannot serve metrics and probes on {addr}: {source}")]
    Serve {
        /// The address asked for.
        addr: String,
        /// Why binding or serving failed.
        #[source]
        source: std::io::Error,
    },
    /// The Lease was lost while leading; reconciling stopped at once. Exit and let the
    /// process be restarted (controller-runtime's manager does the same).
    #[error("lost the leader election Lease {lease}; stopped reconciling")]
    LostLeadership {
        /// `namespace/name` of the Lease.
        lease: String,
    },
    /// The controller refused to start or stopped (see [`Error`]).
    #[error(transparent)]
    Controller(Error),
}

/// Where to serve /metrics, /healthz and /readyz.
#[derive(Debug)]
enum Endpoint {
    Address(SocketAddr),
    Listener(TcpListener),
}

/// Runs one [`Controller`] as a process does in production: probes and metrics served,
/// reconciling gated on a Lease, a graceful shutdown that releases it. See the
/// [module documentation](self) for the lifecycle and an example.
///
/// ```no_run
/// # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use steady_runtime::leader::LeaderElectionConfig;
/// use steady_runtime::operator::Operator;
/// use steady_runtime::{Action, Config, Context, Controller};
///
/// let controller = Controller::new(kube::Api::<ConfigMap>::all(client.clone()), Config::default());
/// Operator::new(client)
///     .metrics("0.0.0.0:8080".parse()?)
///     .leader_election(LeaderElectionConfig::new("operators", "my-operator", "pod-a"))
///     .run(
///         controller,
///         |_cm: Arc<ConfigMap>, _ctx: Arc<Context<()>>| async {
///             Ok::<_, kube::Error>(Action::done())
///         },
///         Arc::new(()),
///         async { let _ = tokio::signal::ctrl_c().await; },
///     )
///     .await?;
/// # Ok(())
/// # }
/// ```
pub struct Operator {
    client: Client,
    endpoint: Option<Endpoint>,
    leader_election: Option<LeaderElectionConfig>,
    metrics: Metrics,
    health: Health,
    leading: watch::Sender<bool>,
}

impl std::fmt::Debug for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Operator")
            .field("endpoint", &self.endpoint)
            .field("leader_election", &self.leader_election)
            .finish_non_exhaustive()
    }
}

impl Operator {
    /// A runner using `client` for the Lease: no endpoint, no leader election (every
    /// replica reconciles), a fresh metrics registry.
    ///
    /// ```no_run
    /// # fn example(client: kube::Client) {
    /// let operator = steady_runtime::operator::Operator::new(client);
    /// # }
    /// ```
    pub fn new(client: Client) -> Self {
        Operator {
            client,
            endpoint: None,
            leader_election: None,
            metrics: Metrics::new(),
            health: Health::default(),
            leading: watch::channel(false).0,
        }
    }

    /// Serve /metrics, /healthz and /readyz on `addr` (bound when [`run`](Self::run)
    /// starts; a bind failure is [`OperatorError::Serve`]).
    ///
    /// ```no_run
    /// # fn example(client: kube::Client) -> Result<(), std::net::AddrParseError> {
    /// let operator = steady_runtime::operator::Operator::new(client)
    ///     .metrics("0.0.0.0:8080".parse()?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn metrics(mut self, addr: SocketAddr) -> Self {
        self.endpoint = Some(Endpoint::Address(addr));
        self
    }

    /// Serve /metrics, /healthz and /readyz on a listener bound by the caller (to learn
    /// the port of `127.0.0.1:0` before running, or to bind early and fail fast).
    ///
    /// ```no_run
    /// # async fn example(client: kube::Client) -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// println!("metrics on http://{}/metrics", listener.local_addr()?);
    /// let operator = steady_runtime::operator::Operator::new(client).metrics_listener(listener);
    /// # Ok(())
    /// # }
    /// ```
    pub fn metrics_listener(mut self, listener: TcpListener) -> Self {
        self.endpoint = Some(Endpoint::Listener(listener));
        self
    }

    /// Campaign for the Lease `config` names and reconcile only while holding it.
    ///
    /// ```no_run
    /// # fn example(client: kube::Client) {
    /// use steady_runtime::leader::LeaderElectionConfig;
    /// let operator = steady_runtime::operator::Operator::new(client)
    ///     .leader_election(LeaderElectionConfig::new("operators", "my-operator", "pod-a"));
    /// # }
    /// ```
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// The registry the controller's and the leader's series are recorded in (what
    /// /metrics serves), e.g. to read them in a test.
    ///
    /// ```no_run
    /// # fn example(client: kube::Client) {
    /// let operator = steady_runtime::operator::Operator::new(client);
    /// let registry = operator.metrics_registry();
    /// assert!(registry.encode().ends_with("# EOF\n"));
    /// # }
    /// ```
    pub fn metrics_registry(&self) -> Metrics {
        self.metrics.clone()
    }

    /// What /readyz reports: ready once the controller's caches have synced.
    ///
    /// ```no_run
    /// # fn example(client: kube::Client) {
    /// let operator = steady_runtime::operator::Operator::new(client);
    /// assert!(!operator.health().is_ready(), "not before run() has synced the caches");
    /// # }
    /// ```
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Whether this replica may reconcile right now: without leader election, `true`
    /// from the start of [`run`](Self::run); with it, `true` exactly while the Lease is
    /// held. `false` again once `run` returns.
    ///
    /// ```no_run
    /// # async fn example(client: kube::Client) {
    /// let operator = steady_runtime::operator::Operator::new(client);
    /// let mut leading = operator.leadership();
    /// tokio::spawn(async move {
    ///     while leading.changed().await.is_ok() {
    ///         println!("leading: {}", *leading.borrow());
    ///     }
    /// });
    /// # }
    /// ```
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Run `controller` with `reconcile` and `data` until `shutdown` resolves (then drain,
    /// release the Lease and return `Ok`) or the Lease is lost (then return
    /// [`OperatorError::LostLeadership`] at once). See the [module documentation](self).
    pub async fn run<K, T, R, Fut, E>(
        self,
        controller: Controller<K>,
        reconcile: R,
        data: Arc<T>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), OperatorError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        controller.validate().map_err(OperatorError::Controller)?;
        if let Some(config) = &self.leader_election {
            config.validate()?;
        }
        let (stop_serving, serving_stopped) = oneshot::channel::<()>();
        if let Some(endpoint) = self.endpoint {
            serve(endpoint, &self.metrics, &self.health, serving_stopped).await?;
        }
        let controller = controller
            .with_metrics(self.metrics.clone())
            .with_health(self.health.clone());
        let (outcome, lease) = match self.leader_election {
            None => {
                self.leading.send_replace(true);
                (controller.run(reconcile, data, shutdown).await, None)
            }
            Some(config) => {
                let lease = config.name.clone();
                let lease_ref = format!("{}/{}", config.namespace, config.name);
                self.metrics.leader_election(&lease, false);
                let elector = LeaderElector::try_start(self.client.clone(), config)?;
                let mirror = mirror_leadership(
                    elector.subscribe(),
                    self.metrics.clone(),
                    lease.clone(),
                    self.leading.clone(),
                );
                let gated = controller.with_leader(elector.subscribe());
                let outcome = tokio::select! {
                    outcome = gated.run(reconcile, data, shutdown) => outcome,
                    never = mirror => match never {},
                };
                // Reconciling has stopped (drained, or cancelled on a loss): say so before
                // the Lease is handed over, so no scrape sees two leaders.
                self.metrics.leader_election(&lease, false);
                self.leading.send_replace(false);
                elector.release().await;
                (outcome, Some(lease_ref))
            }
        };
        self.leading.send_replace(false);
        let _ = stop_serving.send(());
        outcome.map_err(|e| match (e, lease) {
            (Error::LostLeadership, Some(lease)) => OperatorError::LostLeadership { lease },
            (e, _) => OperatorError::Controller(e),
        })
    }
}

/// Binds (if need be) and serves the probes until `stop` fires or is dropped.
async fn serve(
    endpoint: Endpoint,
    metrics: &Metrics,
    health: &Health,
    stop: oneshot::Receiver<()>,
) -> Result<SocketAddr, OperatorError> {
    let (listener, asked) = match endpoint {
        Endpoint::Address(addr) => {
            let listener =
                TcpListener::bind(addr)
                    .await
                    .map_err(|source| OperatorError::Serve {
                        addr: addr.to_string(),
                        source,
                    })?;
            (listener, addr.to_string())
        }
        Endpoint::Listener(listener) => {
            let asked = listener
                .local_addr()
                .map_or_else(|_| "a given listener".to_string(), |a| a.to_string());
            (listener, asked)
        }
    };
    metrics::serve_on(listener, metrics.clone(), health.clone(), async {
        let _ = stop.await;
    })
    .map_err(|source| OperatorError::Serve {
        addr: asked,
        source,
    })
}

/// Copies leadership into the leader metric and the runner's own channel, as it changes,
/// for as long as the runner polls it. Never resolves.
async fn mirror_leadership(
    mut elected: watch::Receiver<bool>,
    metrics: Metrics,
    lease: String,
    leading: watch::Sender<bool>,
) -> Infallible {
    loop {
        let now = *elected.borrow_and_update();
        metrics.leader_election(&lease, now);
        leading.send_replace(now);
        if elected.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}
