//! The fault layer: a tower Service between the controller's `kube::Client` and the API
//! server's Router that drops, duplicates, delays and cuts watch events, serves stale
//! lists, fails requests (409, 429, 500, 504), loses the responses of committed writes,
//! and crashes the controller after a write. Every decision is drawn from one seeded RNG
//! and written to the trace.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use axum::body::Body;
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use steady_store::Store;
use tokio::sync::watch;
use tokio::time::Instant;
use tower::ServiceExt;

/// Every kind of fault the simulator injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A watch event is not delivered.
    DropEvent,
    /// A watch event is delivered twice.
    DuplicateEvent,
    /// A watch event is held back and delivered after later ones (reordered).
    DelayEvent,
    /// A watch stream ends early, without an error.
    CutWatch,
    /// A list is served from an older revision, as from a lagging cache.
    StaleList,
    /// A write is answered 409 Conflict and not applied.
    Conflict,
    /// A write is answered 429 Too Many Requests and not applied.
    Throttle,
    /// A write is answered 500 and not applied.
    ServerError,
    /// A write is answered 504 and not applied.
    Timeout,
    /// A write is applied but its response is lost (the client sees an error).
    LostResponse,
    /// The controller crashes right after a write and restarts with empty caches.
    Crash,
    /// A running pod fails, as if its container exited.
    PodFailure,
    /// Someone else deletes a pod.
    PodDeletion,
}

impl FaultKind {
    /// Every kind, in a fixed order.
    pub const ALL: [FaultKind; 13] = [
        FaultKind::DropEvent,
        FaultKind::DuplicateEvent,
        FaultKind::DelayEvent,
        FaultKind::CutWatch,
        FaultKind::StaleList,
        FaultKind::Conflict,
        FaultKind::Throttle,
        FaultKind::ServerError,
        FaultKind::Timeout,
        FaultKind::LostResponse,
        FaultKind::Crash,
        FaultKind::PodFailure,
        FaultKind::PodDeletion,
    ];

    /// The kebab-case name `steady sim --faults` takes.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::DropEvent => "drop-event",
            FaultKind::DuplicateEvent => "duplicate-event",
            FaultKind::DelayEvent => "delay-event",
            FaultKind::CutWatch => "cut-watch",
            FaultKind::StaleList => "stale-list",
            FaultKind::Conflict => "conflict",
            FaultKind::Throttle => "throttle",
            FaultKind::ServerError => "server-error",
            FaultKind::Timeout => "timeout",
            FaultKind::LostResponse => "lost-response",
            FaultKind::Crash => "crash",
            FaultKind::PodFailure => "pod-failure",
            FaultKind::PodDeletion => "pod-deletion",
        }
    }

    /// The kind `name` denotes (see [`FaultKind::name`]).
    pub fn parse(name: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Probability of each fault at each opportunity (an event, a request, a tick).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRates {
    rates: BTreeMap<FaultKind, f64>,
}

impl FaultRates {
    /// No faults: the reference run.
    pub fn none() -> Self {
        FaultRates::default()
    }

    /// Moderate rates for every kind of fault: what the CI campaign uses.
    pub fn all() -> Self {
        Self::only(&FaultKind::ALL)
    }

    /// The rates of [`FaultRates::all`] for `kinds`, zero for the others.
    pub fn only(kinds: &[FaultKind]) -> Self {
        let mut rates = BTreeMap::new();
        for kind in kinds {
            let rate = match kind {
                FaultKind::DropEvent => 0.05,
                FaultKind::DuplicateEvent => 0.05,
                FaultKind::DelayEvent => 0.05,
                FaultKind::CutWatch => 0.02,
                FaultKind::StaleList => 0.5,
                FaultKind::Conflict => 0.05,
                FaultKind::Throttle => 0.03,
                FaultKind::ServerError => 0.03,
                FaultKind::Timeout => 0.02,
                FaultKind::LostResponse => 0.03,
                FaultKind::Crash => 0.03,
                FaultKind::PodFailure => 0.05,
                FaultKind::PodDeletion => 0.05,
            };
            rates.insert(*kind, rate);
        }
        FaultRates { rates }
    }

    /// The probability of `kind` at each opportunity.
    pub fn rate(&self, kind: FaultKind) -> f64 {
        self.rates.get(&kind).copied().unwrap_or(0.0)
    }

    /// The `--faults` flag of `steady sim` naming these kinds (`none` for no fault).
    pub fn flag(&self) -> String {
        let kinds: Vec<&str> = self.kinds().into_iter().map(FaultKind::name).collect();
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(",")
        }
    }

    /// The kinds with a rate above zero.
    pub fn kinds(&self) -> Vec<FaultKind> {
        self.rates
            .iter()
            .filter(|(_, r)| **r > 0.0)
            .map(|(k, _)| *k)
            .collect()
    }
}

