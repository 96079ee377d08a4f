//! steady-ui: a live web view of one controller on steady's runtime — every primary object
//! (spec beside status, conditions, the objects it owns), a timeline of its reconciles
//! (triggers, writes, outcome), and the controller (queue, in flight, backoff, watches,
//! leadership) — with a few actions (delete an owned object, change replicas, stop and
//! start the controller).
//!
//! Layered above steady-runtime and below the CLI: it reads reconciles from the runtime's
//! [`Recorder`] and everything else through a `kube::Client` like any client (so it works
//! against steady's server or a real cluster), and its actions are ordinary API requests.
//! It knows no particular operator: the kinds come from the recorder's controller state.
//! Must not know: the API server or the store, nor how the router is served (the CLI nests
//! it beside the API on one TLS listener, or alone).
//!
//! Safe by default: every route but `/ui/login` needs a session cookie (`Secure`,
//! `HttpOnly`, `SameSite=Strict`, set by `/ui/login?token=…` for the one-time login code or
//! the admin token) or the admin bearer token, and actions refuse cross-site requests
//! (see [`auth`]). The page ships inside the binary.

#![deny(missing_docs)]

pub mod actions;
pub mod auth;
pub mod feed;
pub mod world;

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use steady_runtime::Recorder;
use tokio::sync::watch;

/// Where the view is mounted.
pub const PREFIX: &str = "/ui";

/// Whether the controller should run: the handle the page's stop/start buttons turn, and
/// the supervisor running the controller follows. Cheap to clone.
#[derive(Clone)]
pub struct Switch {
    wanted: Arc<watch::Sender<bool>>,
}

impl Switch {
    /// A switch, initially on (`true`) or off.
    pub fn new(running: bool) -> Self {
        Switch {
            wanted: Arc::new(watch::channel(running).0),
        }
    }

    /// Ask for the controller to run (`true`) or stop.
    pub fn set(&self, running: bool) {
        self.wanted.send_replace(running);
    }

    /// Whether it is asked to run.
    pub fn wanted(&self) -> bool {
        *self.wanted.borrow()
    }

    /// The wish and its changes.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.wanted.subscribe()
    }
}

/// The view of one controller. Cheap to clone.
#[derive(Clone)]
pub struct Ui {
    shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) client: kube::Client,
    pub(crate) recorder: Recorder,
    pub(crate) switch: Option<Switch>,
    pub(crate) auth: auth::Auth,
    pub(crate) world: world::World,
}

impl Ui {
    /// A view of the controller `recorder` observes, reading the cluster with `client`,
    /// admitting whoever holds `admin_token` (or the one-time login code). Starts watching
    /// the controller's kinds as soon as the recorder names them; call inside a tokio runtime.
    /// With a `switch`, the page can stop and start the controller.
    pub fn new(
        client: kube::Client,
        recorder: Recorder,
        admin_token: &str,
        switch: Option<Switch>,
    ) -> Self {
        let world = world::World::start(client.clone(), recorder.state());
        Ui {
            shared: Arc::new(Shared {
                client,
                recorder,
                switch,
                auth: auth::Auth::new(admin_token),
                world,
            }),
        }
    }

    /// The path (below the server's URL) that logs a browser in once:
    /// `/ui/login?token=<one-time code>`.
    pub fn login_path(&self) -> String {
        format!("{PREFIX}/login?token={}", self.shared.auth.login_code())
    }

    /// The view's routes, all under [`PREFIX`]; merge into (or nest beside) the API router.
    pub fn router(&self) -> Router {
        let protected = Router::new()
            .route(&format!("{PREFIX}/"), get(page))
            .route(&format!("{PREFIX}/app.js"), get(script))
            .route(&format!("{PREFIX}/app.css"), get(style))
            .route(&format!("{PREFIX}/api/events"), get(feed::events))
            .route(&format!("{PREFIX}/api/delete"), post(actions::delete))
            .route(&format!("{PREFIX}/api/replicas"), post(actions::replicas))
            .route(
                &format!("{PREFIX}/api/controller"),
                post(actions::controller),
            )
            .layer(axum::middleware::from_fn_with_state(
                self.clone(),
                auth::require_session,
            ));
        Router::new()
            .route(&format!("{PREFIX}/login"), get(auth::login))
            .route(
                PREFIX,
                get(|| async { axum::response::Redirect::to("/ui/") }),
            )
            .merge(protected)
            .with_state(self.clone())
    }
}

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

fn asset(content_type: &'static str, body: &'static str) -> axum::response::Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

async fn page() -> axum::response::Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn script() -> axum::response::Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn style() -> axum::response::Response {
    asset("text/css; charset=utf-8", APP_CSS)
}
