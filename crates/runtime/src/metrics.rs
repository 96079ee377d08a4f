//! Prometheus metrics under controller-runtime's series names and labels (so existing
//! controller-runtime dashboards and alerts work unchanged), and the probe/metrics HTTP server.
//!
//! Series (as exposed):
//! - `controller_runtime_reconcile_total{controller,result}` (result: success, error, requeue,
//!   requeue_after)
//! - `controller_runtime_reconcile_errors_total{controller}`
//! - `controller_runtime_reconcile_panics_total{controller}`
//! - `controller_runtime_reconcile_time_seconds{controller}` (histogram)
//! - `controller_runtime_active_workers{controller}`,
//!   `controller_runtime_max_concurrent_reconciles{controller}`
//! - `workqueue_depth{name}`, `workqueue_adds_total{name}`, `workqueue_retries_total{name}`,
//!   `workqueue_queue_duration_seconds{name}`, `workqueue_work_duration_seconds{name}`,
//!   `workqueue_longest_running_processor_seconds{name}`
//! - `leader_election_master_status{name}`
//!
//! And one series of steady's own, for "why does my controller reconcile so often":
//! - `steady_reconcile_triggers_total{controller,trigger}` (trigger: primary, owned, watched,
//!   resync, requeue, backoff): reconciles started with at least one trigger of that kind
//!   (a reconcile that merged an owned object's change and its primary's counts in both).
//! - `steady_reconcile_skipped_total{controller}`: wake-ups skipped because the key's inputs
//!   were unchanged since its last reconcile (`Config::skip_unchanged`).
//!
//! prometheus-client appends `_total` to counters when encoding, so counters are registered
//! without it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::queue::Trigger;

/// `Content-Type` of the OpenMetrics text exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of the classic Prometheus text exposition (version 0.0.4).
pub const PROMETHEUS_TEXT_CONTENT_TYPE: &str =
    prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`.
const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

/// client-go/controller-runtime workqueue buckets: 10ns … 1000s, factor 10.
fn workqueue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// Outcome of one reconcile, the `result` label of `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconcileResult {
    /// Finished without asking to run again.
    Success,
    /// Failed; the key is retried with backoff.
    Error,
    /// Asked to run again at once.
    Requeue,
    /// Asked to run again after a delay.
    RequeueAfter,
}

impl EncodeLabelValue for ReconcileResult {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

impl ReconcileResult {
    const ALL: [ReconcileResult; 4] = [
        ReconcileResult::Success,
        ReconcileResult::Error,
        ReconcileResult::Requeue,
        ReconcileResult::RequeueAfter,
    ];

    /// The label value, as controller-runtime spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Error => "error",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::RequeueAfter => "requeue_after",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: ReconcileResult,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TriggerLabels {
    controller: String,
    trigger: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

type HistogramFamily<S> = Family<S, Histogram, fn() -> Histogram>;

struct Inner {
    registry: Registry,
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabel, Counter>,
    reconcile_panics: Family<ControllerLabel, Counter>,
    reconcile_time: HistogramFamily<ControllerLabel>,
    reconcile_triggers: Family<TriggerLabels, Counter>,
    reconcile_skipped: Family<ControllerLabel, Counter>,
    active_workers: Family<ControllerLabel, Gauge>,
    max_concurrent: Family<ControllerLabel, Gauge>,
    wq_depth: Family<NameLabel, Gauge>,
    wq_adds: Family<NameLabel, Counter>,
    wq_retries: Family<NameLabel, Counter>,
    wq_queue_duration: HistogramFamily<NameLabel>,
    wq_work_duration: HistogramFamily<NameLabel>,
    wq_longest_running: Family<NameLabel, Gauge<f64, AtomicU64>>,
    leader: Family<NameLabel, Gauge>,
}

/// All metrics of one process, in their own [`Registry`]. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every family registered; each controller adds its label values.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabels, Counter>::default();
        let reconcile_errors = Family::<ControllerLabel, Counter>::default();
        let reconcile_panics = Family::<ControllerLabel, Counter>::default();
        let reconcile_time: HistogramFamily<ControllerLabel> =
            Family::new_with_constructor(reconcile_time_histogram);
        let reconcile_triggers = Family::<TriggerLabels, Counter>::default();
        let reconcile_skipped = Family::<ControllerLabel, Counter>::default();
        let active_workers = Family::<ControllerLabel, Gauge>::default();
        let max_concurrent = Family::<ControllerLabel, Gauge>::default();
        let wq_depth = Family::<NameLabel, Gauge>::default();
        let wq_adds = Family::<NameLabel, Counter>::default();
        let wq_retries = Family::<NameLabel, Counter>::default();
        let wq_queue_duration: HistogramFamily<NameLabel> =
            Family::new_with_constructor(workqueue_histogram);
        let wq_work_duration: HistogramFamily<NameLabel> =
            Family::new_with_constructor(workqueue_histogram);
        let wq_longest_running = Family::<NameLabel, Gauge<f64, AtomicU64>>::default();
        let leader = Family::<NameLabel, Gauge>::default();

        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            reconcile_panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time.clone(),
        );
        registry.register(
            "steady_reconcile_triggers",
            "Reconciles started per controller with at least one trigger of each kind",
            reconcile_triggers.clone(),
        );
        registry.register(
            "steady_reconcile_skipped",
            "Wake-ups per controller skipped because the key's inputs were unchanged since its last reconcile",
            reconcile_skipped.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            max_concurrent.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            wq_depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            wq_adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            wq_retries.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            wq_queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            wq_work_duration.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            wq_longest_running.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
            leader.clone(),
        );

