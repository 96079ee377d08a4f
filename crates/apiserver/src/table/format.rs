//! Kubernetes' text formats for table cells, and the JSON accessors the
//! computed cells share: durations (`duration.HumanDuration`), label maps
//! (`labels.FormatLabels`), label selectors (`metav1.FormatLabelSelector`),
//! and how a JSON value reads as text. Knows nothing of columns or kinds.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

pub(super) const NONE: &str = "<none>";
pub(super) const UNKNOWN: &str = "<unknown>";

/// Kubernetes' `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration):
/// ~2-3 significant figures. Thresholds: < 2m → "Ns"; < 10m → "NmSs"; < 3h → "Nm";
/// < 8h → "NhMm"; < 48h → "Nh"; < 8d → "NdHh"; < 2y → "Nd"; < 8y → "NyDd"; else "Ny".
/// Up to one second in the future counts as "0s"; further is "<invalid>".
pub(super) fn human_duration(d: Duration) -> String {
    // Truncation toward zero, like Go's int(d.Seconds()).
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_units(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return two_units(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return two_units(hours / 24, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return two_units(hours / 24 / 365, "y", (hours / 24) % 365, "d");
    }
    format!("{}y", hours / 24 / 365)
}

/// `5m`, or `5m30s` when the smaller unit is not zero.
fn two_units(large: i64, large_unit: &str, small: i64, small_unit: &str) -> String {
    if small == 0 {
        format!("{large}{large_unit}")
    } else {
        format!("{large}{large_unit}{small}{small_unit}")
    }
}

// ---------------------------------------------------------------------------
// Printers
// ---------------------------------------------------------------------------

pub(super) fn value_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            items.iter().map(value_text).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

pub(super) fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(*key))
}

pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

pub(super) fn nonempty<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    str_at(v, path).filter(|s| !s.is_empty())
}

pub(super) fn is_set(v: &Value, path: &[&str]) -> bool {
    at(v, path).is_some_and(|x| !x.is_null())
}

pub(super) fn int_at(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path).and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)))
}

pub(super) fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn name_cell(obj: &Value) -> Value {
    json!(str_at(obj, &["metadata", "name"]).unwrap_or(""))
}

pub(super) fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The RFC 3339 timestamp at `path`, if there is one that parses.
pub(super) fn time_at(obj: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    str_at(obj, path).and_then(parse_time)
}

pub(super) fn creation_age(obj: &Value, now: DateTime<Utc>) -> String {
    match time_at(obj, &["metadata", "creationTimestamp"]) {
        Some(t) => human_duration(now - t),
        None => UNKNOWN.to_string(),
    }
}

/// labels.FormatLabels: sorted "k=v,k2=v2", "<none>" when empty.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, String> = map
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), value_text(v))).collect())
        .unwrap_or_default();
    if pairs.is_empty() {
        return NONE.to_string();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// metav1.LabelSelector as a selector string ("" when it selects everything).
pub(super) fn label_selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return String::new();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", value_text(v))));
        }
    }
    for expr in arr_at(selector, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]).unwrap_or("");
        let mut values: Vec<String> = arr_at(expr, &["values"]).iter().map(value_text).collect();
        values.sort();
        let text = match str_at(expr, &["operator"]).unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".to_string(),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_thresholds() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60, "10m"),
            (10 * 60 + 30, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (7 * 3600 + 59 * 60, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (7 * 86400 + 23 * 3600, "7d23h"),
            (8 * 86400, "8d"),
            (729 * 86400 + 23 * 3600, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (8 * 365 * 86400 - 1, "7y364d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::seconds(*secs)), *want, "{secs}s");
        }
        // Fractions truncate toward zero like Go's int(d.Seconds()).
        assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
        assert_eq!(human_duration(Duration::milliseconds(119_999)), "119s");
    }
}
