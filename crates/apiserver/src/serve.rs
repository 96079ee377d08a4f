//! HTTPS serving: owns the listener, the connection limits and the timeouts.
//!
//! It must not know API semantics: it serves whatever [`Router`] it is given over rustls
//! (HTTP/2 and HTTP/1.1), and protects the process from clients that hold connections
//! without using them, as kube-apiserver's `SecureServingInfo` does with Go's `http.Server`:
//!
//! - at most [`ServingConfig::max_connections`] connections at once (sized from the open-file
//!   limit by default); when they are all taken, the loop stops accepting until one ends,
//!   and new connections wait in the kernel's listen backlog;
//! - accept errors (e.g. `EMFILE`) back off 5 ms doubling to 1 s, reset by a success, as
//!   Go's `net/http` does, and are logged at most once per 10 s;
//! - a TLS handshake and the first request's headers must each arrive within their
//!   timeouts, and a connection with no request in flight is closed after the idle timeout
//!   (HTTP/1.1 and HTTP/2 alike). A response still being sent (a watch) keeps its
//!   connection open;
//! - at start the soft `RLIMIT_NOFILE` is raised to the hard limit (Go does the same).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// Accept errors and a full connection table are logged at most once per this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// After a graceful close of an idle connection (an HTTP/2 GOAWAY), how long the peer has to
/// finish before the connection is dropped (Go's http2 `goAwayTimeout`).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// Accept-error backoff bounds (Go's `net/http.Server.Serve`).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Silence before the first TCP keep-alive probe (kube-apiserver's `defaultKeepAlivePeriod`)
/// and between probes (Go's default interval).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(180);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// File descriptors kept out of the connection budget for the store, logs and the runtime.
const RESERVED_FDS: u64 = 32;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{variable}={value:?}: {expected}")]
    BadEnvironment {
        variable: &'static str,
        value: String,
        expected: &'static str,
    },
}

/// Connection limits and timeouts. Defaults are kube-apiserver's where it has one.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingConfig {
    /// Connections served at once; `None` sizes it from the open-file limit
    /// ([`default_max_connections`]).
    pub max_connections: Option<usize>,
    /// Time for a client to complete the TLS handshake (Go applies `ReadHeaderTimeout`).
    pub tls_handshake_timeout: Duration,
    /// Time for the first request's headers to arrive on a new connection (kube-apiserver's
    /// `ReadHeaderTimeout`: 32 s).
    pub header_read_timeout: Duration,
    /// Time a connection with no request in flight stays open after its last request
    /// (`IdleTimeout`: 90 s); this also bounds the headers of later requests.
    pub idle_timeout: Duration,
}

impl Default for ServingConfig {
    fn default() -> Self {
        ServingConfig {
            max_connections: None,
            tls_handshake_timeout: Duration::from_secs(32),
            header_read_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
        }
    }
}

impl ServingConfig {
    /// The defaults, overridden by `STEADY_MAX_CONNECTIONS`, `STEADY_TLS_HANDSHAKE_TIMEOUT_MS`,
    /// `STEADY_HEADER_READ_TIMEOUT_MS` and `STEADY_IDLE_TIMEOUT_MS` where set. These are not
    /// user-facing flags: tests shorten the timeouts with them, operators may tune them.
    pub fn from_env() -> Result<ServingConfig, ServeError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<ServingConfig, ServeError> {
        let number = |variable: &'static str| -> Result<Option<u64>, ServeError> {
            lookup(variable)
                .map(|value| {
                    value.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or(
                        ServeError::BadEnvironment {
                            variable,
                            value,
                            expected: "expected a positive integer",
                        },
                    )
                })
                .transpose()
        };
        let millis = |variable, default: Duration| {
            Ok::<_, ServeError>(number(variable)?.map_or(default, Duration::from_millis))
        };
        let defaults = ServingConfig::default();
        Ok(ServingConfig {
            max_connections: number("STEADY_MAX_CONNECTIONS")?
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            tls_handshake_timeout: millis(
                "STEADY_TLS_HANDSHAKE_TIMEOUT_MS",
                defaults.tls_handshake_timeout,
            )?,
            header_read_timeout: millis(
                "STEADY_HEADER_READ_TIMEOUT_MS",
                defaults.header_read_timeout,
            )?,
            idle_timeout: millis("STEADY_IDLE_TIMEOUT_MS", defaults.idle_timeout)?,
        })
    }
}

