//! Leader election against steady's in-process API server, on tokio's paused clock.
//!
//! Every test steps time in small increments and checks, after each step, that no two
//! candidates report leadership at the same instant.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, PostParams};
use steady_apiserver::ApiServer;
use steady_runtime::leader::{LeaderElectionConfig, LeaderElectionError, LeaderElector};
use tokio::sync::watch;
use tokio::time::Instant;

const NS: &str = "default";
const LEASE: &str = "steady-controller";
const STEP: Duration = Duration::from_millis(100);
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

async fn server() -> ApiServer {
    ApiServer::in_memory(steady_apiserver::Config::default())
        .await
        .expect("server")
}

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new(NS, LEASE, identity)
}

fn elect(server: &ApiServer, identity: &str) -> LeaderElector {
    LeaderElector::start(server.client(), config(identity))
}

/// A candidate `identity` that has acquired the Lease.
async fn elected(server: &ApiServer, identity: &str) -> LeaderElector {
    let elector = elect(server, identity);
    elector.acquired().await;
    elector
}

async fn lease(server: &ApiServer) -> LeaseSpec {
    lease_of(&Api::namespaced(server.client(), NS)).await
}

/// The Lease, which `holder` must hold.
async fn lease_held_by(server: &ApiServer, holder: &str) -> LeaseSpec {
    let spec = lease(server).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(holder));
    spec
}

fn leaders(watches: &[&watch::Receiver<bool>]) -> Vec<usize> {
    watches
        .iter()
        .enumerate()
        .filter(|(_, w)| *w.borrow())
        .map(|(i, _)| i)
        .collect()
}

/// Advances the paused clock in steps of [`STEP`], asserting at every step that at most one
/// candidate leads and handing `visit` the leaders and the time passed; stops once `visit`
/// returns false or `total` has passed.
async fn step_while(
    watches: &[&watch::Receiver<bool>],
    total: Duration,
    mut visit: impl FnMut(Vec<usize>, Duration) -> bool,
) {
    let start = Instant::now();
    loop {
        let now = leaders(watches);
        assert!(
            now.len() <= 1,
            "two leaders at {:?}: {now:?}",
            start.elapsed()
        );
        if !visit(now, start.elapsed()) || start.elapsed() >= total {
            return;
        }
        tokio::time::sleep(STEP).await;
    }
}

/// Steps for at most `total` (see [`step_while`]); returns how long it took until `until`
/// held, or `None` if it never did.
async fn step_until(
    watches: &[&watch::Receiver<bool>],
    total: Duration,
    until: impl Fn(&[usize]) -> bool,
) -> Option<Duration> {
    let mut took = None;
    step_while(watches, total, |now, elapsed| {
        if until(&now) {
            took = Some(elapsed);
        }
        took.is_none()
    })
    .await;
    took
}

/// Steps for `total` (see [`step_while`]); returns the leader set observed at every step.
async fn step_for(watches: &[&watch::Receiver<bool>], total: Duration) -> Vec<Vec<usize>> {
    let mut seen = Vec::new();
    step_while(watches, total, |now, _| {
        seen.push(now);
        true
    })
    .await;
    seen
}

/// Starts `a`, waits until it leads, then starts `b` (so the winner is known).
async fn a_then_b(server: &ApiServer) -> (LeaderElector, LeaderElector) {
    let a = elect(server, "a");
    tokio::time::timeout(Duration::from_secs(1), a.acquired())
        .await
        .expect("a acquires a missing lease at once");
    let b = elect(server, "b");
    (a, b)
}

#[test]
fn config_defaults_and_validation() {
    let c = config("a");
    assert_eq!(c.lease_duration, LEASE_DURATION);
    assert_eq!(c.renew_deadline, RENEW_DEADLINE);
    assert_eq!(c.retry_period, RETRY);
    c.validate().unwrap();

    let bad = |f: &dyn Fn(&mut LeaderElectionConfig)| {
        let mut c = config("a");
        f(&mut c);
        matches!(c.validate(), Err(LeaderElectionError::InvalidConfig(_)))
    };
    assert!(bad(&|c| c.identity.clear()));
    assert!(bad(&|c| c.name.clear()));
    assert!(bad(&|c| c.namespace.clear()));
    assert!(bad(&|c| c.retry_period = Duration::ZERO));
    assert!(bad(&|c| c.renew_deadline = c.lease_duration));
    assert!(bad(&|c| c.renew_deadline = Duration::from_millis(2400)));
}

