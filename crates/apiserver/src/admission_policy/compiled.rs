//! A stored ValidatingAdmissionPolicy read once into compiled expressions, and what its
//! expressions decide over one write: its `matchConditions` (all must hold), its
//! `variables` (in order, each seeing those before it), then each of its `validations`.

use std::collections::HashMap;

use cel::Context;
use serde_json::Value;

use crate::meta;
use crate::schema::Expression;

/// The kind a policy's bindings name parameters of.
#[derive(Debug)]
pub(crate) struct ParamKind {
    pub(crate) api_version: String,
    pub(crate) kind: String,
}

/// An expression with the name it is known by (a match condition's, a variable's).
struct Named {
    name: String,
    expression: Expression,
}

struct Validation {
    expression: Expression,
    message: Option<String>,
    message_expression: Option<Expression>,
    /// The Status reason of its denial.
    reason: &'static str,
}

pub(crate) struct Policy {
    name: String,
    spec: Value,
    ignores_failures: bool,
    param_kind: Option<ParamKind>,
    match_conditions: Vec<Named>,
    variables: Vec<Named>,
    validations: Vec<Validation>,
}

/// What a policy's expressions said of a write, where it was not "allowed".
#[derive(Debug, PartialEq)]
pub(crate) enum Evaluation {
    /// A validation did not hold: its message and reason.
    Failed {
        message: String,
        reason: &'static str,
    },
    /// An expression could not be evaluated (what `failurePolicy` decides about).
    Error(String),
}

/// The Status reasons a validation may give (and what an older policy may hold).
const REASONS: [&str; 4] = [
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
];

fn text<'v>(entry: &'v Value, field: &str) -> Option<&'v str> {
    entry[field]
        .as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn named_list(spec: &Value, field: &str) -> Vec<Named> {
    spec[field]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| Named {
            name: entry["name"].as_str().unwrap_or("").to_string(),
            expression: Expression::compile(entry["expression"].as_str().unwrap_or("")),
        })
        .collect()
}

