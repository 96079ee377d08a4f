//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! A [`LeaderElector`] campaigns in a background task. Every retry period a candidate reads
//! the Lease and takes it if it is missing, already held by this identity, released
//! (`holderIdentity` empty) or expired. Expiry is judged by the candidate's own monotonic
//! clock (`tokio::time`), never by the Lease's wall-clock fields: like client-go's
//! `observedTime`, the candidate remembers when it last saw the Lease's spec change and
//! considers it expired `leaseDurationSeconds` after that. All writes are optimistic
//! (a replace carrying the read `resourceVersion`); a 409 means another replica wrote first
//! and the Lease is read again.
//!
//! The leader renews every retry period. If it cannot renew within the renew deadline
//! (measured from the start of its last successful renewal), or it sees another holder in
//! the Lease, it reports the loss at once: the [`watch`] channel flips to `false` and the
//! caller must stop reconciling. Since the renew deadline is shorter than the lease
//! duration, a leader that cannot reach the API server steps down before any other
//! replica may consider the Lease expired. After a loss the replica campaigns again.
//!
//! [`LeaderElector::release`] gives the Lease up gracefully (holder `""`,
//! `leaseDurationSeconds: 1`) so that a successor takes over at its next retry instead of
//! waiting the lease out. Dropping a [`LeaderElector`] (or [`LeaderElector::abort`]) stops
//! renewing *without* releasing: the Lease then expires after its duration.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// client-go's `JitterFactor`: the renew deadline must exceed this many retry periods.
const JITTER_FACTOR: f64 = 1.2;

/// How many times one attempt re-reads the Lease after a write conflict before it gives
/// up until the next retry period.
const CONFLICT_REREADS: usize = 2;

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The configuration violates an invariant (see [`LeaderElectionConfig::validate`]).
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
    /// A request for the Lease failed.
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// What the API server answered.
        #[source]
        source: kube::Error,
    },
    /// The graceful release did not finish within the renew deadline.
    #[error("lease {namespace}/{name}: release timed out")]
    ReleaseTimedOut {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
    },
}

/// Where the Lease lives, who this replica is, and the election's timing.
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (`holderIdentity`); must be unique among the candidates.
    pub identity: String,
    /// How long non-leaders wait, from the last observed change of the Lease, before they
    /// may take it (written as `leaseDurationSeconds`, rounded up to whole seconds).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before it steps down.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// A config with client-go's defaults: lease duration 15 s, renew deadline 10 s,
    /// retry period 2 s.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaderElectionConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks client-go's invariants: non-empty namespace, name and identity; a non-zero
    /// retry period; `renew_deadline > 1.2 × retry_period`; `lease_duration >
    /// renew_deadline`.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let invalid = |msg: &str| Err(LeaderElectionError::InvalidConfig(msg.to_string()));
        if self.namespace.is_empty() {
            return invalid("namespace must not be empty");
        }
        if self.name.is_empty() {
            return invalid("lease name must not be empty");
        }
        if self.identity.is_empty() {
            return invalid("identity must not be empty");
        }
        if self.retry_period.is_zero() {
            return invalid("retry period must be positive");
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return invalid("renew deadline must be greater than 1.2 × retry period");
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid("lease duration must be greater than renew deadline");
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written into the Lease: the lease duration rounded up.
    fn lease_duration_seconds(&self) -> i32 {
        let secs =
            self.lease_duration.as_secs() + u64::from(self.lease_duration.subsec_nanos() > 0);
        i32::try_from(secs).unwrap_or(i32::MAX)
    }
}

/// State shared by the handle and the background task.
struct Shared {
    leader: watch::Sender<bool>,
    /// Set (under the watch channel's lock) when the handle is dropped: the task may then
    /// no longer report leadership, even if it is still running on another thread.
    stopped: AtomicBool,
}

impl Shared {
    fn set_leader(&self, leading: bool) -> bool {
        self.leader.send_if_modified(|current| {
            if (leading && self.stopped.load(Ordering::SeqCst)) || *current == leading {
                return false;
            }
            *current = leading;
            true
        })
    }

    fn stop(&self) {
        self.leader.send_if_modified(|current| {
            self.stopped.store(true, Ordering::SeqCst);
            std::mem::replace(current, false)
        });
    }
}