#[tokio::test(start_paused = true)]
async fn invalid_config_is_an_error() {
    let server = server().await;
    let mut c = config("a");
    c.lease_duration = Duration::from_secs(5);
    assert!(matches!(
        LeaderElector::try_start(server.client(), c),
        Err(LeaderElectionError::InvalidConfig(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn exactly_one_of_two_candidates_leads() {
    let server = server().await;
    // Started together: either may win, never both.
    let a = elect(&server, "a");
    let b = elect(&server, "b");
    let (wa, wb) = (a.subscribe(), b.subscribe());
    let took = step_until(&[&wa, &wb], RETRY * 2, |l| l.len() == 1).await;
    assert!(took.is_some(), "nobody acquired a missing lease");
    let winner = if a.is_leader() { "a" } else { "b" };

    // Leadership is stable over several lease durations of renewals.
    let seen = step_for(&[&wa, &wb], LEASE_DURATION * 3).await;
    assert!(seen.iter().all(|l| l.len() == 1), "leadership flapped");
    assert_eq!(a.is_leader(), winner == "a");
    assert_eq!(b.is_leader(), winner == "b");

    let spec = lease_held_by(&server, winner).await;
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some());
    assert!(spec.renew_time.is_some());
}

#[tokio::test(start_paused = true)]
async fn release_hands_over_promptly() {
    let server = server().await;
    let (a, b) = a_then_b(&server).await;
    let (wa, wb) = (a.subscribe(), b.subscribe());
    let seen = step_for(&[&wa, &wb], Duration::from_secs(5)).await;
    assert!(seen.iter().all(|l| l == &[0]), "a leads, b waits");

    a.release().await;
    assert!(
        !*wa.borrow(),
        "a reports the loss by the time release returns"
    );
    let took = step_until(&[&wa, &wb], LEASE_DURATION, |l| l == [1])
        .await
        .expect("b takes over");
    assert!(
        took <= RETRY + STEP,
        "handover took {took:?}, expected within one retry period"
    );

    let spec = lease_held_by(&server, "b").await;
    assert_eq!(spec.lease_transitions, Some(1));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    drop(b);
}

#[tokio::test(start_paused = true)]
async fn release_clears_the_holder() {
    let server = server().await;
    let a = elected(&server, "a").await;
    let wa = a.subscribe();
    a.release().await;
    assert!(!*wa.borrow());
    let spec = lease_held_by(&server, "").await;
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));

    // A released lease is taken at once by the next candidate, even the same identity.
    let a2 = elect(&server, "a");
    tokio::time::timeout(Duration::from_millis(1), a2.acquired())
        .await
        .expect("released lease is free");
    assert_eq!(lease(&server).await.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn release_of_a_follower_leaves_the_lease_alone() {
    let server = server().await;
    let (a, b) = a_then_b(&server).await;
    let wa = a.subscribe();
    let wb = b.subscribe();
    step_for(&[&wa, &wb], Duration::from_secs(3)).await;
    b.release().await;
    lease_held_by(&server, "a").await;
    let seen = step_for(&[&wa, &wb], LEASE_DURATION * 2).await;
    assert!(seen.iter().all(|l| l == &[0]));
}

#[tokio::test(start_paused = true)]
async fn abandoned_lease_is_taken_only_after_it_expires() {
    let server = server().await;
    let (a, b) = a_then_b(&server).await;
    let (wa, wb) = (a.subscribe(), b.subscribe());
    step_for(&[&wa, &wb], Duration::from_secs(7)).await;
    assert!(*wa.borrow());

    // Crash-like stop: no release, renewals just stop.
    a.abort();
    assert!(!*wa.borrow(), "an aborted elector reports no leadership");
    let took = step_until(&[&wa, &wb], LEASE_DURATION * 2, |l| l == [1])
        .await
        .expect("b takes over an expired lease");
    // a's last renewal happened at most one retry period before the abort, and b sees a
    // change at most one retry period after it happened; b then waits a full lease duration
    // of its own clock and acts at its next retry.
    assert!(
        took >= LEASE_DURATION - RETRY,
        "b took over after {took:?}, before the lease could expire"
    );
    assert!(took <= LEASE_DURATION + RETRY * 2 + STEP, "took {took:?}");

    let spec = lease_held_by(&server, "b").await;
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_elector_does_not_release() {
    let server = server().await;
    let a = elected(&server, "a").await;
    drop(a);
    tokio::time::sleep(RETRY * 3).await;
    let spec = lease_held_by(&server, "a").await;
    assert_eq!(spec.lease_duration_seconds, Some(15));
}

#[tokio::test(start_paused = true)]
async fn overwritten_lease_is_lost_at_the_next_renewal() {
    let server = server().await;
    let a = elected(&server, "a").await;
    let mut wa = a.subscribe();
    wa.mark_unchanged();
    step_for(&[&wa], Duration::from_secs(3)).await;

    // Someone forcibly takes the lease (as a misconfigured replica would).
    let api = Api::<Lease>::namespaced(server.client(), NS);
    let mut lease = api.get(LEASE).await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("intruder".into());
    spec.lease_transitions = Some(7);
    api.replace(LEASE, &PostParams::default(), &lease)
        .await
        .unwrap();

    let lost = step_until(&[&wa], RETRY * 2, |l| l.is_empty())
        .await
        .expect("a notices it lost the lease");
    assert!(lost <= RETRY + STEP, "loss reported after {lost:?}");
    assert!(wa.has_changed().unwrap(), "subscribers are notified");
    assert!(!a.is_leader());

    // a treats the intruder like any holder: it campaigns again and takes the lease only
    // once it has expired by a's own clock.
    let again = step_until(&[&wa], LEASE_DURATION * 2, |l| l == [0])
        .await
        .expect("a re-acquires after expiry");
    assert!(lost + again >= LEASE_DURATION, "re-acquired too early");
    let spec = lease_of(&api).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(8));
}

async fn lease_of(api: &Api<Lease>) -> LeaseSpec {
    api.get(LEASE).await.unwrap().spec.unwrap()
}

/// A `kube::Client` over the in-process server whose requests can be made to hang
/// forever, like a partitioned API server.
fn partitionable_client(server: &ApiServer) -> (kube::Client, Arc<AtomicBool>) {
    let inner = server.client();
    let down = Arc::new(AtomicBool::new(false));
    let flag = down.clone();
    let router = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let inner = inner.clone();
        let down = flag.clone();
        async move {
            if down.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            let req = http::Request::from_parts(parts, kube::client::Body::from(bytes));
            inner.send(req).await.unwrap().map(axum::body::Body::new)
        }
    });
    (kube::Client::new(router, NS), down)
}

#[tokio::test(start_paused = true)]
async fn leader_that_cannot_renew_steps_down_at_the_renew_deadline() {
    let server = server().await;
    let (client, down) = partitionable_client(&server);
    let a = LeaderElector::start(client, config("a"));
    a.acquired().await;
    let b = elect(&server, "b");
    let (mut wa, wb) = (a.subscribe(), b.subscribe());
    step_for(&[&wa, &wb], Duration::from_secs(5)).await;
    assert!(a.is_leader());
    wa.mark_unchanged();

    down.store(true, Ordering::SeqCst);
    let lost = step_until(&[&wa, &wb], LEASE_DURATION, |l| l.is_empty())
        .await
        .expect("a steps down");
    // The last successful renewal started at most one retry period before the partition.
    assert!(
        lost >= RENEW_DEADLINE - RETRY,
        "stepped down early: {lost:?}"
    );
    assert!(lost <= RENEW_DEADLINE + STEP, "stepped down late: {lost:?}");
    assert!(wa.has_changed().unwrap());

    // b takes over only once the lease has expired, after a stepped down.
    let took = step_until(&[&wa, &wb], LEASE_DURATION * 2, |l| l == [1])
        .await
        .expect("b takes over");
    assert!(lost + took >= LEASE_DURATION - RETRY, "b took over early");
    assert_eq!(lease(&server).await.lease_transitions, Some(1));

    // The partition heals: a sees b's lease and stays a follower.
    down.store(false, Ordering::SeqCst);
    let seen = step_for(&[&wa, &wb], LEASE_DURATION * 2).await;
    assert!(seen.iter().all(|l| l == &[1]));
}

#[tokio::test(start_paused = true)]
async fn transitions_count_each_handover() {
    let server = server().await;
    let (a, b) = a_then_b(&server).await;
    let (wa, wb) = (a.subscribe(), b.subscribe());
    step_for(&[&wa, &wb], RETRY * 2).await;
    assert_eq!(lease(&server).await.lease_transitions, Some(0));

    // a -> b by release.
    a.release().await;
    step_until(&[&wa, &wb], RETRY * 2, |l| l == [1])
        .await
        .expect("b leads");
    assert_eq!(lease(&server).await.lease_transitions, Some(1));

    // b -> c by expiry.
    let c = elect(&server, "c");
    let wc = c.subscribe();
    step_for(&[&wa, &wb, &wc], RETRY * 2).await;
    b.abort();
    step_until(&[&wa, &wb, &wc], LEASE_DURATION * 2, |l| l == [2])
        .await
        .expect("c leads");
    // Renewals do not count as transitions.
    step_for(&[&wa, &wb, &wc], LEASE_DURATION).await;
    let spec = lease_held_by(&server, "c").await;
    assert_eq!(spec.lease_transitions, Some(2));
}
