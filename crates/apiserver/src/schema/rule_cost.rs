//! kube-apiserver's static cost estimate of `x-kubernetes-validations` rules, checked
//! when a CRD is written: a rule whose worst case, times the number of places it can run
//! in one object, exceeds 10^7 keeps the CRD out (`estimated rule cost exceeds budget by
//! factor of 3.1x (try simplifying the rule, or adding maxItems, maxProperties, and
//! maxLength ...)`), and so does a schema whose rules together exceed 10^8. It is the
//! error operator authors meet when a rule walks a list or compares a string that has no
//! `maxItems` or `maxLength`.
//!
//! The estimate is cel-go's (v0.22, kube 1.32's): each node of the rule's syntax tree
//! costs what cel-go's checker charges for it, and what it reads is as large as the schema
//! allows, declared to CEL as kube declares it (`DeclType`): a string `maxLength` × 4
//! bytes, a list `maxItems`, a map `maxProperties`, else as many as a 3 MiB request can
//! hold. The `cel` crate has no type checker, so the few types the estimate depends on
//! (which overload of `+`, `<`, `in` applies; whether a selection reads a map or an
//! object) are inferred here from the schema, the literals and the functions' results.
//!
//! Must not know: how rules run (`rules.rs`), which fields exist (`rule_fields.rs`).

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

use super::{FieldError, FieldErrorReason, flag, map_values, string_items};

/// kube's `StaticEstimatedCostLimit`: the most one rule (times its cardinality) or one
/// `messageExpression` may cost.
pub(super) const RULE_COST_LIMIT: u64 = 10_000_000;
/// kube's `StaticEstimatedCRDCostLimit`: the most the rules of one schema may cost in all.
pub(super) const SCHEMA_COST_LIMIT: u64 = 100_000_000;
/// kube's largest request body, which bounds whatever declares no bound of its own.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// The longest string a request can carry: its bytes but the quotes.
const UNBOUNDED_STRING: u64 = MAX_REQUEST_BYTES - 2;
/// cel-go's unknown size.
const UNKNOWN: u64 = u64::MAX;

/// The worst-case cost of `expr`, a rule or `messageExpression` of schema node `s`
/// (`root`: the CRD's root), once: cel-go's `EstimateCost(..).Max`.
pub(super) fn max_cost(expr: &IdedExpr, s: &Value, root: bool) -> u64 {
    Estimate::of_rule_at(s, root).expr(expr).cost
}

/// Whether `expr`, a rule of schema node `s` (`root`: the CRD's root), certainly
/// evaluates to something other than a bool: an integer field, a string, a list built by
/// `map` (kube's "cel expression must evaluate to a bool").
pub(super) fn certainly_not_bool(expr: &IdedExpr, s: &Value, root: bool) -> bool {
    not_bool(expr, s, root).is_some()
}

/// cel-go's name of the type `expr` certainly evaluates to, when that is not a bool
/// (lists and maps named with their elements as `dyn`).
pub(super) fn not_bool(expr: &IdedExpr, s: &Value, root: bool) -> Option<&'static str> {
    Some(match Estimate::of_rule_at(s, root).expr(expr).ty.kind() {
        Kind::Bool | Kind::Dyn => return None,
        Kind::String => "string",
        Kind::Bytes => "bytes",
        Kind::Int => "int",
        Kind::Uint => "uint",
        Kind::Double => "double",
        Kind::Null => "null_type",
        Kind::Duration => "google.protobuf.Duration",
        Kind::Timestamp => "google.protobuf.Timestamp",
        Kind::List => "list(dyn)",
        Kind::Map | Kind::Object => "map(string, dyn)",
    })
}

/// kube's `getCostErrorMessage`.
pub(super) fn over_budget(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// How many times the rules of a schema node can run for one object (kube's
/// `MaxCardinality`): the product of the `maxItems` and `maxProperties` of the lists and
/// maps above it, unknown (`None`) once one of them declares no bound.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cardinality(Option<u64>);

impl Cardinality {
    /// The schema's root, which runs once.
    pub(super) const ROOT: Cardinality = Cardinality(Some(1));

    /// Of a property, the items or the map values of `parent`.
    pub(super) fn below(self, parent: &Value) -> Cardinality {
        let factor = match parent.get("type").and_then(Value::as_str) {
            Some("object") if parent.get("additionalProperties").is_some() => {
                bound(parent, "maxProperties")
            }
            Some("array") => bound(parent, "maxItems"),
            _ => Some(1),
        };
        Cardinality(self.0.zip(factor).map(|(a, b)| a.saturating_mul(b)))
    }

    /// The cost of a rule of schema node `s` (`root`: the CRD's root) that costs `cost`
    /// once. Where the cardinality is unknown kube assumes as many of `s` as a request
    /// can hold.
    pub(super) fn times(self, cost: u64, s: &Value, root: bool) -> u64 {
        let count = self.0.unwrap_or_else(|| {
            let min_size = Decl::of(s, root || flag(s, "x-kubernetes-embedded-resource"))
                .map_or(0, Decl::min_size);
            MAX_REQUEST_BYTES / (min_size + 1)
        });
        cost.saturating_mul(count)
    }
}

/// The costs of the rules of one schema, for kube's bound on their total.
#[derive(Default)]
pub(super) struct SchemaCost {
    total: u64,
    /// The costliest rules of at least 1 % of the bound, costliest first: at most four.
    most_expensive: Vec<(String, u64)>,
}

impl SchemaCost {
    /// A rule (or `messageExpression`) at `path` that costs `cost`.
    pub(super) fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost >= SCHEMA_COST_LIMIT / 100 {
            self.most_expensive.push((path, cost));
            self.most_expensive
                .sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
            self.most_expensive.truncate(4);
        }
    }

    /// kube's errors for a schema at `schema_path` whose rules cost too much in all.
    pub(super) fn errors(self, schema_path: &str) -> Vec<FieldError> {
        if self.total <= SCHEMA_COST_LIMIT {
            return Vec::new();
        }
        let forbidden = |path: String, detail: String| {
            FieldError::new(
                path,
                FieldErrorReason::Forbidden,
                format!("Forbidden: {detail}"),
            )
        };
        let mut errors: Vec<FieldError> = self
            .most_expensive
            .into_iter()
            .map(|(path, _)| {
                forbidden(
                    path,
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema".into(),
                )
            })
            .collect();
        errors.push(forbidden(
            schema_path.to_string(),
            over_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                self.total,
                SCHEMA_COST_LIMIT,
            ),
        ));
        errors
    }
}

/// A non-negative integer bound of schema node `s` (a negative one counts as 0).
fn bound(s: &Value, key: &str) -> Option<u64> {
    s.get(key)
        .and_then(Value::as_i64)
        .map(|n| n.max(0).unsigned_abs())
}

