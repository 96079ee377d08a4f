//! ConfigMaps and Secrets as kube's `ValidateConfigMap` and `ValidateSecret` check them:
//! every key a valid config key, the values together at most 1 MiB, a key not in both
//! `data` and `binaryData`, and what each well-known Secret type requires (a service
//! account token names its account; TLS, basic-auth, SSH and docker-config Secrets hold
//! their keys). An operator that names a key after a file path, or keeps a large bundle in
//! one ConfigMap, is refused here as on a cluster.

use base64::Engine;
use serde_json::{Map, Value};

use super::{error, invalid, required};
use crate::legacy_token::{ACCOUNT_NAME, SECRET_TYPE};
use crate::meta;
use crate::schema::{FieldError, FieldErrorReason, Path};

/// kube's `MaxSecretSize`, which bounds ConfigMaps too.
const MAX_SIZE: usize = 1024 * 1024;
/// kube's `DNS1123SubdomainMaxLength`, the longest key.
const MAX_KEY_LENGTH: usize = 253;
const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const REDACTED: &str = "<secret contents redacted>";

/// kube's `IsConfigMapKey`: why `key` cannot name a file in a volume, if it cannot.
pub(super) fn key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > MAX_KEY_LENGTH {
        problems.push(format!("must be no more than {MAX_KEY_LENGTH} characters"));
    }
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if key.is_empty() || !key.chars().all(valid_char) {
        problems.push(KEY_MSG.to_string());
    }
    match key {
        "." => problems.push("must not be '.'".into()),
        ".." => problems.push("must not be '..'".into()),
        _ if key.starts_with("..") => problems.push("must not start with '..'".into()),
        _ => {}
    }
    problems
}

fn entries<'v>(obj: &'v Value, field: &str) -> Option<&'v Map<String, Value>> {
    obj.get(field).and_then(Value::as_object)
}

/// Every key of `obj[field]` checked, and (when `other` is given) not also in that map.
fn check_keys(
    obj: &Value,
    field: &str,
    other: Option<(&str, Option<&Map<String, Value>>)>,
    errors: &mut Vec<FieldError>,
) {
    for key in entries(obj, field).into_iter().flat_map(Map::keys) {
        let at = format!("{field}[{key}]");
        let value = Value::from(key.as_str());
        for problem in key_problems(key) {
            errors.push(invalid(&Path::At(&at), &value, &problem));
        }
        if let Some((other_field, Some(other))) = other
            && other.contains_key(key)
        {
            let why = format!("duplicate of key present in {other_field}");
            errors.push(invalid(&Path::At(&at), &value, &why));
        }
    }
}

fn too_long(field: &str) -> FieldError {
    error(
        &Path::At(field),
        FieldErrorReason::TooLong,
        format!("Too long: may not be more than {MAX_SIZE} bytes"),
    )
}

/// The bytes a base64 value of `data` or `binaryData` stands for.
fn decoded_len(value: &Value) -> usize {
    let text = value.as_str().unwrap_or_default();
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count();
    (text.len() / 4 * 3 + text.len() % 4 * 3 / 4).saturating_sub(padding)
}

fn total(map: Option<&Map<String, Value>>, len: impl Fn(&Value) -> usize) -> usize {
    map.into_iter().flat_map(Map::values).map(len).sum()
}

/// kube's `ValidateConfigMap`.
pub(super) fn config_map(obj: &Value, errors: &mut Vec<FieldError>) {
    let (data, binary) = (entries(obj, "data"), entries(obj, "binaryData"));
    check_keys(obj, "data", Some(("binaryData", binary)), errors);
    check_keys(obj, "binaryData", Some(("data", data)), errors);
    let text_len = |v: &Value| v.as_str().map_or(0, str::len);
    if total(data, text_len) + total(binary, decoded_len) > MAX_SIZE {
        // kube names the whole object with an empty path, which it prints as `[]`.
        errors.push(too_long("[]"));
    }
}

/// kube's `ValidateSecret`.
pub(super) fn secret(obj: &Value, errors: &mut Vec<FieldError>) {
    check_keys(obj, "data", None, errors);
    let data = entries(obj, "data");
    if total(data, decoded_len) > MAX_SIZE {
        errors.push(too_long("data"));
    }
    let has = |key: &str| data.is_some_and(|d| d.contains_key(key));
    let requires = |key: &str, errors: &mut Vec<FieldError>| {
        if !has(key) {
            errors.push(required(&Path::At(&format!("data[{key}]"))));
        }
    };
    match obj.get("type").and_then(Value::as_str).unwrap_or_default() {
        SECRET_TYPE => {
            let named = meta::annotation(obj, ACCOUNT_NAME).is_some_and(|name| !name.is_empty());
            if !named {
                let at = format!("metadata.annotations[{ACCOUNT_NAME}]");
                errors.push(required(&Path::At(&at)));
            }
        }
        "kubernetes.io/dockercfg" => docker_config(data, ".dockercfg", errors),
        "kubernetes.io/dockerconfigjson" => docker_config(data, ".dockerconfigjson", errors),
        // kube's paths for these two carry a literal `[%s]` (a format it never filled).
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errors.push(required(&Path::At("data[%s][username]")));
            errors.push(required(&Path::At("data[%s][password]")));
        }
        "kubernetes.io/ssh-auth"
            if data
                .and_then(|d| d.get("ssh-privatekey"))
                .is_none_or(|v| decoded_len(v) == 0) =>
        {
            errors.push(required(&Path::At("data[%s][ssh-privatekey]")));
        }
        "kubernetes.io/tls" => {
            requires("tls.crt", errors);
            requires("tls.key", errors);
        }
        _ => {}
    }
}

