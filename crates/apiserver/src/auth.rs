//! Authentication: who a request comes from. Every request but health and version probes
//! must carry `Authorization: Bearer <token>` (the scheme in any case): the administrator's
//! token (the kubeconfig's: `system:masters`), or a service-account token this server
//! issued (TokenRequest, `kubectl create token`), for as long as the service account it
//! names exists. Anything else is 401 `Unauthorized`. `Impersonate-*` headers then act as
//! another user, if the requester may impersonate them (`kubectl --as`). The [`Identity`]
//! rides in the request's extensions; what it may do is [`crate::rbac`]'s business.
//! In-process clients (tests, the simulator, steady's own controllers) carry none and are
//! trusted as the administrator.

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use serde_json::{Value, json};

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::rbac;

/// The administrator, as kube-apiserver would name a kubeadm admin in `system:masters`.
pub const ADMIN_USER: &str = "kubernetes-admin";
const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";

/// The administrator: whom the kubeconfig's token, and every in-process client, act as.
pub static ADMIN: LazyLock<Identity> = LazyLock::new(Identity::admin);

/// Who a request comes from, as authentication and impersonation decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
}

impl Identity {
    pub fn admin() -> Identity {
        Identity {
            user: ADMIN_USER.into(),
            uid: None,
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        }
    }

    pub fn service_account(namespace: &str, name: &str, uid: Option<String>) -> Identity {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            uid,
            groups: service_account_groups(namespace),
        }
    }

    /// The administrator itself: what a request without an identity stands for.
    pub fn is_administrator(&self) -> bool {
        *self == *ADMIN
    }

    /// `system:masters` may do anything: RBAC is not consulted (kube's superuser group).
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// As a `userInfo` of the reviews and of admission requests.
    pub fn user_info(&self) -> Value {
        let mut info = json!({"username": self.user, "groups": self.groups});
        if let Some(uid) = &self.uid {
            info["uid"] = json!(uid);
        }
        info
    }
}

fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{namespace}"),
        AUTHENTICATED.into(),
    ]
}

/// Wrap `router` so it only answers authenticated requests, each carrying its [`Identity`].
pub fn authenticate(router: Router, server: &ApiServer, admin_token: &str) -> Router {
    let state = Arc::new(Authenticator {
        server: server.clone(),
        admin_token: Arc::from(admin_token),
    });
    router.layer(axum::middleware::from_fn_with_state(state, check))
}

struct Authenticator {
    server: ApiServer,
    admin_token: Arc<str>,
}

fn is_public(path: &str) -> bool {
    matches!(path, "/version" | "/healthz" | "/livez" | "/readyz")
}

async fn check(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let identity = presented.and_then(|token| {
        if constant_time_eq(token.as_bytes(), auth.admin_token.as_bytes()) {
            Some(Identity::admin())
        } else {
            crate::review::service_account_identity(&auth.server, token)
        }
    });
    match identity {
        Some(identity) => match impersonated(&auth.server, identity, request.headers()) {
            Ok(identity) => {
                // No identity in a request means the administrator (as for in-process clients).
                if !identity.is_administrator() {
                    request.extensions_mut().insert(identity);
                }
                next.run(request).await
            }
            Err(e) => e.into_response(),
        },
        None if is_public(request.uri().path()) => next.run(request).await,
        None => ApiError::unauthorized().into_response(),
    }
}

/// The identity `requester` acts as: itself, or whom its `Impersonate-*` headers name,
/// once RBAC allows it to impersonate each of them (kube's impersonation filter).
fn impersonated(
    server: &ApiServer,
    requester: Identity,
    headers: &HeaderMap,
) -> ApiResult<Identity> {
    let all = |name: &str| -> ApiResult<Vec<String>> {
        headers
            .get_all(name)
            .iter()
            .map(|v| match v.to_str() {
                Ok(value) => Ok(value.to_string()),
                // Acting as nobody in particular would be acting as the requester.
                Err(_) => Err(ApiError::bad_request(format!(
                    "the {name} header is not text"
                ))),
            })
            .collect()
    };
    let user = all("impersonate-user")?.into_iter().next();
    let groups = all("impersonate-group")?;
    let uid = all("impersonate-uid")?.into_iter().next();
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() {
            return Ok(requester);
        }
        return Err(ApiError::internal(
            "requested impersonation of groups or a uid without impersonating a user",
        ));
    };
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let user_target = match service_account {
        Some((namespace, name)) => {
            rbac::Target::named("", "serviceaccounts", name).in_namespace(namespace)
        }
        None => rbac::Target::named("", "users", &user),
    };
    rbac::authorize(server, &requester, "impersonate", &user_target)?;
    for group in &groups {
        rbac::authorize(
            server,
            &requester,
            "impersonate",
            &rbac::Target::named("", "groups", group),
        )?;
    }
    if let Some(uid) = &uid {
        let target = rbac::Target::named("authentication.k8s.io", "uids", uid);
        rbac::authorize(server, &requester, "impersonate", &target)?;
    }
    let mut groups = match (service_account, groups.is_empty()) {
        (Some((namespace, _)), true) => service_account_groups(namespace),
        _ => groups,
    };
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    Ok(Identity { user, uid, groups })
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
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
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
