//! The `Operator` runner against steady's in-process API server: the leader metric follows
//! leadership both ways, the Lease is released only after in-flight reconciles drained,
//! a lost Lease stops the runner at once, /readyz waits for the caches. Leader election
//! and shutdown run on tokio's paused clock; the probe test serves on a real socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use steady_runtime::leader::LeaderElectionConfig;
use steady_runtime::metrics::Metrics;
use steady_runtime::{Action, Config, Context, Controller, Error, Operator, OperatorError};
use steady_test_support::eventually;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;
use tower::ServiceExt;

const NS: &str = "default";
const LEASE: &str = "widgets-operator";
/// Long enough for any election step of the default timings (retry 2 s, lease 15 s).
const ELECTION: Duration = Duration::from_secs(60);

async fn server() -> steady_apiserver::ApiServer {
    steady_apiserver::ApiServer::in_memory(Default::default())
        .await
        .expect("server")
}

fn controller(client: &Client, grace: Duration) -> Controller<ConfigMap> {
    let config = Config {
        name: "widgets".into(),
        resync_period: None,
        seed: Some(1),
        shutdown_grace: grace,
        ..Config::default()
    };
    Controller::new(Api::namespaced(client.clone(), NS), config)
}

async fn create_configmap(client: &Client, name: &str) {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    Api::<ConfigMap>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create configmap");
}

fn elected(client: &Client, identity: &str) -> Operator {
    Operator::new(client.clone()).leader_election(LeaderElectionConfig::new(NS, LEASE, identity))
}

/// `leader_election_master_status` for the Lease, if the series exists.
fn leader_metric(metrics: &Metrics) -> Option<i64> {
    let prefix = format!("leader_election_master_status{{name=\"{LEASE}\"}} ");
    metrics
        .encode()
        .lines()
        .find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
}

async fn holder(client: &Client) -> String {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get(LEASE)
        .await
        .expect("lease")
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default()
}

async fn until_leading(operator_leading: &tokio::sync::watch::Receiver<bool>, want: bool) {
    let leading = operator_leading.clone();
    eventually("leadership to change", ELECTION, || {
        let now = *leading.borrow();
        async move { (now == want).then_some(()) }
    })
    .await;
}

/// A reconcile that does nothing, counting its calls.
fn counting(
    calls: Arc<AtomicUsize>,
) -> impl Fn(Arc<ConfigMap>, Arc<Context<()>>) -> std::future::Ready<Result<Action, String>> {
    move |_, _| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Action::done()))
    }
}

type Running = JoinHandle<Result<(), OperatorError>>;

/// What the runner returned, if it did within `limit`.
async fn returned_within(running: Running, limit: Duration) -> Result<(), OperatorError> {
    tokio::time::timeout(limit, running)
        .await
        .expect("the runner returns in time")
        .expect("joined")
}

/// A shutdown future that resolves when `stopped` fires (or its sender is dropped).
async fn on(stopped: oneshot::Receiver<()>) {
    let _ = stopped.await;
}

/// Spawns `operator.run` with a counting reconcile; returns its leadership channel, its
/// registry, the reconcile counter, the stop switch and the task.
fn spawn_counting(
    operator: Operator,
    controller: Controller<ConfigMap>,
) -> (
    tokio::sync::watch::Receiver<bool>,
    Metrics,
    Arc<AtomicUsize>,
    oneshot::Sender<()>,
    Running,
) {
    let leading = operator.leadership();
    let metrics = operator.metrics_registry();
    let calls = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(operator.run(
        controller,
        counting(calls.clone()),
        Arc::new(()),
        on(stopped),
    ));
    (leading, metrics, calls, stop, running)
}

