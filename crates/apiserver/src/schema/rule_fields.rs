//! What kube-apiserver's type check of an `x-kubernetes-validations` rule refuses when
//! the CRD is written: a selection of a field the schema does not declare
//! (`undefined field 'namespace'`, the error kubebuilder users meet on their first apply
//! of a `has(self.x)` marker). The `cel` crate has no type checker, so the rule's syntax
//! tree is walked against the schema here; only what is certain is refused: selections
//! from `self`, `oldSelf`, list items and map values reached through objects whose fields
//! are all declared. Anything else (types of operators and functions, values of
//! `x-kubernetes-preserve-unknown-fields` objects) is left to run time, as before.

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use serde_json::Value;

use super::map_values;

/// The root's `metadata`, as kube declares it to rules: only these fields.
const ROOT_METADATA: [&str; 2] = ["name", "generateName"];

/// What a rule's expression is known to be, from the schema.
#[derive(Clone, Copy)]
enum Node<'s> {
    /// A value of this schema node (`true`: the CRD's root).
    Schema(&'s Value, bool),
    /// The root's metadata.
    RootMetadata,
    /// Not known here: nothing under it is checked.
    Unknown,
}

impl<'s> Node<'s> {
    /// The node `field` selects, `None` when the schema declares no such field.
    fn select(self, field: &str) -> Option<Node<'s>> {
        match self {
            Node::Schema(_, true) if field == "metadata" => Some(Node::RootMetadata),
            Node::Schema(_, true) if field == "apiVersion" || field == "kind" => {
                Some(Node::Unknown)
            }
            Node::Schema(s, _) => match (declared_field(s, field), map_values(s)) {
                (Some(declared), _) => declared.map(|child| Node::Schema(child, false)),
                (None, Some(values)) => Some(Node::Schema(values, false)),
                (None, None) => Some(Node::Unknown),
            },
            Node::RootMetadata => ROOT_METADATA.contains(&field).then_some(Node::Unknown),
            Node::Unknown => Some(Node::Unknown),
        }
    }

    /// An item of a list.
    fn item(self) -> Node<'s> {
        match self {
            Node::Schema(s, _) if s.get("type").and_then(Value::as_str) == Some("array") => s
                .get("items")
                .map_or(Node::Unknown, |i| Node::Schema(i, false)),
            _ => Node::Unknown,
        }
    }

    /// An item of a list, or a value of a map.
    fn element(self) -> Node<'s> {
        match (self.item(), self) {
            (Node::Unknown, Node::Schema(s, _)) => {
                map_values(s).map_or(Node::Unknown, |v| Node::Schema(v, false))
            }
            (item, _) => item,
        }
    }
}

/// Of an object schema that declares all of its fields, the schema of `field` (`None`
/// inside: no such field); `None` for any other schema.
fn declared_field<'s>(s: &'s Value, field: &str) -> Option<Option<&'s Value>> {
    let declares_all = s.get("type").and_then(Value::as_str) == Some("object")
        && s.get("additionalProperties").is_none()
        && s.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true))
        && s.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true));
    match s.get("properties") {
        _ if !declares_all => None,
        Some(Value::Object(fields)) => Some(fields.get(&super::cel_names::unescape(field))),
        None => Some(None),
        Some(_) => None,
    }
}

/// A selection the schema does not declare: the expression's id and the field.
pub(super) struct Undefined {
    pub(super) id: u64,
    pub(super) field: String,
}

/// The selections of `expr`, a rule of schema node `s` (`root`: the CRD's root), of
/// fields the schema does not declare.
pub(super) fn undefined_fields(expr: &IdedExpr, s: &Value, root: bool) -> Vec<Undefined> {
    let mut walk = Walk {
        this: Node::Schema(s, root),
        scope: Vec::new(),
        found: Vec::new(),
    };
    walk.expr(expr);
    walk.found
}

struct Walk<'s> {
    /// What `self` and `oldSelf` are.
    this: Node<'s>,
    /// Comprehension variables in scope, innermost last.
    scope: Vec<(String, Node<'s>)>,
    found: Vec<Undefined>,
}

