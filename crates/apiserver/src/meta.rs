//! Object metadata on JSON values: reading and setting `metadata` fields, name validation.

use serde_json::{Map, Value};

use crate::schema::{FieldError, FieldErrorReason};

pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// `metadata` as a mutable map, created if missing or not an object.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just set to an object"),
    }
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name").filter(|s| !s.is_empty())
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

pub fn uid(obj: &Value) -> Option<&str> {
    meta_str(obj, "uid")
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    metadata(obj)?.get("labels")?.as_object()
}

pub fn owner_references(obj: &Value) -> &[Value] {
    metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The object without `metadata` and `status`: what `generation` tracks.
pub fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Equal apart from `resourceVersion`: a write of `new` would change nothing. A change of
/// field ownership alone is a change (kube-apiserver writes it); an unchanged write leaves
/// `managedFields`, timestamps included, as they were.
pub fn same_content(old: &Value, new: &Value) -> bool {
    fn strip(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(Value::Object(m)) = v.get_mut("metadata") {
            m.remove("resourceVersion");
        }
        v
    }
    strip(old) == strip(new)
}

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (length is checked apart, as Go's validation does).
pub(crate) fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    let alphanumeric = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    alphanumeric(first) && alphanumeric(last) && b.iter().all(|c| alphanumeric(c) || *c == b'-')
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

fn invalid_field(field: &str, value: &str, problems: &[String]) -> FieldError {
    FieldError {
        field: field.into(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: {value:?}: {}", problems.join(", ")),
    }
}

/// What is wrong with a non-empty name under `rule`, if anything.
fn name_problems(name: &str, rule: NameRule) -> Option<Vec<String>> {
    if name == "." || name == ".." {
        return Some(vec![format!("may not be '{name}'")]);
    }
    if let Some(c) = ['/', '%'].into_iter().find(|c| name.contains(*c)) {
        return Some(vec![format!("may not contain '{c}'")]);
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
    fn same_content_ignores_resource_version() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "data": {"k": "v"}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "v"}});
        let c = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"k": "w"}});
        assert!(same_content(&a, &b));
        assert!(!same_content(&a, &c));
    }
}