/// Runs the election in a background task.
///
/// Dropping it stops campaigning and renewing without releasing the Lease (leadership is
/// reported lost on the watch channel immediately; other replicas take over once the lease
/// expires). Use [`LeaderElector::release`] to hand over promptly.
pub struct LeaderElector {
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("is_leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// Starts campaigning in a background task (must be called inside a tokio runtime).
    ///
    /// # Panics
    ///
    /// If the config is invalid (see [`LeaderElectionConfig::validate`]); use
    /// [`LeaderElector::try_start`] to get an error instead.
    pub fn start(client: kube::Client, config: LeaderElectionConfig) -> LeaderElector {
        match Self::try_start(client, config) {
            Ok(elector) => elector,
            Err(err) => panic!("{err}"),
        }
    }

    /// Like [`LeaderElector::start`], but returns an error for an invalid config.
    pub fn try_start(
        client: kube::Client,
        config: LeaderElectionConfig,
    ) -> Result<LeaderElector, LeaderElectionError> {
        config.validate()?;
        let (leader, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            leader,
            stopped: AtomicBool::new(false),
        });
        let (stop_tx, stop_rx) = oneshot::channel();
        let campaign = Campaign {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            shared: shared.clone(),
        };
        let task = tokio::spawn(campaign.run(stop_rx));
        Ok(LeaderElector {
            shared,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }

    /// Current leadership, watchable: `true` while this replica holds the lease.
    ///
    /// The value flips to `false` the moment leadership is lost (renew deadline passed,
    /// another holder seen, release, drop); the caller must then stop reconciling.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.shared.leader.subscribe()
    }

    /// Whether this replica holds the lease right now.
    pub fn is_leader(&self) -> bool {
        *self.shared.leader.borrow()
    }

    /// Waits until this replica becomes leader (returns at once if it is).
    pub async fn acquired(&self) {
        let mut rx = self.subscribe();
        // The sender lives in `self.shared`, so the channel cannot close while we wait.
        let _ = rx.wait_for(|leading| *leading).await;
    }

    /// Stops campaigning; if this replica holds the lease, reports the loss on the watch
    /// channel and then releases the lease (holder `""`, `leaseDurationSeconds: 1`) before
    /// returning. The release is bounded by the renew deadline; a failure is logged.
    pub async fn release(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && let Err(err) = task.await
        {
            tracing::error!(error = %err, "leader election task failed");
        }
        // Drop marks the handle stopped and reports `false`.
    }

    /// Stops campaigning and renewing *without* releasing the lease (same as dropping
    /// the elector): other replicas take over only after the lease expires. Meant for
    /// tests and for crash-like shutdowns.
    pub fn abort(self) {
        drop(self);
    }
}

impl Drop for LeaderElector {
    fn drop(&mut self) {
        // Report the loss first, so no subscriber believes it still leads once the task
        // can no longer renew.
        self.shared.stop();
        if let Some(task) = self.task.take() {
            task.abort();
        }
        // Dropping `self.stop` (if still there) also tells the task to exit without a
        // release, should it run once more before the abort lands.
    }
}

/// The outcome of one acquire-or-renew attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the lease (acquired, or renewed).
    Held,
    /// Another replica holds an unexpired lease.
    HeldByOther,
    /// Our writes kept conflicting; nothing could be decided this time.
    Contended,
}

/// The background task's state.
struct Campaign {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The Lease spec last seen, and when (by tokio's clock) it was first seen changed.
    observed: Option<(LeaseSpec, Instant)>,
    shared: Arc<Shared>,
}

impl Campaign {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let retry = self.config.retry_period;
        // Start of the last successful renewal while leading.
        let mut renewed: Option<Instant> = None;
        loop {
            let started = Instant::now();
            let mut wake = started + retry;
            match renewed {
                None => {
                    let result = tokio::select! {
                        result = self.try_acquire_or_renew(false) => result,
                        signal = &mut stop => return self.finish(signal.is_ok()).await,
                    };
                    match result {
                        Ok(Attempt::Held) => {
                            renewed = Some(started);
                            self.shared.set_leader(true);
                            tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "acquired leadership");
                        }
                        Ok(Attempt::HeldByOther | Attempt::Contended) => {}
                        Err(err) => {
                            tracing::warn!(error = %err, "failed to acquire lease");
                        }
                    }
                }
                Some(last) => {
                    let deadline = last + self.config.renew_deadline;
                    let outcome = if started >= deadline {
                        None
                    } else {
                        tokio::select! {
                            result = tokio::time::timeout_at(deadline, self.try_acquire_or_renew(true)) => result.ok(),
                            signal = &mut stop => return self.finish(signal.is_ok()).await,
                        }
                    };
                    match outcome {
                        Some(Ok(Attempt::Held)) => renewed = Some(started),
                        Some(Ok(Attempt::HeldByOther)) => {
                            renewed = None;
                            self.lose("another holder took the lease");
                        }
                        Some(Ok(Attempt::Contended)) | Some(Err(_)) | None
                            if Instant::now() >= deadline =>
                        {
                            renewed = None;
                            self.lose("renew deadline passed");
                        }
                        Some(Ok(Attempt::Contended)) => {}
                        Some(Err(err)) => {
                            tracing::warn!(error = %err, "failed to renew lease");
                        }
                        None => {}
                    }
                    if let Some(last) = renewed {
                        // Wake no later than the deadline, to step down at once.
                        wake = wake.min(last + self.config.renew_deadline);
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep_until(wake) => {}
                signal = &mut stop => return self.finish(signal.is_ok()).await,
            }
        }
    }

