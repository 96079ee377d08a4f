//! The naming rules every object obeys, in one place: object names (RFC 1123 label or
//! subdomain, or a path segment, by kind), qualified names (label and annotation keys),
//! label values and the annotation size limit, with kube-apiserver's messages. Used by the
//! write path (`metadata` of every object) and by label selectors alike.
//!
//! Knows nothing of kinds beyond which naming rule they follow, nor of HTTP.

use serde_json::{Map, Value};

use crate::schema::{FieldError, FieldErrorReason};

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (length is checked apart, as Go's validation does).
fn matches_dns1123_label(s: &str) -> bool {
    name_shaped(s, |c| c.is_ascii_lowercase() || c.is_ascii_digit(), b"-")
}

/// The shape every name pattern here has: non-empty, starts and ends with a character
/// `alphanumeric` accepts, and holds only those or the `separators` in between.
fn name_shaped(s: &str, alphanumeric: impl Fn(u8) -> bool, separators: &[u8]) -> bool {
    let b = s.as_bytes();
    let (Some(&first), Some(&last)) = (b.first(), b.last()) else {
        return false;
    };
    alphanumeric(first)
        && alphanumeric(last)
        && b.iter()
            .all(|&c| alphanumeric(c) || separators.contains(&c))
}

/// Matches the RFC 1123 subdomain regex: dot-separated labels (length is checked apart).
pub(crate) fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// Which naming rule a kind's object names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    Dns1123Subdomain,
    Dns1123Label,
    /// Any path-segment-safe name (RBAC's `system:…` names, for instance).
    PathSegment,
}

impl NameRule {
    /// The rule for objects of a kind; custom resources (`builtin` false) follow the RFC 1123
    /// subdomain rule, as kube-apiserver's custom resource strategy does.
    pub fn for_kind(group: &str, plural: &str, builtin: bool) -> NameRule {
        match (group, plural) {
            _ if !builtin => NameRule::Dns1123Subdomain,
            ("", "namespaces") | ("", "services") => NameRule::Dns1123Label,
            ("", _) | ("events.k8s.io", _) | ("coordination.k8s.io", _) => {
                NameRule::Dns1123Subdomain
            }
            ("apiextensions.k8s.io", _) => NameRule::Dns1123Subdomain,
            _ => NameRule::PathSegment,
        }
    }
}

/// kube-apiserver's messages for an invalid `metadata.name`.
pub fn validate_name(name: &str, rule: NameRule) -> Option<FieldError> {
    if name.is_empty() {
        return Some(FieldError {
            field: "metadata.name".into(),
            reason: FieldErrorReason::Required,
            message: "Required value: name or generateName is required".into(),
        });
    }
    name_problems(name, rule).map(|problems| invalid_field("metadata.name", name, &problems))
}

/// kube-apiserver's messages for an invalid `metadata.generateName`: the prefix must be a
/// valid name once a trailing `-` is dropped (the random suffix follows it).
pub fn validate_generate_name(prefix: &str, rule: NameRule) -> Option<FieldError> {
    let masked = prefix.strip_suffix('-').unwrap_or(prefix);
    let masked = if masked.is_empty() { "a" } else { masked };
    name_problems(masked, rule)
        .map(|problems| invalid_field("metadata.generateName", prefix, &problems))
}

/// What kube's `IsDNS1123Label` finds wrong with `s` (container, volume and Service port
/// names), one message per problem.
pub(crate) fn dns1123_label_problems(s: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        problems.push("must be no more than 63 characters");
    }
    if !matches_dns1123_label(s) {
        problems.push(DNS1123_LABEL_MSG);
    }
    problems
}

/// What kube's `IsDNS1123Subdomain` finds wrong with `s` (a Service's `externalName`),
/// one message per problem.
pub(crate) fn dns1123_subdomain_problems(s: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        problems.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if !matches_dns1123_subdomain(s) {
        problems.push(DNS1123_SUBDOMAIN_MSG.to_string());
    }
    problems
}

const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// What kube's `IsDNS1035Label` finds wrong with `s` (a CRD's names and versions), one
/// message per problem.
pub(crate) fn dns1035_label_problems(s: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if s.len() > DNS1123_LABEL_MAX {
        problems.push("must be no more than 63 characters");
    }
    let starts_with_letter = s.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !starts_with_letter || !matches_dns1123_label(s) {
        problems.push(DNS1035_LABEL_MSG);
    }
    problems
}

