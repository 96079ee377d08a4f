//! CRD validation rules: `x-kubernetes-validations`, CEL expressions over `self` (the
//! value at the rule's place) and `oldSelf` (its value before an update: a transition
//! rule), evaluated on every create and update of a custom resource as kube-apiserver
//! evaluates them, with its messages: `spec: Invalid value: "object": <message>` (or the
//! rule's `reason`, at its `fieldPath`), `messageExpression`, the default `failed rule:
//! <rule>`. CEL is the `cel` crate's, with its strings extension and kube's libraries
//! ([`super::cel_library`]).
//!
//! Rules are compiled once, when their CRD is registered, and a subtree of the schema
//! without rules is never walked. A transition rule runs only where the old value can be
//! told apart (object fields, map values, `x-kubernetes-list-type: map` items by key);
//! on an update a rule that is not one is skipped where the value did not change (kube's
//! validation ratcheting). Each evaluation is bounded beforehand by the size of what it
//! reads raised to its comprehensions' nesting (kube measures the cost as it runs), so no
//! body makes a rule run for long.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::common::ast::{Expr, IdedExpr};
use cel::{Context, Env, Program};
use serde_json::Value;

use super::rule_cost::{self, Cardinality, SchemaCost};
use super::validate::ValueSchema;
use super::{FieldError, FieldErrorReason, Path};

/// kube's per-evaluation cost limit (`PerCallLimit`), applied to the estimate.
const PER_CALL_LIMIT: u64 = 1_000_000;
/// The deepest a rule or message expression may nest (by [`nesting`]): cel-go's recursion
/// limit, which kube's CEL keeps, and a bound on the parser's and evaluator's recursion.
const MAX_OPERATORS: usize = 250;
/// kube's budget for all the rules of one write (`RuntimeCELCostBudget`).
const REQUEST_BUDGET: u64 = 10_000_000;
pub(super) const OLD_SELF: &str = "oldSelf";
/// How kube prints the (nil) path of the object itself.
pub(super) const NIL_PATH: &str = "<nil>";

/// The CEL environment every rule is compiled and run in.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    // kube's CEL has the strings extension (a failure leaves the standard library alone).
    // Not the crate's lists extension: it is not kube's list library, and its
    // `lists.range(n)` would build a list as long as a number in the object says.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(super::cel_library::extend);
    Arc::new(env)
});

/// One `x-kubernetes-validations` entry, compiled.
pub(crate) struct Rule {
    source: String,
    /// The program, or why the rule does not compile.
    program: Result<Program, String>,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: FieldErrorReason,
    /// `fieldPath`, as a path below the rule's place (`spec.replicas`, no leading dot).
    field_path: Option<String>,
    /// The rule reads `oldSelf`: it runs only on an update, with the old value.
    transition: bool,
    /// How the rule's work grows with its input (see [`cost_exponent`]).
    exponent: u32,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("source", &self.source)
            .finish()
    }
}

impl Rule {
    fn read(entry: &Value) -> Option<Rule> {
        let source = entry.get("rule")?.as_str()?.trim().to_string();
        let text = |key: &str| {
            entry
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let program = compile(&source);
        let (transition, exponent) = match &program {
            Ok(program) => (
                program.references().has_variable(OLD_SELF),
                cost_exponent(program.expression()),
            ),
            Err(_) => (false, 0),
        };
        Some(Rule {
            message: text("message"),
            message_expression: text("messageExpression").and_then(|m| compile(&m).ok()),
            reason: match entry.get("reason").and_then(Value::as_str) {
                Some("FieldValueForbidden") => FieldErrorReason::Forbidden,
                Some("FieldValueRequired") => FieldErrorReason::Required,
                Some("FieldValueDuplicate") => FieldErrorReason::Duplicate,
                _ => FieldErrorReason::Invalid,
            },
            field_path: text("fieldPath").map(|p| p.trim_start_matches('.').to_string()),
            transition,
            exponent,
            program,
            source,
        })
    }

    /// kube's `ruleErrorString`: the message, else the rule.
    fn named(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.source)
    }

    /// kube's `ruleMessageOrDefault`.
    fn default_message(&self) -> String {
        match &self.message {
            Some(message) => message.clone(),
            None => format!("failed rule: {}", self.source),
        }
    }
}

pub(super) fn compile(source: &str) -> Result<Program, String> {
    if nesting(source) > MAX_OPERATORS {
        // The parser and the evaluator recurse once per operator of a chain: a rule of
        // thousands of them would exhaust a server thread's stack.
        return Err(format!(
            "ERROR: <input>:1:1: expression recursion limit exceeded: {MAX_OPERATORS}"
        ));
    }
    ENV.compile(source).map_err(|e| e.to_string())
}

/// A bound on how deep `source` nests: each bracket opens a level, and each operator,
/// selection, call or comma outside string literals deepens the expression by one at
/// its level (a chain `a + b + c` nests as deep as it is long; a finished bracketed part
/// no longer counts for what follows it). The deepest point is the bound.
fn nesting(source: &str) -> usize {
    let mut levels: Vec<usize> = vec![0];
    let mut deepest = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in source.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
                continue;
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            None if ")]}".contains(c) && levels.len() > 1 => {
                levels.pop();
            }
            None if "+-*/%&|=!<>?:.([{,".contains(c) => {
                if let Some(count) = levels.last_mut() {
                    *count += 1;
                }
                if "([{".contains(c) {
                    levels.push(0);
                }
            }
            None => {}
        }
        deepest = deepest.max(levels.len() - 1 + levels.iter().sum::<usize>());
    }
    deepest
}

