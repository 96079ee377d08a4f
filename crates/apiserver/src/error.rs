//! Kubernetes `Status` errors: every failure the API returns is one of these.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use steady_store::StoreError;

use crate::schema::FieldError;

/// A failed API request, rendered as a `meta/v1 Status` with the HTTP code it names.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }
    /// kube's NamespaceLifecycle refusal of a create in a terminating namespace, with the
    /// `NamespaceTerminating` cause controllers look for (they stop creating, and do not
    /// report it as their own failure).
    pub fn namespace_terminating(resource: &str, name: &str, namespace: &str) -> Self {
        let message = format!(
            "{resource} \"{name}\" is forbidden: unable to create new content in namespace \
             {namespace} because it is being terminated"
        );
        let mut details = object_details(resource, name);
        details["causes"] = json!([{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {namespace} is being terminated"),
            "field": "metadata.namespace",
        }]);
        Self::forbidden(message).with_details(details)
    }
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(object_details(resource, name))
    }
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(object_details(resource, name))
    }
    pub fn conflict(resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"),
        )
        .with_details(object_details(resource, name))
    }
    pub fn modified(resource: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is too large (limit {limit} bytes)"),
        )
    }
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf; got {content_type:?}"
            ),
        )
    }
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }
    /// 422 with one cause per field, as kube-apiserver's validation reports them.
    pub fn invalid(kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let summary: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        let causes: Vec<Value> = errors
            .iter()
            // kube's cause message is the error body alone: kubectl prints `field: message`.
            .map(|e| json!({"reason": e.reason.as_str(), "message": e.message, "field": e.field}))
            .collect();
        let summary = match summary.len() {
            1 => summary[0].clone(),
            _ => format!("[{}]", summary.join(", ")),
        };
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {summary}"),
        )
        .with_details(json!({"name": name, "kind": kind, "causes": causes}))
    }
    /// 422 for a request that is well-formed but cannot be applied (json-patch test failures and the like).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }
    /// 429 with no `Retry-After` unless the details name `retryAfterSeconds`.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(429, "TooManyRequests", message)
    }
    /// A failure kube-apiserver reports with a bare code and message, no reason (the
    /// eviction of a pod two budgets cover).
    pub fn failure(code: u16, message: impl Into<String>) -> Self {
        Self::new(code, "", message)
    }

    pub fn with_reason(mut self, reason: &'static str) -> Self {
        self.reason = reason;
        self
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` object as JSON.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(fields) = status.as_object_mut()
        {
            fields.remove("reason");
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }

    /// Map a store error for an object of `resource` named `name`.
    pub fn from_store(err: StoreError, resource: &str, name: &str) -> Self {
        match err {
            StoreError::AlreadyExists { .. } => Self::already_exists(resource, name),
            StoreError::NotFound { .. } => Self::not_found(resource, name),
            StoreError::Conflict { .. } => Self::modified(resource, name),
            StoreError::Expired {
                requested,
                compacted,
            } => Self::expired(format!(
                "too old resource version: {requested} ({compacted})"
            )),
            StoreError::TooLarge { requested, current } => Self::timeout(format!(
                "Too large resource version: {requested}, current: {current}"
            ))
            .with_details(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})),
            other => Self::internal(other.to_string()),
        }
    }
}

/// `details` of an error about one object of `resource` (`pods`, `deployments.apps`):
/// kube-apiserver names the plural as `kind` and, outside the core group, the `group`.
fn object_details(resource: &str, name: &str) -> Value {
    match resource.split_once('.') {
        Some((plural, group)) => json!({"name": name, "group": group, "kind": plural}),
        None => json!({"name": name, "kind": resource}),
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut response = (code, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(seconds) = self
            .details
            .as_ref()
            .and_then(|d| d.get("retryAfterSeconds"))
            .and_then(Value::as_u64)
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