/// A docker config Secret holds its key, and it is a JSON object.
fn docker_config(data: Option<&Map<String, Value>>, key: &str, errors: &mut Vec<FieldError>) {
    let at = format!("data[{key}]");
    let Some(encoded) = data.and_then(|d| d.get(key)) else {
        errors.push(required(&Path::At(&at)));
        return;
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_str().unwrap_or_default())
        .unwrap_or_default();
    if let Some(why) = not_a_json_object(&bytes) {
        errors.push(invalid(&Path::At(&at), &Value::from(REDACTED), &why));
    }
}

/// Why `bytes` do not decode as Go decodes them into a `map[string]interface{}`.
fn not_a_json_object(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_) | Value::Null) => None,
        Ok(other) => {
            let kind = match other {
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                _ => "array",
            };
            Some(format!(
                "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
            ))
        }
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".into()),
        Err(e) => Some(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::messages;
    use super::*;

    fn config_map_errors(obj: Value) -> Vec<String> {
        let mut errors = Vec::new();
        config_map(&obj, &mut errors);
        messages(&errors)
    }

    fn secret_errors(obj: Value) -> Vec<String> {
        let mut errors = Vec::new();
        secret(&obj, &mut errors);
        messages(&errors)
    }

    #[test]
    fn config_keys_are_file_names() {
        assert!(key_problems("app.properties").is_empty());
        assert!(key_problems("KEY_NAME-1").is_empty());
        assert_eq!(key_problems("conf/app.yaml"), [KEY_MSG]);
        assert_eq!(key_problems(""), [KEY_MSG]);
        assert_eq!(key_problems(".."), ["must not be '..'"]);
        assert_eq!(key_problems("..data"), ["must not start with '..'"]);
        assert_eq!(
            key_problems(&"k".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }

    #[test]
    fn a_config_map_is_refused_as_kube_refuses_it() {
        assert!(
            config_map_errors(json!({"data": {"a": "1"}, "binaryData": {"b": "AA=="}})).is_empty()
        );
        assert_eq!(
            config_map_errors(
                json!({"data": {"conf/app.yaml": "x", "k": "1"}, "binaryData": {"k": "AA=="}})
            ),
            [
                format!("data[conf/app.yaml]: Invalid value: \"conf/app.yaml\": {KEY_MSG}"),
                "data[k]: Invalid value: \"k\": duplicate of key present in binaryData".to_string(),
                "binaryData[k]: Invalid value: \"k\": duplicate of key present in data".to_string(),
            ]
        );
        let big = "x".repeat(MAX_SIZE);
        assert_eq!(
            config_map_errors(json!({"data": {"a": big, "b": "y"}})),
            ["[]: Too long: may not be more than 1048576 bytes"]
        );
        assert!(config_map_errors(json!({"data": {"a": big}})).is_empty());
    }

    #[test]
    fn secret_sizes_count_decoded_bytes() {
        for text in ["", "a", "ab", "abc", "abcd", "abcde"] {
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            assert_eq!(decoded_len(&json!(encoded)), text.len(), "{encoded}");
        }
        let exactly = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_SIZE]);
        assert!(secret_errors(json!({"data": {"a": exactly}})).is_empty());
        let over = base64::engine::general_purpose::STANDARD.encode(vec![0u8; MAX_SIZE + 1]);
        assert_eq!(
            secret_errors(json!({"data": {"a": over}})),
            ["data: Too long: may not be more than 1048576 bytes"]
        );
    }

    #[test]
    fn well_known_secret_types_hold_their_keys() {
        let typed = |kind: &str, data: Value| json!({"type": kind, "data": data});
        assert_eq!(
            secret_errors(json!({"type": "kubernetes.io/service-account-token"})),
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        assert!(
            secret_errors(json!({"type": "kubernetes.io/service-account-token",
            "metadata": {"annotations": {ACCOUNT_NAME: "builder"}}}))
            .is_empty()
        );
        assert_eq!(
            secret_errors(typed("kubernetes.io/tls", json!({"tls.crt": "AA=="}))),
            ["data[tls.key]: Required value"]
        );
        assert_eq!(
            secret_errors(typed("kubernetes.io/basic-auth", json!({}))),
            [
                "data[%s][username]: Required value",
                "data[%s][password]: Required value"
            ]
        );
        assert!(
            secret_errors(typed("kubernetes.io/basic-auth", json!({"password": ""}))).is_empty()
        );
        assert_eq!(
            secret_errors(typed(
                "kubernetes.io/ssh-auth",
                json!({"ssh-privatekey": ""})
            )),
            ["data[%s][ssh-privatekey]: Required value"]
        );
        assert_eq!(
            secret_errors(typed("kubernetes.io/dockerconfigjson", json!({}))),
            ["data[.dockerconfigjson]: Required value"]
        );
        let array = base64::engine::general_purpose::STANDARD.encode("[]");
        assert_eq!(
            secret_errors(typed(
                "kubernetes.io/dockercfg",
                json!({".dockercfg": array})
            )),
            [
                "data[.dockercfg]: Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
            ]
        );
        let auths = base64::engine::general_purpose::STANDARD.encode(r#"{"auths":{}}"#);
        assert!(
            secret_errors(typed(
                "kubernetes.io/dockerconfigjson",
                json!({".dockerconfigjson": auths})
            ))
            .is_empty()
        );
        assert!(secret_errors(typed("example.com/custom", json!({}))).is_empty());
    }
}