thread_local! {
    /// Objects' minimum sizes, kept for one CRD's check as kube keeps them in its
    /// declarations: a rule's estimate asks for them again and again, and an object's
    /// walks its required properties all the way down.
    static MIN_SIZES: SizeMemo = SizeMemo::default();
}

/// The minimum sizes of a schema's objects while a [`SizeScope`] is open (keyed by the
/// node's address, which no one moves while the schema is borrowed for the check).
#[derive(Default)]
struct SizeMemo {
    open: std::cell::Cell<bool>,
    sizes: std::cell::RefCell<std::collections::HashMap<(usize, bool), u64>>,
}

impl SizeMemo {
    fn remembered(&self, key: (usize, bool)) -> Option<u64> {
        self.sizes.borrow().get(&key).copied()
    }

    fn remember(&self, key: (usize, bool), size: u64) {
        if self.open.get() {
            self.sizes.borrow_mut().insert(key, size);
        }
    }
}

/// While it lives, objects' minimum sizes are computed once: open one per schema checked.
pub(super) struct SizeScope(());

impl SizeScope {
    pub(super) fn open() -> SizeScope {
        MIN_SIZES.with(|memo| {
            memo.sizes.borrow_mut().clear();
            memo.open.set(true);
        });
        SizeScope(())
    }
}

impl Drop for SizeScope {
    fn drop(&mut self) {
        MIN_SIZES.with(|memo| {
            memo.open.set(false);
            memo.sizes.borrow_mut().clear();
        });
    }
}

/// The kinds of value the estimate tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    String,
    Bytes,
    Int,
    Uint,
    Double,
    Bool,
    Null,
    Duration,
    Timestamp,
    List,
    Map,
    Object,
    /// Any kind (an int-or-string, an unknown function's result): every overload applies.
    Dyn,
}

impl Kind {
    /// cel-go's `isScalar`: a value of size 1 when nothing else says.
    fn scalar(self) -> bool {
        matches!(
            self,
            Kind::Bool | Kind::Double | Kind::Duration | Kind::Int | Kind::Timestamp | Kind::Uint
        )
    }

    /// Strings and bytes: compared and concatenated by size.
    fn sized(self) -> bool {
        matches!(self, Kind::String | Kind::Bytes)
    }

    /// What the arithmetic overloads of `+` take.
    fn numeric(self) -> bool {
        matches!(
            self,
            Kind::Int | Kind::Uint | Kind::Double | Kind::Duration | Kind::Timestamp | Kind::Dyn
        )
    }

    /// Whether a value of this kind can be a `kind`.
    fn can_be(self, kind: Kind) -> bool {
        self == kind || self == Kind::Dyn
    }
}

/// A schema node as kube declares it to CEL (its `DeclType`).
#[derive(Clone, Copy, Debug)]
enum Decl<'s> {
    /// A node of the schema; `true` for a resource's root (the CRD's, or an embedded one).
    Schema(&'s Value, bool),
    /// A resource root's `metadata`: only `name` and `generateName`.
    RootMetadata,
    /// A resource root's `kind` and `apiVersion`, and its metadata's two strings.
    PlainString,
    /// A map's keys: kube's shared string type, of size 0.
    MapKey,
}

impl<'s> Decl<'s> {
    /// Schema node `s` as declared to rules; `None` for what kube does not declare.
    fn of(s: &'s Value, resource_root: bool) -> Option<Decl<'s>> {
        let decl = Decl::Schema(s, resource_root);
        let declared = match decl.kind() {
            Some(Kind::List | Kind::Map) => decl.element().is_some(),
            kind => kind.is_some(),
        };
        declared.then_some(decl)
    }

    /// A child schema node as declared to rules.
    fn child(s: &'s Value) -> Option<Decl<'s>> {
        Decl::of(s, flag(s, "x-kubernetes-embedded-resource"))
    }

    fn kind(self) -> Option<Kind> {
        let Decl::Schema(s, _) = self else {
            return Some(match self {
                Decl::RootMetadata => Kind::Object,
                _ => Kind::String,
            });
        };
        if flag(s, "x-kubernetes-int-or-string") {
            return Some(Kind::Dyn);
        }
        Some(match s.get("type").and_then(Value::as_str)? {
            "array" => Kind::List,
            "object" if map_values(s).is_some() => Kind::Map,
            "object" => Kind::Object,
            "string" => match s.get("format").and_then(Value::as_str) {
                Some("byte") => Kind::Bytes,
                Some("duration") => Kind::Duration,
                Some("date" | "date-time") => Kind::Timestamp,
                _ => Kind::String,
            },
            "boolean" => Kind::Bool,
            "number" => Kind::Double,
            "integer" => Kind::Int,
            _ => return None,
        })
    }

    /// kube's `MaxElements`: the most bytes of a string, items of a list, entries of a map.
    fn max_elements(self) -> u64 {
        let Decl::Schema(s, _) = self else {
            return match self {
                Decl::PlainString => UNBOUNDED_STRING,
                _ => 0,
            };
        };
        match self.kind() {
            Some(Kind::Dyn) => UNBOUNDED_STRING,
            Some(Kind::String) => match bound(s, "maxLength") {
                // maxLength counts characters, of up to 4 bytes each.
                Some(n) => n.saturating_mul(4),
                None => longest_enum_value(s).unwrap_or(UNBOUNDED_STRING),
            },
            Some(Kind::Bytes) => bound(s, "maxLength").unwrap_or(UNBOUNDED_STRING),
            Some(Kind::Duration) => 32,
            Some(Kind::Timestamp) if is_date(s) => 12,
            Some(Kind::Timestamp) => 32,
            Some(Kind::List) => bound(s, "maxItems").unwrap_or_else(|| {
                (MAX_REQUEST_BYTES - 2) / (self.element().map_or(0, Decl::min_size) + 1)
            }),
            Some(Kind::Map) => bound(s, "maxProperties").unwrap_or_else(|| {
                (MAX_REQUEST_BYTES - 2) / (self.element().map_or(0, Decl::min_size) + 6)
            }),
            _ => 0,
        }
    }

    /// kube's `MinSerializedSize`: the bytes of the smallest JSON value of this node.
    fn min_size(self) -> u64 {
        let Decl::Schema(s, _) = self else {
            return 2;
        };
        match self.kind() {
            Some(Kind::Dyn | Kind::Int | Kind::Double) => 1,
            Some(Kind::Duration) => 3,
            Some(Kind::Timestamp) if is_date(s) => 12,
            Some(Kind::Timestamp) => 21,
            Some(Kind::Bool) => 4,
            Some(Kind::Object) => MIN_SIZES.with(|memo| {
                let key = (
                    s as *const Value as usize,
                    matches!(self, Decl::Schema(_, true)),
                );
                if let Some(known) = memo.remembered(key) {
                    return known;
                }
                let size = self.object_min_size(s);
                memo.remember(key, size);
                size
            }),
            _ => 2,
        }
    }

    /// An object's `MinSerializedSize`: `{}` and each required property without a default
    /// (each once, however often `required` names it), as `"name":` and its own minimum.
    fn object_min_size(self, s: &Value) -> u64 {
        let required: std::collections::HashSet<&str> = string_items(s, "required").collect();
        let properties = s.get("properties").and_then(Value::as_object);
        let counted = properties
            .into_iter()
            .flatten()
            .filter_map(|(name, property)| {
                if !required.contains(name.as_str()) || property.get("default").is_some() {
                    return None;
                }
                let field = self.field(name)?;
                Some(
                    (name.len() as u64)
                        .saturating_add(field.min_size())
                        .saturating_add(4),
                )
            });
        counted.fold(2, u64::saturating_add)
    }

    /// The declaration of field `name` of an object.
    fn field(self, name: &str) -> Option<Decl<'s>> {
        match self {
            Decl::Schema(_, true) if name == "kind" || name == "apiVersion" => {
                Some(Decl::PlainString)
            }
            Decl::Schema(_, true) if name == "metadata" => Some(Decl::RootMetadata),
            Decl::Schema(s, _) if self.kind() == Some(Kind::Object) => {
                let property = super::cel_names::unescape(name);
                Decl::child(s.get("properties")?.get(&property)?)
            }
            Decl::RootMetadata if name == "name" || name == "generateName" => {
                Some(Decl::PlainString)
            }
            _ => None,
        }
    }

    /// The declaration of a list's items or a map's values.
    fn element(self) -> Option<Decl<'s>> {
        let Decl::Schema(s, _) = self else {
            return None;
        };
        match s.get("type").and_then(Value::as_str) {
            Some("array") => Decl::child(s.get("items")?),
            Some("object") => Decl::child(map_values(s)?),
            _ => None,
        }
    }

