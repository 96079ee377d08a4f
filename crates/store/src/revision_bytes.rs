//! An object's `metadata.resourceVersion` in its JSON bytes, found by a walk of the JSON
//! structure that decodes nothing: read (what revision a write's reply is at), or replaced
//! (a delete's tombstone: the object's last state at the delete's revision).
//!
//! The store wrote those bytes itself (see `writer::Encoded`), with a `resourceVersion`
//! of digits; decoding the object and encoding it again to make a tombstone cost as much
//! as the write that stored it.

use std::ops::Range;

use bytes::Bytes;

use crate::Revision;

/// The bytes of `stored` with `rev` as their `resourceVersion`; `None` when they hold no
/// `metadata.resourceVersion` of digits where the store's encoding puts it (bytes written
/// by something else), which the caller then encodes again.
pub(crate) fn at_revision(stored: &[u8], rev: Revision) -> Option<Bytes> {
    let digits = revision_digits(stored)?;
    let rev = rev.to_string();
    let mut bytes = Vec::with_capacity(stored.len() - digits.len() + rev.len());
    bytes.extend_from_slice(&stored[..digits.start]);
    bytes.extend_from_slice(rev.as_bytes());
    bytes.extend_from_slice(&stored[digits.end..]);
    Some(Bytes::from(bytes))
}

/// The `metadata.resourceVersion` of the JSON object `json` (an object as the API returns
/// it), without decoding it; `None` when it has none, or not of digits.
pub fn revision_in(json: &[u8]) -> Option<Revision> {
    let digits = revision_digits(json)?;
    std::str::from_utf8(&json[digits]).ok()?.parse().ok()
}

/// Where the digits of `metadata.resourceVersion` are in the JSON object `json`.
fn revision_digits(json: &[u8]) -> Option<Range<usize>> {
    let mut scan = Scan { json, at: 0 };
    scan.member_of_object(b"metadata")?;
    scan.member_of_object(b"resourceVersion")?;
    let digits = scan.string()?;
    let all_digits = !digits.is_empty() && json[digits.clone()].iter().all(u8::is_ascii_digit);
    all_digits.then_some(digits)
}

/// A position in JSON text, moved over it structurally.
struct Scan<'a> {
    json: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    /// Enters the object here and stops before the value of its member `name` (a name
    /// written without escapes).
    fn member_of_object(&mut self, name: &[u8]) -> Option<()> {
        self.expect(b'{')?;
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            if &self.json[key] == name {
                return Some(());
            }
            self.skip_value()?;
            if self.next_byte()? != b',' {
                return None;
            }
        }
    }

    /// The contents of the string here (escapes left as they are), moved past.
    fn string(&mut self) -> Option<Range<usize>> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match *self.json.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(start..self.at - 1);
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    fn skip_value(&mut self) -> Option<()> {
        self.skip_whitespace();
        let mut depth = 0usize;
        loop {
            match *self.json.get(self.at)? {
                b'"' => {
                    self.string()?;
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                b'}' | b']' if depth == 0 => return Some(()),
                b'}' | b']' => {
                    depth -= 1;
                    self.at += 1;
                }
                b',' if depth == 0 => return Some(()),
                _ => self.at += 1,
            }
            if depth == 0 && self.ends_scalar_or_container() {
                return Some(());
            }
        }
    }

    /// Whether what was just passed completes a value at this level (the next byte ends it).
    fn ends_scalar_or_container(&self) -> bool {
        matches!(
            self.json.get(self.at),
            None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t')
        )
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next_byte()? == byte).then_some(())
    }

    /// The next byte that is not whitespace, moved past.
    fn next_byte(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.json.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn skip_whitespace(&mut self) {
        while self
            .json
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t'))
        {
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn spliced(stored: &Value, rev: Revision) -> Option<Value> {
        let bytes = at_revision(stored.to_string().as_bytes(), rev)?;
        Some(serde_json::from_slice(&bytes).expect("JSON"))
    }

    #[test]
    fn sets_the_revision_of_metadata_and_nothing_else() {
        let stored = json!({
            "apiVersion": "v1",
            "data": {"metadata": {"resourceVersion": "1"}, "k": "a \"quoted\" \\ value"},
            "involvedObject": {"resourceVersion": "2", "list": [1, [2, {"x": "]"}], -3.5e2]},
            "kind": "Event",
            "metadata": {
                "managedFields": [{"fieldsV1": {"f:data": {}}, "manager": "m"}],
                "name": "e",
                "resourceVersion": "41",
                "uid": "u"
            },
            "flag": true,
            "nothing": null
        });
        let mut expected = stored.clone();
        expected["metadata"]["resourceVersion"] = json!("1000");
        assert_eq!(spliced(&stored, 1000), Some(expected));
        let pretty = serde_json::to_string_pretty(&stored).expect("JSON");
        let bytes = at_revision(pretty.as_bytes(), 7).expect("found in pretty JSON too");
        let read: Value = serde_json::from_slice(&bytes).expect("JSON");
        assert_eq!(read["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn reads_the_revision_where_it_is() {
        let object = json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "42"}});
        assert_eq!(revision_in(object.to_string().as_bytes()), Some(42));
        let status = json!({"kind": "Status", "metadata": {}, "status": "Success"});
        assert_eq!(revision_in(status.to_string().as_bytes()), None);
    }

    #[test]
    fn leaves_to_the_caller_what_the_store_did_not_write() {
        for stored in [
            json!({"kind": "Pod"}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"resourceVersion": ""}}),
            json!({"metadata": {"resourceVersion": "12a"}}),
            json!({"metadata": {"resourceVersion": 12}}),
            json!({"metadata": "x"}),
            json!([1]),
        ] {
            assert_eq!(spliced(&stored, 3), None, "{stored}");
        }
        assert_eq!(
            at_revision(br#"{"metadata":{"resourceVersion":"1"#, 3),
            None
        );
    }
}