    fn lose(&self, why: &str) {
        self.shared.set_leader(false);
        tracing::warn!(lease = %self.lease_ref(), identity = %self.config.identity, reason = why, "lost leadership");
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn api_error(&self, source: kube::Error) -> LeaderElectionError {
        LeaderElectionError::Api {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// Remembers `spec` as observed now if it differs from the last observed spec.
    fn observe(&mut self, spec: &LeaseSpec) -> Instant {
        match &self.observed {
            Some((seen, at)) if seen == spec => *at,
            _ => {
                let now = Instant::now();
                self.observed = Some((spec.clone(), now));
                now
            }
        }
    }

    /// One client-go `tryAcquireOrRenew`, re-reading after write conflicts.
    async fn try_acquire_or_renew(
        &mut self,
        leading: bool,
    ) -> Result<Attempt, LeaderElectionError> {
        for _ in 0..=CONFLICT_REREADS {
            match self.attempt_once(leading).await? {
                Attempt::Contended => continue,
                decided => return Ok(decided),
            }
        }
        Ok(Attempt::Contended)
    }

    async fn attempt_once(&mut self, leading: bool) -> Result<Attempt, LeaderElectionError> {
        let pp = PostParams::default();
        let identity = self.config.identity.clone();
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.api_error(e))?;

        let Some(mut lease) = current else {
            let now = now_micro();
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity),
                    lease_duration_seconds: Some(self.config.lease_duration_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            let created = self.api.create(&pp, &lease).await;
            return self.outcome(created, |s| s.is_already_exists() || s.is_conflict());
        };

        let old = lease.spec.clone().unwrap_or_default();
        let observed_at = self.observe(&old);
        let holder = old.holder_identity.as_deref().unwrap_or("");
        let ours = holder == identity;
        if !holder.is_empty() && !ours {
            let duration = old
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map_or(self.config.lease_duration, Duration::from_secs);
            if leading || Instant::now() < observed_at + duration {
                return Ok(Attempt::HeldByOther);
            }
        }

        let now = now_micro();
        let spec = LeaseSpec {
            holder_identity: Some(identity),
            lease_duration_seconds: Some(self.config.lease_duration_seconds()),
            renew_time: Some(now.clone()),
            acquire_time: if ours {
                old.acquire_time.clone().or(Some(now))
            } else {
                Some(now)
            },
            lease_transitions: if ours {
                old.lease_transitions.or(Some(0))
            } else {
                Some(old.lease_transitions.unwrap_or(0).saturating_add(1))
            },
            ..old
        };
        lease.spec = Some(spec);
        let replaced = self.api.replace(&self.config.name, &pp, &lease).await;
        self.outcome(replaced, |s| s.is_conflict() || s.is_not_found())
    }

    /// What a write of the Lease means: held if it succeeded, contended if it failed the
    /// way a write that lost the race to another candidate fails (`lost`).
    fn outcome(
        &mut self,
        written: Result<Lease, kube::Error>,
        lost: fn(&kube::core::Status) -> bool,
    ) -> Result<Attempt, LeaderElectionError> {
        match written {
            Ok(lease) => {
                self.observe(&lease.spec.unwrap_or_default());
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(status)) if lost(&status) => Ok(Attempt::Contended),
            Err(e) => Err(self.api_error(e)),
        }
    }

    /// Ends the task: on a release request, reports the loss and then releases the
    /// lease if this replica holds it; otherwise (handle dropped) just exits.
    async fn finish(self, release: bool) {
        self.shared.set_leader(false);
        if !release {
            return;
        }
        let deadline = Instant::now() + self.config.renew_deadline;
        let result = match tokio::time::timeout_at(deadline, self.release_lease()).await {
            Ok(result) => result,
            Err(_) => Err(LeaderElectionError::ReleaseTimedOut {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
            }),
        };
        if let Err(err) = result {
            tracing::warn!(error = %err, "failed to release lease");
        }
    }

    async fn release_lease(&self) -> Result<(), LeaderElectionError> {
        let pp = PostParams::default();
        loop {
            let Some(mut lease) = self
                .api
                .get_opt(&self.config.name)
                .await
                .map_err(|e| self.api_error(e))?
            else {
                return Ok(());
            };
            let old = lease.spec.clone().unwrap_or_default();
            if old.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            let now = now_micro();
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(String::new()),
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..old
            });
            match self.api.replace(&self.config.name, &pp, &lease).await {
                Ok(_) => {
                    tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "released leadership");
                    return Ok(());
                }
                // Someone else wrote: read again and see whether it is still ours.
                Err(kube::Error::Api(s)) if s.is_conflict() => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(()),
                Err(e) => return Err(self.api_error(e)),
            }
        }
    }
}

/// Wall-clock time for the Lease's informational timestamps (never used for decisions).
fn now_micro() -> MicroTime {
    MicroTime(Timestamp::now())
}