#[tokio::test(start_paused = true)]
async fn the_leader_metric_follows_leadership_and_shutdown_releases_the_lease() {
    let server = server().await;
    let client = server.client();
    create_configmap(&client, "w").await;
    let (a_leading, a_metrics, a_calls, a_stop, a_run) =
        spawn_counting(elected(&client, "a"), controller(&client, ELECTION));
    until_leading(&a_leading, true).await;
    assert_eq!(leader_metric(&a_metrics), Some(1));

    let b = elected(&client, "b");
    let b_health = b.health();
    let (b_leading, b_metrics, b_calls, b_stop, b_run) =
        spawn_counting(b, controller(&client, ELECTION));
    eventually("the follower's caches sync", ELECTION, || {
        let ready = b_health.is_ready();
        async move { ready.then_some(()) }
    })
    .await;
    assert_eq!(leader_metric(&b_metrics), Some(0), "a follower reports 0");
    assert!(!*b_leading.borrow());
    assert_eq!(a_calls.load(Ordering::SeqCst), 1, "the leader reconciles");
    assert_eq!(b_calls.load(Ordering::SeqCst), 0, "the follower does not");

    a_stop.send(()).expect("a runs");
    a_run.await.expect("joined").expect("a clean shutdown");
    assert_eq!(leader_metric(&a_metrics), Some(0), "released: back to 0");
    assert!(!*a_leading.borrow());
    assert_ne!(holder(&client).await, "a", "the Lease was released");

    // Released, not expired: the follower takes over at its next retry (2 s), well
    // before the 15 s lease duration.
    tokio::time::timeout(Duration::from_secs(3), until_leading(&b_leading, true))
        .await
        .expect("the successor takes over without waiting the lease out");
    assert_eq!(leader_metric(&b_metrics), Some(1));
    eventually("the successor reconciles", ELECTION, || {
        let calls = b_calls.load(Ordering::SeqCst);
        async move { (calls == 1).then_some(()) }
    })
    .await;
    b_stop.send(()).expect("b runs");
    b_run.await.expect("joined").expect("b clean shutdown");
    assert_eq!(holder(&client).await, "", "released on shutdown");
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_stops_at_once_and_the_metric_goes_back_to_zero() {
    let server = server().await;
    let client = server.client();
    let (leading, metrics, _calls, _stop, running) =
        spawn_counting(elected(&client, "a"), controller(&client, ELECTION));
    until_leading(&leading, true).await;
    assert_eq!(leader_metric(&metrics), Some(1));

    // Another replica takes the Lease (as after a partition): "a" sees it at its next renewal.
    Api::<Lease>::namespaced(client.clone(), NS)
        .patch(
            LEASE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"holderIdentity": "thief"}})),
        )
        .await
        .expect("steal the lease");
    let outcome = returned_within(running, ELECTION).await;
    assert!(
        matches!(outcome, Err(OperatorError::LostLeadership { ref lease }) if lease == "default/widgets-operator"),
        "{outcome:?}"
    );
    assert_eq!(leader_metric(&metrics), Some(0), "lost: back to 0");
    assert!(!*leading.borrow());
    assert_eq!(
        holder(&client).await,
        "thief",
        "a lost Lease is not touched"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_an_in_flight_reconcile_finish_before_releasing_the_lease() {
    let server = server().await;
    let client = server.client();
    create_configmap(&client, "slow").await;
    let operator = elected(&client, "a");
    let leading = operator.leadership();
    let started = Arc::new(Notify::new());
    let finish = Arc::new(Notify::new());
    let finished = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = oneshot::channel::<()>();
    let reconcile = {
        let (started, finish, finished) = (started.clone(), finish.clone(), finished.clone());
        move |_: Arc<ConfigMap>, _: Arc<Context<()>>| {
            let (started, finish, finished) = (started.clone(), finish.clone(), finished.clone());
            async move {
                started.notify_one();
                finish.notified().await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, String>(Action::done())
            }
        }
    };
    let mut running = tokio::spawn(operator.run(
        controller(&client, Duration::from_secs(30)),
        reconcile,
        Arc::new(()),
        on(stopped),
    ));
    tokio::time::timeout(ELECTION, started.notified())
        .await
        .expect("the reconcile starts");
    stop.send(()).expect("running");

    // Draining: still running, still leading, the Lease still ours.
    assert!(
        tokio::time::timeout(Duration::from_secs(10), &mut running)
            .await
            .is_err(),
        "run returned while a reconcile was in flight"
    );
    assert!(*leading.borrow());
    assert_eq!(holder(&client).await, "a");

    finish.notify_one();
    returned_within(running, Duration::from_secs(1))
        .await
        .expect("a clean shutdown once the reconcile finished");
    assert!(
        finished.load(Ordering::SeqCst),
        "the reconcile ran to its end"
    );
    assert_eq!(holder(&client).await, "", "released after the drain");
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_a_reconcile_that_outlives_the_grace() {
    let server = server().await;
    let client = server.client();
    create_configmap(&client, "stuck").await;
    let started = Arc::new(Notify::new());
    let (stop, stopped) = oneshot::channel::<()>();
    let reconcile = {
        let started = started.clone();
        move |_: Arc<ConfigMap>, _: Arc<Context<()>>| {
            let started = started.clone();
            async move {
                started.notify_one();
                std::future::pending::<Result<Action, String>>().await
            }
        }
    };
    let running = tokio::spawn(Operator::new(client.clone()).run(
        controller(&client, Duration::from_secs(5)),
        reconcile,
        Arc::new(()),
        on(stopped),
    ));
    started.notified().await;
    let asked = tokio::time::Instant::now();
    stop.send(()).expect("running");
    returned_within(running, Duration::from_secs(6))
        .await
        .expect("a shutdown bounded by the grace, not an error");
    assert!(
        asked.elapsed() >= Duration::from_secs(5),
        "waited the grace"
    );
}

#[tokio::test(start_paused = true)]
async fn an_invalid_controller_or_election_is_refused_before_anything_runs() {
    let server = server().await;
    let client = server.client();
    let mut duplicated = controller(&client, ELECTION);
    let _ = duplicated.owns(Api::<ConfigMap>::all(client.clone()));
    let refused = Operator::new(client.clone())
        .run(
            duplicated,
            counting(Arc::default()),
            Arc::new(()),
            std::future::pending(),
        )
        .await;
    assert!(
        matches!(
            refused,
            Err(OperatorError::Controller(Error::DuplicateSource { .. }))
        ),
        "{refused:?}"
    );

    let mut config = LeaderElectionConfig::new(NS, LEASE, "a");
    config.renew_deadline = config.lease_duration;
    let refused = Operator::new(client.clone())
        .leader_election(config)
        .run(
            controller(&client, ELECTION),
            counting(Arc::default()),
            Arc::new(()),
            std::future::pending(),
        )
        .await;
    assert!(
        matches!(refused, Err(OperatorError::LeaderElection(_))),
        "{refused:?}"
    );
    let leases = Api::<Lease>::namespaced(client, NS).get_opt(LEASE).await;
    assert!(
        matches!(leases, Ok(None)),
        "no campaign started: {leases:?}"
    );
}

/// A client of `server` whose list requests wait until `lists` is notified.
fn client_with_held_lists(server: &steady_apiserver::ApiServer, lists: Arc<Notify>) -> Client {
    let router = server.router();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (router, lists) = (router.clone(), lists.clone());
        async move {
            let query = request.uri().query().unwrap_or_default().to_string();
            let watch = query.split('&').any(|p| p == "watch=true");
            if !watch && request.method() == http::Method::GET {
                lists.notified().await;
                lists.notify_one();
            }
            router.oneshot(request.map(axum::body::Body::new)).await
        }
    });
    Client::new(service, NS)
}

/// GET `path` on `addr` with a bare HTTP/1.0 request; the status code.
async fn status(addr: std::net::SocketAddr, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn readyz_answers_503_until_the_caches_sync_and_again_after_shutdown() {
    let server = server().await;
    let lists = Arc::new(Notify::new());
    let client = client_with_held_lists(&server, lists.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let operator = Operator::new(client.clone()).metrics_listener(listener);
    let health = operator.health();
    let (_leading, _metrics, _calls, stop, running) =
        spawn_counting(operator, controller(&client, ELECTION));

    let limit = Duration::from_secs(10);
    eventually("the probes are served", limit, || async {
        tokio::net::TcpStream::connect(addr).await.ok()
    })
    .await;
    assert_eq!(status(addr, "/healthz").await, 200);
    assert_eq!(
        status(addr, "/readyz").await,
        503,
        "the initial list is held"
    );

    lists.notify_one();
    eventually("ready once the caches synced", limit, || async {
        (status(addr, "/readyz").await == 200).then_some(())
    })
    .await;
    assert_eq!(status(addr, "/metrics").await, 200);

    stop.send(()).expect("running");
    running.await.expect("joined").expect("clean shutdown");
    assert!(!health.is_ready(), "not ready once stopped");
}
