//! steady's Kubernetes-compatible API server.
//!
//! Owns the semantics of the Kubernetes API over [`steady_store`]: the resource registry
//! (built-in kinds and kinds registered live by CustomResourceDefinitions), discovery,
//! validation and defaulting, get/list/watch/create/update/patch/delete with Kubernetes'
//! resourceVersion, generation, status and finalizer rules, the garbage collector, namespace
//! lifecycle, `Status` errors, and the transports: an axum [`axum::Router`] served over HTTPS
//! with bearer-token auth ([`serve`], [`tls`], [`auth`]), and the same Router wired into a [`kube::Client`] with no
//! socket at all ([`ApiServer::client`]).
//!
//! It must not know about controllers, operators or the simulator: those sit above it and
//! talk to it only through the Kubernetes API.

mod admission_objects;
mod admission_policy;
mod apply;
pub mod auth;
mod bootstrap;
mod builtin;
mod claim_resize;
mod controllers;
mod crd;
mod default_storage_class;
mod defaults;
mod discovery;
mod error;
mod escalation;
mod eviction;
mod go_text;
mod http_api;
pub mod kubeconfig;
mod legacy_token;
mod limit_ranger;
mod meta;
mod negotiate;
mod objects;
mod patch;
mod per_revision;
mod pod_admission;
mod pod_security;
mod protobuf;
mod quantities;
mod rbac;
mod registry;
pub mod request;
mod resource_quota;
mod review;
mod schema;
mod selector;
pub mod serve;
mod service_allocation;
mod spec_rules;
mod status_rules;
mod storage_protection;
mod table;
pub mod tls;
mod typed;
mod update_rules;
mod validation;
mod versions;
mod watch;
mod webhook;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use steady_store::Store;
use tokio::task::JoinHandle;

pub use error::{ApiError, ApiResult};
pub use registry::{Registry, ResourceType};

/// Source of wall-clock time for timestamps. The simulator supplies a deterministic one.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// Tunables of the API server.
#[derive(Clone)]
pub struct Config {
    /// Largest accepted request body (kube-apiserver: 3 MiB).
    pub max_body_bytes: usize,
    /// How often a quiet watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Seed for generated names and uids; `None` draws one from the OS.
    pub seed: Option<u64>,
    pub clock: Clock,
    /// The administrator's bearer token, when served over HTTPS: a TokenReview recognises
    /// it, and service-account tokens are signed with a key derived from it (so they stay
    /// valid across restarts). Without it the key is random per process.
    pub admin_token: Option<String>,
    /// The port clients reach the server on: the `default/kubernetes` Service's targetPort
    /// (6443 when unknown).
    pub api_port: Option<u16>,
    /// Keep the objects written last decoded, for the writes that follow them (see
    /// `objects/recent.rs`). It pays where one thread writes a small world (the simulator:
    /// 8 % fewer instructions a seed) and costs where many clients write in parallel
    /// (`bench server`: a few percent of throughput), so it is off by default.
    pub keep_recent_writes: bool,
    /// The CA clients verify the server with, when served over HTTPS: published in every
    /// namespace as the `kube-root-ca.crt` ConfigMap (kube's root-ca-cert-publisher),
    /// which pods' token volumes name.
    pub root_ca_pem: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(60),
            seed: None,
            clock: Arc::new(Utc::now),
            admin_token: None,
            api_port: None,
            keep_recent_writes: false,
            root_ca_pem: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("bookmark_interval", &self.bookmark_interval)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// The API server: cheap to clone, every clone serves the same store.
#[derive(Clone)]
pub struct ApiServer {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    registry: Registry,
    config: Config,
    rng: Mutex<StdRng>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    watch_expiry: Arc<watch::Expiry>,
    token_keys: review::TokenKeys,
    recent_writes: Option<objects::RecentWrites>,
    /// Per namespace, held by a write charged to quotas from its check to its charge,
    /// and by every other write of its quotas' status.
    quota_turns: resource_quota::QuotaTurns,
    /// Which namespace-wide admission objects (ResourceQuotas, LimitRanges) this server
    /// has stored: until one kind has, no write looks for it in its namespace.
    admission_objects: admission_objects::AdmissionObjects,
    /// RBAC objects decoded once per revision, for the authorizer.
    rbac_objects: rbac::DecodedObjects,
    /// ValidatingAdmissionPolicies compiled, and their bindings decoded, once per revision.
    admission_policies: admission_policy::StoredPolicies,
}

impl ApiServer {
    /// Serve `store`: registers the CRDs it holds, makes sure the bootstrap objects exist
    /// and starts the garbage collector and namespace controller.
    pub async fn start(store: Store, config: Config) -> ApiResult<ApiServer> {
        let mut rng = match config.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let keep_recent_writes = config.keep_recent_writes;
        let token_keys = review::TokenKeys::new(config.admin_token.clone(), rng.random());
        let server = ApiServer {
            inner: Arc::new(Inner {
                store,
                registry: Registry::default(),
                config,
                rng: Mutex::new(rng),
                tasks: Mutex::new(Vec::new()),
                watch_expiry: Arc::default(),
                token_keys,
                recent_writes: keep_recent_writes.then(objects::RecentWrites::default),
                quota_turns: Default::default(),
                admission_objects: Default::default(),
                rbac_objects: Default::default(),
                admission_policies: Default::default(),
            }),
        };
        server.inner.admission_objects.find_stored(server.store());
        crd::register_stored(&server)?;
        objects::ensure_default_namespaces(&server).await?;
        bootstrap::ensure(&server).await?;
        let tasks = controllers::spawn_all(&server).await;
        server.tasks().extend(tasks);
        Ok(server)
    }