    /// What iterating over this list or map binds: its items, or its keys.
    fn iterated(self) -> Option<Decl<'s>> {
        match self.kind() {
            Some(Kind::Map) => Some(Decl::MapKey),
            _ => self.element(),
        }
    }
}

fn is_date(s: &Value) -> bool {
    s.get("format").and_then(Value::as_str) == Some("date")
}

/// The bytes of the longest string value of a string schema's `enum`.
fn longest_enum_value(s: &Value) -> Option<u64> {
    s.get("enum")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(|v| v.len() as u64)
        .max()
}

/// What the estimate knows of an expression's type.
#[derive(Clone, Debug)]
enum Ty<'s> {
    Declared(Decl<'s>),
    Of(Kind),
    ListOf(Box<Ty<'s>>),
}

const DYN: Ty<'static> = Ty::Of(Kind::Dyn);

impl<'s> Ty<'s> {
    fn declared(decl: Option<Decl<'s>>) -> Ty<'s> {
        decl.map_or(DYN, Ty::Declared)
    }

    fn kind(&self) -> Kind {
        match self {
            Ty::Declared(decl) => decl.kind().unwrap_or(Kind::Dyn),
            Ty::Of(kind) => *kind,
            Ty::ListOf(_) => Kind::List,
        }
    }

    /// The type of field `name` of a value of this type.
    fn field(&self, name: &str) -> Ty<'s> {
        match self {
            Ty::Declared(decl) if self.kind() == Kind::Map => Ty::declared(decl.element()),
            Ty::Declared(decl) => Ty::declared(decl.field(name)),
            _ => DYN,
        }
    }

    /// The type of an item of a list, or a value of a map.
    fn element(&self) -> Ty<'s> {
        match self {
            Ty::Declared(decl) => Ty::declared(decl.element()),
            Ty::ListOf(item) => (**item).clone(),
            Ty::Of(_) => DYN,
        }
    }

    /// The type a comprehension over a value of this type binds.
    fn iterated(&self) -> Ty<'s> {
        match self.kind() {
            Kind::Map => Ty::Of(Kind::String),
            _ => self.element(),
        }
    }
}

/// The least and the most of a size (cel-go's `SizeEstimate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Size {
    min: u64,
    max: u64,
}

impl Size {
    const UNKNOWN: Size = Size {
        min: 0,
        max: UNKNOWN,
    };

    fn exactly(n: u64) -> Size {
        Size { min: n, max: n }
    }

    fn add(self, other: Size) -> Size {
        Size {
            min: self.min.saturating_add(other.min),
            max: self.max.saturating_add(other.max),
        }
    }

    fn times(self, other: Size) -> Size {
        Size {
            min: self.min.saturating_mul(other.min),
            max: self.max.saturating_mul(other.max),
        }
    }

    fn union(self, other: Size) -> Size {
        Size {
            min: self.min.min(other.min),
            max: self.max.max(other.max),
        }
    }

    /// cel-go's `MultiplyByCostFactor`: rounded up, as a float.
    fn factor(self, factor: f64) -> Size {
        let scale = |n: u64| {
            let scaled = (n as f64 * factor).ceil();
            if scaled >= u64::MAX as f64 {
                UNKNOWN
            } else {
                scaled as u64
            }
        };
        Size {
            min: scale(self.min),
            max: scale(self.max),
        }
    }
}

/// Where an expression's value is in the schema, as cel-go's estimator tracks it: the
/// path from a variable, which kube's size estimator walks from the rule's own node.
#[derive(Clone, Copy, Debug)]
enum Place<'s> {
    /// The expression is no path (a literal, most calls' results).
    Nowhere,
    /// A path: to this node, or (`None`) off the declared schema.
    At(Option<Decl<'s>>),
}

/// An estimated expression.
struct Est<'s> {
    /// The most it costs.
    cost: u64,
    /// Its size where cel-go computes one (literals, some calls' results, comprehensions).
    size: Option<Size>,
    place: Place<'s>,
    ty: Ty<'s>,
}

impl<'s> Est<'s> {
    fn new(cost: u64, ty: Ty<'s>) -> Est<'s> {
        Est {
            cost,
            size: None,
            place: Place::Nowhere,
            ty,
        }
    }

    /// cel-go's `sizeEstimate`: computed, else the schema's, else 1 for a scalar.
    fn size(&self) -> Size {
        match (self.size, self.place) {
            (Some(size), _) => size,
            (None, Place::At(Some(decl))) => Size {
                min: 0,
                max: decl.max_elements(),
            },
            _ if self.ty.kind().scalar() => Size::exactly(1),
            _ => Size::UNKNOWN,
        }
    }
}

/// A comprehension's variable.
struct Var<'s> {
    place: Place<'s>,
    ty: Ty<'s>,
}