impl Policy {
    /// A stored policy; `None` if it has no name.
    pub(crate) fn read(object: &Value) -> Option<Policy> {
        let name = meta::name(object)?.to_string();
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let param_kind = spec
            .get("paramKind")
            .filter(|p| p.is_object())
            .map(|p| ParamKind {
                api_version: p["apiVersion"].as_str().unwrap_or("").to_string(),
                kind: p["kind"].as_str().unwrap_or("").to_string(),
            });
        let validations = spec["validations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| Validation {
                expression: Expression::compile(entry["expression"].as_str().unwrap_or("")),
                message: text(entry, "message").map(str::to_string),
                message_expression: text(entry, "messageExpression").map(Expression::compile),
                reason: REASONS
                    .into_iter()
                    .find(|r| entry["reason"].as_str() == Some(*r))
                    .unwrap_or("Invalid"),
            })
            .collect();
        Some(Policy {
            name,
            ignores_failures: spec["failurePolicy"] == "Ignore",
            param_kind,
            match_conditions: named_list(&spec, "matchConditions"),
            variables: named_list(&spec, "variables"),
            validations,
            spec,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn spec(&self) -> &Value {
        &self.spec
    }

    pub(crate) fn ignores_failures(&self) -> bool {
        self.ignores_failures
    }

    pub(crate) fn param_kind(&self) -> Option<&ParamKind> {
        self.param_kind.as_ref()
    }

    /// What the policy's expressions say over `context` (which binds every input but
    /// `variables`; their values hold `nodes` values in all): nothing when a match
    /// condition is false or every validation holds.
    pub(crate) fn evaluate(&self, context: &mut Context, nodes: u64) -> Vec<Evaluation> {
        let mut errors = Vec::new();
        for condition in &self.match_conditions {
            match condition.expression.evaluate(context, nodes) {
                // Only `false` fails a condition (its type is checked when it is written).
                Ok(cel::Value::Bool(false)) => return Vec::new(),
                Ok(_) => {}
                Err(e) => errors.push(resulted_in_error(&condition.expression, &e)),
            }
        }
        if !errors.is_empty() {
            return vec![Evaluation::Error(aggregate(&errors))];
        }
        let failed_variables = self.bind_variables(context, nodes);
        self.validations
            .iter()
            .filter_map(|validation| {
                let expression = &validation.expression;
                match expression.evaluate(context, nodes) {
                    Ok(cel::Value::Bool(true)) => None,
                    Ok(_) => Some(Evaluation::Failed {
                        message: validation.message(context, nodes),
                        reason: validation.reason,
                    }),
                    Err(e) => {
                        let why = failed_variables
                            .iter()
                            .find(|(name, _)| e == format!("no such key: {name}"))
                            .map_or(e, |(_, why)| why.clone());
                        Some(Evaluation::Error(resulted_in_error(expression, &why)))
                    }
                }
            })
            .collect()
    }

    /// Evaluate the variables in order into `variables`, each seeing those before it;
    /// the ones that failed, with kube's error for an expression that reads them.
    fn bind_variables(&self, context: &mut Context, nodes: u64) -> Vec<(String, String)> {
        let mut values: HashMap<String, cel::Value> = HashMap::new();
        let mut failed = Vec::new();
        context.add_variable_from_value("variables", cel::Value::from(values.clone()));
        for variable in &self.variables {
            match variable.expression.evaluate(context, nodes) {
                Ok(value) => {
                    values.insert(variable.name.clone(), value);
                    context.add_variable_from_value("variables", cel::Value::from(values.clone()));
                }
                Err(e) => failed.push((
                    variable.name.clone(),
                    format!(
                        "composited variable {:?} fails to evaluate: {e}",
                        variable.name
                    ),
                )),
            }
        }
        failed
    }
}

impl Validation {
    /// kube's choice of message for a failed validation: its `messageExpression`'s, else
    /// its `message`, else the expression itself.
    fn message(&self, context: &Context, nodes: u64) -> String {
        let expression = self.message_expression.as_ref();
        if let Some(message) = expression.and_then(|m| m.message(context, nodes)) {
            return message;
        }
        match &self.message {
            Some(message) => message.clone(),
            None => format!("failed expression: {}", self.expression.source().trim()),
        }
    }
}

fn resulted_in_error(expression: &Expression, error: &str) -> String {
    format!(
        "expression '{}' resulted in error: {error}",
        expression.source()
    )
}

/// Go's `utilerrors.NewAggregate(...).Error()`: one error as it is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::{new_context, plain_value};

    fn policy(spec: Value) -> Policy {
        Policy::read(&json!({"metadata": {"name": "p"}, "spec": spec})).expect("named")
    }

    fn evaluate(policy: &Policy, object: Value) -> Vec<Evaluation> {
        let mut context = new_context();
        context.add_variable_from_value("object", plain_value(&object));
        policy.evaluate(&mut context, 10)
    }

    fn failed(message: &str) -> Evaluation {
        Evaluation::Failed {
            message: message.into(),
            reason: "Invalid",
        }
    }

    #[test]
    fn a_failed_validation_says_what_kube_would() {
        let p = policy(json!({"validations": [
            {"expression": "object.n < 1", "messageExpression": "'n is ' + string(object.n)"},
            {"expression": "object.n < 1", "messageExpression": "'  '", "message": "blank: the message"},
            {"expression": "object.n < 1", "messageExpression": "'two\\nlines'", "message": "lines: the message"},
            {"expression": "object.n < 1", "messageExpression": "object.missing", "message": "error: the message"},
            {"expression": " object.n < 1 "},
            {"expression": "object.n > 0"},
        ]}));
        assert_eq!(
            evaluate(&p, json!({"n": 2})),
            [
                failed("n is 2"),
                failed("blank: the message"),
                failed("lines: the message"),
                failed("error: the message"),
                failed("failed expression: object.n < 1"),
            ]
        );
    }

    #[test]
    fn a_false_match_condition_wins_over_an_error_and_errors_are_aggregated() {
        let conditions = |first: &str| {
            policy(json!({
                "matchConditions": [
                    {"name": "a", "expression": first},
                    {"name": "b", "expression": "object.other == 1"},
                ],
                "validations": [{"expression": "false"}],
            }))
        };
        assert_eq!(evaluate(&conditions("object.n == 1"), json!({"n": 2})), []);
        assert_eq!(
            evaluate(&conditions("object.gone == 1"), json!({"n": 2})),
            [Evaluation::Error(
                "[expression 'object.gone == 1' resulted in error: no such key: gone, expression 'object.other == 1' resulted in error: no such key: other]"
                    .into()
            )]
        );
    }

    #[test]
    fn variables_see_those_before_them_and_report_their_own_errors() {
        let p = policy(json!({
            "variables": [
                {"name": "double", "expression": "object.n * 2"},
                {"name": "quadruple", "expression": "variables.double * 2"},
                {"name": "broken", "expression": "object.gone"},
            ],
            "validations": [
                {"expression": "variables.quadruple == 8", "message": "not four times two"},
                {"expression": "variables.broken == 1"},
            ],
        }));
        assert_eq!(
            evaluate(&p, json!({"n": 2})),
            [Evaluation::Error(
                "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: gone"
                    .into()
            )]
        );
        assert_eq!(
            evaluate(&p, json!({"n": 3}))[0],
            failed("not four times two")
        );
    }
}
