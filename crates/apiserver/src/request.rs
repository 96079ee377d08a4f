//! Request parsing: URL paths to routes, query strings to typed parameters.

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// What a URL path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    Resources { group: String, version: String },
    OpenApiV3Root,
    OpenApiV3 { path: String },
    Object(ObjectPath),
}

/// A resource URL: `/api/v1/namespaces/ns/pods/name/status` and its shorter forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectPath {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse_route(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["version"] => Some(Route::Version),
        ["healthz" | "livez" | "readyz", ..] => Some(Route::Health),
        ["api"] => Some(Route::CoreVersions),
        ["api", version] => Some(Route::Resources {
            group: String::new(),
            version: version.to_string(),
        }),
        ["api", version, rest @ ..] => object_path("", version, rest).map(Route::Object),
        ["apis"] => Some(Route::Groups),
        ["apis", group] => Some(Route::Group(group.to_string())),
        ["apis", group, version] => Some(Route::Resources {
            group: group.to_string(),
            version: version.to_string(),
        }),
        ["apis", group, version, rest @ ..] => object_path(group, version, rest).map(Route::Object),
        ["openapi", "v3"] => Some(Route::OpenApiV3Root),
        ["openapi", "v3", rest @ ..] => Some(Route::OpenApiV3 {
            path: rest.join("/"),
        }),
        _ => None,
    }
}

fn object_path(group: &str, version: &str, rest: &[&str]) -> Option<ObjectPath> {
    let path = |plural: &str, namespace: Option<&str>, name: Option<&&str>, sub: Option<&&str>| {
        Some(ObjectPath {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.map(|s| s.to_string()),
            subresource: sub.map(|s| s.to_string()),
        })
    };
    if rest.iter().any(|s| s.is_empty()) {
        return None;
    }
    match rest {
        // /namespaces/{ns}/status and /finalize address the namespace itself.
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            path("namespaces", None, Some(name), Some(sub))
        }
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => {
            path(plural, Some(ns), tail.first(), tail.get(1))
        }
        [plural, tail @ ..] if tail.len() <= 2 => path(plural, None, tail.first(), tail.get(1)),
        _ => None,
    }
}

/// Query parameters, with Kubernetes' boolean rules.
#[derive(Debug, Default, Clone)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: Option<&str>) -> Params {
        let pairs = query
            .map(|q| {
                q.split('&')
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                        (decode(k), decode(v))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Params(pairs)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// Present and not `0`/`false` (what kube-apiserver accepts for booleans).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| !matches!(v.to_ascii_lowercase().as_str(), "0" | "false"))
    }

    pub fn number(&self, key: &str) -> ApiResult<Option<i64>> {
        match self.non_empty(key) {
            None => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid value for {key}: {v:?} is not an integer"))
            }),
        }
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `fieldValidation`: what to do with unknown or duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn from_params(params: &Params) -> ApiResult<Self> {
        match params.non_empty("fieldValidation") {
            None => Ok(FieldValidation::Warn),
            Some(v) if v.eq_ignore_ascii_case("strict") => Ok(FieldValidation::Strict),
            Some(v) if v.eq_ignore_ascii_case("warn") => Ok(FieldValidation::Warn),
            Some(v) if v.eq_ignore_ascii_case("ignore") => Ok(FieldValidation::Ignore),
            Some(v) => Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {v}"
            ))),
        }
    }
}

/// Options every write shares.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_validation: FieldValidation,
    pub field_manager: Option<String>,
    pub force: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            dry_run: false,
            field_validation: FieldValidation::Warn,
            field_manager: None,
            force: false,
        }
    }
}

impl WriteOptions {
    pub fn from_params(params: &Params) -> ApiResult<Self> {
        let dry_run = match params.get("dryRun") {
            None | Some("") => false,
            Some("All") => true,
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {v:?}: supported values: \"All\""
                )));
            }
        };
        Ok(WriteOptions {
            dry_run,
            field_validation: FieldValidation::from_params(params)?,
            field_manager: params.non_empty("fieldManager").map(str::to_string),
            force: params.flag("force"),
        })
    }
}

