//! The string `format`s kube-apiserver checks in custom resources (go-openapi's strfmt
//! registry, restricted to kube's supported formats; any other format is stripped from
//! the schema and checks nothing): `date-time` and `date` (RFC 3339), `duration`,
//! `byte` (base64), the `uuid`s, `ipv4`, `ipv6`, `cidr`, `mac`, `bsonobjectid`,
//! `hexcolor`. A value breaking its format is refused as kube refuses it:
//! `spec.at in body must be of type date-time: "yesterday"`.
//!
//! Deviation: `email`, `uri`, `hostname`, `isbn*`, `creditcard`, `ssn` and `rgbcolor`
//! are accepted without a check (their Go parsers' edges are not reproduced here, and a
//! wrong refusal would be worse than a missed one).

use std::net::IpAddr;
use std::sync::LazyLock;

use base64::Engine;
use regex::Regex;

/// Whether `value` is a valid `format`.
pub(super) fn valid(format: &str, value: &str) -> bool {
    // go-openapi finds a format by its name without dashes (`date-time` is `datetime`);
    // only these two names of kube's formats have one.
    match format {
        "date-time" | "datetime" => date_time(value),
        "date" => date(value),
        "duration" => duration(value),
        "byte" => base64(value),
        "uuid" => UUID.is_match(value),
        "uuid3" => UUID3.is_match(value),
        "uuid4" => UUID4.is_match(value),
        "uuid5" => UUID5.is_match(value),
        "ipv4" => value.parse::<IpAddr>().is_ok() && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => cidr(value),
        "mac" => mac(value),
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "hexcolor" => HEX_COLOR.is_match(value),
        _ => true,
    }
}

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|_| unreachable!("a constant pattern compiles"))
}

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| regex("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
/// strfmt's time of day: `hh:mm:ss`, a fraction, and `z` (either case) or an offset.
static TIME_OF_DAY: LazyLock<Regex> = LazyLock::new(|| {
    regex("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?([zZ]|([+-][0-9]{2}:[0-9]{2}))$")
});
/// strfmt's fallback duration terms (`3 days`, `1w`), found anywhere in the value.
static DURATION_TERM: LazyLock<Regex> = LazyLock::new(|| regex(r"(\d+)\s*([A-Za-zµ]+)"));

/// Go's `2006-01-02`: four digits of year, a real month and day.
fn date(value: &str) -> bool {
    let shaped = value.len() == 10
        && value.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    let number = |range: std::ops::Range<usize>| value[range].parse::<u32>().unwrap_or(0);
    shaped
        && chrono::NaiveDate::from_ymd_opt(number(0..4) as i32, number(5..7), number(8..10))
            .is_some()
}

/// strfmt's `IsDateTime`: a date, `t`, a time of day with a zone (case-insensitive).
fn date_time(value: &str) -> bool {
    if value.len() < 4 {
        return false;
    }
    let mut parts = value.split(['t', 'T']);
    let (Some(day), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !date(day) {
        return false;
    }
    TIME_OF_DAY.captures(time).is_some_and(|c| {
        let part = |i: usize| c.get(i).map_or("", |m| m.as_str());
        part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
    })
}

/// strfmt's `ParseDuration`: Go's `time.ParseDuration`, else terms like `3 days`.
fn duration(value: &str) -> bool {
    if go_duration(value) {
        return true;
    }
    const UNITS: [&str; 19] = [
        "ns", "nano", "us", "µs", "micro", "ms", "milli", "s", "sec", "m", "min", "h", "hr",
        "hour", "d", "day", "w", "wk", "week",
    ];
    DURATION_TERM.captures_iter(value).any(|c| {
        let unit = c.get(2).map_or("", |m| m.as_str()).to_lowercase();
        let singular = unit
            .strip_suffix('s')
            .filter(|u| !u.is_empty())
            .unwrap_or(&unit);
        UNITS.contains(&unit.as_str()) || UNITS.contains(&singular)
    })
}

/// Go's `time.ParseDuration`: an optional sign, then numbers (with fractions) each with a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`); `0` alone.
fn go_duration(value: &str) -> bool {
    let rest = value.strip_prefix(['-', '+']).unwrap_or(value);
    if rest == "0" {
        return true;
    }
    let mut rest = rest;
    let mut terms = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return false;
        }
        rest = &rest[number_end..];
        let Some(unit) = ["ns", "us", "µs", "μs", "ms", "s", "m", "h"]
            .into_iter()
            .filter(|u| rest.starts_with(u))
            .max_by_key(|u| u.len())
        else {
            return false;
        };
        rest = &rest[unit.len()..];
        terms += 1;
    }
    terms > 0
}