fn invalid_field(field: &str, value: &str, problems: &[String]) -> FieldError {
    FieldError {
        field: field.into(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: {value:?}: {}", problems.join(", ")),
    }
}

/// kube's `IsValidPathSegmentName`: what a name that is one URL path segment may not be
/// or contain (every RBAC name, and every object name before its kind's own rule).
pub(crate) fn path_segment_problems(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ['/', '%']
        .into_iter()
        .filter(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// What is wrong with a non-empty name under `rule`, if anything.
fn name_problems(name: &str, rule: NameRule) -> Option<Vec<String>> {
    let segment_problems = path_segment_problems(name);
    if !segment_problems.is_empty() {
        return Some(segment_problems);
    }
    let (max, matches, message) = match rule {
        NameRule::PathSegment => return None,
        NameRule::Dns1123Label => (
            DNS1123_LABEL_MAX,
            matches_dns1123_label(name),
            DNS1123_LABEL_MSG,
        ),
        NameRule::Dns1123Subdomain => (
            DNS1123_SUBDOMAIN_MAX,
            matches_dns1123_subdomain(name),
            DNS1123_SUBDOMAIN_MSG,
        ),
    };
    let mut problems = Vec::new();
    if name.len() > max {
        problems.push(format!("must be no more than {max} characters"));
    }
    if !matches {
        problems.push(message.to_string());
    }
    (!problems.is_empty()).then_some(problems)
}

const NAME_FMT_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const QUALIFIED_NAME_MSG: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, i.e. non-empty.
fn is_qualified_name_part(s: &str) -> bool {
    name_shaped(s, |c| c.is_ascii_alphanumeric(), b"-_.")
}

/// What is wrong with a qualified name (`[prefix/]name`: label and annotation keys).
pub(crate) fn qualified_name_problems(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            let format_problem = format!("prefix part {DNS1123_SUBDOMAIN_MSG}");
            let rule: PartRule = (253, matches_dns1123_subdomain, &format_problem);
            part_problems(&mut errs, "prefix", prefix, rule);
            *name
        }
        _ => {
            errs.push(QUALIFIED_NAME_MSG.to_string());
            return errs;
        }
    };
    let rule: PartRule = (63, is_qualified_name_part, NAME_FMT_MSG);
    part_problems(&mut errs, "name", name, rule);
    errs
}

/// The rule a part of a qualified name follows: at most this long, well formed by this
/// check, and what to say when it is not.
type PartRule<'a> = (usize, fn(&str) -> bool, &'a str);

/// Adds what is wrong with the `which` part of a qualified name: it must be non-empty and
/// follow its `rule`.
fn part_problems(errs: &mut Vec<String>, which: &str, part: &str, rule: PartRule<'_>) {
    let (max, well_formed, format_problem) = rule;
    if part.is_empty() {
        errs.push(format!("{which} part must be non-empty"));
        return;
    }
    if part.len() > max {
        errs.push(format!(
            "{which} part must be no more than {max} characters"
        ));
    }
    if !well_formed(part) {
        errs.push(format_problem.to_string());
    }
}

/// What is wrong with a label value (empty, or a qualified name part of at most 63).
pub(crate) fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        problems.push(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        problems.push(LABEL_VALUE_MSG.to_string());
    }
    problems
}

const LABEL_VALUE_MAX: usize = 63;
/// kube-apiserver's `TotalAnnotationSizeLimitB`: keys and values together.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Problems with `metadata.labels` and `metadata.annotations`, as kube-apiserver's
/// `ValidateObjectMeta` reports them (every problem, each naming the map).
pub fn validate_labels_and_annotations(obj: &Value) -> Vec<FieldError> {
    let metadata = obj.get("metadata").and_then(Value::as_object);
    let map = |field: &str| {
        metadata
            .and_then(|m| m.get(field))
            .and_then(Value::as_object)
    };
    let mut errors = Vec::new();
    if let Some(labels) = map("labels") {
        validate_labels(labels, &mut errors);
    }
    if let Some(annotations) = map("annotations") {
        validate_annotations(annotations, &mut errors);
    }
    errors
}