/// The `x-kubernetes-validations` of schema node `s`, compiled.
pub(super) fn read(s: &Value) -> Vec<Arc<Rule>> {
    match s.get("x-kubernetes-validations") {
        Some(Value::Array(entries)) => entries
            .iter()
            .filter_map(Rule::read)
            .map(Arc::new)
            .collect(),
        _ => Vec::new(),
    }
}

/// kube's `ValidationReason`s a rule may give.
const SUPPORTED_REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// What kube refuses of the `x-kubernetes-validations` entries of schema node `s` (at
/// `path`) before it compiles any: a missing rule, blank or multi-line messages, a
/// multi-line rule without a message, an unknown reason, a `fieldPath` that is no path
/// below the node.
pub(crate) fn entry_errors(s: &Value, path: &str) -> Vec<FieldError> {
    let Some(Value::Array(entries)) = s.get("x-kubernetes-validations") else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = |key: &str| format!("{path}.x-kubernetes-validations[{i}].{key}");
        let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or("");
        let required = |key: &str, detail: &str| {
            FieldError::new(
                at(key),
                FieldErrorReason::Required,
                format!("Required value: {detail}"),
            )
        };
        let invalid = |key: &str, detail: &str| {
            FieldError::new(
                at(key),
                FieldErrorReason::Invalid,
                format!("Invalid value: {}: {detail}", super::quote(text(key))),
            )
        };
        let lines = |s: &str| s.contains(['\n', '\r']);
        let (rule, message) = (text("rule").trim(), text("message"));
        if rule.is_empty() {
            errors.push(required("rule", "rule is not specified"));
        } else if !message.is_empty() && message.trim().is_empty() {
            errors.push(invalid("message", "message must be non-empty if specified"));
        } else if lines(message.trim()) {
            errors.push(invalid("message", "message must not contain line breaks"));
        } else if lines(rule) && message.trim().is_empty() {
            errors.push(required(
                "message",
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = text("messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.push(required(
                "messageExpression",
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = entry.get("reason").and_then(Value::as_str)
            && !SUPPORTED_REASONS.contains(&reason)
        {
            errors.push(super::unsupported(at("reason"), reason, &SUPPORTED_REASONS));
        }
        let field_path = text("fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errors.push(invalid(
                "fieldPath",
                "fieldPath must be non-empty if specified",
            ));
        }
        if lines(field_path) {
            errors.push(invalid(
                "fieldPath",
                "fieldPath must not contain line breaks",
            ));
        }
        if !field_path.is_empty() && !field_path_valid(s, field_path) {
            errors.push(invalid("fieldPath", "fieldPath must be a valid path"));
        }
    }
    errors
}

/// Whether `field_path` (`.spec.replicas`, `['a.b']`, `.ports[0]`) leads from schema node
/// `s` to a field it declares, as kube's `ValidFieldPath` walks it. Below a node that
/// declares no fields (preserved unknown fields, int-or-string) anything goes.
fn field_path_valid(s: &Value, field_path: &str) -> bool {
    let mut node = s;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (step, after) = if let Some(named) = rest.strip_prefix('.') {
            let end = named.find(['.', '[']).unwrap_or(named.len());
            (Step::Field(&named[..end]), &named[end..])
        } else if let Some(bracketed) = rest.strip_prefix('[') {
            let Some(end) = bracketed.find(']') else {
                return false;
            };
            let inside = &bracketed[..end];
            let step = match inside.strip_prefix('\'').and_then(|q| q.strip_suffix('\'')) {
                Some(key) => Step::Field(key),
                None if inside.parse::<usize>().is_ok() => Step::Index,
                None => return false,
            };
            (step, &bracketed[end + 1..])
        } else {
            return false;
        };
        let declares_fields = node.get("properties").is_some()
            || node
                .get("additionalProperties")
                .is_some_and(Value::is_object)
            || node.get("items").is_some();
        if !declares_fields {
            return node.get("type").and_then(Value::as_str).is_none()
                || super::flag(node, "x-kubernetes-preserve-unknown-fields");
        }
        let next = match step {
            Step::Field("") => None,
            Step::Field(name) => node
                .get("properties")
                .and_then(|p| p.get(name))
                .or_else(|| node.get("additionalProperties").filter(|v| v.is_object())),
            Step::Index => node.get("items"),
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
        rest = after;
    }
    true
}

enum Step<'p> {
    Field(&'p str),
    Index,
}

/// Why each rule of schema node `s` (at `path` in the CRD; `root`: the schema's root)
/// does not compile, selects a field the schema does not declare, costs more than kube
/// allows, or reads `oldSelf` below `uncorrelatable` (an atomic list or map, or a set,
/// whose old items cannot be told apart): a CRD carrying one is refused. `costs`, where
/// kube estimates them (not inside `allOf`, `anyOf`, `oneOf` or `not`): how many times
/// the node's rules can run for one object, and the schema's running total.
pub(crate) fn compile_errors(
    s: &Value,
    path: &str,
    root: bool,
    mut costs: Option<(Cardinality, &mut SchemaCost)>,
    uncorrelatable: Option<&str>,
) -> Vec<FieldError> {
    let Some(Value::Array(entries)) = s.get("x-kubernetes-validations") else {
        return Vec::new();
    };
    let checked = |source: &str| {
        compile(source).and_then(|program| {
            let undefined = super::rule_fields::undefined_fields(program.expression(), s, root);
            match undefined.is_empty() {
                true => Ok(program),
                false => Err(undefined_message(&program, source, &undefined)),
            }
        })
    };
    let mut errors = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        let mut reads_old_self = None;
        for key in ["rule", "messageExpression"] {
            let Some(source) = entry
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
            else {
                if key == "rule" {
                    break;
                }
                continue;
            };
            let invalid = |detail: String| {
                FieldError::new(
                    format!("{at}.{key}"),
                    FieldErrorReason::Invalid,
                    format!("Invalid value: {}: {detail}", go_rule(entry)),
                )
            };
            // kube stops at a rule's first problem, before its message is compiled.
            let program = match checked(source) {
                Ok(program) => program,
                Err(why) if key == "rule" => {
                    errors.push(invalid(format!("compilation failed: {why}")));
                    break;
                }
                Err(why) => {
                    errors.push(invalid(format!(
                        "messageExpression compilation failed: {why}"
                    )));
                    continue;
                }
            };
            if key == "rule" && rule_cost::certainly_not_bool(program.expression(), s, root) {
                errors.push(invalid("cel expression must evaluate to a bool".into()));
                break;
            }
            if key == "rule" && program.references().has_variable(OLD_SELF) {
                reads_old_self = Some(source);
            }
            let Some((cardinality, total)) = costs.as_mut() else {
                continue;
            };
            let once = rule_cost::max_cost(program.expression(), s, root);
            // A rule runs wherever its node is; a message is built once, for the failure.
            let (cost, name) = match key {
                "rule" => (cardinality.times(once, s, root), "estimated rule cost"),
                _ => (once, "estimated messageExpression cost"),
            };
            if cost > rule_cost::RULE_COST_LIMIT {
                errors.push(FieldError::new(
                    format!("{at}.{key}"),
                    FieldErrorReason::Forbidden,
                    format!(
                        "Forbidden: {}",
                        rule_cost::over_budget(name, cost, rule_cost::RULE_COST_LIMIT)
                    ),
                ));
            }
            total.observe(format!("{at}.{key}"), cost);
        }
        if let (Some(rule), Some(within)) = (reads_old_self, uncorrelatable) {
            errors.push(FieldError::new(
                format!("{at}.rule"),
                FieldErrorReason::Invalid,
                format!(
                    "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {within}",
                    super::quote(rule)
                ),
            ));
        }
    }
    errors
}