/// Serve `app` over TLS on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Arc<rustls::ServerConfig>,
    config: &ServingConfig,
    shutdown: impl Future<Output = ()> + Send,
) {
    let fd_limit = raise_fd_limit();
    let max_connections = config
        .max_connections
        .unwrap_or_else(|| default_max_connections(fd_limit))
        .min(Semaphore::MAX_PERMITS);
    tracing::debug!(max_connections, ?fd_limit, "serving HTTPS");
    let slots = Arc::new(Semaphore::new(max_connections));
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let (closing_tx, closing_rx) = watch::channel(false);
    let mut backoff = AcceptBackoff::default();
    let mut full_log = RateLimitedLog::default();
    let mut error_log = RateLimitedLog::default();
    tokio::pin!(shutdown);
    loop {
        if slots.available_permits() == 0 && full_log.admit(Instant::now()) {
            tracing::warn!(
                max_connections,
                "connection limit reached: new connections wait until one closes"
            );
        }
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = accept(&listener, &slots) => accepted,
        };
        match accepted {
            Ok((stream, peer, slot)) => {
                backoff.reset();
                let connection = Connection {
                    acceptor: acceptor.clone(),
                    app: app.clone(),
                    config: config.clone(),
                    closing: closing_rx.clone(),
                    peer,
                    _slot: slot,
                };
                tokio::spawn(connection.serve(stream));
            }
            Err(error) => {
                let delay = backoff.next_delay();
                if error_log.admit(Instant::now()) {
                    let suppressed = error_log.take_suppressed();
                    tracing::warn!(%error, retry_in = ?delay, suppressed, "accept failed");
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
    let _ = closing_tx.send(true);
}

/// Wait for a free connection slot, then for a connection.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> io::Result<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let slot = slots
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| io::Error::other("the connection slots were closed"))?;
    let (stream, peer) = listener.accept().await?;
    without_nagle(&stream);
    probe_when_idle(&stream);
    Ok((stream, peer, slot))
}

/// Send each write at once, as Go's net package does for every TCP connection (so
/// kube-apiserver does). With Nagle's algorithm on, a watch event written while the last
/// one is still unacknowledged waits for that acknowledgement, which a client may delay by
/// up to 40 ms.
pub(crate) fn without_nagle(stream: &TcpStream) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "could not set TCP_NODELAY");
    }
}

/// TCP keep-alive probes after 3 minutes of silence, then every 15 s, as kube-apiserver
/// sets them on the connections it accepts (Go's interval): a peer that vanished without
/// closing (a laptop shut mid-watch) loses its connection and its slot.
fn probe_when_idle(stream: &TcpStream) {
    let probes = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL);
    if let Err(error) = socket2::SockRef::from(stream).set_tcp_keepalive(&probes) {
        tracing::debug!(%error, "could not set TCP keep-alive");
    }
}

/// The connection budget for an open-file limit: all of it but a reserve (a quarter, at
/// least 32 descriptors) for the store, logs and the runtime, so that accepting never
/// runs the process out of descriptors. Unknown limit: 1024, the common default.
pub fn default_max_connections(fd_limit: Option<u64>) -> usize {
    let limit = fd_limit.unwrap_or(1024);
    let reserve = (limit / 4).max(RESERVED_FDS);
    usize::try_from(limit.saturating_sub(reserve).max(1)).unwrap_or(usize::MAX)
}