/// How dependents are handled when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// `DeleteOptions`, from the body or, when there is none, from the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    pub fn parse(body: Option<&Value>, params: &Params) -> ApiResult<Self> {
        let field = |name: &str| -> Option<Value> {
            body.and_then(|b| b.get(name))
                .filter(|v| !v.is_null())
                .cloned()
                .or_else(|| params.non_empty(name).map(|s| Value::String(s.to_string())))
        };
        let propagation = match field("propagationPolicy") {
            None => match field("orphanDependents") {
                Some(Value::Bool(true)) => Some(Propagation::Orphan),
                Some(Value::String(s)) if s == "true" => Some(Propagation::Orphan),
                _ => None,
            },
            Some(Value::String(s)) => Some(match s.as_str() {
                "Background" => Propagation::Background,
                "Foreground" => Propagation::Foreground,
                "Orphan" => Propagation::Orphan,
                other => {
                    return Err(ApiError::unprocessable(format!(
                        "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                    )));
                }
            }),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy must be a string, got {other}"
                )));
            }
        };
        let grace_period_seconds = match field("gracePeriodSeconds") {
            None => None,
            Some(Value::Number(n)) => n.as_i64(),
            Some(Value::String(s)) => Some(s.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("gracePeriodSeconds: {s:?} is not an integer"))
            })?),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "gracePeriodSeconds must be an integer, got {other}"
                )));
            }
        };
        if grace_period_seconds.is_some_and(|g| g < 0) {
            return Err(ApiError::unprocessable(
                "gracePeriodSeconds: Invalid value: must be greater than or equal to 0",
            ));
        }
        let preconditions = body.and_then(|b| b.get("preconditions"));
        let precondition = |name: &str| {
            preconditions
                .and_then(|p| p.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let dry_run = match field("dryRun") {
            Some(Value::Array(a)) => a.iter().any(|v| v == "All"),
            Some(Value::String(s)) => s == "All",
            _ => false,
        };
        Ok(DeleteOptions {
            propagation,
            grace_period_seconds,
            precondition_uid: precondition("uid"),
            precondition_resource_version: precondition("resourceVersion"),
            dry_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(
        group: &str,
        ns: Option<&str>,
        plural: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Object(ObjectPath {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            namespace: ns.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
        })
    }

    #[test]
    fn routes() {
        assert_eq!(
            parse_route("/api/v1/pods"),
            Some(object("", None, "pods", None, None))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/default/pods/p/status"),
            Some(object(
                "",
                Some("default"),
                "pods",
                Some("p"),
                Some("status")
            ))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/default"),
            Some(object("", None, "namespaces", Some("default"), None))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/default/finalize"),
            Some(object(
                "",
                None,
                "namespaces",
                Some("default"),
                Some("finalize")
            ))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/default/configmaps"),
            Some(object("", Some("default"), "configmaps", None, None))
        );
        assert_eq!(
            parse_route("/apis/steady.dev/v1/namespaces/a/caches/c/scale"),
            Some(object(
                "steady.dev",
                Some("a"),
                "caches",
                Some("c"),
                Some("scale")
            ))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/a/pods/p/status/extra"),
            None
        );
        assert_eq!(parse_route("/nope"), None);
    }

    #[test]
    fn params_follow_kubernetes_booleans() {
        let p = Params::parse(Some(
            "&watch=true&allowWatchBookmarks=0&labelSelector=a%3Db%2Cc+in+(x)",
        ));
        assert!(p.flag("watch"));
        assert!(!p.flag("allowWatchBookmarks"));
        assert_eq!(p.get("labelSelector"), Some("a=b,c in (x)"));
    }

    #[test]
    fn delete_options_from_body_and_query() {
        let body = json!({"propagationPolicy": "Foreground", "preconditions": {"uid": "u"}});
        let opts = DeleteOptions::parse(Some(&body), &Params::default()).expect("valid");
        assert_eq!(opts.propagation, Some(Propagation::Foreground));
        assert_eq!(opts.precondition_uid.as_deref(), Some("u"));
        let opts = DeleteOptions::parse(None, &Params::parse(Some("gracePeriodSeconds=0")))
            .expect("valid");
        assert_eq!(opts.grace_period_seconds, Some(0));
        let bad = json!({"propagationPolicy": "Sideways"});
        assert_eq!(
            DeleteOptions::parse(Some(&bad), &Params::default())
                .map_err(|e| e.code)
                .err(),
            Some(422)
        );
    }
}