/// An `x-kubernetes-validations` entry as kube prints it in a compilation error: its Go
/// struct (`%#v`). A pointer prints as an address there, which no client can rely on.
fn go_rule(entry: &Value) -> String {
    let text = |key: &str| super::quote(entry.get(key).and_then(Value::as_str).unwrap_or(""));
    let pointer = |key: &str, ty: &str| match entry.get(key) {
        None | Some(Value::Null) => format!("({ty})(nil)"),
        Some(_) => format!("({ty})(0xc000010000)"),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        text("rule"),
        text("message"),
        text("messageExpression"),
        pointer("reason", "*apiextensions.FieldValueErrorReason"),
        text("fieldPath"),
        pointer("optionalOldSelf", "*bool"),
    )
}

/// kube's (cel-go's) report of undefined fields: each at its line and column, with the
/// source and a caret under the place.
fn undefined_message(
    program: &Program,
    source: &str,
    undefined: &[super::rule_fields::Undefined],
) -> String {
    let errors = undefined
        .iter()
        .map(|u| (u.id, format!("undefined field '{}'", u.field)));
    positioned_errors(program, source, errors)
}

/// cel-go's report of errors at nodes of `program`: `ERROR: <input>:line:column: what`,
/// the source line and a caret under the column, one after another.
fn positioned_errors(
    program: &Program,
    source: &str,
    errors: impl Iterator<Item = (u64, String)>,
) -> String {
    errors
        .map(|(id, what)| {
            let offset = program
                .source_info()
                .offset_for(id)
                .map_or(0, |(start, _)| start as usize);
            let before = source.get(..offset).unwrap_or(source);
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let column = before[line_start..].chars().count() + 1;
            let text = source.lines().nth(line - 1).unwrap_or("");
            format!(
                "ERROR: <input>:{line}:{column}: {what}\n | {text}\n | {}^",
                ".".repeat(column - 1)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Names CEL itself declares that an expression may use as identifiers: types, and the
/// namespaces of namespaced functions (`sets.contains`, `math.abs`).
const CEL_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "google",
    "sets",
    "lists",
    "math",
    "strings",
    "optional",
    "base64",
    "cel",
];

/// The identifiers of `expr` that are neither `declared`, nor bound by a comprehension
/// around them, nor CEL's own: each node's id and name.
fn undeclared(
    expr: &IdedExpr,
    declared: &[&str],
    bound: &mut Vec<String>,
    out: &mut Vec<(u64, String)>,
) {
    let mut walk = |e: &IdedExpr, bound: &mut Vec<String>| undeclared(e, declared, bound, out);
    match &expr.expr {
        Expr::Ident(name) => {
            let known = declared.contains(&name.as_str())
                || CEL_NAMES.contains(&name.as_str())
                || bound.iter().any(|b| b == name);
            if !known {
                out.push((expr.id, name.clone()));
            }
        }
        Expr::Select(select) => walk(&select.operand, bound),
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk(target, bound);
            }
            for arg in &call.args {
                walk(arg, bound);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, bound);
            walk(&c.accu_init, bound);
            let depth = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            walk(&c.loop_cond, bound);
            walk(&c.loop_step, bound);
            walk(&c.result, bound);
            bound.truncate(depth);
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, bound);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, bound);
                    walk(&entry.value, bound);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let cel::common::ast::EntryExpr::StructField(field) = &entry.expr {
                    walk(&field.value, bound);
                }
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// How many times a rule's work can multiply the size of what it reads: one per nested
/// comprehension (`all`, `exists`, `map`, `filter`…), one more for a comprehension whose
/// body reads `self` or `oldSelf` again (each item then works over the whole value), and
/// one for a `replace` whose replacement is read from the object (its result can be its
/// input times its replacement). Without any,
/// a rule's work is linear in its input and its length.
fn cost_exponent(expr: &IdedExpr) -> u32 {
    let highest =
        |exprs: &mut dyn Iterator<Item = &IdedExpr>| exprs.map(cost_exponent).max().unwrap_or(0);
    match &expr.expr {
        Expr::Comprehension(c) => {
            let body = cost_exponent(&c.loop_step).max(u32::from(reads_self(&c.loop_step)));
            let around = [&c.iter_range, &c.accu_init, &c.loop_cond, &c.result];
            (1 + body).max(highest(&mut around.into_iter()))
        }
        Expr::Call(call) => {
            let args = highest(&mut call.target.iter().map(|t| &**t).chain(&call.args));
            // A replacement read from the object can multiply its input by its own size.
            let multiplies = call.func_name == "replace" && call.args.iter().any(reads_self);
            args + u32::from(multiplies)
        }
        Expr::List(list) => highest(&mut list.elements.iter()),
        Expr::Map(map) => highest(&mut map.entries.iter().filter_map(|e| match &e.expr {
            cel::common::ast::EntryExpr::MapEntry(entry) => Some(&entry.value),
            _ => None,
        })),
        Expr::Select(select) => cost_exponent(&select.operand),
        _ => 0,
    }
}

/// Whether `expr` reads `self` or `oldSelf`.
fn reads_self(expr: &IdedExpr) -> bool {
    let references = expr.references();
    references.has_variable("self") || references.has_variable(OLD_SELF)
}

/// The rules' errors for `new` (and, on an update, `old`) against `schema`.
pub fn check(new: &Value, old: Option<&Value>, schema: &ValueSchema) -> Vec<FieldError> {
    let mut out = Vec::new();
    if schema.has_rules() {
        let mut walk = Walk {
            budget: REQUEST_BUDGET,
            out: &mut out,
        };
        walk.node(new, old, schema, &Path::At(""), true);
    }
    out
}

/// The walk over the new value, the old one where it corresponds, and the schema.
struct Walk<'o> {
    budget: u64,
    out: &'o mut Vec<FieldError>,
}

impl Walk<'_> {
    /// False once the budget is spent: nothing more is checked.
    fn node(
        &mut self,
        value: &Value,
        old: Option<&Value>,
        schema: &ValueSchema,
        path: &Path<'_>,
        root: bool,
    ) -> bool {
        if !schema.has_rules() || value.is_null() {
            return true;
        }
        if !self.rules(value, old, schema, path, root) {
            return false;
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if root && super::META_FIELDS.contains(&key.as_str()) {
                        continue;
                    }
                    let Some(sub) = schema.child_schema(key) else {
                        continue;
                    };
                    let old_child = old
                        .filter(|_| schema.map_correlates())
                        .and_then(|o| o.get(key));
                    if !self.node(child, old_child, sub, &Path::Field(path, key), false) {
                        return false;
                    }
                }
            }
            Value::Array(items) => {
                let Some(sub) = schema.item_schema() else {
                    return true;
                };
                for (i, item) in items.iter().enumerate() {
                    let old_item = old.and_then(|o| schema.correlated_item(item, o));
                    if !self.node(item, old_item, sub, &Path::Item(path, i), false) {
                        return false;
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// Run the rules of one place; false once the budget is spent.
    fn rules(
        &mut self,
        value: &Value,
        old: Option<&Value>,
        schema: &ValueSchema,
        path: &Path<'_>,
        root: bool,
    ) -> bool {
        if schema.rules().is_empty() {
            return true;
        }
        let ty = schema.type_name();
        let fail = |rule: &Rule, detail: String, reason: FieldErrorReason| {
            let mut at = path.render();
            if let Some(field) = &rule.field_path {
                at = if at.is_empty() {
                    field.clone()
                } else {
                    format!("{at}.{field}")
                };
            } else if at.is_empty() {
                // kube's path of the object itself is nil, which it prints so.
                at = NIL_PATH.to_string();
            }
            let message = match reason {
                FieldErrorReason::Forbidden => format!("Forbidden: {detail}"),
                FieldErrorReason::Required => format!("Required value: {detail}"),
                FieldErrorReason::Duplicate => format!("Duplicate value: {}", super::quote(ty)),
                _ => format!("Invalid value: {}: {detail}", super::quote(ty)),
            };
            FieldError::new(at, reason, message)
        };
        let invalid = |rule: &Rule, detail: String| fail(rule, detail, FieldErrorReason::Invalid);
        // Both made once per place, and only when a rule needs them: the input's size (a
        // walk of it) for a rule that can multiply it, the bound variables for any that runs.
        let mut size: Option<u64> = None;
        let mut bound: Option<Context> = None;
        for rule in schema.rules() {
            let program = match &rule.program {
                Ok(program) => program,
                Err(why) => {
                    self.out
                        .push(invalid(rule, format!("rule compile error: {why}")));
                    continue;
                }
            };
            if rule.transition && old.is_none() {
                continue;
            }
            // kube's ratcheting: an unchanged value is not held to a rule again.
            if !rule.transition && old.is_some_and(|o| o == value) {
                continue;
            }
            let cost = if rule.exponent == 0 {
                0
            } else {
                size.get_or_insert_with(|| nodes(value) + old.map_or(0, nodes))
                    .saturating_pow(rule.exponent)
            };
            if cost > PER_CALL_LIMIT {
                self.out.push(invalid(rule, format!(
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    rule.named()
                )));
                return false;
            }
            if cost > self.budget {
                self.out.push(invalid(
                    rule,
                    "validation failed due to running out of cost budget, no further validation rules will be run".into(),
                ));
                return false;
            }
            self.budget -= cost;
            let context = bound.get_or_insert_with(|| {
                let mut context = new_context();
                context.add_variable_from_value("self", to_cel(value, schema, root));
                if let Some(old) = old {
                    context.add_variable_from_value(OLD_SELF, to_cel(old, schema, root));
                }
                context
            });
            match program.execute(context) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => {
                    let detail = rule
                        .message_expression
                        .as_ref()
                        .and_then(|m| message_of(m, context))
                        .unwrap_or_else(|| rule.default_message());
                    self.out.push(fail(rule, detail, rule.reason));
                }
                Ok(other) => self.out.push(invalid(
                    rule,
                    format!(
                        "rule did not evaluate to a bool: {other:?} evaluating rule: {}",
                        rule.named()
                    ),
                )),
                Err(e) => self.out.push(invalid(
                    rule,
                    format!("{} evaluating rule: {}", execution_error(&e), rule.named()),
                )),
            }
        }
        true
    }
}

/// A `messageExpression`'s message: a non-empty string on one line, else `None` (kube
/// then reports the rule's message).
fn message_of(program: &Program, context: &Context) -> Option<String> {
    match program.execute(context) {
        Ok(cel::Value::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n')).then(|| s.to_string())
        }
        _ => None,
    }
}

/// kube's wording of CEL's runtime errors, where the two differ.
fn execution_error(e: &cel::ExecutionError) -> String {
    match e {
        cel::ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string(),
    }
}

/// The cost scale of a rule over `value`: one per JSON value it holds, and one per 8
/// bytes of its strings (keys included).
fn nodes(value: &Value) -> u64 {
    let text = |s: &str| (s.len() / 8) as u64;
    match value {
        Value::Array(items) => 1 + items.iter().map(nodes).sum::<u64>(),
        Value::Object(map) => {
            1 + map
                .iter()
                .map(|(key, child)| text(key) + nodes(child))
                .sum::<u64>()
        }
        Value::String(s) => 1 + text(s),
        _ => 1,
    }
}

/// `value` as CEL sees it: integers as `int` (`double` where the schema says `number`),
/// objects as maps. At the top level, `metadata` holds only `name` and `generateName`.
fn to_cel(value: &Value, schema: &ValueSchema, root: bool) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (schema.type_name(), n.as_i64()) {
            ("number", _) | (_, None) => cel::Value::Float(n.as_f64().unwrap_or_default()),
            (_, Some(i)) => cel::Value::Int(i),
        },
        Value::String(s) => cel::Value::from(s.as_str()),
        Value::Array(items) => {
            let item_schema = schema.item_schema();
            let items = items
                .iter()
                .map(|item| match item_schema {
                    Some(sub) => to_cel(item, sub, false),
                    None => to_cel(item, &ValueSchema::default(), false),
                })
                .collect::<Vec<_>>();
            cel::Value::List(Arc::new(items))
        }
        Value::Object(map) => {
            // An object's properties are named as rules name them; a map's keys as they are.
            let object = schema.declares_properties();
            let converted: HashMap<String, cel::Value> = map
                .iter()
                .filter_map(|(key, child)| {
                    let value = if root && key == "metadata" {
                        object_meta(child)
                    } else {
                        match schema.child_schema(key) {
                            Some(sub) => to_cel(child, sub, false),
                            None => to_cel(child, &ValueSchema::default(), false),
                        }
                    };
                    let name = match object {
                        true => super::cel_names::escape(key)?,
                        false => key.clone(),
                    };
                    Some((name, value))
                })
                .collect();
            cel::Value::from(converted)
        }
    }
}