/// Problems with `metadata.ownerReferences`, as apimachinery's `ValidateOwnerReferences`
/// reports them on every write: each reference names a version, kind, name and uid, no
/// Event owns anything, and at most one reference is the controller. Where kube prints the
/// references as a Go value, `{...}` stands for it.
pub fn validate_owner_references(obj: &Value) -> Vec<FieldError> {
    const FIELD: &str = "metadata.ownerReferences";
    let Some(references) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    let mut first_controller: Option<String> = None;
    for reference in references {
        let text = |field: &str| {
            reference
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let version = api_version.rsplit('/').next().unwrap_or_default();
        for (field, value, empty, what) in [
            ("apiVersion", api_version, version.is_empty(), "version"),
            ("kind", kind, kind.is_empty(), "kind"),
            ("name", text("name"), text("name").is_empty(), "name"),
            ("uid", text("uid"), text("uid").is_empty(), "uid"),
        ] {
            if empty {
                errors.push(FieldError {
                    field: format!("{FIELD}.{field}"),
                    reason: FieldErrorReason::Invalid,
                    message: format!("Invalid value: {value:?}: {what} must not be empty"),
                });
            }
        }
        if api_version == "v1" && kind == "Event" {
            errors.push(FieldError {
                field: FIELD.into(),
                reason: FieldErrorReason::Invalid,
                message: "Invalid value: v1.OwnerReference{...}: /v1, Kind=Event is disallowed from being an owner".into(),
            });
        }
        if reference.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{kind}/{}", text("name"));
            match &first_controller {
                Some(first) => errors.push(FieldError {
                    field: FIELD.into(),
                    reason: FieldErrorReason::Invalid,
                    message: format!(
                        "Invalid value: []v1.OwnerReference{{...}}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    ),
                }),
                None => first_controller = Some(this),
            }
        }
    }
    errors
}

/// The finalizers kube knows without a domain: the namespace controller's and the
/// garbage collector's two.
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

fn finalizers_of(obj: &Value) -> Vec<&str> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Problems with `metadata.finalizers`, as kube-apiserver reports them: each must be a
/// qualified name, `orphan` and `foregroundDeletion` exclude each other (apimachinery's
/// `ValidateFinalizers`), and a built-in object's without a `/` must be a standard one
/// (core's `validateKubeFinalizerName`; `strict`).
pub fn validate_finalizers(obj: &Value, strict: bool) -> Vec<FieldError> {
    const FIELD: &str = "metadata.finalizers";
    let finalizers = finalizers_of(obj);
    let mut errors = Vec::new();
    for finalizer in &finalizers {
        for problem in qualified_name_problems(finalizer) {
            errors.push(invalid_field(FIELD, finalizer, &[problem]));
        }
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        let shown: Vec<String> = finalizers.iter().map(|f| format!("{f:?}")).collect();
        errors.push(FieldError {
            field: FIELD.into(),
            reason: FieldErrorReason::Invalid,
            message: format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                shown.join(", ")
            ),
        });
    }
    if strict {
        for (i, finalizer) in finalizers.iter().enumerate() {
            if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(finalizer) {
                errors.push(invalid_field(
                    &format!("{FIELD}[{i}]"),
                    finalizer,
                    &[
                        "name is neither a standard finalizer name nor is it fully qualified"
                            .into(),
                    ],
                ));
            }
        }
    }
    errors
}

/// The warnings kube's custom resource strategy gives for the finalizers a write adds
/// (`generateWarningsFromObj`): the qualified-name problems, and a name without a `/`
/// that is not a standard one.
pub fn finalizer_warnings(obj: &Value, old: Option<&Value>) -> Vec<String> {
    const FIELD: &str = "metadata.finalizers";
    let before = old.map(finalizers_of).unwrap_or_default();
    let mut warnings = Vec::new();
    for finalizer in finalizers_of(obj)
        .into_iter()
        .filter(|f| !before.contains(f))
    {
        for problem in qualified_name_problems(finalizer) {
            warnings.push(format!("{FIELD}: {finalizer:?}: {problem}"));
        }
        if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(&finalizer) {
            // A name with a dot looks like a domain: kube asks for the path as well.
            let how = if finalizer.contains('.') {
                "a domain-qualified finalizer name including a path (/)"
            } else {
                "a domain-qualified finalizer name"
            };
            warnings.push(format!(
                "{FIELD}: {finalizer:?}: prefer {how} to avoid accidental conflicts with other finalizer writers"
            ));
        }
    }
    warnings
}

fn validate_labels(labels: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    validate_labels_at("metadata.labels", labels, errors);
}