    /// A server over a fresh in-memory store: what tests, the simulator and demos start.
    pub async fn in_memory(config: Config) -> ApiResult<ApiServer> {
        let store = Store::in_memory(steady_store::StoreOptions::default())
            .await
            .map_err(|err| ApiError::internal(err.to_string()))?;
        Self::start(store, config).await
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    pub(crate) fn recent_writes(&self) -> Option<&objects::RecentWrites> {
        self.inner.recent_writes.as_ref()
    }

    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The HTTP API as an axum Router, without authentication (see [`auth`]).
    pub fn router(&self) -> axum::Router {
        bare_errors_as_status(recover_panics(http_api::router(self.clone())))
    }

    /// A `kube::Client` that calls the Router directly: no socket, no TLS, no token.
    pub fn client(&self) -> kube::Client {
        let service = tower::ServiceBuilder::new()
            .map_request(|r: http::Request<kube::client::Body>| r.map(axum::body::Body::new))
            .service(self.router());
        kube::Client::new(service, "default")
    }

    /// End every watch open now as kube-apiserver ends a watch whose position it no longer
    /// serves: one in-stream `ERROR` event carrying a 410 `Expired` Status ("too old resource
    /// version"), then the end of the stream. Watches opened afterwards are unaffected.
    ///
    /// In a real cluster this happens whenever the API server restarts its watch cache (for
    /// example on an apiserver restart), and every client must then re-list. Benchmarks and
    /// tests call this to put kube-rs watchers and the steady runtime through that path on
    /// demand. Deterministic: it wakes the open watches in the order they began waiting.
    pub fn expire_watches(&self) {
        self.inner.watch_expiry.fire(self.inner.store.revision());
    }

    pub(crate) fn token_keys(&self) -> &review::TokenKeys {
        &self.inner.token_keys
    }

    pub(crate) fn watch_expiry(&self) -> &Arc<watch::Expiry> {
        &self.inner.watch_expiry
    }

    /// Stop background controllers and the store. Open watches end.
    pub async fn shutdown(&self) {
        for task in self.tasks().drain(..) {
            task.abort();
        }
        self.inner.store.shutdown().await;
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.inner.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now(&self) -> DateTime<Utc> {
        (self.inner.config.clock)()
    }

    /// RFC 3339 with seconds, as Kubernetes writes `metav1.Time`.
    pub(crate) fn timestamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    pub(crate) fn with_rng<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        let mut rng = self.inner.rng.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rng)
    }

