//! Bearer-token authentication: every request but health and version probes must carry
//! `Authorization: Bearer <token>` (the scheme in any case); anything else is 401
//! `Unauthorized`.

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
        .and_then(bearer_token);
    let authorized = presented.is_some_and(|p| constant_time_eq(p.as_bytes(), token.as_bytes()));
    if authorized || is_public(request.uri().path()) {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// The credentials of an `Authorization: Bearer <token>` value. The scheme is matched in any
/// case (RFC 7235 §2.1), as kube-apiserver's bearer-token authenticator does.
fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
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

    #[test]
    fn the_bearer_scheme_matches_in_any_case() {
        for value in [
            "Bearer t0k",
            "bearer t0k",
            "BEARER t0k",
            "bEaReR  t0k ",
            " Bearer t0k",
        ] {
            assert_eq!(bearer_token(value), Some("t0k"), "{value:?}");
        }
        for value in [
            "Basic t0k",
            "Bearer",
            "Bearer ",
            "Bearert0k",
            "Bearer\tt0k",
            "t0k",
        ] {
            assert_eq!(bearer_token(value), None, "{value:?}");
        }
    }
}
