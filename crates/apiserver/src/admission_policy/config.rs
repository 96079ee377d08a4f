//! ValidatingAdmissionPolicies and their bindings as they are written: kube-apiserver's
//! defaults, and what its validation refuses (expressions that do not compile among it),
//! so a policy that would never be stored on a cluster is not stored here either.

use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::schema::{Expression, FieldError, FieldErrorReason};

/// kube's bound on a policy's `matchConditions`.
const MAX_MATCH_CONDITIONS: usize = 64;

/// The reasons a validation may give (kube's `supportedValidationPolicyReason`).
const REASONS: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];

/// Default and validate a policy (`binding: false`) or a binding being written.
pub(crate) fn prepare(object: &mut Value, binding: bool) -> ApiResult<()> {
    let errors = match binding {
        false => {
            default_policy(object);
            policy_errors(&object["spec"])
        }
        true => {
            default_binding(object);
            binding_errors(&object["spec"])
        }
    };
    if errors.is_empty() {
        return Ok(());
    }
    let kind = match binding {
        false => "ValidatingAdmissionPolicy",
        true => "ValidatingAdmissionPolicyBinding",
    };
    Err(ApiError::invalid(
        &format!("{kind}.admissionregistration.k8s.io"),
        meta::name(object).unwrap_or(""),
        &errors,
    ))
}

/// The object's `spec`, made an empty one when it has none (Go's struct is always there).
fn spec_of(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let object = object.as_object_mut()?;
    if !object.get("spec").is_some_and(Value::is_object) {
        object.insert("spec".into(), json!({}));
    }
    object.get_mut("spec").and_then(Value::as_object_mut)
}

fn default_policy(object: &mut Value) {
    let Some(spec) = spec_of(object) else {
        return;
    };
    spec.entry("failurePolicy").or_insert(json!("Fail"));
    if let Some(constraints) = spec
        .get_mut("matchConstraints")
        .and_then(Value::as_object_mut)
    {
        default_match_resources(constraints);
    }
}

fn default_binding(object: &mut Value) {
    let Some(spec) = spec_of(object) else {
        return;
    };
    if let Some(resources) = spec
        .get_mut("matchResources")
        .and_then(Value::as_object_mut)
    {
        default_match_resources(resources);
    }
}

/// kube's `SetDefaults_MatchResources` and each rule's scope.
fn default_match_resources(resources: &mut Map<String, Value>) {
    resources
        .entry("matchPolicy")
        .or_insert(json!("Equivalent"));
    resources.entry("namespaceSelector").or_insert(json!({}));
    resources.entry("objectSelector").or_insert(json!({}));
    for field in ["resourceRules", "excludeResourceRules"] {
        let rules = resources.get_mut(field).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            rule.entry("scope").or_insert(json!("*"));
        }
    }
}

/// Errors at `path`, built the way kube's `field.ErrorList` prints them.
struct Errors(Vec<FieldError>);

impl Errors {
    fn required(&mut self, path: String, detail: &str) {
        let message = match detail {
            "" => "Required value".to_string(),
            detail => format!("Required value: {detail}"),
        };
        self.0
            .push(FieldError::new(path, FieldErrorReason::Required, message));
    }

    fn invalid(&mut self, path: String, value: &str, detail: &str) {
        let message = format!("Invalid value: {value:?}: {detail}");
        self.0
            .push(FieldError::new(path, FieldErrorReason::Invalid, message));
    }

    fn unsupported(&mut self, path: String, value: &str, supported: &[&str]) {
        let quoted: Vec<String> = supported.iter().map(|v| format!("{v:?}")).collect();
        let message = format!(
            "Unsupported value: {value:?}: supported values: {}",
            quoted.join(", ")
        );
        self.0.push(FieldError::new(
            path,
            FieldErrorReason::NotSupported,
            message,
        ));
    }

    /// An expression that must compile over `variables` (and, `bool_typed`, evaluate to
    /// a bool).
    fn expression(&mut self, path: String, source: &str, variables: &[&str], bool_typed: bool) {
        if source.trim().is_empty() {
            self.required(path, "expression is not specified");
            return;
        }
        let Some(expression) = self.compiled(&path, source, variables) else {
            return;
        };
        if let Some(ty) = not_bool(&expression).filter(|_| bool_typed) {
            self.invalid(path, source, &format!("must evaluate to bool but got {ty}"));
        }
    }