/// A readable, deterministic log of one run: simulated time and what happened.
#[derive(Clone, Default)]
pub struct Trace {
    lines: Arc<Mutex<Vec<String>>>,
    start: Arc<Mutex<Option<Instant>>>,
}

impl Trace {
    /// Append `line`, stamped with the simulated time.
    pub fn log(&self, line: impl AsRef<str>) {
        let now = Instant::now();
        let start = *self
            .start
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(now);
        let at = (now - start).as_secs_f64();
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("{at:>9.3}s  {}", line.as_ref()));
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Effective writes at one simulated instant that mark a hot loop: far more than any
/// burst of creates a scenario makes at once.
pub const HOT_LOOP_WRITES: u64 = 1000;

/// The shared state of the fault layer: RNG, rates, counters, the on/off switch.
pub struct Faults {
    rng: Mutex<StdRng>,
    rates: FaultRates,
    active: AtomicBool,
    /// Woken when faults stop (a Notify wakes waiters in a defined order; tokio's watch
    /// channel would wake the watch streams in a random one).
    stopped: tokio::sync::Notify,
    injected: Mutex<BTreeMap<FaultKind, u64>>,
    trace: Trace,
    store: Store,
    /// Write requests sent through a client of the layer (what a systematic crash counts).
    write_requests: AtomicU64,
    /// Writes that changed the stored world, for the stability and idempotency checks: a
    /// no-op update or server-side apply answers 200 without a new resourceVersion, as on a
    /// cluster, and an operator that applies on every reconcile is still idempotent.
    writes: AtomicU64,
    /// Effective writes at the current simulated instant, to catch a hot loop.
    writes_this_instant: Mutex<(Instant, u64)>,
    /// Set when the controller wrote [`HOT_LOOP_WRITES`] times at one instant.
    hot_loop: AtomicBool,
    /// Set when a crash fault fired; the harness restarts the controller.
    crashed: watch::Sender<u64>,
    frozen: AtomicBool,
    /// Systematic crash: die right after this many writes (counted across restarts).
    crash_after_write: Option<u64>,
}

impl Faults {
    /// The fault layer of one run: dice seeded from `seed`, faults off until
    /// [`Faults::set_active`]; `crash_after_write` crashes the controller after that many writes.
    pub fn new(
        seed: u64,
        rates: FaultRates,
        crash_after_write: Option<u64>,
        store: Store,
        trace: Trace,
    ) -> Arc<Faults> {
        Arc::new(Faults {
            rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x5eed_fa17)),
            rates,
            active: AtomicBool::new(false),
            stopped: tokio::sync::Notify::new(),
            injected: Mutex::new(BTreeMap::new()),
            trace,
            store,
            write_requests: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            writes_this_instant: Mutex::new((Instant::now(), 0)),
            hot_loop: AtomicBool::new(false),
            crashed: watch::channel(0).0,
            frozen: AtomicBool::new(false),
            crash_after_write,
        })
    }

    /// Open or close the fault window; closing it wakes whoever waits for faults to stop.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::SeqCst);
        if !active {
            self.stopped.notify_waiters();
        }
        self.trace
            .log(if active { "faults on" } else { "faults off" });
    }

    /// Whether the fault window is open.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Resolves once faults are off.
    async fn until_stopped(&self) {
        let notified = self.stopped.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if !self.is_active() {
            return;
        }
        notified.await;
    }

    /// Roll the dice for `kind` (never fires while faults are off).
    pub fn roll(&self, kind: FaultKind) -> bool {
        if !self.is_active() {
            return false;
        }
        let rate = self.rates.rate(kind);
        if rate <= 0.0 {
            return false;
        }
        let hit = self
            .rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random_bool(rate.min(1.0));
        if hit {
            *self
                .injected
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(kind)
                .or_default() += 1;
        }
        hit
    }

    /// A seeded draw in `0..len` (0 when `len` is 0).
    pub fn random_index(&self, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random_range(0..len)
    }

    /// How many faults of each kind fired so far.
    pub fn injected(&self) -> BTreeMap<FaultKind, u64> {
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many faults of `kind` fired so far.
    pub fn count(&self, kind: FaultKind) -> u64 {
        self.injected().get(&kind).copied().unwrap_or(0)
    }

    /// The run's trace.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Writes through clients of this layer so far that changed the stored world.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    /// Write requests sent through clients of this layer so far, effective or not.
    pub fn write_requests(&self) -> u64 {
        self.write_requests.load(Ordering::SeqCst)
    }

    /// Whether the controller was caught in a hot loop (and stopped: its requests hang).
    pub fn hot_loop(&self) -> bool {
        self.hot_loop.load(Ordering::SeqCst)
    }

    /// Count an effective write. A controller whose every write triggers its next reconcile
    /// never lets the paused clock advance, so no time-based property could end the run:
    /// after [`HOT_LOOP_WRITES`] writes at one instant it is frozen (its requests hang) and
    /// flagged for the harness to report.
    fn count_write(&self, what: &str) {
        self.writes.fetch_add(1, Ordering::SeqCst);
        let now = Instant::now();
        let mut instant = self
            .writes_this_instant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if instant.0 == now {
            instant.1 += 1;
        } else {
            *instant = (now, 1);
        }
        if instant.1 >= HOT_LOOP_WRITES && !self.hot_loop.swap(true, Ordering::SeqCst) {
            self.frozen.store(true, Ordering::SeqCst);
            self.trace.log(format!(
                "hot loop: {HOT_LOOP_WRITES} writes without simulated time passing (last {what}); \
                 the controller is stopped"
            ));
        }
    }

    /// Resolves when a crash fault fires.
    pub fn crashes(&self) -> watch::Receiver<u64> {
        self.crashed.subscribe()
    }

    /// After a crash: the old controller's requests hang until it is torn down; a new
    /// client (a restarted controller) thaws the layer.
    pub fn thaw(&self) {
        self.frozen.store(false, Ordering::SeqCst);
    }

    fn crash(&self) {
        self.frozen.store(true, Ordering::SeqCst);
        self.crashed.send_modify(|n| *n += 1);
    }
}