/// What a root rule sees of `metadata` (kube's `WithTypeAndObjectMeta`).
fn object_meta(metadata: &Value) -> cel::Value {
    let kept: HashMap<String, cel::Value> = ["name", "generateName"]
        .into_iter()
        .filter_map(|key| {
            let text = metadata.get(key)?.as_str()?;
            Some((key.to_string(), cel::Value::from(text)))
        })
        .collect();
    cel::Value::from(kept)
}

/// A CEL expression outside a CRD's schema (an admission policy's), compiled once in the
/// environment rules have, and held to the same bound on its work.
pub(crate) struct Expression {
    source: String,
    /// The program, or why the expression does not compile.
    program: Result<Program, String>,
    exponent: u32,
}

impl Expression {
    pub(crate) fn compile(source: &str) -> Expression {
        let program = compile(source);
        let exponent = program
            .as_ref()
            .map_or(0, |p| cost_exponent(p.expression()));
        Expression {
            source: source.to_string(),
            program,
            exponent,
        }
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// cel-go's error for an expression that does not compile.
    pub(crate) fn compile_error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// cel-go's check error for identifiers the expression reads that are not among
    /// `declared` (a typo, `self` in an admission policy, `params` without a param kind).
    pub(crate) fn undeclared_references(&self, declared: &[&str]) -> Option<String> {
        let program = self.program.as_ref().ok()?;
        let mut found = Vec::new();
        undeclared(program.expression(), declared, &mut Vec::new(), &mut found);
        if found.is_empty() {
            return None;
        }
        let errors = found.into_iter().map(|(id, name)| {
            (
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            )
        });
        Some(positioned_errors(program, &self.source, errors))
    }

    /// The type the expression can only evaluate to, when that is not a bool (a literal,
    /// arithmetic, a string function): cel-go's type check refuses it.
    pub(crate) fn not_bool(&self) -> Option<&'static str> {
        let program = self.program.as_ref().ok()?;
        rule_cost::not_bool(program.expression(), &serde_json::json!({}), false)
    }