struct Estimate<'e, 's> {
    /// What `self` and `oldSelf` are.
    this: Option<Decl<'s>>,
    /// Comprehension variables in scope, innermost last.
    scope: Vec<(&'e str, Var<'s>)>,
}

impl<'e, 's> Estimate<'e, 's> {
    /// The estimate of a rule of schema node `s` (`root`: the CRD's root).
    fn of_rule_at(s: &'s Value, root: bool) -> Estimate<'e, 's> {
        Estimate {
            this: Decl::of(s, root || flag(s, "x-kubernetes-embedded-resource")),
            scope: Vec::new(),
        }
    }

    fn expr(&mut self, expr: &'e IdedExpr) -> Est<'s> {
        match &expr.expr {
            Expr::Literal(literal) => literal_est(literal),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand);
                if select.test {
                    // kube's CEL charges nothing for a presence test itself.
                    return Est::new(operand.cost, Ty::Of(Kind::Bool));
                }
                let selects = matches!(operand.ty.kind(), Kind::Map | Kind::Object);
                Est {
                    cost: operand.cost.saturating_add(u64::from(selects)),
                    size: None,
                    place: match operand.place {
                        Place::At(Some(decl)) => Place::At(decl.field(&select.field)),
                        place => place,
                    },
                    ty: operand.ty.field(&select.field),
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::List(list) => {
                let items: Vec<Est> = list.elements.iter().map(|e| self.expr(e)).collect();
                let item_ty = items.first().map_or(DYN, |first| first.ty.clone());
                Est {
                    size: Some(Size::exactly(items.len() as u64)),
                    ..Est::new(
                        10u64.saturating_add(sum(&items)),
                        Ty::ListOf(Box::new(item_ty)),
                    )
                }
            }
            Expr::Map(map) => {
                let mut cost: u64 = 30;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        cost = cost
                            .saturating_add(self.expr(&entry.key).cost)
                            .saturating_add(self.expr(&entry.value).cost);
                    }
                }
                Est {
                    size: Some(Size::exactly(map.entries.len() as u64)),
                    ..Est::new(cost, Ty::Of(Kind::Map))
                }
            }
            Expr::Struct(s) => {
                let mut cost: u64 = 40;
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        cost = cost.saturating_add(self.expr(&field.value).cost);
                    }
                }
                Est::new(cost, Ty::Of(Kind::Object))
            }
            _ => Est::new(0, DYN),
        }
    }

    fn ident(&self, name: &str) -> Est<'s> {
        match self.scope.iter().rev().find(|(var, _)| *var == name) {
            Some((_, var)) => Est {
                place: var.place,
                ..Est::new(1, var.ty.clone())
            },
            // kube's size estimator drops a path's variable: any of them is the rule's node.
            None => Est {
                place: Place::At(self.this),
                ..Est::new(
                    1,
                    match name {
                        "self" | super::rules::OLD_SELF => Ty::declared(self.this),
                        _ => DYN,
                    },
                )
            },
        }
    }

    fn comprehension(&mut self, c: &'e ComprehensionExpr) -> Est<'s> {
        let range = self.expr(&c.iter_range);
        let init = self.expr(&c.accu_init);
        let count = range.size();
        let iterates = matches!(range.ty.kind(), Kind::List | Kind::Map);
        let item = Var {
            place: match range.place {
                Place::At(Some(decl)) if iterates => Place::At(decl.iterated()),
                Place::At(None) if iterates => Place::At(None),
                // cel-go's path of such an item is `@items` alone, and kube's estimator
                // drops a path's first element: the rule's own node.
                Place::Nowhere if iterates => Place::At(self.this),
                _ => Place::Nowhere,
            },
            ty: range.ty.iterated(),
        };
        let bound = self.scope.len();
        match &c.iter_var2 {
            Some(second) => {
                let index = Var {
                    place: Place::Nowhere,
                    ty: Ty::Of(Kind::Dyn),
                };
                self.scope.push((c.iter_var.as_str(), index));
                self.scope.push((second.as_str(), item));
            }
            None => self.scope.push((c.iter_var.as_str(), item)),
        }
        let accumulator = Var {
            place: Place::Nowhere,
            ty: init.ty.clone(),
        };
        self.scope.push((c.accu_var.as_str(), accumulator));
        let condition = self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        if let Some((_, accumulator)) = self.scope.last_mut()
            && step.ty.kind() == accumulator.ty.kind()
        {
            accumulator.ty = step.ty.clone();
        }
        let result = self.expr(&c.result);
        self.scope.truncate(bound);
        let per_item = step.cost.saturating_add(condition.cost);
        Est {
            size: Some(count),
            ..Est::new(
                range
                    .cost
                    .saturating_add(init.cost)
                    .saturating_add(result.cost)
                    .saturating_add(count.max.saturating_mul(per_item)),
                result.ty,
            )
        }
    }

    fn call(&mut self, call: &'e CallExpr) -> Est<'s> {
        let target = call.target.as_deref().map(|t| self.expr(t));
        let args: Vec<Est<'s>> = call.args.iter().map(|a| self.expr(a)).collect();
        let mut out = match (call.func_name.as_str(), args.as_slice()) {
            // The logical operators charge only their operands.
            ("_&&_" | "_||_", [l, r]) => {
                Est::new(l.cost.saturating_add(r.cost), Ty::Of(Kind::Bool))
            }
            ("_?_:_", [condition, a, b]) => Est {
                size: Some(a.size().union(b.size())),
                ..Est::new(
                    condition.cost.saturating_add(a.cost.max(b.cost)),
                    a.ty.clone(),
                )
            },
            (name, _) => {
                let mut out = function(name, target.as_ref(), &args, &call.args);
                out.cost = out.cost.saturating_add(sum(&args));
                if let ("_[_]", Some(of)) = (name, args.first()) {
                    out.place = element_place(of.place);
                }
                out
            }
        };
        out.cost = out
            .cost
            .saturating_add(target.as_ref().map_or(0, |t| t.cost));
        out
    }
}

fn sum(estimates: &[Est<'_>]) -> u64 {
    estimates
        .iter()
        .fold(0, |total, e| total.saturating_add(e.cost))
}

fn literal_est(literal: &LiteralValue) -> Est<'static> {
    let (size, kind) = match literal {
        LiteralValue::String(s) => (s.chars().count() as u64, Kind::String),
        LiteralValue::Bytes(b) => (b.len() as u64, Kind::Bytes),
        LiteralValue::Boolean(_) => (1, Kind::Bool),
        LiteralValue::Int(_) => (1, Kind::Int),
        LiteralValue::UInt(_) => (1, Kind::Uint),
        LiteralValue::Double(_) => (1, Kind::Double),
        LiteralValue::Null => (1, Kind::Null),
    };
    Est {
        size: Some(Size::exactly(size)),
        ..Est::new(0, Ty::Of(kind))
    }
}

/// What function `name` itself costs (its arguments and target are added by the caller),
/// its result's type and, where cel-go computes one, its size: kube's library estimates
/// first, then cel-go's, else 1.
fn function<'s>(
    name: &str,
    target: Option<&Est<'s>>,
    args: &[Est<'s>],
    arg_exprs: &[IdedExpr],
) -> Est<'s> {
    let string = Ty::Of(Kind::String);
    let boolean = Ty::Of(Kind::Bool);
    match (name, target, args) {
        // kube's library (`library.CostEstimator`), matched on the name.
        ("indexOf" | "lastIndexOf", Some(list), _) if list.ty.kind() == Kind::List => {
            Est::new(list_walk(list), Ty::Of(Kind::Int))
        }
        ("indexOf" | "lastIndexOf", Some(s), _) => {
            Est::new(s.size().factor(0.1).max, Ty::Of(Kind::Int))
        }
        ("isSorted" | "sum" | "max" | "min", Some(list), _) => {
            let ty = if name == "isSorted" {
                boolean
            } else {
                list.ty.element()
            };
            Est::new(list_walk(list), ty)
        }
        ("lowerAscii" | "upperAscii" | "substring" | "trim", Some(s), _) => Est {
            size: Some(s.size()),
            ..Est::new(s.size().factor(0.1).max, string)
        },
        ("replace", Some(s), [old, new, ..]) => Est {
            size: Some(replaced_size(s.size(), old.size(), new.size())),
            ..Est::new(s.size().factor(0.2).max, string)
        },
        ("split", Some(s), _) => {
            let limit = match arg_exprs.get(1).map(|e| &e.expr) {
                Some(Expr::Literal(LiteralValue::Int(n))) => Some(**n as u64),
                _ => None,
            };
            Est {
                size: Some(Size {
                    min: 0,
                    max: limit.unwrap_or(s.size().max),
                }),
                ..Est::new(s.size().factor(0.2).max, Ty::ListOf(Box::new(string)))
            }
        }
        ("join", Some(list), _) => {
            let count = list.size();
            let mut joined = count.times(item_of(list).size());
            if let Some(separator) = args.first() {
                let separators = Size {
                    min: count.min.saturating_sub(1),
                    max: count.max.saturating_sub(1),
                };
                joined = joined.add(separator.size().times(separators));
            }
            Est {
                size: Some(joined),
                ..Est::new(joined.factor(0.1).max, string)
            }
        }
        ("find" | "findAll", Some(s), [pattern, ..]) => {
            let ty = if name == "find" {
                string
            } else {
                Ty::ListOf(Box::new(string))
            };
            Est {
                size: Some(Size {
                    min: 0,
                    max: s.size().max,
                }),
                ..Est::new(regex_cost(s, pattern), ty)
            }
        }
        // cel-go's own estimates.
        ("format", Some(s), _) => Est::new(s.size().factor(0.1).max, string),
        ("bytes", None, [s]) if s.ty.kind().can_be(Kind::String) => Est {
            size: Some(Size {
                min: s.size().min,
                max: s.size().max.saturating_mul(4),
            }),
            ..Est::new(converted(s, Kind::String), Ty::Of(Kind::Bytes))
        },
        ("string", None, [b]) if b.ty.kind().can_be(Kind::Bytes) => Est {
            size: Some(Size {
                min: b.size().min / 4,
                max: b.size().max,
            }),
            ..Est::new(converted(b, Kind::Bytes), string)
        },
        ("startsWith" | "endsWith", Some(_), [affix]) => {
            Est::new(affix.size().factor(0.1).max, boolean)
        }
        ("@in", None, [_, collection]) => {
            let cost = match collection.ty.kind() {
                Kind::List => collection.size().max,
                Kind::Dyn => collection.size().max.max(1),
                _ => 1,
            };
            Est::new(cost, boolean)
        }
        ("matches", Some(s), [pattern]) => Est::new(regex_cost(s, pattern), boolean),
        ("contains", Some(s), [part]) if s.ty.kind().can_be(Kind::String) => Est::new(
            s.size().factor(0.1).times(part.size().factor(0.1)).max,
            boolean,
        ),
        ("_+_", None, [l, r]) => add(l, r),
        ("_<_" | "_<=_" | "_>_" | "_>=_", None, [l, r]) => {
            let (lk, rk) = (l.ty.kind(), r.ty.kind());
            let by_size = [Kind::String, Kind::Bytes]
                .into_iter()
                .any(|kind| lk.can_be(kind) && rk.can_be(kind));
            let by_value = !lk.sized() && !rk.sized();
            let cost = if by_size { compared(l, r) } else { 0 };
            Est::new(cost.max(u64::from(by_value)), boolean)
        }
        ("_==_" | "_!=_", None, [l, r]) => Est::new(compared(l, r), boolean),
        ("_[_]", None, [of, _]) => Est::new(1, of.ty.element()),
        ("size" | "int" | "getDayOfMonth" | "getMonth" | "getFullYear", _, _) => {
            Est::new(1, Ty::Of(Kind::Int))
        }
        ("!_" | "@not_strictly_false", None, _) => Est::new(1, boolean),
        ("-_" | "_-_" | "_*_" | "_/_" | "_%_", None, [first, ..]) => Est::new(1, first.ty.clone()),
        ("string", None, _) => Est::new(1, string),
        ("double", None, _) => Est::new(1, Ty::Of(Kind::Double)),
        ("uint", None, _) => Est::new(1, Ty::Of(Kind::Uint)),
        ("duration", None, _) => Est::new(1, Ty::Of(Kind::Duration)),
        ("timestamp", None, _) => Est::new(1, Ty::Of(Kind::Timestamp)),
        _ => Est::new(1, DYN),
    }
}

