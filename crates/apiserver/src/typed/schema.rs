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

/// One field of a struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub shape: Shape,
    /// Not required by kube's OpenAPI: `omitempty` in Go, so an empty list or map, or a
    /// null, is not encoded back.
    pub optional: bool,
}

#[derive(Debug)]
pub(crate) struct Struct {
    /// Its name without kube's `io.k8s.` prefix: `api.core.v1.PodSpec`.
    pub name: &'static str,
    pub fields: Vec<(&'static str, Field)>,
    /// An open-addressing table over `fields` (index + 1; 0 is empty): every write looks up
    /// every key of its object here, and a binary search among strings was most of the walk.
    slots: Box<[u16]>,
    /// log2 of the table's size.
    bits: u32,
}

impl Struct {
    fn new(name: &'static str, fields: Vec<(&'static str, Field)>) -> Struct {
        // At most half full, so a probe sequence stays short.
        let bits = (fields.len() * 2)
            .next_power_of_two()
            .max(2)
            .trailing_zeros();
        let mut slots = vec![0u16; 1 << bits].into_boxed_slice();
        for (i, (field, _)) in fields.iter().enumerate() {
            let mut at = slot(field, bits);
            while slots[at] != 0 {
                at = (at + 1) & (slots.len() - 1);
            }
            slots[at] = u16::try_from(i + 1).expect("fewer than 65,535 fields");
        }
        Struct {
            name,
            fields,
            slots,
            bits,
        }
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        let mut at = slot(name, self.bits);
        loop {
            let index = usize::from(self.slots[at]).checked_sub(1)?;
            let (field, found) = &self.fields[index];
            if *field == name {
                return Some(found);
            }
            at = (at + 1) & (self.slots.len() - 1);
        }
    }

    /// How Go names the type in its messages: `v1.PodSpec`, `resource.Quantity`.
    pub fn go_name(&self) -> &'static str {
        go_name(self.name)
    }
}

/// A field name's slot in a table of `2^bits`: its length and three of its bytes, mixed.
fn slot(name: &str, bits: u32) -> usize {
    let bytes = name.as_bytes();
    let byte = |i: usize| u32::from(bytes.get(i).copied().unwrap_or(0));
    let len = bytes.len();
    let key =
        (len as u32) ^ (byte(0) << 7) ^ (byte(len / 2) << 14) ^ (byte(len.wrapping_sub(1)) << 21);
    (key.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
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
    let mut fields: Vec<Vec<(&'static str, Field)>> = vec![Vec::new(); names.len()];
    let mut kinds = HashMap::new();
    let mut current: Option<usize> = None;
    for line in lines() {
        let words: Vec<&'static str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["kind", api_version, kind, name] => {
                kinds.insert((*api_version, *kind), ids[name]);
            }
            ["struct", name] => current = Some(usize::from(ids[name])),
            [field, shape, rest @ ..] if line.starts_with("  ") => {
                let at = current.expect("a field inside a struct");
                let optional = match rest {
                    [] => false,
                    ["optional"] => true,
                    _ => panic!("schema.txt: cannot read {line:?}"),
                };
                let shape = shape_of(shape, &ids);
                fields[at].push((field, Field { shape, optional }));
            }
            _ => panic!("schema.txt: cannot read {line:?}"),
        }
    }
    let structs = names
        .into_iter()
        .zip(fields)
        .map(|(name, fields)| Struct::new(name, fields))
        .collect();
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
        let Some(Field {
            shape: Shape::Struct(spec),
            optional: true,
        }) = pod.field("spec")
        else {
            panic!("a pod's spec is a struct");
        };
        let spec = &schema.structs[usize::from(*spec)];
        assert_eq!(spec.go_name(), "v1.PodSpec");
        let containers = spec.field("containers").expect("containers");
        assert!(matches!(containers.shape, Shape::List(_)) && !containers.optional);
        let node_name = spec.field("nodeName").expect("nodeName");
        assert_eq!(
            (&node_name.shape, node_name.optional),
            (&Shape::String, true)
        );
        assert_eq!(spec.field("nodename"), None);
        assert_eq!(
            go_name("apimachinery.pkg.api.resource.Quantity"),
            "resource.Quantity"
        );
    }

    #[test]
    fn every_field_is_found_and_no_other() {
        for s in &SCHEMA.structs {
            for (name, field) in &s.fields {
                assert_eq!(s.field(name), Some(field), "{}.{name}", s.name);
                assert_eq!(s.field(&format!("{name}x")), None);
            }
            assert_eq!(s.field(""), None);
        }
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