    /// `source` compiled, or why not reported at `path`: cel-go's syntax errors, or an
    /// identifier none of `variables` declares.
    fn compiled(&mut self, path: &str, source: &str, variables: &[&str]) -> Option<Expression> {
        let expression = Expression::compile(source);
        let why = match expression.compile_error() {
            Some(why) => Some(why.to_string()),
            None => expression.undeclared_references(variables),
        };
        match why {
            Some(why) => {
                self.invalid(
                    path.to_string(),
                    source,
                    &format!("compilation failed: {why}"),
                );
                None
            }
            None => Some(expression),
        }
    }
}

/// The variables a policy's expressions may read: `params` only with a param kind, and no
/// `authorizer` in a `messageExpression`.
fn variables(params: bool, authorizer: bool) -> Vec<&'static str> {
    let mut declared = vec![
        "object",
        "oldObject",
        "request",
        "namespaceObject",
        "variables",
    ];
    declared.extend(params.then_some("params"));
    declared.extend(authorizer.then_some("authorizer"));
    declared
}

/// The type cel-go's check gives a policy's expression when that is not a bool: the
/// estimate's, or `dyn` for a value read straight from `object`, `oldObject` or `params`
/// (declared `dyn`; `request`, `namespaceObject` and `variables` have types).
fn not_bool(expression: &Expression) -> Option<&'static str> {
    match expression.is_read_from(&["object", "oldObject", "params"]) {
        true => Some("dyn"),
        false => expression.not_bool(),
    }
}

fn entries<'v>(spec: &'v Value, field: &str) -> &'v [Value] {
    spec[field].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn policy_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Errors(Vec::new());
    match spec["failurePolicy"].as_str() {
        Some("Fail" | "Ignore") => {}
        other => errors.unsupported(
            "spec.failurePolicy".into(),
            other.unwrap_or(""),
            &["Fail", "Ignore"],
        ),
    }
    let params = spec.get("paramKind").is_some_and(|k| !k.is_null());
    let declared = variables(params, true);
    if let Some(kind) = spec.get("paramKind").filter(|k| !k.is_null()) {
        for field in ["apiVersion", "kind"] {
            if kind[field].as_str().is_none_or(str::is_empty) {
                errors.required(format!("spec.paramKind.{field}"), "");
            }
        }
    }
    match spec.get("matchConstraints").filter(|c| c.is_object()) {
        None => errors.required("spec.matchConstraints".into(), ""),
        Some(constraints) if entries(constraints, "resourceRules").is_empty() => {
            errors.required("spec.matchConstraints.resourceRules".into(), "");
        }
        Some(_) => {}
    }
    let conditions = entries(spec, "matchConditions").len();
    if conditions > MAX_MATCH_CONDITIONS {
        errors.0.push(FieldError::new(
            "spec.matchConditions".to_string(),
            FieldErrorReason::TooMany,
            format!("Too many: {conditions}: must have at most {MAX_MATCH_CONDITIONS} items"),
        ));
    }
    named_expressions(&mut errors, spec, "matchConditions", &declared, true);
    named_expressions(&mut errors, spec, "variables", &declared, false);
    let validations = entries(spec, "validations");
    if validations.is_empty() && entries(spec, "auditAnnotations").is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        errors.required("spec.validations".into(), detail);
        errors.required("spec.auditAnnotations".into(), detail);
    }
    for (i, validation) in validations.iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        validation_errors(&mut errors, validation, &at, params);
    }
    audit_annotation_errors(&mut errors, spec, &declared);
    errors.0
}

/// `auditAnnotations`: keys present and unique, value expressions that compile (steady
/// records no audit log, but keeps out what kube keeps out).
fn audit_annotation_errors(errors: &mut Errors, spec: &Value, declared: &[&str]) {
    let mut keys = std::collections::BTreeSet::new();
    for (i, annotation) in entries(spec, "auditAnnotations").iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        match annotation["key"].as_str().filter(|k| !k.is_empty()) {
            None => errors.required(format!("{at}.key"), ""),
            Some(key) if !keys.insert(key) => errors.0.push(FieldError::new(
                format!("{at}.key"),
                FieldErrorReason::Duplicate,
                format!("Duplicate value: {key:?}"),
            )),
            Some(_) => {}
        }
        let source = annotation["valueExpression"].as_str().unwrap_or("");
        let path = format!("{at}.valueExpression");
        if source.trim().is_empty() {
            errors.required(path, "valueExpression is not specified");
        } else {
            errors.compiled(&path, source, declared);
        }
    }
}

