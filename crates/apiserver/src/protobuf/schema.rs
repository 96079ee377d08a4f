//! The message schema: `schema.txt` (kinds → messages → fields) parsed once into
//! lookups. What a field's type and presence mean is documented in the file itself; this
//! module only reads it, and knows nothing of the wire format or of JSON.

use std::collections::HashMap;
use std::sync::LazyLock;

const SCHEMA: &str = include_str!("schema.txt");

/// What one occurrence of a field holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Elem {
    String,
    Int32,
    Int64,
    Bool,
    /// Base64 in JSON, as Go's `[]byte`.
    Bytes,
    /// `intstr.IntOrString`: an integer or a string in JSON.
    IntOrString,
    /// A nested message, by name.
    Message(String),
}

/// Single, repeated (`[]T`) or a map from strings (`map[string]T`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shape {
    Single(Elem),
    List(Elem),
    Map(Elem),
}

/// How Go's JSON tags write a field (see `schema.txt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    OmitEmpty,
    Pointer,
    Always,
    Inline,
}

pub(super) struct Field {
    pub(super) number: u32,
    pub(super) json: String,
    pub(super) shape: Shape,
    pub(super) presence: Presence,
}

#[derive(Default)]
pub(super) struct Message {
    /// A field it does not list refuses the body.
    pub(super) strict: bool,
    /// Its JSON is its one field's value.
    pub(super) unwrap: bool,
    pub(super) fields: Vec<Field>,
}

impl Message {
    pub(super) fn field(&self, number: u32) -> Option<&Field> {
        self.fields.iter().find(|f| f.number == number)
    }
}

#[derive(Default)]
pub(super) struct Schema {
    /// (apiVersion, kind) → message name.
    kinds: HashMap<(String, String), String>,
    messages: HashMap<String, Message>,
}

impl Schema {
    /// The message a kind is decoded as; `None` for a kind steady does not decode.
    pub(super) fn kind(&self, api_version: &str, kind: &str) -> Option<&str> {
        self.kinds
            .get(&(api_version.to_string(), kind.to_string()))
            .map(String::as_str)
    }

    pub(super) fn message(&self, name: &str) -> Option<&Message> {
        self.messages.get(name)
    }
}

static PARSED: LazyLock<Result<Schema, String>> = LazyLock::new(|| parse(SCHEMA));

/// The schema, or why `schema.txt` does not parse (a unit test keeps it parsing).
pub(super) fn schema() -> Result<&'static Schema, &'static str> {
    PARSED.as_ref().map_err(String::as_str)
}

fn parse(text: &str) -> Result<Schema, String> {
    let mut schema = Schema::default();
    let mut current: Option<&mut Message> = None;
    for (index, raw) in text.lines().enumerate() {
        let words: Vec<&str> = raw
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let line = || format!("schema.txt:{}: {raw:?}", index + 1);
        match words.as_slice() {
            [] => {}
            ["kind", api_version, kind, message] => {
                schema.kinds.insert(
                    (api_version.to_string(), kind.to_string()),
                    message.to_string(),
                );
            }
            ["message", name, flags @ ..] => {
                let message = Message {
                    strict: flags.contains(&"strict"),
                    unwrap: flags.contains(&"unwrap"),
                    fields: Vec::new(),
                };
                if flags.iter().any(|f| *f != "strict" && *f != "unwrap") {
                    return Err(format!("{}: unknown flag", line()));
                }
                current = Some(schema.messages.entry(name.to_string()).or_insert(message));
            }
            [number, json, ty, presence] => {
                let message = current
                    .as_deref_mut()
                    .ok_or_else(|| format!("{}: field outside a message", line()))?;
                message.fields.push(Field {
                    number: number
                        .parse()
                        .map_err(|_| format!("{}: field number", line()))?,
                    json: json.to_string(),
                    shape: shape(ty).ok_or_else(|| format!("{}: type", line()))?,
                    presence: presence_of(presence)
                        .ok_or_else(|| format!("{}: presence", line()))?,
                });
            }
            _ => return Err(format!("{}: not a kind, message or field", line())),
        }
    }
    Ok(schema)
}

fn shape(ty: &str) -> Option<Shape> {
    if let Some(elem) = ty.strip_prefix("[]") {
        Some(Shape::List(elem_of(elem)))
    } else if let Some(elem) = ty.strip_prefix("map[string]") {
        Some(Shape::Map(elem_of(elem)))
    } else if ty.contains(['[', ']']) {
        None
    } else {
        Some(Shape::Single(elem_of(ty)))
    }
}

fn elem_of(ty: &str) -> Elem {
    match ty {
        "string" => Elem::String,
        "int32" => Elem::Int32,
        "int64" => Elem::Int64,
        "bool" => Elem::Bool,
        "bytes" => Elem::Bytes,
        "intorstring" => Elem::IntOrString,
        message => Elem::Message(message.to_string()),
    }
}

fn presence_of(word: &str) -> Option<Presence> {
    match word {
        "omitempty" => Some(Presence::OmitEmpty),
        "pointer" => Some(Presence::Pointer),
        "always" => Some(Presence::Always),
        "inline" => Some(Presence::Inline),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parses_and_every_reference_resolves() {
        let schema = match schema() {
            Ok(schema) => schema,
            Err(err) => panic!("{err}"),
        };
        for message in schema.kinds.values() {
            assert!(
                schema.message(message).is_some(),
                "kind's message {message}"
            );
        }
        assert!(schema.message("IntOrString").is_some());
        for (name, message) in &schema.messages {
            assert!(!message.unwrap || message.fields.len() == 1, "{name}");
            for (i, field) in message.fields.iter().enumerate() {
                assert!(
                    message.fields[..i].iter().all(|f| f.number != field.number),
                    "{name}.{} numbered twice",
                    field.json
                );
                let (Shape::Single(elem) | Shape::List(elem) | Shape::Map(elem)) = &field.shape;
                if let Elem::Message(nested) = elem {
                    assert!(schema.message(nested).is_some(), "{name}.{}", field.json);
                }
                let single_message = matches!(field.shape, Shape::Single(Elem::Message(_)));
                assert!(
                    field.presence != Presence::Inline || single_message,
                    "{name}.{}: only a message is inlined",
                    field.json
                );
            }
        }
    }

    #[test]
    fn malformed_lines_are_refused() {
        for text in [
            "  1 name string omitempty",
            "message M\n  x name string omitempty",
            "message M\n  1 name map[int]string omitempty",
            "message M\n  1 name string sometimes",
            "message M loose",
            "what",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