    pub(crate) fn new_uid(&self) -> String {
        let bytes: [u8; 16] = self.with_rng(|rng| rng.random());
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// Five characters from the alphabet kube-apiserver uses for `generateName`.
    pub(crate) fn name_suffix(&self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.with_rng(|rng| {
            (0..5)
                .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
                .collect()
        })
    }
}

/// A handler that panics answers 500 with a `Status`, as kube-apiserver's panic recovery
/// does, instead of dropping the connection with no answer; the panic is logged with the
/// request it came from. A panic is always a bug, but one request's bug must not look like
/// a network failure to its client, nor take the connection's other requests with it.
fn recover_panics(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::from_fn(answer_panic_with_status))
}

async fn answer_panic_with_status(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures::FutureExt;
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    match std::panic::AssertUnwindSafe(next.run(request))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(%method, %path, panic = %message, "a request handler panicked");
            ApiError::internal(
                "this request made the API server panic; the server's log has the details",
            )
            .into_response()
        }
    }
}

/// Every error response leaves as a `Status`: one that axum or a layer produced with an
/// empty body (a rejection, a bare status code) gets the `Status` for its code, keeping
/// its headers (`Allow`, `WWW-Authenticate`, ...).
fn bare_errors_as_status(router: axum::Router) -> axum::Router {
    router.layer(axum::middleware::map_response(status_for_bare_error))
}

async fn status_for_bare_error(response: axum::response::Response) -> axum::response::Response {
    use axum::body::HttpBody;
    use axum::response::IntoResponse;
    let code = response.status();
    let is_error = code.is_client_error() || code.is_server_error();
    if !is_error || response.body().size_hint().exact() != Some(0) {
        return response;
    }
    let error = ApiError {
        code: code.as_u16(),
        reason: reason_for(code),
        message: code
            .canonical_reason()
            .unwrap_or("the server rejected the request")
            .to_string(),
        details: None,
    };
    let (mut parts, _) = response.into_parts();
    let rendered = error.into_response();
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.extend(rendered.headers().clone());
    axum::response::Response::from_parts(parts, rendered.into_body())
}

/// The `Status` reason kube-apiserver gives a bare HTTP code (apimachinery's
/// `NewGenericServerResponse`); "" is its `StatusReasonUnknown`.
fn reason_for(code: http::StatusCode) -> &'static str {
    match code.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Gone",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_a_status() {
        let router = super::recover_panics(axum::Router::new().route(
            "/boom",
            get(|| async {
                if true {
                    panic!("deliberate");
                }
                "unreachable"
            }),
        ));
        let request = Request::builder()
            .uri("/boom")
            .body(Body::empty())
            .expect("request");
        let response = router.oneshot(request).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).expect("a Status");
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "InternalError");
    }

    /// axum's own rejections (405 from a method router, 404 from its default fallback) and
    /// a bare status from a handler have empty bodies unless the layer renders them.
    #[tokio::test]
    async fn empty_bodied_errors_become_a_status() {
        let router = super::bare_errors_as_status(
            axum::Router::new()
                .route("/get-only", get(|| async { "ok" }))
                .route("/bare", get(|| async { StatusCode::SERVICE_UNAVAILABLE })),
        );
        let cases = [
            ("POST", "/get-only", 405, "MethodNotAllowed"),
            ("GET", "/nowhere", 404, "NotFound"),
            ("GET", "/bare", 503, "ServiceUnavailable"),
        ];
        for (method, path, code, reason) in cases {
            let request = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let response = router.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status().as_u16(), code, "{method} {path}");
            let headers = response.headers().clone();
            assert_eq!(
                headers["content-type"], "application/json",
                "{method} {path}"
            );
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(status["kind"], "Status", "{method} {path}: {status}");
            assert_eq!(status["code"], code, "{method} {path}: {status}");
            assert_eq!(status["reason"], reason, "{method} {path}: {status}");
            if code == 405 {
                assert_eq!(headers["allow"], "GET,HEAD");
            }
        }
        // Answers with a body, and successes, are left alone.
        let request = Request::get("/get-only").body(Body::empty()).unwrap();
        let response = router.oneshot(request).await.unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
    }
}