/// `matchConditions` or `variables`: named, names unique (and CEL identifiers for
/// variables), expressions that compile.
fn named_expressions(
    errors: &mut Errors,
    spec: &Value,
    field: &str,
    declared: &[&str],
    bool_typed: bool,
) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, entry) in entries(spec, field).iter().enumerate() {
        let at = format!("spec.{field}[{i}]");
        match entry["name"].as_str().filter(|n| !n.trim().is_empty()) {
            None if bool_typed => errors.required(format!("{at}.name"), ""),
            None => errors.required(format!("{at}.name"), "name is not specified"),
            Some(name) if !seen.insert(name) => errors.0.push(FieldError::new(
                format!("{at}.name"),
                FieldErrorReason::Duplicate,
                format!("Duplicate value: {name:?}"),
            )),
            Some(name) if !bool_typed && !is_cel_identifier(name) => {
                errors.invalid(
                    format!("{at}.name"),
                    name,
                    "name is not a valid CEL identifier",
                );
            }
            Some(_) => {}
        }
        let source = entry["expression"].as_str().unwrap_or("");
        errors.expression(format!("{at}.expression"), source, declared, bool_typed);
    }
}

fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn validation_errors(errors: &mut Errors, validation: &Value, at: &str, params: bool) {
    let source = validation["expression"].as_str().unwrap_or("");
    errors.expression(
        format!("{at}.expression"),
        source,
        &variables(params, true),
        true,
    );
    if let Some(message) = validation["message"].as_str() {
        if !message.is_empty() && message.trim().is_empty() {
            errors.invalid(
                format!("{at}.message"),
                message,
                "message must be non-empty if specified",
            );
        } else if message.trim().contains(['\n', '\r']) {
            errors.invalid(
                format!("{at}.message"),
                message,
                "message must not contain line breaks",
            );
        }
    }
    if let Some(expression) = validation["messageExpression"].as_str() {
        let path = format!("{at}.messageExpression");
        if !expression.is_empty() && expression.trim().is_empty() {
            errors.invalid(path, expression, "must be non-empty if specified");
        } else {
            errors.compiled(&path, expression, &variables(params, false));
        }
    }
    if let Some(reason) = validation["reason"].as_str()
        && !REASONS.contains(&reason)
    {
        errors.unsupported(format!("{at}.reason"), reason, &REASONS);
    }
}