/// One accepted connection, holding its slot until it ends.
struct Connection {
    acceptor: tokio_rustls::TlsAcceptor,
    app: Router,
    config: ServingConfig,
    closing: watch::Receiver<bool>,
    peer: SocketAddr,
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(mut self, stream: TcpStream) {
        let peer = self.peer;
        let handshake = self.acceptor.accept(stream);
        let tls_stream =
            match tokio::time::timeout(self.config.tls_handshake_timeout, handshake).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
        let activity = Activity::default();
        let service = hyper_util::service::TowerToHyperService::new(track_requests(
            self.app.clone(),
            activity.clone(),
        ));
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        // hyper's own HTTP/1.1 header timer would also run between requests, closing
        // keep-alive connections after the header timeout instead of the idle timeout that
        // clients' pools expect (90 s in Go's and hyper's): `Activity::idle` bounds both.
        builder.http1().header_read_timeout(None);
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls_stream), service);
        tokio::pin!(connection);
        let idle = activity.idle(self.config.header_read_timeout, self.config.idle_timeout);
        let closing = self.closing.changed();
        tokio::select! {
            _ = connection.as_mut() => {}
            _ = closing => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
            _ = idle => {
                tracing::debug!(%peer, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(GOAWAY_GRACE, connection).await;
            }
        }
    }
}

/// The number of requests in flight on one connection, from the request's arrival until its
/// response body is finished or dropped.
#[derive(Clone)]
struct Activity(Arc<watch::Sender<usize>>);

impl Default for Activity {
    fn default() -> Self {
        Activity(Arc::new(watch::Sender::new(0)))
    }
}

/// Counts one request in flight while it lives.
struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Activity {
    fn begin(&self) -> InFlight {
        self.0.send_modify(|n| *n += 1);
        InFlight(self.0.clone())
    }

    /// Completes once no request has been in flight for `first` since the start (no request
    /// yet) or for `between` since the last one ended.
    async fn idle(&self, first: Duration, between: Duration) {
        let mut in_flight = self.0.subscribe();
        let mut allowed = first;
        loop {
            if *in_flight.borrow_and_update() == 0 {
                tokio::select! {
                    _ = tokio::time::sleep(allowed) => return,
                    _ = in_flight.changed() => {}
                }
            } else {
                // The sender lives in `self`, so this only returns on a change.
                let _ = in_flight.changed().await;
            }
            allowed = between;
        }
    }
}

/// `app`, counting each request in `activity` until its response body is done.
fn track_requests(
    app: Router,
    activity: Activity,
) -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = Infallible,
    Future = impl Future + Send,
> + Clone
+ Send {
    tower::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let in_flight = activity.begin();
        let response = app.clone().oneshot(request);
        async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    // Owned by the body, so the request counts until the body is dropped.
                    let _in_flight = &in_flight;
                    frame
                }))
            }))
        }
    })
}

/// Go's accept backoff: 5 ms, doubling to 1 s; a success starts over.
#[derive(Default)]
struct AcceptBackoff {
    last: Option<Duration>,
}

impl AcceptBackoff {
    fn next_delay(&mut self) -> Duration {
        let delay = self
            .last
            .map_or(ACCEPT_BACKOFF_MIN, |d| (d * 2).min(ACCEPT_BACKOFF_MAX));
        self.last = Some(delay);
        delay
    }

    fn reset(&mut self) {
        self.last = None;
    }
}

/// Admits one log line per [`LOG_INTERVAL`] and counts the ones it held back.
#[derive(Default)]
struct RateLimitedLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    fn admit(&mut self, now: Instant) -> bool {
        match self.last {
            Some(last) if now.duration_since(last) < LOG_INTERVAL => {
                self.suppressed += 1;
                false
            }
            _ => {
                self.last = Some(now);
                true
            }
        }
    }

    fn take_suppressed(&mut self) -> u64 {
        std::mem::take(&mut self.suppressed)
    }
}

