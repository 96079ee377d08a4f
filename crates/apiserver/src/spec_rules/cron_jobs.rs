//! What a CronJob must hold, as kube-apiserver 1.32's `ValidateCronJobCreate` and
//! `validateCronJobSpec` check it: a name of at most 52 characters on create (the
//! controller appends an 11-character suffix to name its Jobs), a schedule in cron's
//! standard form without a `TZ=`/`CRON_TZ=` prefix (unless the stored schedule had one),
//! a time zone that looks like a zone name, a known concurrency policy, and history limits
//! and a starting deadline that are not negative.
//!
//! The schedule is parsed by croner, configured as robfig/cron's `ParseStandard`; its
//! messages are kube's for the wrong number of fields and croner's otherwise. The time
//! zone is not looked up in a zone database as Go's `time.LoadLocation` does.

use croner::parser::{CronParser, Seconds, Year};
use serde_json::Value;

use super::{error, invalid, required};
use crate::schema::{FieldError, FieldErrorReason, Path};

const NAME_MAX: usize = 52;
const CONCURRENCY_POLICIES: [&str; 3] = ["Allow", "Forbid", "Replace"];

/// The errors of the CronJob `new` (`old`: the stored one, on an update).
pub(crate) fn validate(old: Option<&Value>, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if old.is_none() && name.len() > NAME_MAX {
        errors.push(invalid(
            &Path::At("metadata.name"),
            &Value::from(name),
            "must be no more than 52 characters",
        ));
    }
    let text = |obj: Option<&Value>, pointer: &str| {
        obj.and_then(|o| o.pointer(pointer))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let schedule = text(Some(new), "/spec/schedule").unwrap_or_default();
    let time_zone = new.pointer("/spec/timeZone").filter(|z| !z.is_null());
    let field = Path::At("spec.schedule");
    if schedule.is_empty() {
        errors.push(required(&field));
    } else {
        let tz_allowed = text(old, "/spec/schedule").is_some_and(|s| s.contains("TZ"));
        if let Err(why) = parse_standard(&schedule) {
            errors.push(invalid(&field, &Value::from(schedule.as_str()), &why));
        }
        let tz_in_schedule = schedule.contains("TZ");
        if tz_allowed && tz_in_schedule && time_zone.is_some() {
            errors.push(invalid(
                &field,
                &Value::from(schedule.as_str()),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !tz_allowed && tz_in_schedule {
            errors.push(invalid(
                &field,
                &Value::from(schedule.as_str()),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    non_negative(new, "startingDeadlineSeconds", &mut errors);
    let zone_changed =
        old.is_none_or(|old| old.pointer("/spec/timeZone") != new.pointer("/spec/timeZone"));
    if zone_changed && let Some(zone) = time_zone {
        errors.extend(time_zone_error(zone));
    }
    let policy = text(Some(new), "/spec/concurrencyPolicy").unwrap_or_default();
    let policy_field = Path::At("spec.concurrencyPolicy");
    if policy.is_empty() {
        errors.push(required(&policy_field));
    } else if !CONCURRENCY_POLICIES.contains(&policy.as_str()) {
        errors.push(error(
            &policy_field,
            FieldErrorReason::NotSupported,
            format!(
                "Unsupported value: {policy:?}: supported values: \"Allow\", \"Forbid\", \"Replace\""
            ),
        ));
    }
    non_negative(new, "successfulJobsHistoryLimit", &mut errors);
    non_negative(new, "failedJobsHistoryLimit", &mut errors);
    errors
}

fn non_negative(cron_job: &Value, field: &str, errors: &mut Vec<FieldError>) {
    if let Some(value) = cron_job
        .pointer(&format!("/spec/{field}"))
        .and_then(Value::as_i64)
        .filter(|v| *v < 0)
    {
        errors.push(invalid(
            &Path::At(&format!("spec.{field}")),
            &Value::from(value),
            "must be greater than or equal to 0",
        ));
    }
}

/// robfig/cron's `ParseStandard`: an optional `TZ=`/`CRON_TZ=` prefix, then a descriptor
/// (`@hourly`, `@every 1h30m`, …) or exactly five fields.
fn parse_standard(schedule: &str) -> Result<(), String> {
    let mut spec = schedule.trim();
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        spec = spec
            .split_once(char::is_whitespace)
            .map_or("", |(_, rest)| rest.trim());
    }
    if let Some(every) = spec.strip_prefix("@every ") {
        return go_duration(every.trim()).then_some(()).ok_or_else(|| {
            format!(
                "failed to parse duration {spec}: time: invalid duration {:?}",
                every.trim()
            )
        });
    }
    if !spec.starts_with('@') {
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(spec)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Whether `text` is a Go duration `time.ParseDuration` reads: number and unit, repeated.
fn go_duration(text: &str) -> bool {
    const UNITS: [&str; 7] = ["ns", "us", "µs", "ms", "s", "m", "h"];
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        // The longest unit first: `ms` before `m`.
        let Some(unit) = UNITS
            .iter()
            .filter(|u| rest.starts_with(**u))
            .max_by_key(|u| u.len())
        else {
            return false;
        };
        rest = &rest[unit.len()..];
    }
    true
}

/// kube's `validateTimeZone`.
fn time_zone_error(zone: &Value) -> Option<FieldError> {
    let field = Path::At("spec.timeZone");
    let name = zone.as_str().unwrap_or_default();
    if name.is_empty() {
        return Some(invalid(
            &field,
            zone,
            "timeZone must be nil or non-empty string",
        ));
    }
    let valid_part = |part: &str| {
        part != "."
            && part != ".."
            && !part.starts_with('-')
            && !part.is_empty()
            && part.len() <= 14
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
    };
    if !name.split('/').all(valid_part) {
        return Some(invalid(&field, zone, &format!("unknown time zone {name}")));
    }
    if name.eq_ignore_ascii_case("Local") {
        return Some(invalid(
            &field,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    // Go's `time.LoadLocation`: a name the IANA database has (case-sensitive).
    let known = name == "UTC" || name.parse::<chrono_tz::Tz>().is_ok();
    (!known).then(|| invalid(&field, zone, &format!("unknown time zone {name}")))
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::*;
    use serde_json::json;

    fn cron_job(name: &str, spec: Value) -> Value {
        let mut spec = spec;
        spec["concurrencyPolicy"] = spec
            .get("concurrencyPolicy")
            .cloned()
            .unwrap_or(json!("Allow"));
        json!({"metadata": {"name": name}, "spec": spec})
    }

    #[test]
    fn standard_schedules_and_descriptors_pass() {
        for schedule in [
            "*/5 * * * *",
            "0 3 * * 1-5",
            "@hourly",
            "@every 1h30m",
            "@daily",
        ] {
            let errors = validate(None, &cron_job("backup", json!({"schedule": schedule})));
            assert!(errors.is_empty(), "{schedule}: {:?}", messages(&errors));
        }
    }

    #[test]
    fn a_bad_schedule_a_long_name_and_a_zone_prefix_are_refused_as_kube_does() {
        let name = "a".repeat(53);
        let errors = messages(&validate(
            None,
            &cron_job(&name, json!({"schedule": "* * *"})),
        ));
        assert_eq!(
            errors,
            [
                format!("metadata.name: Invalid value: \"{name}\": must be no more than 52 characters"),
                "spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields, found 3: [* * *]".into(),
            ]
        );
        let zoned = messages(&validate(
            None,
            &cron_job("b", json!({"schedule": "TZ=UTC 0 * * * *"})),
        ));
        assert_eq!(
            zoned,
            [
                "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            ]
        );
        let stored = cron_job("b", json!({"schedule": "TZ=UTC 0 * * * *"}));
        assert!(
            validate(Some(&stored), &stored).is_empty(),
            "kept from before"
        );
    }

    #[test]
    fn the_policy_limits_and_zone_are_checked() {
        let errors = messages(&validate(
            None,
            &cron_job(
                "c",
                json!({"schedule": "@hourly", "concurrencyPolicy": "Sometimes",
                    "failedJobsHistoryLimit": -1, "timeZone": "Local"}),
            ),
        ));
        assert_eq!(
            errors,
            [
                "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
                "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
                "spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
        assert!(
            validate(
                None,
                &cron_job(
                    "d",
                    json!({"schedule": "@hourly", "timeZone": "Europe/Berlin"})
                )
            )
            .is_empty()
        );
        let unknown = cron_job(
            "e",
            json!({"schedule": "@hourly", "timeZone": "Europe/berlin"}),
        );
        assert_eq!(
            messages(&validate(None, &unknown)),
            ["spec.timeZone: Invalid value: \"Europe/berlin\": unknown time zone Europe/berlin"],
            "the zone database's names are case-sensitive"
        );
    }
}