/// apimachinery's `ValidateLabels` of the map at `field` (an object's labels, a pod's
/// `nodeSelector`).
pub(crate) fn validate_labels_at(
    field: &str,
    labels: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    for (key, value) in labels {
        let key_problems = qualified_name_problems(key);
        if !key_problems.is_empty() {
            errors.push(invalid_field(field, key, &key_problems));
        }
        match value.as_str() {
            Some(value) => {
                let value_problems = label_value_problems(value);
                if !value_problems.is_empty() {
                    errors.push(invalid_field(field, value, &value_problems));
                }
            }
            None if !value.is_null() => errors.push(not_a_string(field, key)),
            None => {}
        }
    }
}

fn validate_annotations(annotations: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "metadata.annotations";
    let mut total = 0;
    for (key, value) in annotations {
        // kube-apiserver checks annotation keys case-insensitively.
        let key_problems = qualified_name_problems(&key.to_lowercase());
        if !key_problems.is_empty() {
            errors.push(invalid_field(FIELD, key, &key_problems));
        }
        match value.as_str() {
            Some(value) => total += key.len() + value.len(),
            None if !value.is_null() => errors.push(not_a_string(FIELD, key)),
            None => total += key.len(),
        }
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errors.push(FieldError {
            field: FIELD.into(),
            reason: FieldErrorReason::TooLong,
            message: format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
        });
    }
}

fn not_a_string(field: &str, key: &str) -> FieldError {
    FieldError {
        field: format!("{field}[{key}]"),
        reason: FieldErrorReason::TypeInvalid,
        message: "Invalid value: must be a string".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_follow_the_kind_rule() {
        assert!(validate_name("web-0", NameRule::Dns1123Label).is_none());
        assert!(validate_name("Web", NameRule::Dns1123Label).is_some());
        assert!(validate_name("a.b", NameRule::Dns1123Label).is_some());
        assert!(validate_name("a.b", NameRule::Dns1123Subdomain).is_none());
        assert!(validate_name("-a", NameRule::Dns1123Subdomain).is_some());
        assert!(validate_name(&"a".repeat(64), NameRule::Dns1123Label).is_some());
        assert!(validate_name("Any_Thing", NameRule::PathSegment).is_none());
        assert!(validate_name(&"a".repeat(64), NameRule::Dns1123Subdomain).is_none());
        assert!(validate_name(&"a".repeat(254), NameRule::Dns1123Subdomain).is_some());
        assert!(validate_name("my cache", NameRule::Dns1123Subdomain).is_some());
        assert_eq!(
            NameRule::for_kind("steady.dev", "caches", false),
            NameRule::Dns1123Subdomain
        );
        assert!(validate_generate_name("web-", NameRule::Dns1123Subdomain).is_none());
        assert!(validate_generate_name("Web-", NameRule::Dns1123Subdomain).is_some());
        assert!(validate_name("a/b", NameRule::PathSegment).is_some());
        assert_eq!(
            validate_name("", NameRule::PathSegment).map(|e| e.reason),
            Some(FieldErrorReason::Required)
        );
    }

    #[test]
    fn labels_and_annotations_follow_kube_rules() {
        let ok = json!({"metadata": {
            "labels": {"app.kubernetes.io/name": "web", "tier": ""},
            "annotations": {"Example.COM/Note": "anything at all: spaces, /, ü"},
        }});
        assert!(validate_labels_and_annotations(&ok).is_empty());

        let bad = json!({"metadata": {
            "labels": {"bad key": "v", "ok": "no spaces allowed", "long": "a".repeat(64)},
            "annotations": {"-x": "v"},
        }});
        let errors = validate_labels_and_annotations(&bad);
        let messages: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(errors.len(), 4, "{messages:#?}");
        assert!(messages.iter().any(|m| m.starts_with(
            "metadata.labels: Invalid value: \"bad key\": name part must consist of"
        )));
        assert!(
            messages
                .iter()
                .any(|m| m.contains("must be no more than 63 characters"))
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("metadata.annotations: Invalid value: \"-x\""))
        );
    }

    #[test]
    fn annotations_are_bounded_in_total() {
        let at_limit =
            json!({"metadata": {"annotations": {"k": "v".repeat(ANNOTATIONS_MAX_BYTES - 1)}}});
        assert!(validate_labels_and_annotations(&at_limit).is_empty());
        let over = json!({"metadata": {"annotations": {"k": "v".repeat(ANNOTATIONS_MAX_BYTES)}}});
        let errors = validate_labels_and_annotations(&over);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].reason, FieldErrorReason::TooLong);
    }
}