/// The Router wrapped in the fault layer, usable as a `kube::Client` transport.
#[derive(Clone)]
pub struct FaultService {
    router: axum::Router,
    faults: Arc<Faults>,
    relists: RelistsDue,
}

impl FaultService {
    /// `router` behind the fault layer.
    pub fn new(router: axum::Router, faults: Arc<Faults>) -> Self {
        FaultService {
            router,
            faults,
            relists: RelistsDue::default(),
        }
    }

    /// A `kube::Client` whose every request goes through the fault layer into `router`.
    pub fn client(router: axum::Router, faults: Arc<Faults>) -> kube::Client {
        kube::Client::new(FaultService::new(router, faults), "default")
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Whether a write's response shows that it changed the stored world, and the response
/// (buffered to read it). An object in the body answers precisely: its resourceVersion is
/// newer than the store's revision before the request only if this request wrote it. A body
/// without one (a `Status`) falls back to whether the store's revision moved at all.
async fn changed_the_world(
    response: http::Response<Body>,
    revision_before: u64,
    revision_after: u64,
) -> (http::Response<Body>, bool) {
    if !response.status().is_success() {
        return (response, false);
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let written_at = steady_store::revision_in(&bytes);
    let effective = match written_at {
        Some(revision) => revision > revision_before,
        None => revision_after > revision_before,
    };
    (
        http::Response::from_parts(parts, Body::from(bytes)),
        effective,
    )
}

fn status(code: u16, reason: &str, message: &str) -> http::Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    let mut response = http::Response::new(Body::from(body.to_string()));
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn is_list(path: &str) -> bool {
    matches!(
        steady_apiserver::request::parse_route(path),
        Some(steady_apiserver::request::Route::Object(
            steady_apiserver::request::ObjectPath { name: None, .. }
        ))
    )
}

impl tower::Service<http::Request<kube::client::Body>> for FaultService {
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let faults = self.faults.clone();
        let router = self.router.clone();
        let relists = self.relists.clone();
        Box::pin(async move {
            if faults.frozen.load(Ordering::SeqCst) {
                // The controller "crashed": nothing it sends arrives any more.
                return Ok(std::future::pending().await);
            }
            let mut request = request.map(Body::new);
            let method = request.method().clone();
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or("").to_string();
            let watching = query
                .split('&')
                .any(|p| p == "watch=true" || p == "watch=1");
            let writing = method != http::Method::GET;
            let what = format!("{method} {path}");
            if let Some(expired) = relists.expire(&faults, &path, &query, watching, &what) {
                return Ok(expired);
            }
            if writing {
                for (kind, code, reason) in [
                    (FaultKind::Conflict, 409, "Conflict"),
                    (FaultKind::Throttle, 429, "TooManyRequests"),
                    (FaultKind::ServerError, 500, "InternalError"),
                    (FaultKind::Timeout, 504, "Timeout"),
                ] {
                    if faults.roll(kind) {
                        faults.trace.log(format!("fault {kind}: {what} → {code}"));
                        return Ok(status(code, reason, &format!("injected {kind}")));
                    }
                }
            } else if !watching && is_list(&path) && faults.roll(FaultKind::StaleList) {
                let current = faults.store.revision();
                let oldest = faults.store.compacted_revision().max(1);
                let lag = faults.random_index(20) as u64 + 1;
                let at = current.saturating_sub(lag).max(oldest);
                let stale =
                    format!("{path}?{query}&resourceVersion={at}&resourceVersionMatch=Exact");
                if let Ok(uri) = stale.parse() {
                    *request.uri_mut() = uri;
                    faults.trace.log(format!(
                        "fault stale-list: {what} served at revision {at} (current {current})"
                    ));
                }
            }
            let revision_before = faults.store.revision();
            let mut response = match router.oneshot(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            if writing {
                let effective;
                (response, effective) =
                    changed_the_world(response, revision_before, faults.store.revision()).await;
                if effective {
                    faults.count_write(&what);
                }
                let written = faults.write_requests.fetch_add(1, Ordering::SeqCst) + 1;
                faults.trace.log(format!(
                    "write {what} → {}{}",
                    response.status().as_u16(),
                    if effective { "" } else { " (no change)" }
                ));
                if faults.is_active() && faults.crash_after_write == Some(written) {
                    faults.trace.log(format!(
                        "fault crash: systematic crash after write {written}"
                    ));
                    *faults
                        .injected
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(FaultKind::Crash)
                        .or_default() += 1;
                    faults.crash();
                    return Ok(std::future::pending().await);
                }
                if faults.roll(FaultKind::LostResponse) {
                    faults.trace.log(format!(
                        "fault lost-response: {what} committed, the client sees 504"
                    ));
                    return Ok(status(504, "Timeout", "injected lost-response"));
                }
                if faults.roll(FaultKind::Crash) {
                    faults
                        .trace
                        .log(format!("fault crash: the controller dies after {what}"));
                    faults.crash();
                    return Ok(std::future::pending().await);
                }
            }
            if watching && response.status().is_success() {
                return Ok(response.map(|body| wrap_watch(body, faults.clone(), what)));
            }
            Ok(response)
        })
    }
}

/// The collections one client watched while faults were on and has not listed since they
/// stopped. Its watches may have lost events to the faults: every watch open when they
/// stop is expired (see [`wrap_watch`]), and so is a watch it opens after they stopped
/// without listing first (one cut at that instant and resumed where it left off), so
/// that it relists and sees what it missed.
#[derive(Clone, Default)]
struct RelistsDue(Arc<Mutex<BTreeSet<String>>>);

impl RelistsDue {
    /// Note a list or watch of `path`; `Some(expired watch)` when the client must relist.
    fn expire(
        &self,
        faults: &Faults,
        path: &str,
        query: &str,
        watching: bool,
        what: &str,
    ) -> Option<http::Response<Body>> {
        let mut due = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if faults.is_active() {
            if watching {
                due.insert(path.to_string());
            }
            return None;
        }
        let lists = !watching || query.split('&').any(|p| p == "sendInitialEvents=true");
        if !due.remove(path) || lists {
            return None;
        }
        faults.trace.log(format!(
            "{what}: a watch resumed after faults stopped, without a relist: expired"
        ));
        let mut response = http::Response::new(Body::from(expired_line()));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        Some(response)
    }
}

/// The watch event that makes a client relist, as kube-apiserver sends it in the stream:
/// one line.
fn expired_line() -> Bytes {
    Bytes::from_static(
        b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version (simulated expiry)\",\"reason\":\"Expired\",\"code\":410}}\n",
    )
}

/// Watch bodies: one event per frame (steady's server writes one line per frame).
fn wrap_watch(body: Body, faults: Arc<Faults>, what: String) -> Body {
    struct State {
        inner: axum::body::BodyDataStream,
        faults: Arc<Faults>,
        out: VecDeque<Bytes>,
        held: Option<Bytes>,
        done: bool,
        what: String,
        /// Opened while faults were on: expired when they stop, even if that happened
        /// before the body was first polled.
        opened_during_faults: bool,
    }
    let faults_on = faults.is_active();
    let state = State {
        inner: body.into_data_stream(),
        faults,
        out: VecDeque::new(),
        held: None,
        done: false,
        what,
        opened_during_faults: faults_on,
    };
    let stream = futures::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(line) = s.out.pop_front() {
                return Some((Ok::<Bytes, std::convert::Infallible>(line), s));
            }
            if s.done {
                return None;
            }
            let faults = s.faults.clone();
            let next = tokio::select! {
                biased;
                _ = faults.until_stopped(), if s.opened_during_faults => {
                    {
                        // Faults just stopped: expire this watch so the client relists.
                        s.out.extend(s.held.take());
                        s.out.push_back(expired_line());
                        s.done = true;
                    }
                    continue;
                }
                frame = s.inner.next() => frame,
            };
            let Some(Ok(line)) = next else {
                s.out.extend(s.held.take());
                s.done = true;
                continue;
            };
            let is_event = !line.starts_with(b"{\"type\":\"BOOKMARK\"")
                && !line.starts_with(b"{\"type\":\"ERROR\"");
            if is_event && s.faults.roll(FaultKind::DropEvent) {
                s.faults.trace.log(format!(
                    "fault drop-event on {}: {}",
                    s.what,
                    summary(&line)
                ));
                continue;
            }
            if is_event && s.faults.roll(FaultKind::DelayEvent) {
                s.faults.trace.log(format!(
                    "fault delay-event on {}: {}",
                    s.what,
                    summary(&line)
                ));
                s.out.extend(s.held.replace(line));
                continue;
            }
            let duplicate = is_event && s.faults.roll(FaultKind::DuplicateEvent);
            if duplicate {
                s.faults.trace.log(format!(
                    "fault duplicate-event on {}: {}",
                    s.what,
                    summary(&line)
                ));
                s.out.push_back(line.clone());
            }
            s.out.push_back(line);
            s.out.extend(s.held.take());
            if s.faults.roll(FaultKind::CutWatch) {
                s.faults.trace.log(format!("fault cut-watch: {}", s.what));
                s.done = true;
            }
        }
    });
    Body::from_stream(stream)
}

/// What the fault layer reads of an object: serde skips the rest without building it.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Head {
    kind: Option<String>,
    metadata: HeadMetadata,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct HeadMetadata {
    name: Option<String>,
    namespace: Option<String>,
}

/// What the fault layer reads of a watch event.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct EventHead {
    #[serde(rename = "type")]
    kind: Option<String>,
    object: Head,
}

/// `MODIFIED Pod default/x-1` from an event line.
fn summary(line: &[u8]) -> String {
    let Ok(event) = serde_json::from_slice::<EventHead>(line) else {
        return "?".into();
    };
    let meta = event.object.metadata;
    format!(
        "{} {} {}/{}",
        event.kind.as_deref().unwrap_or("?"),
        event.object.kind.as_deref().unwrap_or("?"),
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("?")
    )
}