        Metrics {
            inner: Arc::new(Inner {
                registry,
                reconcile_total,
                reconcile_errors,
                reconcile_panics,
                reconcile_time,
                reconcile_triggers,
                reconcile_skipped,
                active_workers,
                max_concurrent,
                wq_depth,
                wq_adds,
                wq_retries,
                wq_queue_duration,
                wq_work_duration,
                wq_longest_running,
                leader,
            }),
        }
    }

    /// Handles for one controller (and its work queue, named after it as in
    /// controller-runtime). Creating them makes the controller's series appear, at zero.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let i = &self.inner;
        let controller = ControllerLabel {
            controller: name.to_string(),
        };
        let queue = NameLabel {
            name: name.to_string(),
        };
        let results = ReconcileResult::ALL.map(|result| {
            i.reconcile_total.get_or_create_owned(&ResultLabels {
                controller: name.to_string(),
                result,
            })
        });
        ControllerMetrics {
            inner: Arc::new(ControllerInner {
                results,
                errors: i.reconcile_errors.get_or_create_owned(&controller),
                panics: i.reconcile_panics.get_or_create_owned(&controller),
                time: i.reconcile_time.get_or_create_owned(&controller),
                triggers: Trigger::KINDS.map(|trigger| {
                    i.reconcile_triggers.get_or_create_owned(&TriggerLabels {
                        controller: name.to_string(),
                        trigger,
                    })
                }),
                skipped: i.reconcile_skipped.get_or_create_owned(&controller),
                active_workers: i.active_workers.get_or_create_owned(&controller),
                max_concurrent: i.max_concurrent.get_or_create_owned(&controller),
                depth: i.wq_depth.get_or_create_owned(&queue),
                adds: i.wq_adds.get_or_create_owned(&queue),
                retries: i.wq_retries.get_or_create_owned(&queue),
                queue_duration: i.wq_queue_duration.get_or_create_owned(&queue),
                work_duration: i.wq_work_duration.get_or_create_owned(&queue),
                longest_running: i.wq_longest_running.get_or_create_owned(&queue),
            }),
        }
    }

    /// Record whether this process holds the lease `lease_name` (1) or not (0).
    pub fn leader_election(&self, lease_name: &str, is_leader: bool) {
        self.inner
            .leader
            .get_or_create(&NameLabel {
                name: lease_name.to_string(),
            })
            .set(i64::from(is_leader));
    }

    /// The OpenMetrics text exposition (ends with `# EOF`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.inner.registry) {
            tracing::error!(error = %e, "encoding metrics (OpenMetrics) failed");
        }
        out
    }

    /// The classic Prometheus text exposition (version 0.0.4).
    pub fn encode_prometheus_text(&self) -> String {
        let mut out = String::new();
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
        {
            tracing::error!(error = %e, "encoding metrics (Prometheus text) failed");
        }
        out
    }
}

struct ControllerInner {
    /// Indexed like [`ReconcileResult::ALL`].
    results: [Counter; 4],
    errors: Counter,
    panics: Counter,
    time: Histogram,
    /// Indexed like [`Trigger::KINDS`].
    triggers: [Counter; Trigger::KINDS.len()],
    skipped: Counter,
    active_workers: Gauge,
    max_concurrent: Gauge,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    longest_running: Gauge<f64, AtomicU64>,
}