/// The cost of `==` and of ordering strings or bytes: a tenth of the shorter side's size.
fn compared(l: &Est<'_>, r: &Est<'_>) -> u64 {
    let shorter = l.size().max.min(r.size().max);
    Size {
        min: u64::from(shorter > 0),
        max: shorter,
    }
    .factor(0.1)
    .max
}

/// `_+_`: over the overloads the operands' kinds allow, the costliest (strings and bytes
/// cost a tenth of their joined size, lists and numbers 1).
fn add<'s>(l: &Est<'s>, r: &Est<'s>) -> Est<'s> {
    let (lk, rk) = (l.ty.kind(), r.ty.kind());
    let both = |kind: Kind| lk.can_be(kind) && rk.can_be(kind);
    let joined = l.size().add(r.size());
    let concatenates = both(Kind::String) || both(Kind::Bytes);
    let counts = both(Kind::List) || (lk.numeric() && rk.numeric());
    let cost = match (concatenates, counts) {
        (true, true) => joined.factor(0.1).max.max(1),
        (true, false) => joined.factor(0.1).max,
        (false, _) => 1,
    };
    // An empty list literal (a map or filter's accumulator) says less than what is added.
    let vague = |e: &Est<'s>| {
        e.ty.kind() == Kind::Dyn
            || (e.ty.kind() == Kind::List && e.ty.element().kind() == Kind::Dyn)
    };
    let ty = if vague(l) { &r.ty } else { &l.ty };
    Est {
        size: (concatenates || both(Kind::List)).then_some(joined),
        ..Est::new(cost, ty.clone())
    }
}

