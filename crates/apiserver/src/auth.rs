//! Bearer-token authentication: every request but health and version probes must carry
//! `Authorization: Bearer <token>`; anything else is 401 `Unauthorized`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// Wrap `router` so it only answers requests with the right token.
pub fn require_token(router: Router, token: &str) -> Router {
    let token: Arc<str> = Arc::from(token);
    router.layer(axum::middleware::from_fn_with_state(token, check))
}

fn is_public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

async fn check(State(token): State<Arc<str>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let authorized = presented.is_some_and(|p| constant_time_eq(p.as_bytes(), token.as_bytes()));
    if authorized || is_public(request.uri().path()) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// Compare without an early exit, so timing does not reveal how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