/// Go's `StdEncoding.DecodeString`: padded standard base64; line breaks are skipped.
fn base64(value: &str) -> bool {
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let compact: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    lenient.decode(compact).is_ok()
}

/// Go's `net.ParseCIDR`: an address and a prefix length that fits it.
fn cidr(value: &str) -> bool {
    let Some((address, prefix)) = value.split_once('/') else {
        return false;
    };
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let longest = if address.is_ipv4() { 32 } else { 128 };
    !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && prefix.parse::<u32>().is_ok_and(|p| p <= longest)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as hex pairs split by `:` or `-`, or as
/// groups of four hex digits split by `.`.
fn mac(value: &str) -> bool {
    let hex = |group: &str, width: usize| {
        group.len() == width && group.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let pairs = |separator: char| {
        let groups: Vec<&str> = value.split(separator).collect();
        matches!(groups.len(), 6 | 8 | 20) && groups.iter().all(|g| hex(g, 2))
    };
    let quads = || {
        let groups: Vec<&str> = value.split('.').collect();
        matches!(groups.len(), 3 | 4 | 10) && groups.iter().all(|g| hex(g, 4))
    };
    pairs(':') || pairs('-') || quads()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_checked_as_kube_checks_them() {
        let cases: [(&str, &[&str], &[&str]); 10] = [
            (
                "date-time",
                &[
                    "2024-02-29T10:00:00Z",
                    "2024-01-01t10:00:00.123456+02:00",
                    "2026-12-06T08:00:00+00:00",
                ],
                &[
                    "2024-02-30T10:00:00Z",
                    "2024-01-01T10:00:00",
                    "2024-01-01T24:00:00Z",
                    "yesterday",
                    "2024-01-01",
                ],
            ),
            (
                "date",
                &["2024-02-29"],
                &["2023-02-29", "24-01-01", "2024-1-01"],
            ),
            (
                "duration",
                &["1h30m", "500ms", "0", "-1.5h", "3 days", "1w"],
                &["", "1", "1x", "soon"],
            ),
            (
                "byte",
                &["aGVsbG8=", "aGVs\nbG8=", ""],
                &["aGVsbG8", "not base64!"],
            ),
            (
                "uuid",
                &[
                    "123e4567-e89b-12d3-a456-426614174000",
                    "123E4567E89B12D3A456426614174000",
                ],
                &["123e4567"],
            ),
            (
                "ipv4",
                &["10.0.0.1", "::ffff:10.0.0.1"],
                &["10.0.0.256", "01.2.3.4", "::1"],
            ),
            ("ipv6", &["::1", "fe80::1"], &["10.0.0.1", "fe80::1%eth0"]),
            (
                "cidr",
                &["10.0.0.0/8", "fd00::/64"],
                &["10.0.0.0/33", "10.0.0.0", "10.0.0.0/"],
            ),
            (
                "mac",
                &["00:1a:2b:3c:4d:5e", "00-1A-2B-3C-4D-5E", "001a.2b3c.4d5e"],
                &["00:1a:2b:3c:4d", "001a2b3c4d5e"],
            ),
            ("hexcolor", &["#fff", "a0b1c2"], &["#ffff", "red"]),
        ];
        for (format, good, bad) in cases {
            for value in good {
                assert!(valid(format, value), "{format}: {value:?} is valid");
            }
            for value in bad {
                assert!(!valid(format, value), "{format}: {value:?} is not");
            }
        }
        // Formats kube does not check, and those left unchecked here, take anything.
        for format in [
            "int-or-string",
            "password",
            "email",
            "uri",
            "k8s-short-name",
        ] {
            assert!(valid(format, "anything at all"));
        }
    }
}