fn binding_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Errors(Vec::new());
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        errors.required("spec.policyName".into(), "");
    }
    let actions = entries(spec, "validationActions");
    if actions.is_empty() {
        errors.required(
            "spec.validationActions".into(),
            "at least one validation action is required",
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, action) in actions.iter().enumerate() {
        let at = format!("spec.validationActions[{i}]");
        let action = action.as_str().unwrap_or("");
        if !["Deny", "Warn", "Audit"].contains(&action) {
            errors.unsupported(at, action, &["Audit", "Deny", "Warn"]);
        } else if !seen.insert(action) {
            errors.0.push(FieldError::new(
                at,
                FieldErrorReason::Duplicate,
                format!("Duplicate value: {action:?}"),
            ));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errors.0.push(FieldError::new(
            "spec.validationActions".to_string(),
            FieldErrorReason::Invalid,
            "Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)".to_string(),
        ));
    }
    if let Some(param_ref) = spec.get("paramRef").filter(|r| r.is_object()) {
        param_ref_errors(&mut errors, param_ref);
    }
    errors.0
}

fn param_ref_errors(errors: &mut Errors, param_ref: &Value) {
    let named = param_ref["name"].as_str().is_some_and(|n| !n.is_empty());
    let selected = param_ref.get("selector").is_some_and(|s| !s.is_null());
    match (named, selected) {
        (true, true) => {
            for field in ["name", "selector"] {
                errors.0.push(FieldError::new(
                    format!("spec.paramRef.{field}"),
                    FieldErrorReason::Forbidden,
                    "Forbidden: name and selector are mutually exclusive".to_string(),
                ));
            }
        }
        (false, false) => errors.required(
            "spec.paramRef".into(),
            "one of name or selector must be specified",
        ),
        _ => {}
    }
    match param_ref["parameterNotFoundAction"].as_str() {
        None => errors.required("spec.paramRef.parameterNotFoundAction".into(), ""),
        Some("Allow" | "Deny") => {}
        Some(other) => errors.unsupported(
            "spec.paramRef.parameterNotFoundAction".into(),
            other,
            &["Allow", "Deny"],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(object: Value, binding: bool) -> Vec<String> {
        let mut object = object;
        match prepare(&mut object, binding) {
            Ok(()) => Vec::new(),
            Err(e) => {
                let causes = e.details.expect("details")["causes"].clone();
                causes
                    .as_array()
                    .expect("causes")
                    .iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap_or(""),
                            c["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            }
        }
    }

    #[test]
    fn a_policy_is_defaulted_as_kube_defaults_it() {
        let mut policy = json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{"expression": "object.metadata.name != ''"}],
        }});
        prepare(&mut policy, false).expect("valid");
        assert_eq!(policy["spec"]["failurePolicy"], "Fail");
        let constraints = &policy["spec"]["matchConstraints"];
        assert_eq!(constraints["matchPolicy"], "Equivalent");
        assert_eq!(constraints["namespaceSelector"], json!({}));
        assert_eq!(constraints["resourceRules"][0]["scope"], "*");
    }

    #[test]
    fn audit_annotations_match_conditions_and_variables_are_checked() {
        let conditions: Vec<Value> = (0..65)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect();
        let policy = json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "matchConditions": conditions,
            "variables": [{"name": "2fast", "expression": "object"}, {"name": "", "expression": "1"}],
            "auditAnnotations": [
                {"key": "k", "valueExpression": "'a'"},
                {"key": "k", "valueExpression": "'b' +"},
            ],
        }});
        let found = messages(policy, false);
        assert_eq!(
            found[0],
            "spec.matchConditions: Too many: 65: must have at most 64 items"
        );
        assert!(found.contains(&"spec.variables[0].name: Invalid value: \"2fast\": name is not a valid CEL identifier".to_string()), "{found:?}");
        assert!(
            found.contains(
                &"spec.variables[1].name: Required value: name is not specified".to_string()
            ),
            "{found:?}"
        );
        assert!(
            found.contains(&"spec.auditAnnotations[1].key: Duplicate value: \"k\"".to_string()),
            "{found:?}"
        );
        assert!(
            found.iter().any(|m| m.starts_with("spec.auditAnnotations[1].valueExpression: Invalid value: \"'b' +\": compilation failed: ERROR: <input>:1:")),
            "{found:?}"
        );
    }

    #[test]
    fn an_identifier_no_policy_declares_is_refused_as_cel_go_refuses_it() {
        let policy = |param_kind: Option<Value>, expressions: &[&str]| {
            let validations: Vec<Value> = expressions
                .iter()
                .map(|e| json!({"expression": e, "messageExpression": "'for ' + object.metadata.name"}))
                .collect();
            let mut spec = json!({
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["pods"]}]},
                "validations": validations,
            });
            if let Some(kind) = param_kind {
                spec["paramKind"] = kind;
            }
            json!({"metadata": {"name": "p"}, "spec": spec})
        };
        assert_eq!(
            messages(
                policy(
                    None,
                    &["self.spec.replicas <= 5", "object.spec.x == params.x"]
                ),
                false
            ),
            [
                "spec.validations[0].expression: Invalid value: \"self.spec.replicas <= 5\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'self' (in container '')\n | self.spec.replicas <= 5\n | ^",
                "spec.validations[1].expression: Invalid value: \"object.spec.x == params.x\": compilation failed: ERROR: <input>:1:18: undeclared reference to 'params' (in container '')\n | object.spec.x == params.x\n | .................^",
            ]
        );
        let fine = [
            "object.spec.x == params.x",
            "object.spec.containers.all(c, c.image != '' && c.ports.exists(p, p.containerPort > 0))",
            "type(object.spec) == map && sets.contains([1, 2], [1]) && authorizer.group('').resource('pods').check('get').allowed()",
            "[1, 2].map(n, n * 2).filter(d, d > 2).size() == 1 && request.dryRun == false",
        ];
        let kind = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(
            messages(policy(Some(kind), &fine), false),
            Vec::<String>::new()
        );
        // A messageExpression has no authorizer, as in kube.
        let mut policy = policy(None, &["true"]);
        policy["spec"]["validations"][0]["messageExpression"] =
            json!("authorizer.group('').toString()");
        let found = messages(policy, false);
        assert!(
            found[0].contains("undeclared reference to 'authorizer'"),
            "{found:?}"
        );
    }
}