/// Metric handles of one controller, label values bound. Cheap to clone.
#[derive(Clone)]
pub struct ControllerMetrics {
    inner: Arc<ControllerInner>,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl ControllerMetrics {
    /// Count one finished reconcile and observe how long it took. An `Error` result also
    /// counts in `controller_runtime_reconcile_errors_total`.
    pub fn reconcile_result(&self, result: ReconcileResult, duration: Duration) {
        let idx = match result {
            ReconcileResult::Success => 0,
            ReconcileResult::Error => 1,
            ReconcileResult::Requeue => 2,
            ReconcileResult::RequeueAfter => 3,
        };
        self.inner.results[idx].inc();
        if result == ReconcileResult::Error {
            self.inner.errors.inc();
        }
        self.inner.time.observe(duration.as_secs_f64());
    }

    /// Count a reconcile started for `triggers`: once per kind among them.
    pub fn reconcile_started(&self, triggers: &[Trigger]) {
        for (kind, counter) in Trigger::KINDS.iter().zip(&self.inner.triggers) {
            if triggers.iter().any(|t| t.kind() == *kind) {
                counter.inc();
            }
        }
    }

    /// Reconciles started so far with a trigger of each kind, in [`Trigger::KINDS`] order.
    pub fn reconciles_by_trigger(&self) -> [(&'static str, u64); Trigger::KINDS.len()] {
        std::array::from_fn(|i| (Trigger::KINDS[i], self.inner.triggers[i].get()))
    }

    /// Count a wake-up skipped because the key's inputs were unchanged.
    pub fn reconcile_skipped(&self) {
        self.inner.skipped.inc();
    }

    /// Wake-ups skipped so far.
    pub fn skipped(&self) -> u64 {
        self.inner.skipped.get()
    }

    /// Count a reconcile that panicked (`controller_runtime_reconcile_panics_total`).
    pub fn reconcile_panic(&self) {
        self.inner.panics.inc();
    }

    /// Reconciles running now (`controller_runtime_active_workers`).
    pub fn set_active_workers(&self, n: i64) {
        self.inner.active_workers.set(n);
    }

    /// The concurrency limit (`controller_runtime_max_concurrent_reconciles`).
    pub fn set_max_concurrent(&self, n: i64) {
        self.inner.max_concurrent.set(n);
    }

    /// Work queue depth.
    pub fn set_depth(&self, n: i64) {
        self.inner.depth.set(n);
    }

    /// One add to the work queue.
    pub fn add(&self) {
        self.inner.adds.inc();
    }

    /// One rate-limited re-add (retry) to the work queue.
    pub fn retry(&self) {
        self.inner.retries.inc();
    }

    /// How long an item waited in the queue before a worker took it.
    pub fn queued_for(&self, d: Duration) {
        self.inner.queue_duration.observe(d.as_secs_f64());
    }

    /// How long a worker spent on an item.
    pub fn worked_for(&self, d: Duration) {
        self.inner.work_duration.observe(d.as_secs_f64());
    }

    /// How long the longest-running worker has been busy on its current item.
    pub fn set_longest_running(&self, d: Duration) {
        self.inner.longest_running.set(d.as_secs_f64());
    }
}

/// Health state the probes report. Cheap to clone; every clone shares the state.
#[derive(Clone, Default, Debug)]
pub struct Health {
    ready: Arc<AtomicBool>,
}

impl Health {
    /// Mark the process ready (caches synced) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Whether every cache has synced (`/readyz` answers 200).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct ProbeState {
    metrics: Metrics,
    health: Health,
}

/// An axum Router serving `GET /metrics` (OpenMetrics when the scraper's `Accept` asks for
/// it, else Prometheus text 0.0.4), `/healthz` (200 "ok" while the process runs) and
/// `/readyz` (200 "ok" when [`Health`] is ready, else 503).
pub fn router(metrics: Metrics, health: Health) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ProbeState { metrics, health })
}