    /// Whether the expression is nothing but a value read from one of `roots` (fields
    /// selected, items indexed): of CEL's type `dyn` where those are.
    pub(crate) fn is_read_from(&self, roots: &[&str]) -> bool {
        let Ok(program) = &self.program else {
            return false;
        };
        let mut expr = program.expression();
        loop {
            match &expr.expr {
                Expr::Select(select) if !select.test => expr = &select.operand,
                Expr::Call(call) if call.func_name == "_[_]" && call.args.len() == 2 => {
                    expr = &call.args[0];
                }
                Expr::Ident(name) => return roots.contains(&name.as_str()),
                _ => return false,
            }
        }
    }

    /// The expression's value over `context`, whose variables hold `input_nodes` values
    /// (counted as [`value_nodes`] counts them); kube's wording of what went wrong.
    pub(crate) fn evaluate(
        &self,
        context: &Context,
        input_nodes: u64,
    ) -> Result<cel::Value, String> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        if self.over_bound(input_nodes) {
            return Err("operation cancelled: actual cost limit exceeded".into());
        }
        program.execute(context).map_err(|e| execution_error(&e))
    }

    /// A `messageExpression`'s message (see [`message_of`]); `None` also when the
    /// expression could cost more than the bound over `input_nodes`.
    pub(crate) fn message(&self, context: &Context, input_nodes: u64) -> Option<String> {
        if self.over_bound(input_nodes) {
            return None;
        }
        message_of(self.program.as_ref().ok()?, context)
    }

    fn over_bound(&self, input_nodes: u64) -> bool {
        self.exponent > 0 && input_nodes.saturating_pow(self.exponent) > PER_CALL_LIMIT
    }
}

