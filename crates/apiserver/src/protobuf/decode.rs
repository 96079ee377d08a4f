//! The one generic decoder: protobuf wire bytes of a message in, its JSON object out,
//! driven by the message's entry in the schema (`schema.txt`). Knows the wire format
//! and Go's JSON conventions; nothing of kinds or HTTP.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use super::schema::{Elem, Field, Message, Presence, Schema, Shape};

/// Why a message could not be turned into JSON.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The bytes are not a valid encoding of the message.
    Malformed(String),
    /// A strict message uses a field the schema does not map.
    Unmapped,
}

type Decoded<T> = Result<T, Refusal>;

fn malformed<T>(why: impl Into<String>) -> Decoded<T> {
    Err(Refusal::Malformed(why.into()))
}

/// One field occurrence on the wire.
#[derive(Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed32 or fixed64 value (no mapped field has one).
    Fixed,
}

/// Every field occurrence of one message's bytes, in order.
fn occurrences(mut buf: &[u8]) -> Decoded<Vec<(u32, Wire<'_>)>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .map_or_else(|| malformed("invalid field number"), Ok)?;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            1 => skip(&mut buf, 8)?,
            2 => {
                let len = usize::try_from(varint(&mut buf)?).unwrap_or(usize::MAX);
                let (bytes, rest) = split(buf, len)?;
                buf = rest;
                Wire::Bytes(bytes)
            }
            5 => skip(&mut buf, 4)?,
            other => return malformed(format!("unsupported wire type {other}")),
        };
        out.push((number, wire));
    }
    Ok(out)
}

fn split(buf: &[u8], len: usize) -> Decoded<(&[u8], &[u8])> {
    if len > buf.len() {
        return malformed("buffer underflow");
    }
    Ok(buf.split_at(len))
}

fn skip<'a>(buf: &mut &'a [u8], len: usize) -> Decoded<Wire<'a>> {
    *buf = split(buf, len)?.1;
    Ok(Wire::Fixed)
}

fn varint(buf: &mut &[u8]) -> Decoded<u64> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let Some((&byte, rest)) = buf.split_first() else {
            return malformed("buffer underflow");
        };
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    malformed("invalid varint")
}

/// Decodes `bytes` as message `name` into its JSON.
pub(super) fn message(schema: &Schema, name: &str, bytes: &[u8]) -> Decoded<Value> {
    let Some(message) = schema.message(name) else {
        return malformed(format!("message {name} is not in the schema"));
    };
    let found = occurrences(bytes)?;
    if message.strict && found.iter().any(|(n, _)| message.field(*n).is_none()) {
        return Err(Refusal::Unmapped);
    }
    let mut object = Map::new();
    for field in &message.fields {
        let wires: Vec<Wire<'_>> = found
            .iter()
            .filter(|(n, _)| *n == field.number)
            .map(|(_, w)| *w)
            .collect();
        write_field(schema, field, &wires, &mut object)?;
    }
    Ok(unwrapped(message, object))
}

fn unwrapped(message: &Message, mut object: Map<String, Value>) -> Value {
    match message.fields.first() {
        Some(only) if message.unwrap => object.remove(&only.json).unwrap_or(Value::Null),
        _ => Value::Object(object),
    }
}