async fn metrics_handler(State(state): State<ProbeState>, headers: HeaderMap) -> Response {
    let wants_openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    if wants_openmetrics {
        (
            [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
            state.metrics.encode(),
        )
            .into_response()
    } else {
        (
            [(header::CONTENT_TYPE, PROMETHEUS_TEXT_CONTENT_TYPE)],
            state.metrics.encode_prometheus_text(),
        )
            .into_response()
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<ProbeState>) -> (StatusCode, &'static str) {
    if state.health.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// Bind `addr` and serve [`router`] on it (in a spawned task) until `shutdown` resolves.
/// Returns the bound address, so port 0 works.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    serve_on(listener, metrics, health, shutdown)
}

/// [`serve`] on a listener the caller bound (to learn its address before serving, or to
/// hand over a socket), until `shutdown` resolves. Returns the listener's address.
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// use steady_runtime::metrics::{serve_on, Health, Metrics};
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = serve_on(listener, Metrics::new(), Health::default(), std::future::pending())?;
/// println!("probes on http://{addr}/readyz");
/// # Ok(())
/// # }
/// ```
pub fn serve_on(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<SocketAddr> {
    let bound = listener.local_addr()?;
    let app = router(metrics, health);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, addr = %bound, "metrics/probe server failed");
        }
    });
    tracing::info!(addr = %bound, "serving metrics and probes");
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tower::ServiceExt;

    /// The sample lines (no comments) of an exposition.
    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    fn has_sample(text: &str, prefix: &str, value: &str) -> bool {
        samples(text)
            .iter()
            .any(|l| l.starts_with(prefix) && l.ends_with(&format!(" {value}")))
    }

    #[test]
    fn encoded_series_have_controller_runtime_names_and_labels() {
        let m = Metrics::new();
        let c = m.controller("widgets");
        c.reconcile_result(ReconcileResult::Success, Duration::from_millis(20));
        c.reconcile_result(ReconcileResult::Success, Duration::from_millis(30));
        c.reconcile_result(ReconcileResult::Error, Duration::from_millis(7));
        c.reconcile_result(ReconcileResult::Requeue, Duration::from_secs(2));
        c.reconcile_result(ReconcileResult::RequeueAfter, Duration::from_secs(90));
        c.reconcile_panic();
        c.set_active_workers(3);
        c.set_max_concurrent(4);
        c.set_depth(5);
        c.add();
        c.add();
        c.retry();
        c.queued_for(Duration::from_millis(1));
        c.worked_for(Duration::from_millis(250));
        c.set_longest_running(Duration::from_millis(1500));
        m.leader_election("steady-lock", true);
        m.leader_election("other-lock", false);

        let text = m.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for (prefix, value) in [
            (
                r#"controller_runtime_reconcile_total{controller="widgets",result="success"}"#,
                "2",
            ),
            (
                r#"controller_runtime_reconcile_total{controller="widgets",result="error"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_total{controller="widgets",result="requeue"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_total{controller="widgets",result="requeue_after"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_errors_total{controller="widgets"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_panics_total{controller="widgets"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_count{controller="widgets"}"#,
                "5",
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="widgets"}"#,
                "0",
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_bucket{le="0.01",controller="widgets"}"#,
                "1",
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_bucket{le="60.0",controller="widgets"}"#,
                "4",
            ),
            (
                r#"controller_runtime_reconcile_time_seconds_bucket{le="+Inf",controller="widgets"}"#,
                "5",
            ),
            (
                r#"controller_runtime_active_workers{controller="widgets"}"#,
                "3",
            ),
            (
                r#"controller_runtime_max_concurrent_reconciles{controller="widgets"}"#,
                "4",
            ),
            (r#"workqueue_depth{name="widgets"}"#, "5"),
            (r#"workqueue_adds_total{name="widgets"}"#, "2"),
            (r#"workqueue_retries_total{name="widgets"}"#, "1"),
            (
                r#"workqueue_queue_duration_seconds_count{name="widgets"}"#,
                "1",
            ),
            (
                r#"workqueue_work_duration_seconds_count{name="widgets"}"#,
                "1",
            ),
            (
                r#"workqueue_work_duration_seconds_sum{name="widgets"}"#,
                "0.25",
            ),
            (
                r#"workqueue_longest_running_processor_seconds{name="widgets"}"#,
                "1.5",
            ),
            (r#"leader_election_master_status{name="steady-lock"}"#, "1"),
            (r#"leader_election_master_status{name="other-lock"}"#, "0"),
        ] {
            assert!(
                has_sample(&text, prefix, value),
                "missing `{prefix} {value}` in\n{text}"
            );
        }
        // Counters are typed under the name without `_total`, never with `_total_total`.
        assert!(text.contains("# TYPE controller_runtime_reconcile counter"));
        assert!(!text.contains("_total_total"), "{text}");
        assert!(text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram"));
        assert!(text.contains("# TYPE workqueue_depth gauge"));
    }

    #[test]
    fn controller_series_start_at_zero() {
        let m = Metrics::new();
        let _c = m.controller("idle");
        let text = m.encode();
        for result in ReconcileResult::ALL {
            let prefix = format!(
                r#"controller_runtime_reconcile_total{{controller="idle",result="{}"}}"#,
                result.as_str()
            );
            assert!(has_sample(&text, &prefix, "0"), "{prefix} in\n{text}");
        }
        assert!(has_sample(
            &text,
            r#"controller_runtime_reconcile_errors_total{controller="idle"}"#,
            "0"
        ));
    }

    #[test]
    fn a_reconcile_counts_once_per_kind_of_trigger() {
        let m = Metrics::new();
        let c = m.controller("widgets");
        let owned = |name: &str| Trigger::Owned {
            kind: "Pod".into(),
            name: name.into(),
        };
        c.reconcile_started(&[Trigger::Primary, owned("a"), owned("b")]);
        c.reconcile_started(&[owned("c")]);
        c.reconcile_started(&[Trigger::Backoff { attempt: 2 }]);
        assert_eq!(c.reconciles_by_trigger()[1], ("owned", 2));
        let text = m.encode();
        for (trigger, value) in [
            ("primary", "1"),
            ("owned", "2"),
            ("watched", "0"),
            ("resync", "0"),
            ("requeue", "0"),
            ("backoff", "1"),
        ] {
            let prefix = format!(
                r#"steady_reconcile_triggers_total{{controller="widgets",trigger="{trigger}"}}"#
            );
            assert!(
                has_sample(&text, &prefix, value),
                "{prefix} {value} in\n{text}"
            );
        }
    }

    #[test]
    fn handles_share_series_and_leader_flips() {
        let m = Metrics::new();
        m.controller("a").add();
        m.controller("a").clone().add();
        m.leader_election("lease", true);
        m.leader_election("lease", false);
        let text = m.encode();
        assert!(has_sample(&text, r#"workqueue_adds_total{name="a"}"#, "2"));
        assert!(has_sample(
            &text,
            r#"leader_election_master_status{name="lease"}"#,
            "0"
        ));
    }

    #[test]
    fn prometheus_text_format() {
        let m = Metrics::new();
        m.controller("w")
            .reconcile_result(ReconcileResult::Success, Duration::from_millis(1));
        let text = m.encode_prometheus_text();
        assert!(has_sample(
            &text,
            r#"controller_runtime_reconcile_total{controller="w",result="success"}"#,
            "1"
        ));
        assert!(!text.contains("# EOF"));
    }

    async fn get(
        router: &Router,
        path: &str,
        accept: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut req = Request::builder().uri(path);
        if let Some(accept) = accept {
            req = req.header(header::ACCEPT, accept);
        }
        let resp = router
            .clone()
            .oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let ct = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, ct, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn probes_and_metrics_endpoint() {
        let metrics = Metrics::new();
        let health = Health::default();
        metrics
            .controller("widgets")
            .reconcile_result(ReconcileResult::Success, Duration::from_millis(3));
        let app = router(metrics.clone(), health.clone());

        let (status, _, body) = get(&app, "/healthz", None).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));

        let (status, _, _) = get(&app, "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        health.set_ready(true);
        let (status, _, body) = get(&app, "/readyz", None).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        health.set_ready(false);
        let (status, _, _) = get(&app, "/readyz", None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);

        let (status, ct, body) = get(&app, "/metrics", None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct, PROMETHEUS_TEXT_CONTENT_TYPE);
        assert!(body.contains(
            r#"controller_runtime_reconcile_total{controller="widgets",result="success"} 1"#
        ));

        let (status, ct, body) = get(
            &app,
            "/metrics",
            Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(ct, OPENMETRICS_CONTENT_TYPE);
        assert!(body.ends_with("# EOF\n"));

        let (status, _, _) = get(&app, "/nope", None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn serve_binds_port_zero_and_shuts_down() {
        let health = Health::default();
        health.set_ready(true);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let addr = serve(
            "127.0.0.1:0".parse().unwrap(),
            Metrics::new(),
            health,
            async move {
                let _ = rx.await;
            },
        )
        .await
        .unwrap();
        assert_ne!(addr.port(), 0);

        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut resp = String::new();
        conn.read_to_string(&mut resp).await.unwrap();
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.ends_with("ok"), "{resp}");

        tx.send(()).unwrap();
        // After shutdown the listener closes; connecting eventually fails.
        let mut closed = false;
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_err() {
                closed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(closed, "server still accepting after shutdown");
    }
}