/// The functions of kube's libraries, declared once: every rule runs in a scope of it.
static LIBRARY: LazyLock<Context<'static, 'static>> = LazyLock::new(library_root);

/// A root context of the environment every rule and expression runs in, with kube's
/// libraries: what a caller declaring functions of its own starts from.
pub(crate) fn library_root() -> Context<'static, 'static> {
    let mut context = Context::with_env(ENV.clone());
    super::cel_library::register(&mut context);
    context
}

/// A context with kube's libraries and no variables, for one evaluation.
pub(crate) fn new_context() -> Context<'static, 'static> {
    LIBRARY.new_inner_scope()
}

/// A JSON value as CEL sees it without a schema: integers as `int`, other numbers as
/// `double`, objects as maps keyed by their properties' names.
pub(crate) fn plain_value(value: &Value) -> cel::Value {
    to_cel(value, &ValueSchema::default(), false)
}

/// How many values `value` holds, for the bound on an expression's work over it.
pub(crate) fn value_nodes(value: &Value) -> u64 {
    nodes(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::tests::fields;

    fn schema(s: Value) -> ValueSchema {
        ValueSchema::new(&s)
    }

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn replicas_schema() -> ValueSchema {
        schema(json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.minReplicas <= self.maxReplicas",
             "message": "minReplicas must not exceed maxReplicas"},
            {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable"},
            {"rule": "!has(self.legacy)", "reason": "FieldValueForbidden",
             "fieldPath": ".legacy", "message": "legacy is gone"},
            {"rule": "self.name.startsWith('web')",
             "messageExpression": "'name ' + self.name + ' must start with web'"},
        ],
        "properties": {
            "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
            "mode": {"type": "string"}, "name": {"type": "string"},
            "legacy": {"type": "boolean"},
        }}}}))
    }

    #[test]
    fn rules_are_reported_as_kube_reports_them() {
        let s = replicas_schema();
        let good =
            json!({"spec": {"minReplicas": 1, "maxReplicas": 3, "mode": "a", "name": "web-1"}});
        assert!(check(&good, None, &s).is_empty());
        let bad = json!({"spec": {"minReplicas": 4, "maxReplicas": 3, "mode": "a",
                                   "name": "db", "legacy": true}});
        assert_eq!(
            messages(&check(&bad, None, &s)),
            [
                "spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas",
                "spec.legacy: Forbidden: legacy is gone",
                "spec: Invalid value: \"object\": name db must start with web",
            ]
        );
    }

    #[test]
    fn transition_rules_need_the_old_value_and_unchanged_values_ratchet() {
        let s = replicas_schema();
        let old = json!({"spec": {"minReplicas": 1, "maxReplicas": 3, "mode": "a", "name": "web"}});
        let changed =
            json!({"spec": {"minReplicas": 1, "maxReplicas": 3, "mode": "b", "name": "web"}});
        assert_eq!(
            messages(&check(&changed, Some(&old), &s)),
            ["spec: Invalid value: \"object\": mode is immutable"]
        );
        // An object stored before a rule existed stays writable where it is unchanged.
        let stored =
            json!({"spec": {"minReplicas": 9, "maxReplicas": 3, "mode": "a", "name": "web"}});
        assert!(check(&stored, Some(&stored), &s).is_empty());
    }

    #[test]
    fn a_missing_field_and_the_default_message_are_kubes() {
        let s = schema(json!({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-validations": [{"rule": "self.size > 0"}],
            "properties": {"size": {"type": "integer"}}}}}));
        assert_eq!(
            messages(&check(&json!({"spec": {"size": 0}}), None, &s)),
            ["spec: Invalid value: \"object\": failed rule: self.size > 0"]
        );
        assert_eq!(
            messages(&check(&json!({"spec": {}}), None, &s)),
            ["spec: Invalid value: \"object\": no such key: size evaluating rule: self.size > 0"]
        );
    }

    #[test]
    fn list_items_and_map_lists_by_key() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"ports": {
                "type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.port > 0 && self.port < 65536", "message": "bad port"},
                        {"rule": "self.port == oldSelf.port", "message": "port is immutable"}],
                    "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}),
        );
        let old = json!({"spec": {"ports": [{"name": "http", "port": 80}]}});
        let new = json!({"spec": {"ports": [{"name": "metrics", "port": 0},
                                            {"name": "http", "port": 8080}]}});
        assert_eq!(
            messages(&check(&new, Some(&old), &s)),
            [
                "spec.ports[0]: Invalid value: \"object\": bad port",
                "spec.ports[1]: Invalid value: \"object\": port is immutable",
            ]
        );
    }

    #[test]
    fn a_rule_too_costly_for_its_input_is_refused_before_it_runs() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.items.all(a, self.items.all(b, a == b || a != b))"}],
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}}}}}),
        );
        let small = json!({"spec": {"items": [1, 2, 3]}});
        assert!(check(&small, None, &s).is_empty());
        let big = json!({"spec": {"items": (0..5000).collect::<Vec<_>>()}});
        let errors = messages(&check(&big, None, &s));
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].contains("call cost exceeds limit for rule"),
            "{errors:?}"
        );
    }

    #[test]
    fn the_cost_exponent_follows_what_can_multiply() {
        let exponent = |rule: &str| cost_exponent(compile(rule).expect("compiles").expression());
        assert_eq!(exponent("self.a <= self.b && self.name.startsWith('x')"), 0);
        assert_eq!(exponent("self.items.all(i, i.size() < 10)"), 1);
        assert_eq!(exponent("self.items.map(i, self.name + i)"), 2);
        assert_eq!(exponent("self.a.all(x, self.a.exists(y, x == y))"), 2);
        assert_eq!(exponent("self.name.replace('-', '_') == 'a_b'"), 0);
        assert_eq!(exponent("self.name.replace('', self.name).size() > 0"), 1);
    }

    #[test]
    fn the_root_sees_name_but_not_the_rest_of_metadata() {
        let s = schema(json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.size() <= 10 && !has(self.metadata.labels)",
             "message": "short names only"}]}));
        let ok = json!({"metadata": {"name": "web", "labels": {"a": "b"}}});
        assert!(check(&ok, None, &s).is_empty());
        let long = json!({"metadata": {"name": "a-very-long-name"}});
        assert_eq!(
            messages(&check(&long, None, &s)),
            ["<nil>: Invalid value: \"object\": short names only"]
        );
    }

    #[test]
    fn a_rule_nested_beyond_the_parsers_limit_is_refused_not_crashed_on() {
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        let errors = compile_errors(
            &json!({"x-kubernetes-validations": [{"rule": deep}]}),
            "s",
            false,
            None,
            None,
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        let long = format!("{} == 1", vec!["1"; 20000].join(" + "));
        let errors = compile_errors(
            &json!({"x-kubernetes-validations": [{"rule": long}]}),
            "s",
            false,
            None,
            None,
        );
        assert!(
            errors[0].message.contains("recursion limit exceeded"),
            "{errors:?}"
        );
        // The longest chain allowed compiles and runs within a server thread's stack.
        let longest = format!("{} == 248", vec!["1"; 248].join(" + "));
        assert_eq!(nesting(&longest), MAX_OPERATORS - 1);
        let s = schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": longest}]}));
        assert!(check(&json!({}), None, &s).is_empty());
        assert_eq!(nesting("self.name == 'a+b.c' && \"(\\\"\" != ''"), 7);
        let lists = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        let errors = compile_errors(
            &json!({"x-kubernetes-validations": [{"rule": lists}]}),
            "s",
            false,
            None,
            None,
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    /// CEL's `duration()` and `timestamp()`, as Gateway API's route timeouts use them.
    #[test]
    fn durations_and_timestamps_compare_as_in_kube() {
        let s = schema(json!({"type": "object", "properties": {
            "request": {"type": "string"}, "backendRequest": {"type": "string"},
            "notBefore": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))",
                 "message": "backendRequest timeout cannot be longer than request timeout"},
                {"rule": "!has(self.notBefore) || timestamp(self.notBefore) > timestamp('2020-01-01T00:00:00Z')",
                 "message": "too early"}]}));
        let check = |value: Value| messages(&check(&value, None, &s));
        assert_eq!(
            check(json!({"request": "10s", "backendRequest": "1m"})),
            [
                "<nil>: Invalid value: \"object\": backendRequest timeout cannot be longer than request timeout"
            ]
        );
        assert!(check(json!({"request": "1h", "backendRequest": "500ms"})).is_empty());
        assert!(check(json!({"request": "0s", "backendRequest": "1h"})).is_empty());
        assert_eq!(
            check(json!({"notBefore": "2019-12-31T23:59:59Z"})),
            ["<nil>: Invalid value: \"object\": too early"]
        );
        assert!(check(json!({"notBefore": "2024-06-01T12:00:00+02:00"})).is_empty());
    }

    /// Gateway API's route rules: many operators, nested shallowly (a sum of sixteen
    /// guarded terms), compile as in kube; only depth counts against cel-go's limit.
    #[test]
    fn a_long_but_shallow_rule_compiles() {
        let term = |i: usize| {
            format!(
                "(self.size() > {i} ? (has(self[{i}].matches) ? self[{i}].matches.size() : 0) : 0)"
            )
        };
        let rule = format!(
            "{} <= 128",
            (0..16).map(term).collect::<Vec<_>>().join(" + ")
        );
        assert!(rule.len() > 1000);
        assert!(nesting(&rule) < MAX_OPERATORS, "{}", nesting(&rule));
        assert!(compile(&rule).is_ok());
    }

    #[test]
    fn rules_that_do_not_compile_are_named() {
        let s = json!({"x-kubernetes-validations": [{"rule": "self.a >"}, {"message": "x"}]});
        let errors = compile_errors(&s, "spec.validation", false, None, None);
        assert_eq!(errors.len(), 1);
        assert_eq!(
            errors[0].field,
            "spec.validation.x-kubernetes-validations[0].rule"
        );
        assert!(
            errors[0].message.contains("compilation failed"),
            "{}",
            errors[0].message
        );
        assert_eq!(
            fields(&entry_errors(&s, "s")),
            ["s.x-kubernetes-validations[1].rule: Required value: rule is not specified"]
        );
    }

    /// kube's compile errors: a rule that is not a bool, a message expression that does
    /// not compile (named as such), and nothing of the message once the rule fails.
    #[test]
    fn rules_are_refused_at_their_first_problem_as_kube_refuses_them() {
        let s = json!({"type": "object", "properties": {
            "replicas": {"type": "integer"}, "name": {"type": "string"},
            "enabled": {"type": "boolean"},
            "ports": {"type": "array", "items": {"type": "integer"}}}});
        let errors = |rules: Value| {
            let mut s = s.clone();
            s["x-kubernetes-validations"] = rules;
            fields(&compile_errors(&s, "s", false, None, None))
        };
        let struct_of = |rule: &str, message_expression: &str| {
            format!(
                "apiextensions.ValidationRule{{Rule:\"{rule}\", Message:\"\", MessageExpression:\"{message_expression}\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}"
            )
        };
        for not_bool in [
            "self.replicas",
            "self.name.lowerAscii()",
            "self.ports.map(p, p > 0)",
            "size(self.ports)",
        ] {
            assert_eq!(
                errors(json!([{"rule": not_bool, "messageExpression": "self.nope("}])),
                [format!(
                    "s.x-kubernetes-validations[0].rule: Invalid value: {}: cel expression must evaluate to a bool",
                    struct_of(not_bool, "self.nope(")
                )],
            );
        }
        for fine in [
            "self.enabled",
            "self.ports.all(p, p > 0)",
            "self.replicas > 0 ? self.enabled : true",
            "self.ports[0] == 1",
        ] {
            assert_eq!(
                errors(json!([{"rule": fine}])),
                Vec::<String>::new(),
                "{fine}"
            );
        }
        let found = errors(json!([{"rule": "self.enabled", "messageExpression": "'a' +"}]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(&format!("s.x-kubernetes-validations[0].messageExpression: Invalid value: {}: messageExpression compilation failed: ", struct_of("self.enabled", "'a' +"))),
            "{found:?}"
        );
    }

    /// What kube refuses of an entry before compiling it, with its messages.
    #[test]
    fn entries_are_checked_as_kube_checks_them() {
        let s = json!({"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "array", "items": {"type": "object", "properties": {"port": {"type": "integer"}}}}},
            "x-kubernetes-validations": [
                {"rule": "self.replicas > 0", "message": "  "},
                {"rule": "self.replicas > 0 &&\n  self.replicas < 9"},
                {"rule": "true", "message": "one\ntwo"},
                {"rule": "true", "messageExpression": " ", "reason": "FieldValueWrong"},
                {"rule": "true", "fieldPath": ".replica"},
                {"rule": "true", "fieldPath": "replicas"},
                {"rule": "true", "fieldPath": ".replicas"},
                {"rule": "true", "fieldPath": ".labels.anything"},
                {"rule": "true", "fieldPath": ".ports[0].port"},
                {"rule": "true", "fieldPath": "['replicas']"}]});
        let at = |i: usize| format!("s.x-kubernetes-validations[{i}]");
        assert_eq!(
            fields(&entry_errors(&s, "s")),
            [
                format!(
                    "{}.message: Invalid value: \"  \": message must be non-empty if specified",
                    at(0)
                ),
                format!(
                    "{}.message: Required value: message must be specified if rule contains line breaks",
                    at(1)
                ),
                format!(
                    "{}.message: Invalid value: \"one\\ntwo\": message must not contain line breaks",
                    at(2)
                ),
                format!(
                    "{}.messageExpression: Required value: messageExpression must be non-empty if specified",
                    at(3)
                ),
                format!(
                    "{}.reason: Unsupported value: \"FieldValueWrong\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                    at(3)
                ),
                format!(
                    "{}.fieldPath: Invalid value: \".replica\": fieldPath must be a valid path",
                    at(4)
                ),
                format!(
                    "{}.fieldPath: Invalid value: \"replicas\": fieldPath must be a valid path",
                    at(5)
                ),
            ]
        );
    }

    /// kubebuilder's immutability marker on a field inside a list item: kube refuses it,
    /// since an item of an atomic list has no old self to compare with.
    #[test]
    fn old_self_is_refused_below_a_list_that_does_not_correlate() {
        let s = json!({"type": "string", "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "immutable"}, {"rule": "self != ''"}]});
        let within = "spec.validation.openAPIV3Schema.properties[spec].properties[items]";
        assert_eq!(
            fields(&compile_errors(&s, "i", false, None, Some(within))),
            [format!(
                "i.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
            )]
        );
        assert!(compile_errors(&s, "i", false, None, None).is_empty());
    }
}
