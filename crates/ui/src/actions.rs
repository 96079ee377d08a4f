//! The page's actions, each an ordinary API request through the view's `kube::Client`:
//! delete an object the controller owns, set a primary's `spec.replicas`, stop or start
//! the controller (through its [`crate::Switch`]). Only kinds the controller watches can
//! be touched, and deletion only of owned kinds.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use serde::Deserialize;
use steady_runtime::observe::{Role, WatchedKind};

use crate::Ui;

/// Why an action was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The controller does not watch that kind in that role.
    #[error("the controller has no {role:?} kind {kind}")]
    UnknownKind {
        /// The role asked for.
        role: Role,
        /// The kind asked for.
        kind: String,
    },
    /// The view was started without a switch.
    #[error("this view cannot stop or start its controller")]
    NoSwitch,
    /// The API refused or failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

impl IntoResponse for ActionError {
    fn into_response(self) -> Response {
        let code = match &self {
            ActionError::UnknownKind { .. } => StatusCode::NOT_FOUND,
            ActionError::NoSwitch => StatusCode::CONFLICT,
            ActionError::Api(kube::Error::Api(status)) => {
                StatusCode::from_u16(status.code).unwrap_or(StatusCode::BAD_GATEWAY)
            }
            ActionError::Api(_) => StatusCode::BAD_GATEWAY,
        };
        (
            code,
            Json(serde_json::json!({ "message": self.to_string() })),
        )
            .into_response()
    }
}

/// An object named by the page.
#[derive(Debug, Deserialize)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: String,
    /// Its namespace (empty for cluster-scoped).
    #[serde(default)]
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// A primary's new replica count.
#[derive(Debug, Deserialize)]
pub struct Replicas {
    /// The primary's namespace.
    #[serde(default)]
    pub namespace: String,
    /// The primary's name.
    pub name: String,
    /// The count.
    pub replicas: u32,
}

/// Whether the controller should run.
#[derive(Debug, Deserialize)]
pub struct Running {
    /// Run (`true`) or stop.
    pub running: bool,
}

fn api_for(
    ui: &Ui,
    role: Role,
    kind: &str,
    namespace: &str,
) -> Result<Api<DynamicObject>, ActionError> {
    let state = ui.shared.recorder.state().borrow().clone();
    let Some(found): Option<WatchedKind> = state
        .kinds
        .into_iter()
        .find(|k| k.role == role && k.kind == kind)
    else {
        return Err(ActionError::UnknownKind {
            role,
            kind: kind.to_string(),
        });
    };
    let resource = ApiResource {
        api_version: match found.group.as_str() {
            "" => found.version.clone(),
            group => format!("{group}/{}", found.version),
        },
        group: found.group,
        version: found.version,
        kind: found.kind,
        plural: found.plural,
    };
    let client = ui.shared.client.clone();
    Ok(match namespace {
        "" => Api::all_with(client, &resource),
        ns => Api::namespaced_with(client, ns, &resource),
    })
}

/// `POST /ui/api/delete {kind, namespace, name}`: delete an owned object.
pub(crate) async fn delete(
    State(ui): State<Ui>,
    Json(target): Json<ObjectRef>,
) -> Result<StatusCode, ActionError> {
    let api = api_for(&ui, Role::Owned, &target.kind, &target.namespace)?;
    api.delete(&target.name, &DeleteParams::default()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /ui/api/replicas {namespace, name, replicas}`: merge-patch the primary's
/// `spec.replicas`.
pub(crate) async fn replicas(
    State(ui): State<Ui>,
    Json(target): Json<Replicas>,
) -> Result<StatusCode, ActionError> {
    let state = ui.shared.recorder.state().borrow().clone();
    let primary = state
        .kinds
        .iter()
        .find(|k| k.role == Role::Primary)
        .map(|k| k.kind.clone())
        .unwrap_or_default();
    let api = api_for(&ui, Role::Primary, &primary, &target.namespace)?;
    let patch = serde_json::json!({ "spec": { "replicas": target.replicas } });
    api.patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /ui/api/controller {running}`: stop or start the controller.
pub(crate) async fn controller(
    State(ui): State<Ui>,
    Json(wanted): Json<Running>,
) -> Result<StatusCode, ActionError> {
    let switch = ui.shared.switch.as_ref().ok_or(ActionError::NoSwitch)?;
    switch.set(wanted.running);
    Ok(StatusCode::NO_CONTENT)
}
