//! A container's environment, as kube 1.32's `ValidateEnv` and `ValidateEnvFrom` check
//! it: each variable named validly and, when it is read from elsewhere, from exactly one
//! source and not beside a `value`; a ConfigMap or Secret key selector names a valid
//! object and key; a downward-API field selector reads a field the pod can expose (the
//! same selectors serve downward-API volumes, `volumes.rs`), a resource selector a
//! resource a container has.

use serde_json::Value;

use super::config::key_problems;
use super::{dns_subdomain, invalid, list, not_supported, present, required, text};
use crate::schema::{FieldError, Path};
use crate::validation::{dns1123_subdomain_problems, qualified_name_problems};

const ENV_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";

/// The fields an env var may read from its pod (kube's
/// `validEnvDownwardAPIFieldPathExpressions`, sorted as kube lists them).
const ENV_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The resources a downward-API resource selector may read (beside the hugepages ones).
const CONTAINER_RESOURCES: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// The pod fields kube's `ConvertDownwardAPIFieldLabel` knows, subscripts aside.
const CONVERTIBLE_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
    "spec.host",
];

/// The `env` and `envFrom` of the container at `at`.
pub(super) fn env(container: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let vars = Path::Field(at, "env");
    for (i, var) in list(container, "env").iter().enumerate() {
        let item = Path::Item(&vars, i);
        let field = Path::Field(&item, "name");
        let name = text(var, "name");
        if name.is_empty() {
            errors.push(required(&field));
        } else if !is_env_var_name(name) {
            errors.push(invalid(&field, &Value::from(name), ENV_NAME_MSG));
        }
        if let Some(from) = var.get("valueFrom").filter(|f| !f.is_null()) {
            value_from(from, !text(var, "value").is_empty(), &item, errors);
        }
    }
    env_from(container, at, errors);
}

fn is_env_var_name(name: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
    name.bytes().next().is_some_and(|b| !b.is_ascii_digit()) && name.bytes().all(allowed)
}

/// kube's `validateEnvVarValueFrom`: one source, checked, and no `value` beside it.
fn value_from(from: &Value, has_value: bool, var_at: &Path, errors: &mut Vec<FieldError>) {
    let at = Path::Field(var_at, "valueFrom");
    let mut sources = 0;
    if let Some(selector) = present(from, "fieldRef") {
        sources += 1;
        field_selector(selector, ENV_FIELDS, &Path::Field(&at, "fieldRef"), errors);
    }
    if let Some(selector) = present(from, "resourceFieldRef") {
        sources += 1;
        let selector_at = Path::Field(&at, "resourceFieldRef");
        resource_selector(selector, false, &selector_at, errors);
    }
    for source in ["configMapKeyRef", "secretKeyRef"] {
        if let Some(selector) = present(from, source) {
            sources += 1;
            key_selector(selector, &Path::Field(&at, source), errors);
        }
    }
    let why = if sources == 0 {
        "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
    } else if has_value {
        "may not be specified when `value` is not empty"
    } else if sources > 1 {
        "may not have more than one field specified at a time"
    } else {
        return;
    };
    errors.push(invalid(&at, &Value::from(""), why));
}

/// kube's `validateConfigMapKeySelector` and `validateSecretKeySelector`.
fn key_selector(selector: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    dns_subdomain(text(selector, "name"), &Path::Field(at, "name"), errors);
    let key = text(selector, "key");
    let key_at = Path::Field(at, "key");
    if key.is_empty() {
        errors.push(required(&key_at));
    }
    for problem in key_problems(key).iter().filter(|_| !key.is_empty()) {
        errors.push(invalid(&key_at, &Value::from(key), problem));
    }
}

/// kube's `ValidateEnvFrom`: each source a ConfigMap or a Secret (one), validly named,
/// with a valid prefix.
fn env_from(container: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let all = Path::Field(at, "envFrom");
    for (i, source) in list(container, "envFrom").iter().enumerate() {
        let item = Path::Item(&all, i);
        let prefix = text(source, "prefix");
        if !prefix.is_empty() && !is_env_var_name(prefix) {
            let field = Path::Field(&item, "prefix");
            errors.push(invalid(&field, &Value::from(prefix), ENV_NAME_MSG));
        }
        let mut sources = 0;
        for kind in ["configMapRef", "secretRef"] {
            if let Some(reference) = present(source, kind) {
                sources += 1;
                object_name(reference, &Path::Field(&item, kind), errors);
            }
        }
        let why = match sources {
            0 => "must specify one of: `configMapRef` or `secretRef`",
            1 => continue,
            _ => "may not have more than one field specified at a time",
        };
        errors.push(invalid(&all, &Value::from(""), why));
    }
}

/// A ConfigMap's or Secret's name given whole or as a prefix (kube masks a trailing `-`).
fn object_name(reference: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let name = text(reference, "name");
    let field = Path::Field(at, "name");
    if name.is_empty() {
        errors.push(required(&field));
        return;
    }
    let masked = match name.strip_suffix('-') {
        Some(stem) if !stem.is_empty() => format!("{stem}a"),
        _ => name.to_owned(),
    };
    for problem in dns1123_subdomain_problems(&masked) {
        errors.push(invalid(&field, &Value::from(name), &problem));
    }
}

