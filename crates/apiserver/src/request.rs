//! Request parsing: URL paths to routes, query strings to typed parameters, and bodies
//! (JSON and YAML) to values within the one nesting-depth limit every stored object obeys.

use serde_json::Value;

use crate::auth::Identity;
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

/// The route a path addresses; `None` when it addresses nothing or is not decodable.
pub fn parse_route(path: &str) -> Option<Route> {
    route(path).ok()
}

/// The route a path addresses. Each segment is percent-decoded after the path is split, so
/// an encoded `/` (`%2F`) stays inside its segment. A segment that does not decode to UTF-8
/// is a 400, a path that addresses nothing a 404.
pub fn route(path: &str) -> ApiResult<Route> {
    let decoded = path
        .trim_matches('/')
        .split('/')
        .map(decode_path_segment)
        .collect::<ApiResult<Vec<String>>>()?;
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    route_of_segments(&segments).ok_or_else(ApiError::path_not_found)
}

fn decode_path_segment(segment: &str) -> ApiResult<String> {
    percent_decode(segment, false).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid URL path segment {segment:?}: bad percent-encoding or not UTF-8"
        ))
    })
}

fn route_of_segments(segments: &[&str]) -> Option<Route> {
    match segments {
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
                        (decode_query_part(k), decode_query_part(v))
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

/// A query key or value: `+` is a space, a malformed escape stays as it is and bytes that
/// are not UTF-8 are replaced (a query never fails to parse, as in Go's `url.ParseQuery`
/// callers that ignore its error).
fn decode_query_part(s: &str) -> String {
    percent_decode(s, true).unwrap_or_else(|| {
        let bytes = decode_escapes(s, true);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Percent-decode `s`; `None` if an escape is malformed or the result is not UTF-8.
fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    if !s.contains(['%', '+']) {
        return Some(s.to_string());
    }
    let bytes = s.as_bytes();
    let malformed = bytes.iter().enumerate().any(|(i, b)| {
        *b == b'%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    });
    if malformed {
        return None;
    }
    String::from_utf8(decode_escapes(s, plus_is_space)).ok()
}

/// The bytes `s` encodes; a `%` not followed by two hex digits stands for itself.
fn decode_escapes(s: &str, plus_is_space: bool) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' if plus_is_space => out.push(b' '),
            b'%' => match (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            ) {
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
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The deepest nesting of objects and arrays a request body, and every object written to the
/// store, may have (`{}` is one level). serde_json reads back at most 127 levels, so a stored
/// object deeper than that could never be read again; kube-apiserver's decoder allows 10,000.
/// One limit below serde_json's, applied to every decoded body and by the store to every
/// object it encodes, keeps everything that is written readable.
pub const MAX_NESTING_DEPTH: usize = steady_store::MAX_DEPTH;

/// The error for a body or object nested more deeply than [`MAX_NESTING_DEPTH`].
pub fn too_deep(what: &str) -> String {
    format!(
        "{what} is nested too deeply: more than {MAX_NESTING_DEPTH} levels of objects and arrays"
    )
}

/// Whether `value` nests objects and arrays more than `limit` levels deep.
/// Every write walks its object with it: no allocation per node.
pub fn deeper_than(value: &Value, limit: usize) -> bool {
    let nested = |child: &Value| deeper_than(child, limit - 1);
    match value {
        Value::Array(items) => limit == 0 || items.iter().any(nested),
        Value::Object(map) => limit == 0 || map.values().any(nested),
        _ => false,
    }
}

/// Whether JSON text nests more than `limit` levels deep, so a body is rejected before a
/// parser recurses into it. Exact for valid JSON. No JSON nests deeper than it has `{` and
/// `[` bytes, and counting those is a vectorised search several times cheaper than the
/// exact scan, which only text with more of them than the limit still needs.
pub(crate) fn json_deeper_than(text: &[u8], limit: usize) -> bool {
    let more_openers_than_the_limit = memchr::memchr2_iter(b'{', b'[', text).nth(limit).is_some();
    more_openers_than_the_limit && json_nesting_exceeds(text, limit)
}

/// [`json_deeper_than`] by one pass over every byte.
fn json_nesting_exceeds(text: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// A JSON body of any type, within the nesting limit; `what` names it in errors.
pub fn decode_json_value(body: &[u8], what: &str) -> Result<Value, String> {
    if json_deeper_than(body, MAX_NESTING_DEPTH) {
        return Err(too_deep(what));
    }
    steady_store::json::from_bytes(body).map_err(|e| {
        format!(
            "couldn't decode {what} as JSON: {e} (line {}, column {})",
            e.line(),
            e.column()
        )
    })
}

/// A JSON request body that must be an object.
pub fn decode_json_object(body: &[u8]) -> ApiResult<Value> {
    let value = decode_json_value(body, "the request body").map_err(ApiError::bad_request)?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    }
    Ok(value)
}

/// A YAML body of any type, within the nesting limit; `what` names it in errors.
///
/// libyaml's scanner spends time proportional to the flow nesting (`{`/`[`) on every token,
/// so a deeply nested body costs time quadratic in its size (`{a: ` repeated 50,000 times
/// took 10 s). A first pass over the tokens alone stops at the first collection deeper than
/// the limit, so the parse that follows sees only bodies it handles in linear time.
pub fn decode_yaml_value(body: &[u8], what: &str) -> Result<Value, String> {
    let malformed = |e: String| format!("couldn't decode {what} as YAML: {e}");
    match yaml_tokens::collections_deeper_than(body, MAX_NESTING_DEPTH) {
        Ok(false) => {}
        Ok(true) => return Err(too_deep(what)),
        Err(problem) => return Err(malformed(problem)),
    }
    let value: Value = serde_yaml::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    // Aliases can nest a collection deeper than the tokens that spell it.
    if deeper_than(&value, MAX_NESTING_DEPTH) {
        return Err(too_deep(what));
    }
    Ok(value)
}

/// A YAML request body that must be an object.
pub fn decode_yaml_object(body: &[u8]) -> ApiResult<Value> {
    let value = decode_yaml_value(body, "the request body").map_err(ApiError::bad_request)?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the request body must be an object"));
    }
    Ok(value)
}

/// A linear pass over libyaml's tokens (the scanner serde_yaml's parser runs on).
mod yaml_tokens {
    use std::mem::MaybeUninit;

    use unsafe_libyaml as unsafe_sys;

    /// Owns an initialised parser reading a borrowed input; deletes it when dropped.
    struct Scanner<'input> {
        parser: Box<MaybeUninit<unsafe_sys::yaml_parser_t>>,
        _input: std::marker::PhantomData<&'input [u8]>,
    }

    impl<'input> Scanner<'input> {
        fn new(input: &'input [u8]) -> Option<Self> {
            let mut parser = Box::new(MaybeUninit::<unsafe_sys::yaml_parser_t>::uninit());
            // SAFETY: `yaml_parser_initialize` fully initialises the parser it is given and
            // reports failure (allocation) without leaving anything to free.
            if unsafe { unsafe_sys::yaml_parser_initialize(parser.as_mut_ptr()) }.fail {
                return None;
            }
            // SAFETY: the parser is initialised and has no input yet; `input` outlives the
            // scanner (the `'input` borrow), and libyaml only reads `input.len()` bytes of it.
            unsafe {
                unsafe_sys::yaml_parser_set_input_string(
                    parser.as_mut_ptr(),
                    input.as_ptr(),
                    input.len() as u64,
                )
            };
            Some(Scanner {
                parser,
                _input: std::marker::PhantomData,
            })
        }

        /// The next token's type, or libyaml's description of the syntax error.
        fn next_type(&mut self) -> Result<unsafe_sys::yaml_token_type_t, String> {
            let mut token = MaybeUninit::<unsafe_sys::yaml_token_t>::uninit();
            // SAFETY: the parser is initialised (constructor); `yaml_parser_scan` fills the
            // token it is given (zeroed on failure), and the token is deleted once read.
            unsafe {
                if unsafe_sys::yaml_parser_scan(self.parser.as_mut_ptr(), token.as_mut_ptr()).fail {
                    return Err(self.problem());
                }
                let token_type = (*token.as_ptr()).type_;
                unsafe_sys::yaml_token_delete(token.as_mut_ptr());
                Ok(token_type)
            }
        }

        fn problem(&self) -> String {
            // SAFETY: the parser is initialised; `problem` is null or a static C string.
            unsafe {
                let parser = &*self.parser.as_ptr();
                if parser.problem.is_null() {
                    return "invalid YAML".to_string();
                }
                let problem = std::ffi::CStr::from_ptr(parser.problem.cast());
                format!(
                    "{} at line {} column {}",
                    problem.to_string_lossy(),
                    parser.problem_mark.line + 1,
                    parser.problem_mark.column + 1
                )
            }
        }
    }

    impl Drop for Scanner<'_> {
        fn drop(&mut self) {
            // SAFETY: the parser was initialised by `new` and is deleted exactly once.
            unsafe { unsafe_sys::yaml_parser_delete(self.parser.as_mut_ptr()) }
        }
    }

    /// Whether some collection in `input` opens more than `limit` levels deep. The count
    /// never exceeds the depth of the value the document decodes to (every collection
    /// token opens a collection), so this rejects nothing the limit allows; stopping at the
    /// first token past the limit bounds the scanner's per-token work by the limit.
    pub(super) fn collections_deeper_than(input: &[u8], limit: usize) -> Result<bool, String> {
        let mut scanner = Scanner::new(input).ok_or("out of memory")?;
        let mut depth = 0usize;
        loop {
            match scanner.next_type()? {
                unsafe_sys::YAML_STREAM_END_TOKEN => return Ok(false),
                unsafe_sys::YAML_FLOW_SEQUENCE_START_TOKEN
                | unsafe_sys::YAML_FLOW_MAPPING_START_TOKEN
                | unsafe_sys::YAML_BLOCK_SEQUENCE_START_TOKEN
                | unsafe_sys::YAML_BLOCK_MAPPING_START_TOKEN => {
                    depth += 1;
                    if depth > limit {
                        return Ok(true);
                    }
                }
                unsafe_sys::YAML_FLOW_SEQUENCE_END_TOKEN
                | unsafe_sys::YAML_FLOW_MAPPING_END_TOKEN
                | unsafe_sys::YAML_BLOCK_END_TOKEN => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
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
    /// The manager of a write that names none: the User-Agent up to its first '/'.
    pub user_agent_manager: String,
    /// Who asks, when not the administrator (admission webhooks see it).
    pub requester: Option<Identity>,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            dry_run: false,
            field_validation: FieldValidation::Warn,
            field_manager: None,
            force: false,
            user_agent_manager: String::new(),
            requester: None,
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
            user_agent_manager: String::new(),
            requester: None,
        })
    }

    /// Takes the default manager from a User-Agent, as kube-apiserver does (at most 128 bytes).
    pub fn with_user_agent(mut self, user_agent: Option<&str>) -> Self {
        let prefix = user_agent.unwrap_or("").split('/').next().unwrap_or("");
        let end = (0..=prefix.len().min(128))
            .rev()
            .find(|i| prefix.is_char_boundary(*i))
            .unwrap_or(0);
        self.user_agent_manager = prefix[..end].to_owned();
        self
    }

    /// The request's identity, kept only when it is not the administrator.
    pub fn with_requester(mut self, identity: &Identity) -> Self {
        self.requester = requester(identity);
        self
    }

    /// The manager a write is recorded under in `managedFields`.
    pub fn manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .unwrap_or(&self.user_agent_manager)
    }
}

/// How dependents are handled when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// `identity`, unless it is the administrator (the default: nothing to keep).
pub fn requester(identity: &Identity) -> Option<Identity> {
    (!identity.is_administrator()).then(|| identity.clone())
}

/// `DeleteOptions`, from the body or, when there is none, from the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    /// The deprecated `orphanDependents`, when sent: beyond choosing the propagation, an
    /// explicit `false` makes kube-apiserver answer 202 to a delete that leaves the object
    /// in place (and 200 to every other).
    pub orphan_dependents: Option<bool>,
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub dry_run: bool,
    /// Who asks, when not the administrator (admission webhooks see it).
    pub requester: Option<Identity>,
}

impl DeleteOptions {
    pub fn parse(body: Option<&Value>, params: &Params) -> ApiResult<Self> {
        let field = |name: &str| -> Option<Value> {
            body.and_then(|b| b.get(name))
                .filter(|v| !v.is_null())
                .cloned()
                .or_else(|| params.non_empty(name).map(|s| Value::String(s.to_string())))
        };
        let orphan_dependents = match field("orphanDependents") {
            Some(Value::Bool(b)) => Some(b),
            Some(Value::String(s)) if s == "true" || s == "false" => Some(s == "true"),
            _ => None,
        };
        let propagation = match field("propagationPolicy") {
            None => orphan_dependents
                .filter(|orphan| *orphan)
                .map(|_| Propagation::Orphan),
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
            orphan_dependents,
            grace_period_seconds,
            precondition_uid: precondition("uid"),
            precondition_resource_version: precondition("resourceVersion"),
            dry_run,
            requester: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_default_manager_is_the_user_agent_before_its_slash() {
        let opts = WriteOptions::default();
        let kubectl = opts.with_user_agent(Some("kubectl/v1.32.4 (linux/amd64) kubernetes/abc"));
        assert_eq!(kubectl.manager(), "kubectl");
        let long = "x".repeat(200);
        assert_eq!(
            WriteOptions::default()
                .with_user_agent(Some(&long))
                .manager()
                .len(),
            128
        );
        assert_eq!(WriteOptions::default().with_user_agent(None).manager(), "");
        let named = WriteOptions {
            field_manager: Some("mine".into()),
            ..WriteOptions::default()
        };
        assert_eq!(named.with_user_agent(Some("kubectl/1")).manager(), "mine");
    }

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
    fn path_segments_decode_after_splitting() {
        assert_eq!(
            parse_route("/api/v1/namespaces/d%65fault/configmaps/a%2Fb"),
            Some(object("", Some("default"), "configmaps", Some("a/b"), None))
        );
        assert_eq!(
            parse_route("/api/v1/namespaces/default/configmaps/a+b"),
            Some(object("", Some("default"), "configmaps", Some("a+b"), None))
        );
        for bad in ["%FF", "%C3%28", "%zz", "%4"] {
            let path = format!("/api/v1/namespaces/default/configmaps/{bad}");
            assert_eq!(route(&path).map_err(|e| e.code), Err(400), "{bad}");
        }
        assert_eq!(route("/nope").map_err(|e| e.code), Err(404));
    }

    #[test]
    fn json_depth_prescan_ignores_brackets_in_strings() {
        let deep = format!("{}{}", "[".repeat(101), "]".repeat(101));
        assert!(json_deeper_than(deep.as_bytes(), 100));
        assert!(!json_deeper_than(&deep.as_bytes()[1..deep.len() - 1], 100));
        let tricky = format!(
            r#"{{"a": "{}\"{}", "b": [1]}}"#,
            "[".repeat(200),
            "{".repeat(200)
        );
        assert!(!json_deeper_than(tricky.as_bytes(), 2));
        assert!(json_deeper_than(tricky.as_bytes(), 1));
    }

    #[test]
    fn one_depth_limit_for_json_yaml_and_values() {
        let at_limit = format!(
            "{}1{}",
            "[".repeat(MAX_NESTING_DEPTH),
            "]".repeat(MAX_NESTING_DEPTH)
        );
        let past = format!("[{at_limit}]");
        let value = decode_json_value(at_limit.as_bytes(), "body").expect("at the limit");
        assert!(!deeper_than(&value, MAX_NESTING_DEPTH));
        assert!(deeper_than(&value, MAX_NESTING_DEPTH - 1));
        assert!(decode_yaml_value(at_limit.as_bytes(), "body").is_ok());
        for result in [
            decode_json_value(past.as_bytes(), "body"),
            decode_yaml_value(past.as_bytes(), "body"),
        ] {
            assert_eq!(result.err(), Some(too_deep("body")));
        }
        // Block collections count too; an alias can nest deeper than its tokens.
        let block: String = (0..=MAX_NESTING_DEPTH)
            .map(|i| format!("{}- \n", "  ".repeat(i)))
            .collect();
        assert!(decode_yaml_value(block.as_bytes(), "body").is_err());
        let half = MAX_NESTING_DEPTH / 2 + 1;
        let aliased = format!(
            "a: &x {}1{}\nb: {}*x{}\n",
            "[".repeat(half),
            "]".repeat(half),
            "[".repeat(half),
            "]".repeat(half)
        );
        assert_eq!(
            decode_yaml_value(aliased.as_bytes(), "body").err(),
            Some(too_deep("body"))
        );
        assert!(decode_yaml_value(b"a: [1, {b: c}]\n", "body").is_ok());
        assert!(decode_yaml_value(b"a: [1, {b: c\n", "body").is_err());
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
        let legacy = json!({"orphanDependents": false});
        let opts = DeleteOptions::parse(Some(&legacy), &Params::default()).expect("valid");
        assert_eq!(
            (opts.propagation, opts.orphan_dependents),
            (None, Some(false))
        );
        let opts = DeleteOptions::parse(None, &Params::parse(Some("orphanDependents=true")))
            .expect("valid");
        assert_eq!(opts.propagation, Some(Propagation::Orphan));
        let bad = json!({"propagationPolicy": "Sideways"});
        assert_eq!(
            DeleteOptions::parse(Some(&bad), &Params::default())
                .map_err(|e| e.code)
                .err(),
            Some(422)
        );
    }
}