impl<'s> Walk<'s> {
    /// What `expr` is known to be.
    fn node(&self, expr: &IdedExpr) -> Node<'s> {
        match &expr.expr {
            Expr::Ident(name) => match self.scope.iter().rev().find(|(var, _)| var == name) {
                Some((_, node)) => *node,
                None if name == "self" || name == super::rules::OLD_SELF => self.this,
                None => Node::Unknown,
            },
            Expr::Select(select) => self
                .node(&select.operand)
                .select(&select.field)
                .unwrap_or(Node::Unknown),
            Expr::Call(call) if call.func_name == "_[_]" => match call.args.first() {
                Some(of) => self.node(of).element(),
                None => Node::Unknown,
            },
            _ => Node::Unknown,
        }
    }

    fn expr(&mut self, expr: &IdedExpr) {
        match &expr.expr {
            Expr::Select(select) => {
                if self.node(&select.operand).select(&select.field).is_none() {
                    self.found.push(Undefined {
                        id: expr.id,
                        field: select.field.clone(),
                    });
                }
                self.expr(&select.operand);
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.expr(target);
                }
                for arg in &call.args {
                    self.expr(arg);
                }
            }
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range);
                self.expr(&c.accu_init);
                // Over a list its items; over a map its keys, which are strings.
                let item = self.node(&c.iter_range).item();
                let bound = self.scope.len();
                match &c.iter_var2 {
                    // Two variables: the index (or key), then the item (or value).
                    Some(second) => {
                        self.scope.push((c.iter_var.clone(), Node::Unknown));
                        self.scope.push((second.clone(), item));
                    }
                    None => self.scope.push((c.iter_var.clone(), item)),
                }
                self.scope.push((c.accu_var.clone(), Node::Unknown));
                for part in [&c.loop_cond, &c.loop_step, &c.result] {
                    self.expr(part);
                }
                self.scope.truncate(bound);
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.expr(element);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.expr(&entry.key);
                        self.expr(&entry.value);
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.expr(&field.value);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::rules::compile_errors;

    /// The messages of the rule errors of `rule` on schema node `s`.
    fn errors(s: serde_json::Value, rule: &str, root: bool) -> Vec<String> {
        let mut s = s;
        s["x-kubernetes-validations"] = json!([{ "rule": rule }]);
        compile_errors(&s, "s", root, None, None)
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    /// Two reports from users' first applies, with kube's line, column and caret.
    #[test]
    fn undefined_fields_are_refused_as_kube_refuses_them() {
        let auth = json!({"type": "object", "properties": {"type": {"type": "string"}}});
        let rule = "self.type != 'secret' && self.type != 'configmap' || has(self.namespace)";
        let found = errors(auth, rule, false);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].ends_with(&format!(
                "compilation failed: ERROR: <input>:1:57: undefined field 'namespace'\n | {rule}\n | {}^",
                ".".repeat(56)
            )),
            "{}",
            found[0]
        );

        let templates = json!({"type": "object", "properties": {"templates": {
            "type": "array", "items": {"type": "object", "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}});
        let rule =
            "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)";
        let found = errors(templates, rule, false);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("ERROR: <input>:1:27: undefined field 'namespace'"),
            "{}",
            found[0]
        );
        assert!(
            found[0].contains("ERROR: <input>:1:68: undefined field 'namespace'"),
            "{}",
            found[0]
        );
    }

    /// grafana/grafana-operator#2552, as kube 1.32 printed it: the entry as a Go struct,
    /// then each undefined field with its caret.
    #[test]
    fn the_whole_refusal_reads_as_kube_prints_it() {
        let metadata = json!({"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
            "x-kubernetes-validations": [{
                "rule": "(!(has(oldSelf.namespace) && !has(self.namespace)))",
                "message": "namespace is immutable"}]});
        let found = compile_errors(&metadata, "m", false, None, None);
        let rule = "(!(has(oldSelf.namespace) && !has(self.namespace)))";
        assert_eq!(
            found[0].to_string(),
            format!(
                "m.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"{rule}\", Message:\"namespace is immutable\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}}: compilation failed: ERROR: <input>:1:7: undefined field 'namespace'\n | {rule}\n | ......^\nERROR: <input>:1:34: undefined field 'namespace'\n | {rule}\n | .................................^"
            )
        );
    }

    #[test]
    fn only_what_the_schema_declares_for_certain_is_checked() {
        let root = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ports": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"port": {"type": "integer"}}}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        for fine in [
            "self.metadata.name.startsWith('a') && has(self.metadata.generateName)",
            "self.apiVersion != '' && self.kind != ''",
            "self.spec.replicas >= 0 && self.spec.labels.anything == 'x'",
            "self.spec.ports.all(k, self.spec.ports[k].port > 0)",
            "has(self.spec.extra.whatever.deeper)",
            "[1, 2].all(x, x > 0) && {'a': 1}.a == 1",
        ] {
            assert_eq!(
                errors(root.clone(), fine, true),
                Vec::<String>::new(),
                "{fine}"
            );
        }
        for (wrong, field) in [
            ("self.metadata.labels.size() > 0", "labels"),
            ("self.spec.replica > 0", "replica"),
            ("self.spec.ports['http'].prot > 0", "prot"),
            ("self.sepc.replicas > 0", "sepc"),
        ] {
            let found = errors(root.clone(), wrong, true);
            assert_eq!(found.len(), 1, "{wrong}: {found:?}");
            assert!(
                found[0].contains(&format!("undefined field '{field}'")),
                "{}",
                found[0]
            );
        }
        // Below the root, `metadata` is whatever the schema declares.
        let embedded = json!({"type": "object", "properties": {"metadata": {"type": "object"}}});
        assert_eq!(
            errors(
                embedded,
                "self.metadata.labels == self.metadata.labels",
                false
            )
            .len(),
            1
        );
    }
}