/// kube's `validateObjectFieldSelector`: a v1 field path the pod knows, among `allowed`
/// unless it subscripts labels or annotations by a qualified name.
pub(super) fn field_selector(
    selector: &Value,
    allowed: &[&str],
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let version = text(selector, "apiVersion");
    if version.is_empty() {
        errors.push(required(&Path::Field(at, "apiVersion")));
        return;
    }
    let path = text(selector, "fieldPath");
    let path_at = Path::Field(at, "fieldPath");
    if path.is_empty() {
        errors.push(required(&path_at));
        return;
    }
    let subscripted = path
        .strip_suffix("']")
        .and_then(|s| s.split_once("['"))
        .filter(|(field, _)| !field.is_empty());
    let conversion_error = if version != "v1" {
        Some(format!("unsupported pod version: {version}"))
    } else {
        match subscripted {
            Some(("metadata.annotations" | "metadata.labels", _)) => None,
            Some(_) => Some(format!("field label does not support subscript: {path}")),
            None if CONVERTIBLE_FIELDS.contains(&path) => None,
            None => Some(format!("field label not supported: {path}")),
        }
    };
    if let Some(why) = conversion_error {
        let why = format!("error converting fieldPath: {why}");
        errors.push(invalid(&path_at, &Value::from(path), &why));
        return;
    }
    match subscripted {
        Some((field, key)) => {
            let key = if field == "metadata.annotations" {
                key.to_lowercase()
            } else {
                key.to_owned()
            };
            for problem in qualified_name_problems(&key) {
                errors.push(invalid(at, &Value::from(key.as_str()), &problem));
            }
        }
        None => {
            let path = if path == "spec.host" {
                "spec.nodeName"
            } else {
                path
            };
            if !allowed.contains(&path) {
                errors.push(not_supported(&path_at, &Value::from(path), allowed));
            }
        }
    }
}

/// kube's `validateContainerResourceFieldSelector`: a resource a container can have, and
/// in a volume the container it is read from. The divisor is not checked.
pub(super) fn resource_selector(
    selector: &Value,
    in_volume: bool,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let resource = text(selector, "resource");
    if in_volume && text(selector, "containerName").is_empty() {
        errors.push(required(&Path::Field(at, "containerName")));
    } else if resource.is_empty() {
        errors.push(required(&Path::Field(at, "resource")));
    } else if !CONTAINER_RESOURCES.contains(&resource)
        && !["limits.hugepages-", "requests.hugepages-"]
            .iter()
            .any(|prefix| resource.starts_with(prefix))
    {
        errors.push(not_supported(
            &Path::Field(at, "resource"),
            &Value::from(resource),
            CONTAINER_RESOURCES,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn container_errors(extra: Value) -> Vec<String> {
        let mut container = json!({"name": "c", "image": "app:1"});
        container
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        messages(&validate(
            "",
            "pods",
            &json!({"spec": {"containers": [container]}}),
        ))
    }

    #[test]
    fn variables_read_from_one_valid_source() {
        let fine = json!({"env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "TEAM", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['team']"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "APP_"}]});
        assert_eq!(container_errors(fine), Vec::<String>::new());
        let at = "spec.containers[0]";
        let wrong = json!({"env": [
            {"name": "A", "value": "x", "valueFrom": {"secretKeyRef": {"name": "db", "key": "k"}}},
            {"name": "B", "valueFrom": {}},
            {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.phase"}}},
            {"name": "D", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.owner"}}},
            {"name": "E", "valueFrom": {"configMapKeyRef": {"name": "Settings", "key": "a/b"}}},
            {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}],
            "envFrom": [{"prefix": "1X"}]});
        assert_eq!(
            container_errors(wrong),
            [
                format!(
                    "{at}.env[0].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty"
                ),
                format!(
                    "{at}.env[1].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
                ),
                format!(
                    "{at}.env[2].valueFrom.fieldRef.fieldPath: Unsupported value: \"status.phase\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\""
                ),
                format!(
                    "{at}.env[3].valueFrom.fieldRef.fieldPath: Invalid value: \"metadata.owner\": error converting fieldPath: field label not supported: metadata.owner"
                ),
                format!(
                    "{at}.env[4].valueFrom.configMapKeyRef.name: Invalid value: \"Settings\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                ),
                format!(
                    "{at}.env[4].valueFrom.configMapKeyRef.key: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                ),
                format!(
                    "{at}.env[5].valueFrom.resourceFieldRef.resource: Unsupported value: \"limits.gpu\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\""
                ),
                format!(
                    "{at}.envFrom[0].prefix: Invalid value: \"1X\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"
                ),
                format!(
                    "{at}.envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"
                ),
            ]
        );
    }
}
