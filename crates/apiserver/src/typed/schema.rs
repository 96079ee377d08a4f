//! `schema.txt` read once: every struct of the built-in kinds, its fields and their shapes.

use std::collections::HashMap;
use std::sync::LazyLock;

/// What Go's decoder expects at one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    String,
    Bool,
    Int32,
    Int64,
    Float64,
    /// `metav1.Time` and `MicroTime`: an RFC 3339 string.
    Time,
    /// `[]byte`: a base64 string.
    Bytes,
    IntOrString,
    Quantity,
    /// `RawExtension`, `FieldsV1`, JSON schema values: any JSON.
    Any,
    Struct(StructId),
    List(Box<Shape>),
    Map(Box<Shape>),
}

/// Index of a struct in [`Schema::structs`].
pub(crate) type StructId = u16;

#[derive(Debug)]
pub(crate) struct Struct {
    /// Its name without kube's `io.k8s.` prefix: `api.core.v1.PodSpec`.
    pub name: &'static str,
    /// Sorted by JSON name, for a binary search.
    pub fields: Vec<(&'static str, Shape)>,
}

impl Struct {
    pub fn field(&self, name: &str) -> Option<&Shape> {
        self.fields
            .binary_search_by(|(field, _)| (*field).cmp(name))
            .ok()
            .map(|i| &self.fields[i].1)
    }

    /// How Go names the type in its messages: `v1.PodSpec`, `resource.Quantity`.
    pub fn go_name(&self) -> &'static str {
        go_name(self.name)
    }
}

pub(crate) fn go_name(name: &str) -> &str {
    let mut dots = name.rmatch_indices('.');
    match (dots.next(), dots.next()) {
        (Some(_), Some((second, _))) => &name[second + 1..],
        _ => name,
    }
}

#[derive(Debug)]
pub(crate) struct Schema {
    pub structs: Vec<Struct>,
    /// (apiVersion, kind) → its struct.
    pub kinds: HashMap<(&'static str, &'static str), StructId>,
}

const TEXT: &str = include_str!("schema.txt");

pub(crate) static SCHEMA: LazyLock<Schema> = LazyLock::new(|| parse(TEXT));

/// Parses the generated text; a line it cannot read is a bug in the generator, caught by
/// this module's tests, so it panics rather than serve a partial schema.
fn parse(text: &'static str) -> Schema {
    let lines = || {
        text.lines()
            .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
    };
    let names: Vec<&'static str> = lines()
        .filter_map(|line| line.strip_prefix("struct "))
        .collect();
    let ids: HashMap<&str, StructId> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            (
                *name,
                StructId::try_from(i).expect("fewer than 65,536 structs"),
            )
        })
        .collect();
    let mut structs: Vec<Struct> = names
        .iter()
        .map(|name| Struct {
            name,
            fields: Vec::new(),
        })
        .collect();
    let mut kinds = HashMap::new();
    let mut current: Option<usize> = None;
    for line in lines() {
        let words: Vec<&'static str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kind", api_version, kind, name] => {
                kinds.insert((*api_version, *kind), ids[name]);
            }
            ["struct", name] => current = Some(usize::from(ids[name])),
            [field, shape] if line.starts_with("  ") => {
                let at = current.expect("a field inside a struct");
                structs[at].fields.push((field, shape_of(shape, &ids)));
            }
            _ => panic!("schema.txt: cannot read {line:?}"),
        }
    }
    for s in &mut structs {
        s.fields.sort_by(|a, b| a.0.cmp(b.0));
    }
    Schema { structs, kinds }
}

fn shape_of(text: &str, ids: &HashMap<&str, StructId>) -> Shape {
    if let Some(item) = text.strip_prefix("[]") {
        return Shape::List(Box::new(shape_of(item, ids)));
    }
    if let Some(value) = text.strip_prefix("map[string]") {
        return Shape::Map(Box::new(shape_of(value, ids)));
    }
    match text {
        "string" => Shape::String,
        "bool" => Shape::Bool,
        "int32" => Shape::Int32,
        "int64" => Shape::Int64,
        "float64" => Shape::Float64,
        "time" => Shape::Time,
        "bytes" => Shape::Bytes,
        "int-or-string" => Shape::IntOrString,
        "quantity" => Shape::Quantity,
        "any" => Shape::Any,
        name => match ids.get(name) {
            Some(id) => Shape::Struct(*id),
            None => panic!("schema.txt: unknown shape {name:?}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_schema_reads_in_full() {
        let schema = &*SCHEMA;
        let pod = schema.kinds[&("v1", "Pod")];
        let pod = &schema.structs[usize::from(pod)];
        assert_eq!(pod.name, "api.core.v1.Pod");
        assert_eq!(pod.go_name(), "v1.Pod");
        let Some(Shape::Struct(spec)) = pod.field("spec") else {
            panic!("a pod's spec is a struct");
        };
        let spec = &schema.structs[usize::from(*spec)];
        assert_eq!(spec.go_name(), "v1.PodSpec");
        assert!(matches!(spec.field("containers"), Some(Shape::List(_))));
        assert_eq!(spec.field("nodeName"), Some(&Shape::String));
        assert_eq!(spec.field("nodename"), None);
        assert_eq!(
            go_name("apimachinery.pkg.api.resource.Quantity"),
            "resource.Quantity"
        );
    }

    #[test]
    fn every_served_kind_has_its_struct() {
        for kind in crate::builtin::BUILTIN_KINDS {
            let api_version = kind.api_version();
            assert!(
                SCHEMA
                    .kinds
                    .contains_key(&(api_version.as_str(), kind.kind)),
                "{api_version} {} has no struct in schema.txt: regenerate it",
                kind.kind
            );
        }
    }
}