/// Raise the soft open-file limit to the hard one (a server with many watches needs more
/// than the usual 1024) and return the limit now in force; `None` where unknown.
#[cfg(unix)]
#[allow(clippy::useless_conversion)] // `rlim_t` is `u64` on Linux, not on every unix.
pub fn raise_fd_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), "cannot read the open-file limit");
        return None;
    }
    let soft = limit.rlim_cur;
    if soft >= limit.rlim_max {
        return Some(u64::from(soft));
    }
    let raised = libc::rlimit {
        rlim_cur: limit.rlim_max,
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), soft, hard = limit.rlim_max, "cannot raise the open-file limit");
        return Some(u64::from(soft));
    }
    tracing::info!(
        from = soft,
        to = raised.rlim_cur,
        "raised the open-file limit"
    );
    Some(u64::from(raised.rlim_cur))
}

#[cfg(not(unix))]
pub fn raise_fd_limit() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_send_at_once_and_probe_when_idle() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let slots = Arc::new(Semaphore::new(1));
        let client = TcpStream::connect(addr);
        let (accepted, client) = tokio::join!(accept(&listener, &slots), client);
        let (stream, _, _slot) = accepted.expect("accepted");
        assert!(stream.nodelay().expect("TCP_NODELAY readable"));
        let socket = socket2::SockRef::from(&stream);
        assert!(socket.keepalive().expect("SO_KEEPALIVE readable"));
        drop(client);
    }

    #[test]
    fn accept_backoff_doubles_to_a_second_and_resets() {
        let mut backoff = AcceptBackoff::default();
        let delays: Vec<u128> = (0..10).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_log_admits_one_line_per_interval() {
        let mut log = RateLimitedLog::default();
        let start = Instant::now();
        assert!(log.admit(start));
        for i in 1..100 {
            assert!(!log.admit(start + Duration::from_millis(i)));
        }
        assert_eq!(log.take_suppressed(), 99);
        assert!(log.admit(start + LOG_INTERVAL));
        assert_eq!(log.take_suppressed(), 0);
    }

    #[test]
    fn the_connection_budget_leaves_descriptors_for_the_rest() {
        assert_eq!(default_max_connections(Some(128)), 96);
        assert_eq!(default_max_connections(Some(64)), 32);
        assert_eq!(default_max_connections(Some(20)), 1);
        assert_eq!(default_max_connections(Some(1 << 20)), 786_432);
        assert_eq!(default_max_connections(None), 768);
    }

    #[test]
    fn the_environment_overrides_the_defaults() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            ServingConfig::from_lookup(env(&[])).unwrap(),
            ServingConfig::default()
        );
        let config = ServingConfig::from_lookup(env(&[
            ("STEADY_MAX_CONNECTIONS", "10"),
            ("STEADY_IDLE_TIMEOUT_MS", "250"),
        ]))
        .unwrap();
        assert_eq!(config.max_connections, Some(10));
        assert_eq!(config.idle_timeout, Duration::from_millis(250));
        assert_eq!(config.header_read_timeout, Duration::from_secs(32));
        let error = ServingConfig::from_lookup(env(&[("STEADY_HEADER_READ_TIMEOUT_MS", "2s")]))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "STEADY_HEADER_READ_TIMEOUT_MS=\"2s\": expected a positive integer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_without_requests_in_flight() {
        let activity = Activity::default();
        let first = Duration::from_secs(3);
        let between = Duration::from_secs(10);
        let start = Instant::now();
        // No request at all: idle after `first`.
        activity.idle(first, between).await;
        assert_eq!(start.elapsed(), first);

        // A request in flight (a watch) for a minute: never idle meanwhile; idle `between`
        // after it ends.
        let start = Instant::now();
        let watch = activity.begin();
        let ends = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(watch);
        });
        activity.idle(first, between).await;
        assert_eq!(start.elapsed(), Duration::from_secs(70));
        ends.await.unwrap();
    }
}