/// `bytes(s)` of a string or `string(b)` of bytes: a tenth of the size; 1 where the
/// argument may be of another kind.
fn converted(arg: &Est<'_>, from: Kind) -> u64 {
    let scaled = arg.size().factor(0.1).max;
    match arg.ty.kind() {
        kind if kind == from => scaled,
        _ => scaled.max(1),
    }
}

/// A regular expression's match: a tenth of the string's size (plus one) times a quarter
/// of the pattern's.
fn regex_cost(s: &Est<'_>, pattern: &Est<'_>) -> u64 {
    s.size()
        .add(Size::exactly(1))
        .factor(0.1)
        .times(pattern.size().factor(0.25))
        .max
}

/// An item of a list, as kube's library estimates it: at the list's path plus `@items`.
fn item_of<'s>(list: &Est<'s>) -> Est<'s> {
    Est {
        place: element_place(list.place),
        ..Est::new(0, list.ty.element())
    }
}

/// The path of a list's item or a map's value: cel-go's `@items` or `@values` appended.
fn element_place(place: Place<'_>) -> Place<'_> {
    match place {
        Place::At(Some(decl)) => Place::At(decl.element()),
        place => place,
    }
}

/// kube's lists library walking a list once: one per item, and a tenth of each string's size.
fn list_walk(list: &Est<'_>) -> u64 {
    let item = item_of(list);
    let per_item = match item.ty.kind() {
        Kind::String | Kind::Bytes => Size::exactly(1).add(item.size().factor(0.1)),
        _ => Size::exactly(1),
    };
    list.size().times(per_item).max
}

/// The size of `s.replace(old, new)`: every occurrence of `old` replaced by `new`.
fn replaced_size(s: Size, old: Size, new: Size) -> Size {
    let ceil_div = |n: u64, d: u64| n.div_ceil(d);
    let (max_count, max_kept) = if old.min == 0 {
        (s.max.saturating_add(1), s.max)
    } else if new.max <= old.min {
        (0, s.max)
    } else {
        (ceil_div(s.max, old.min), 0)
    };
    let (min_count, min_kept) = if old.max == 0 {
        (s.min.saturating_add(1), s.min)
    } else if old.max <= new.min {
        (0, s.min)
    } else {
        (ceil_div(s.min, old.max), 0)
    };
    Size {
        min: min_count.saturating_mul(new.min).saturating_add(min_kept),
        max: max_count.saturating_mul(new.max).saturating_add(max_kept),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cost(s: Value, rule: &str) -> u64 {
        let program = super::super::rules::compile(rule).expect("compiles");
        max_cost(program.expression(), &s, false)
    }

    fn strings(list: Value) -> Value {
        let mut list = list;
        list["type"] = json!("array");
        list
    }

    /// cel-go's worked costs: a list of at most 10 strings of at most 5 characters.
    #[test]
    fn a_bounded_list_costs_what_cel_go_charges() {
        let s = strings(json!({"maxItems": 10, "items": {"type": "string", "maxLength": 5}}));
        assert_eq!(cost(s.clone(), "self.all(x, x.startsWith('a'))"), 52);
        assert_eq!(cost(s.clone(), "self.all(x, x.contains('ab'))"), 62);
        assert_eq!(cost(s.clone(), "self.all(x, x.matches('^a'))"), 72);
        assert_eq!(cost(s, "self.size() <= 5"), 3);
    }

    /// The expected costs of kube's own `TestCostEstimation` (compilation_test.go).
    #[test]
    fn unbounded_values_cost_what_kube_expects() {
        let unbounded_strings = strings(json!({"items": {"type": "string"}}));
        assert_eq!(cost(unbounded_strings, "self.all(x, true)"), 3_145_727);
        let numbers = strings(json!({"items": {"type": "number"}}));
        assert_eq!(cost(numbers, "self.all(x, true)"), 4_718_591);
        let map = json!({"type": "object", "additionalProperties": {"type": "string"}});
        assert_eq!(cost(map.clone(), "self.all(x, true)"), 1_179_647);
        assert_eq!(cost(map, "self.all(x, x.contains(self[x]))"), 2_752_507);
        let short = json!({"type": "string", "maxLength": 10});
        assert_eq!(cost(short, "self.contains('test')"), 5);
        assert_eq!(
            cost(json!({"type": "string"}), "self.contains('test')"),
            314_574
        );
    }

    /// kube's `TestCostEstimation` (apiextensions-apiserver, compilation_test.go): each
    /// rule over a schema with no bounds, then with every bound set to a number, and the
    /// cost kube expects of each (0: kube checks none).
    #[test]
    fn costs_are_those_kube_expects_of_its_own_table() {
        type Generator = fn(Option<u64>) -> Value;
        #[rustfmt::skip]
        let cases: Vec<(&str, Generator, &str, u64, u64, u64)> = vec![
            ("number array", |m| array_of("number", m), "self.all(x, true)", 4_718_591, 10, 32),
            ("string array", |m| array_of("string", m), "self.all(x, true)", 3_145_727, 20, 62),
            ("boolean array", |m| array_of("boolean", m), "self.all(x, true)", 1_887_437, 5, 17),
            ("array of arrays", |m| arrays_of("number", m), "self.all(x, true)", 3_145_727, 100, 302),
            ("array of objects", objects, "self.all(x, true)", 555_128, 50, 152),
            ("map of numbers", |m| map_of("number", m), "self.all(x, true)", 1_348_169, 10, 32),
            ("map of strings", |m| map_of("string", m), "self.all(x, true)", 1_179_647, 3, 11),
            ("map of booleans", |m| map_of("boolean", m), "self.all(x, true)", 943_718, 100, 302),
            ("string contains", string, "self.contains('test')", 314_574, 10, 5),
            ("string startsWith", string, "self.startsWith('test')", 2, 15, 2),
            ("string endsWith", string, "self.endsWith('test')", 2, 30, 2),
            ("concatenation", string, "size(self + \"hello\") > size(\"hello\")", 314_578, 4, 7),
            ("index of numbers", |m| array_of("number", m), "self[1] == 0.0", 2, 5000, 2),
            ("index of strings", |m| array_of("string", m), "self[1] == self[1]", 314_577, 8, 314_577),
            ("O(n^2) loop", |m| array_of("number", m), "self.all(x, self.all(y, true))", 0, 10, 352),
            ("O(n^3) loop", |m| array_of("number", m), "self.all(x, self.all(y, self.all(z, true)))", 0, 10, 3552),
            ("regex", string, "self.matches(\"x\")", 314_574, 50, 22),
            ("regex on a literal", string, "\"\".matches(\"(((((((((())))))))))[0-9]\")", 7, 10, 7),
            ("empty regex", string, "self.matches(\"\")", 1, 100, 1),
            ("map of strings by key", nested_spec, "self.all(x, x.contains(self[x]))", 2_752_507, 10, 72),
            ("array bounded at zero", |m| array_of("number", m), "self[3] == 0.0", 2, 0, 2),
            ("map bounded at zero", |m| map_of("number", m), "self[\"x\"] == 0.0", 2, 0, 2),
            ("string bounded at zero", string, "self == \"x\"", 2, 0, 1),
            ("bytes bounded at zero", bytes, "self == b\"x\"", 2, 0, 1),
            ("a bound above the estimate", |m| array_of("number", m), "self.all(x, x == 0.0)", 6_291_454, 3 * 1024 * 2048, 25_165_826),
            ("all bounded nested", all_bounded_nested, "self.all(x, x[\"y\"].required == \"z\")", 7_340_027, 10, 72),
            ("one bounded nested", one_bounded_nested, "self.all(x, x[\"y\"].required == \"z\")", 7_340_027, 10, 7_340_027),
            ("int-or-string array", |m| array_of("int-or-string", m), "self.all(x, true)", 4_718_591, 10, 32),
            ("int-or-string index", |m| array_of("int-or-string", m), "self[0] == 5", 3, 10, 3),
            ("boolean index", |m| array_of("boolean", m), "self[0] == false", 2, 25, 2),
            ("object index", objects, "self[0] == null", 2, 422, 2),
            ("nested index", |m| arrays_of("number", m), "self[0][0] == -1.0", 3, 51, 3),
            ("maps in a list", |m| maps_of("number", m), "self.all(x, x.y == 25.2)", 6_291_452, 12, 74),
            ("map in a list", |m| maps_of("number", m), "self[0].x > 2.0", 4, 3000, 4),
            ("duration array", |m| array_of("duration", m), "self.all(x, true)", 2_359_295, 5, 17),
            ("duration index", |m| array_of("duration", m), "self[0].getHours() == 2", 4, 525, 4),
            ("date array", |m| array_of("date", m), "self.all(x, true)", 725_936, 15, 47),
            ("date index", |m| array_of("date", m), "self[2].getDayOfMonth() == 13", 4, 42, 4),
            ("date-time array", |m| array_of("date-time", m), "self.all(x, true)", 428_963, 25, 77),
            ("map of int-or-strings", |m| map_of("int-or-string", m), "self.all(x, true)", 1_348_169, 15, 47),
            ("map of objects", |m| map_with(object_item(), m), "self.all(x, true)", 428_963, 20, 62),
            ("map of maps", |m| map_with(json!({"type": "object", "additionalProperties": {"type": "number"}}), m), "self.all(x, true)", 1_179_647, 10, 32),
            ("map of lists", |m| map_with(json!({"type": "array", "items": {"type": "number"}}), m), "self.all(x, true)", 1_179_647, 25, 77),
            ("map of durations", |m| map_of("duration", m), "self.all(x, true)", 1_048_577, 5, 17),
            ("map of dates", |m| map_of("date", m), "self.all(x, true)", 524_288, 10, 32),
            ("map of date-times", |m| map_of("date-time", m), "self.all(x, true)", 349_526, 25, 77),
            ("find", string, "self.find('[0-9]+') == ''", 629_147, 10, 11),
            ("join", |m| bounded(array_of_bounded_strings(m), "maxItems", m), "self.join(' ') == 'aa bb'", 329_853_068_905, 10, 43),
            ("isSorted", |m| bounded(array_of_bounded_strings(m), "maxItems", m), "self.isSorted() == true", 329_854_432_052, 10, 52),
            ("replace", replacing, "self.str.replace(self.before, self.after) == 'does not matter'", 629_154, 4, 12),
            ("split", splitting, "self.str.split(self.separator) == []", 629_160, 10, 22),
            ("lowerAscii", string, "self.lowerAscii() == 'lower!'", 314_575, 10, 6),
            ("size", |m| map_of("integer", m), "oldSelf.size() == self.size()", 5, 10, 5),
            ("timestamps", |m| map_of("date-time", m), "self[\"a\"] == self[\"b\"]", 8, 7, 8),
            ("durations", |m| map_of("duration", m), "self[\"c\"] == self[\"d\"]", 8, 42, 8),
            ("enum", enumerated, "self.contains('A')", 2, 1000, 401),
        ];
        for (name, generate, rule, unbounded, bound, bounded) in cases {
            let found = cost(generate(None), rule);
            if unbounded == 0 {
                assert!(found > 100_000_000, "{name}, unbounded: {found}");
            } else {
                assert_eq!(found, unbounded, "{name}, unbounded");
            }
            assert_eq!(
                cost(generate(Some(bound)), rule),
                bounded,
                "{name}, bounded at {bound}"
            );
        }
    }

    /// kube's test schemas' item types: a format or int-or-string where named so.
    fn typed(name: &str) -> Value {
        match name {
            "duration" | "date" | "date-time" => json!({"type": "string", "format": name}),
            "int-or-string" => json!({"x-kubernetes-int-or-string": true}),
            _ => json!({"type": name}),
        }
    }

    fn bounded(mut s: Value, key: &str, bound: Option<u64>) -> Value {
        if let Some(bound) = bound {
            s[key] = json!(bound);
        }
        s
    }

    fn array_of(item: &str, bound: Option<u64>) -> Value {
        bounded(
            json!({"type": "array", "items": typed(item)}),
            "maxItems",
            bound,
        )
    }

    fn arrays_of(item: &str, bound: Option<u64>) -> Value {
        let inner = json!({"type": "array", "items": typed(item)});
        bounded(json!({"type": "array", "items": inner}), "maxItems", bound)
    }

    fn object_item() -> Value {
        json!({"type": "object", "required": ["required"], "properties": {
            "required": {"type": "string"}, "optional": {"type": "string"}}})
    }

    fn objects(bound: Option<u64>) -> Value {
        bounded(
            json!({"type": "array", "items": object_item()}),
            "maxItems",
            bound,
        )
    }

    fn maps_of(value: &str, bound: Option<u64>) -> Value {
        let map = json!({"type": "object", "additionalProperties": typed(value)});
        bounded(json!({"type": "array", "items": map}), "maxItems", bound)
    }

    fn map_with(values: Value, bound: Option<u64>) -> Value {
        let map = json!({"type": "object", "additionalProperties": values});
        bounded(map, "maxProperties", bound)
    }

    fn map_of(value: &str, bound: Option<u64>) -> Value {
        map_with(typed(value), bound)
    }

    fn string(bound: Option<u64>) -> Value {
        bounded(json!({"type": "string"}), "maxLength", bound)
    }

    fn bytes(bound: Option<u64>) -> Value {
        bounded(
            json!({"type": "string", "format": "byte"}),
            "maxLength",
            bound,
        )
    }

    fn enumerated(bound: Option<u64>) -> Value {
        let s = json!({"type": "string", "enum": ["A", "B", "C", "LongValue"]});
        bounded(s, "maxLength", bound)
    }

    fn nested_spec(bound: Option<u64>) -> Value {
        map_with(string(bound), bound)
    }

    fn all_bounded_nested(bound: Option<u64>) -> Value {
        let inner = bounded(object_item(), "maxProperties", bound);
        let outer = map_with(inner, bound);
        bounded(json!({"type": "array", "items": outer}), "maxItems", bound)
    }

    fn one_bounded_nested(bound: Option<u64>) -> Value {
        let outer = map_with(object_item(), bound);
        json!({"type": "array", "items": outer})
    }

    fn array_of_bounded_strings(bound: Option<u64>) -> Value {
        json!({"type": "array", "items": string(bound)})
    }

    fn replacing(bound: Option<u64>) -> Value {
        json!({"type": "object", "properties": {
            "str": string(bound), "before": string(Some(2)), "after": string(Some(4))}})
    }

    fn splitting(bound: Option<u64>) -> Value {
        json!({"type": "object", "properties": {"str": string(bound), "separator": string(bound)}})
    }

    /// openshift/api#1826: a duplicate check over 10 unbounded strings, refused by kube
    /// with "3.1x".
    #[test]
    fn a_duplicate_check_over_unbounded_strings_is_over_budget() {
        let s = strings(json!({"maxItems": 10, "items": {"type": "string"}}));
        let estimate = cost(s, "self.all(x, self.exists_one(y, x == y))");
        assert_eq!(estimate, 31_457_762);
        assert!(over_budget("estimated rule cost", estimate, RULE_COST_LIMIT).contains("3.1x"));
    }

    #[test]
    fn the_factor_is_printed_as_kube_prints_it() {
        let message = over_budget("estimated rule cost", 10_084_789, RULE_COST_LIMIT);
        assert!(
            message.starts_with("estimated rule cost exceeds budget by factor of 1.008479x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
            "{message}"
        );
        assert!(over_budget("x", 2_000_000_000, 10_000_000).contains("more than 100x"));
    }

    /// A concatenation with a value of no known size (`string(int)`) is unbounded:
    /// kubernetes#124234's messageExpression.
    #[test]
    fn a_concatenation_of_unknown_size_is_unbounded() {
        let s = json!({"type": "object", "properties": {"attempts": {"type": "integer"}}});
        let estimate = cost(s, "'invalid attempts: ' + string(self.attempts)");
        assert!(estimate > 100 * RULE_COST_LIMIT, "{estimate}");
    }

    #[test]
    fn sizes_follow_kube_declarations() {
        let root = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"},
                "mode": {"type": "string", "enum": ["Always", "Never"]},
                "data": {"type": "string", "format": "byte", "maxLength": 8},
                "at": {"type": "string", "format": "date-time"},
                "port": {"x-kubernetes-int-or-string": true},
                "flags": {"type": "array", "items": {"type": "boolean"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}});
        let decl = Decl::of(&root, true).expect("declared");
        let spec = decl.field("spec").expect("spec");
        let max = |name: &str| spec.field(name).expect(name).max_elements();
        assert_eq!(max("mode"), 6);
        assert_eq!(max("data"), 8);
        assert_eq!(max("at"), 32);
        assert_eq!(max("port"), UNBOUNDED_STRING);
        assert_eq!(max("flags"), UNBOUNDED_STRING / 5);
        assert_eq!(max("labels"), UNBOUNDED_STRING / 8);
        // `name` is required: 2 + ("name" + "" + 4).
        assert_eq!(spec.min_size(), 2 + 4 + 2 + 4);
        let metadata = decl.field("metadata").expect("metadata");
        assert_eq!(
            metadata.field("name").map(Decl::max_elements),
            Some(UNBOUNDED_STRING)
        );
        assert!(metadata.field("labels").is_none());
    }

    #[test]
    fn cardinality_multiplies_down_and_is_lost_below_an_unbounded_list() {
        let bounded = json!({"type": "array", "maxItems": 5});
        let map = json!({"type": "object", "additionalProperties": {}, "maxProperties": 3});
        let object = json!({"type": "object"});
        let in_lists = Cardinality::ROOT.below(&object).below(&bounded).below(&map);
        assert_eq!(in_lists.times(2, &object, false), 30);
        let unbounded = Cardinality::ROOT.below(&json!({"type": "array"}));
        let item =
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}});
        // Unknown: as many items as a request holds, each at least `{"a":""}` (9 bytes).
        assert_eq!(unbounded.times(1, &item, false), MAX_REQUEST_BYTES / 10);
    }

    #[test]
    fn replacements_and_joins_size_their_results() {
        let s = |max| Size { min: 0, max };
        assert_eq!(
            replaced_size(s(100), Size::exactly(1), Size::exactly(3)),
            s(300)
        );
        assert_eq!(
            replaced_size(s(100), Size::exactly(3), Size::exactly(1)),
            s(100)
        );
        let list = strings(json!({"maxItems": 4, "items": {"type": "string", "maxLength": 2}}));
        // 4 items of 8 bytes and 3 separators of 1: 35 bytes, then lowerAscii over them.
        assert_eq!(
            cost(list, "self.join(',').lowerAscii() == 'a'"),
            1 + 4 + 4 + 1
        );
    }
}
