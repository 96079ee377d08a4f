//! Who may see the view: a browser session (a random id in a `Secure`, `HttpOnly`,
//! `SameSite=Strict` cookie, obtained at `/ui/login?token=…` with the one-time login code
//! or the admin token) or a client presenting the admin bearer token. Anything else: 401.
//!
//! Actions (POST) also refuse cross-site requests: a browser's `Sec-Fetch-Site` must say
//! `same-origin` and its `Origin` must be this server, when sent; and every action must
//! carry the `X-Steady-UI` header, which a cross-site page cannot add without a CORS
//! preflight this server never approves. SameSite=Strict alone would already keep the
//! cookie off cross-site requests; these hold even where it does not (older browsers,
//! same-site subdomains).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use rand::Rng;

use crate::Ui;

/// The session cookie's name.
pub const COOKIE: &str = "steady_ui_session";
/// The header every action must carry.
pub const ACTION_HEADER: &str = "x-steady-ui";
/// Sessions kept; logging in once more drops the oldest.
const MAX_SESSIONS: usize = 64;

/// Tokens and sessions. Cheap to clone (shared).
#[derive(Clone)]
pub struct Auth {
    shared: Arc<AuthShared>,
}

struct AuthShared {
    admin_token: String,
    /// Valid for one login; replaced by a fresh one when used.
    login_code: Mutex<String>,
    sessions: Mutex<VecDeque<String>>,
}

fn random_secret() -> String {
    let bytes: [u8; 24] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compare without an early exit, so timing does not reveal how much of a guess was right.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Auth {
    /// Admit `admin_token` (as a bearer token or at login) and a fresh one-time code.
    pub fn new(admin_token: &str) -> Self {
        Auth {
            shared: Arc::new(AuthShared {
                admin_token: admin_token.to_string(),
                login_code: Mutex::new(random_secret()),
                sessions: Mutex::default(),
            }),
        }
    }

    /// The current one-time login code.
    pub fn login_code(&self) -> String {
        self.shared
            .login_code
            .lock()
            .map(|code| code.clone())
            .unwrap_or_default()
    }

    /// A new session for `token` (the login code, which is then used up, or the admin
    /// token), or `None`.
    pub fn login(&self, token: &str) -> Option<String> {
        let admitted = same_secret(token, &self.shared.admin_token)
            || self.shared.login_code.lock().is_ok_and(|mut code| {
                let matches = same_secret(token, &code);
                if matches {
                    *code = random_secret();
                }
                matches
            });
        if !admitted {
            return None;
        }
        let session = random_secret();
        let mut sessions = self.shared.sessions.lock().ok()?;
        if sessions.len() >= MAX_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(session.clone());
        Some(session)
    }

    /// Whether `headers` carry a live session cookie or the admin bearer token.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|token| same_secret(token.trim(), &self.shared.admin_token));
        bearer || session_cookie(headers).is_some_and(|id| self.has_session(id))
    }

    fn has_session(&self, id: &str) -> bool {
        self.shared
            .sessions
            .lock()
            .is_ok_and(|sessions| sessions.iter().any(|s| same_secret(s, id)))
    }
}

/// The session id in the request's cookies, if any.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Why a POST to this server, known to its client as `host` (`127.0.0.1:6443`), looks
/// cross-site, if it does.
pub fn cross_site(headers: &HeaderMap, host: &str) -> Option<&'static str> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
    };
    if text("sec-fetch-site").is_some_and(|site| site != "same-origin") {
        return Some("cross-site request (Sec-Fetch-Site)");
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        let own = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .is_some_and(|origin_host| origin_host == host);
        if !own {
            return Some("cross-site request (Origin)");
        }
    }
    if text(ACTION_HEADER).is_none() {
        return Some("actions need the X-Steady-UI header");
    }
    None
}

#[derive(serde::Deserialize)]
pub(crate) struct LoginQuery {
    token: String,
}

/// `GET /ui/login?token=…`: a session cookie and a redirect to the page, or 401.
pub(crate) async fn login(State(ui): State<Ui>, Query(query): Query<LoginQuery>) -> Response {
    let Some(session) = ui.shared.auth.login(&query.token) else {
        return unauthorized(
            "the login link was already used or is wrong; ask `steady up` for a new one, or use the admin token",
        );
    };
    let cookie = format!("{COOKIE}={session}; Path=/ui; Secure; HttpOnly; SameSite=Strict");
    (
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&format!("{}/", crate::PREFIX)),
    )
        .into_response()
}

fn unauthorized(message: &'static str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CACHE_CONTROL, "no-store")],
        message,
    )
        .into_response()
}

/// Every protected route: 401 without a session or the admin token; 403 for a
/// cross-site action.
pub(crate) async fn require_session(
    State(ui): State<Ui>,
    request: Request,
    next: Next,
) -> Response {
    if !ui.shared.auth.admits(request.headers()) {
        return unauthorized("log in with the URL `steady up` printed");
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default();
    if request.method() == Method::POST
        && let Some(reason) = cross_site(request.headers(), host)
    {
        return (StatusCode::FORBIDDEN, reason).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("header"));
        }
        map
    }

    #[test]
    fn the_login_code_works_once_and_sessions_are_admitted() {
        let auth = Auth::new("admin");
        let code = auth.login_code();
        let session = auth.login(&code).expect("first use");
        assert!(auth.login(&code).is_none(), "a used code is refused");
        assert_ne!(auth.login_code(), code);
        let cookie = format!("other=1; {COOKIE}={session}");
        assert!(auth.admits(&headers(&[("cookie", &cookie)])));
        assert!(!auth.admits(&headers(&[("cookie", "steady_ui_session=guess")])));
        assert!(!auth.admits(&headers(&[])));
        assert!(auth.admits(&headers(&[("authorization", "Bearer admin")])));
        assert!(auth.login("admin").is_some());
        assert!(auth.login("wrong").is_none());
    }

    #[test]
    fn actions_from_other_sites_are_refused() {
        let host = "127.0.0.1:6443";
        let ok = [(ACTION_HEADER, "1")];
        assert_eq!(cross_site(&headers(&ok), host), None);
        let same = [
            ("origin", "https://127.0.0.1:6443"),
            ("sec-fetch-site", "same-origin"),
            (ACTION_HEADER, "1"),
        ];
        assert_eq!(cross_site(&headers(&same), host), None);
        let foreign_origin = [("origin", "https://evil.example"), (ACTION_HEADER, "1")];
        assert!(cross_site(&headers(&foreign_origin), host).is_some());
        let cross = [("sec-fetch-site", "cross-site"), (ACTION_HEADER, "1")];
        assert!(cross_site(&headers(&cross), host).is_some());
        assert!(cross_site(&headers(&[]), host).is_some());
    }
}