/// Writes one field into `object` as Go's JSON tags would.
fn write_field(
    schema: &Schema,
    field: &Field,
    wires: &[Wire<'_>],
    object: &mut Map<String, Value>,
) -> Decoded<()> {
    let value = match &field.shape {
        Shape::Single(elem) => single(schema, elem, field.presence, wires)?,
        Shape::List(elem) => {
            let items = wires
                .iter()
                .map(|w| elem_value(schema, elem, *w))
                .collect::<Decoded<Vec<_>>>()?;
            collection(Value::Array(items), field.presence)
        }
        Shape::Map(elem) => {
            let entries = wires
                .iter()
                .map(|w| map_entry(schema, elem, *w))
                .collect::<Decoded<Map<_, _>>>()?;
            collection(Value::Object(entries), field.presence)
        }
    };
    match (value, field.presence) {
        (Some(Value::Object(inner)), Presence::Inline) => object.extend(inner),
        (Some(value), _) => {
            object.insert(field.json.clone(), value);
        }
        (None, _) => {}
    }
    Ok(())
}

/// A list or map: dropped when empty unless written always.
fn collection(value: Value, presence: Presence) -> Option<Value> {
    (presence == Presence::Always || !is_zero(&value)).then_some(value)
}

fn single(
    schema: &Schema,
    elem: &Elem,
    presence: Presence,
    wires: &[Wire<'_>],
) -> Decoded<Option<Value>> {
    let present = match elem {
        // Occurrences of a message merge, as their concatenation decodes.
        Elem::Message(_) | Elem::IntOrString if !wires.is_empty() => {
            let mut merged = Vec::new();
            for wire in wires {
                merged.extend_from_slice(bytes_of(*wire)?);
            }
            Some(elem_value(schema, elem, Wire::Bytes(&merged))?)
        }
        _ => wires
            .last()
            .map(|w| elem_value(schema, elem, *w))
            .transpose()?,
    };
    if *elem == Elem::IntOrString {
        return present.map_or(Ok(None), |v| int_or_string(v, presence));
    }
    Ok(match presence {
        Presence::Pointer | Presence::Inline => present,
        Presence::OmitEmpty => present.filter(|v| !is_zero(v)),
        Presence::Always => Some(match present {
            Some(value) => value,
            None => elem_value(schema, elem, zero_wire(elem))?,
        }),
    })
}

/// The wire value that decodes as an element's zero.
fn zero_wire(elem: &Elem) -> Wire<'static> {
    match elem {
        Elem::Int32 | Elem::Int64 | Elem::Bool => Wire::Varint(0),
        _ => Wire::Bytes(&[]),
    }
}

/// An `IntOrString` from its decoded fields. A `*IntOrString` (pointer) is kept whenever
/// present, even at zero (`maxUnavailable: 0` means something); a value field drops its
/// zero, which the API server defaults exactly like an absent one.
fn int_or_string(decoded: Value, presence: Presence) -> Decoded<Option<Value>> {
    let int_val = decoded.get("intVal").cloned().unwrap_or(Value::from(0));
    let str_val = decoded.get("strVal").cloned().unwrap_or(Value::from(""));
    let kind = decoded.get("type").and_then(Value::as_i64).unwrap_or(0);
    if presence == Presence::Pointer {
        return Ok(Some(if kind == 1 { str_val } else { int_val }));
    }
    match kind {
        0 => Ok(Some(int_val).filter(|v| !is_zero(v))),
        1 => Ok(Some(str_val).filter(|v| !is_zero(v))),
        other => malformed(format!("invalid IntOrString type {other}")),
    }
}

fn map_entry(schema: &Schema, elem: &Elem, wire: Wire<'_>) -> Decoded<(String, Value)> {
    let mut key = String::new();
    let mut value = None;
    for (number, inner) in occurrences(bytes_of(wire)?)? {
        match number {
            1 => key = string(inner)?,
            2 => value = Some(elem_value(schema, elem, inner)?),
            _ => {}
        }
    }
    let value = match value {
        Some(value) => value,
        None => elem_value(schema, elem, zero_wire(elem))?,
    };
    Ok((key, value))
}

fn elem_value(schema: &Schema, elem: &Elem, wire: Wire<'_>) -> Decoded<Value> {
    Ok(match elem {
        Elem::String => Value::String(string(wire)?),
        // Go's int32 is the low 32 bits of the varint, as prost reads it.
        Elem::Int32 => Value::from(number(wire)? as i32),
        Elem::Int64 => Value::from(number(wire)? as i64),
        Elem::Bool => Value::Bool(number(wire)? != 0),
        Elem::Bytes => Value::String(BASE64.encode(bytes_of(wire)?)),
        Elem::IntOrString => message(schema, "IntOrString", bytes_of(wire)?)?,
        Elem::Message(name) => message(schema, name, bytes_of(wire)?)?,
    })
}

fn number(wire: Wire<'_>) -> Decoded<u64> {
    match wire {
        Wire::Varint(v) => Ok(v),
        _ => malformed("wire type mismatch: expected a varint"),
    }
}

fn bytes_of(wire: Wire<'_>) -> Decoded<&[u8]> {
    match wire {
        Wire::Bytes(b) => Ok(b),
        _ => malformed("wire type mismatch: expected length-delimited"),
    }
}

fn string(wire: Wire<'_>) -> Decoded<String> {
    String::from_utf8(bytes_of(wire)?.to_vec())
        .or_else(|_| malformed("invalid string value: data is not UTF-8 encoded"))
}

/// Go's zero value: `""`, `0`, `false`, an empty list or object.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protobuf::schema::schema;

    fn decode_as(name: &str, bytes: &[u8]) -> Decoded<Value> {
        match schema() {
            Ok(schema) => message(schema, name, bytes),
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn repeated_message_occurrences_merge() {
        // metadata {name: "a"} then metadata {namespace: "b"}.
        let bytes = [0x0a, 0x03, 0x0a, 0x01, b'a', 0x0a, 0x03, 0x1a, 0x01, b'b'];
        match decode_as("ConfigMap", &bytes) {
            Ok(v) => assert_eq!(v, json!({"metadata": {"name": "a", "namespace": "b"}})),
            Err(err) => panic!("{err:?}"),
        }
    }

    #[test]
    fn wrong_wire_types_and_bad_strings_are_malformed() {
        for bytes in [
            // data (a map) sent as a varint
            &[0x10, 0x01][..],
            // metadata.name not UTF-8
            &[0x0a, 0x03, 0x0a, 0x01, 0xff],
            // a length past the end
            &[0x0a, 0x05, 0x0a],
            // a group wire type
            &[0x0b],
        ] {
            assert!(
                matches!(decode_as("ConfigMap", bytes), Err(Refusal::Malformed(_))),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn a_strict_message_refuses_any_unlisted_field() {
        // Pod{spec: PodSpec{field 99: 1}}: a number no schema lists.
        let unknown = [0x12, 0x03, 0x98, 0x06, 0x01];
        assert!(matches!(decode_as("Pod", &unknown), Err(Refusal::Unmapped)));
        // The same field in a loose message (ConfigMap) is ignored.
        assert_eq!(
            decode_as("ConfigMap", &[0x98, 0x06, 0x01]).ok(),
            Some(json!({"metadata": {}}))
        );
    }
}
