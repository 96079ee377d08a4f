//! Go's formatting of values where kube's messages print them with `%q`: strings as
//! `strconv.Quote` writes them, string slices as `["a" "b"]` (and with `%#v`, as
//! `[]string{"a", "b"}`).

/// Go's `%q` of a string (strconv.Quote).
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for ch in text.chars() {
        match ch {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\u{c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{b}' => quoted.push_str("\\v"),
            ch if (ch as u32) < 0x20 || ch == '\u{7f}' => {
                quoted.push_str(&format!("\\x{:02x}", ch as u32));
            }
            ch if ch.is_control() || (ch.is_whitespace() && ch != ' ') => {
                let code = ch as u32;
                if code < 0x10000 {
                    quoted.push_str(&format!("\\u{code:04x}"));
                } else {
                    quoted.push_str(&format!("\\U{code:08x}"));
                }
            }
            ch => quoted.push(ch),
        }
    }
    quoted.push('"');
    quoted
}

/// Go's `%q` of a `[]string`: each element quoted, separated by one space.
pub(crate) fn quote_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| quote(item.as_ref())).collect();
    format!("[{}]", quoted.join(" "))
}

/// Go's `%#v` of a `[]string`, as `field.Invalid` prints one: `[]string{"a", "b"}`.
pub(crate) fn go_string_slice<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| quote(item.as_ref())).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_like_strconv_quote() {
        assert_eq!(quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
        assert_eq!(quote("héllo"), "\"héllo\"");
    }

    #[test]
    fn quote_list_is_space_separated() {
        assert_eq!(quote_list(&["a", "b c"]), "[\"a\" \"b c\"]");
        assert_eq!(quote_list::<&str>(&[]), "[]");
        assert_eq!(go_string_slice(&["/a", "/b"]), "[]string{\"/a\", \"/b\"}");
    }
}
