//! `status.conditions` helpers with `metav1.Condition` semantics (as in apimachinery's
//! `meta.SetStatusCondition`), with the clock injected so results are deterministic.
//!
//! [`Condition`] is k8s-openapi's `metav1::Condition` (its `Time` is a `jiff::Timestamp`
//! with this workspace's k8s-openapi 0.29; the API takes the operators' `chrono` clock and
//! converts, at seconds precision as `metav1.Time` is written). It is wrapped, not aliased,
//! for three reasons: constructors (`Condition::from_bool(..)`) must be callable without
//! importing an extension trait; status types derive `Eq`, which k8s-openapi's type does
//! not (every field has total equality, so the wrapper implements it); and a condition
//! written without `lastTransitionTime` (a hand-written patch; the Cache CRD requires only
//! `type` and `status`) must still decode, as the epoch, instead of failing a whole
//! list. It serializes exactly as `metav1::Condition`, derefs to it and converts both ways
//! ([`Condition::into_inner`], `From`).

use std::ops::{Deref, DerefMut};

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition as MetaCondition, Time};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize};

/// `"True"`.
pub const STATUS_TRUE: &str = "True";
/// `"False"`.
pub const STATUS_FALSE: &str = "False";
/// `"Unknown"`.
pub const STATUS_UNKNOWN: &str = "Unknown";

/// One `status.conditions` entry: k8s-openapi's `metav1::Condition` (type, status
/// `"True"`/`"False"`/`"Unknown"`, reason, message, lastTransitionTime,
/// observedGeneration), reached through `Deref` (`condition.reason`).
///
/// ```
/// use steady_runtime::conditions::{Condition, STATUS_TRUE};
/// let ready = Condition::from_bool("Ready", true, "AllReplicasReady", "3 of 3 ready")
///     .with_observed_generation(Some(2));
/// assert_eq!(ready.status, STATUS_TRUE);
/// let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition = ready.into_inner();
/// assert_eq!(meta.observed_generation, Some(2));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Condition(pub MetaCondition);

/// Every field (strings, an integer, a timestamp) has total equality.
impl Eq for Condition {}

impl Deref for Condition {
    type Target = MetaCondition;

    fn deref(&self) -> &MetaCondition {
        &self.0
    }
}

impl DerefMut for Condition {
    fn deref_mut(&mut self) -> &mut MetaCondition {
        &mut self.0
    }
}

impl From<MetaCondition> for Condition {
    fn from(condition: MetaCondition) -> Self {
        Condition(condition)
    }
}

impl From<Condition> for MetaCondition {
    fn from(condition: Condition) -> Self {
        condition.0
    }
}

/// `metav1.Condition` as written, with a missing `lastTransitionTime` tolerated.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Lenient {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(default)]
    status: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    last_transition_time: Option<Time>,
    #[serde(default)]
    observed_generation: Option<i64>,
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let c = Lenient::deserialize(deserializer)?;
        Ok(Condition(MetaCondition {
            type_: c.type_,
            status: c.status,
            reason: c.reason,
            message: c.message,
            last_transition_time: c
                .last_transition_time
                .unwrap_or(Time(Timestamp::UNIX_EPOCH)),
            observed_generation: c.observed_generation,
        }))
    }
}

impl Condition {
    /// A condition without observed generation; its `lastTransitionTime` (the epoch here)
    /// is set by [`set_condition`].
    pub fn new(
        type_: impl Into<String>,
        status: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition(MetaCondition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        })
    }

    /// `status` is `"True"` or `"False"` after `cond`.
    pub fn from_bool(
        type_: impl Into<String>,
        cond: bool,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let status = if cond { STATUS_TRUE } else { STATUS_FALSE };
        Condition::new(type_, status, reason, message)
    }

    /// Set `observedGeneration` (normally the object's `metadata.generation`).
    pub fn with_observed_generation(mut self, generation: Option<i64>) -> Self {
        self.0.observed_generation = generation;
        self
    }

    /// k8s-openapi's `metav1::Condition` inside.
    pub fn into_inner(self) -> MetaCondition {
        self.0
    }
}

/// `now` as `metav1.Time`: whole seconds (what the API serializes), clamped to the range
/// `jiff` represents.
pub fn to_time(now: DateTime<Utc>) -> Time {
    let seconds = now
        .timestamp()
        .clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Set or replace the condition of type `new.type_` in `conditions`.
///
/// - Absent: `new` is appended with `lastTransitionTime = now`.
/// - Present with a different `status`: replaced by `new` with `lastTransitionTime = now`.
/// - Present with the same `status`: reason, message and observedGeneration are taken from
///   `new`; `lastTransitionTime` is kept from the existing condition.
///
/// `new.last_transition_time` is ignored: the timestamp always comes from `now` (or is
/// kept). Returns true if `conditions` changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition, now: DateTime<Utc>) -> bool {
    let mut updated = new;
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == updated.type_) else {
        updated.last_transition_time = to_time(now);
        conditions.push(updated);
        return true;
    };
    updated.last_transition_time = if existing.status == updated.status {
        existing.last_transition_time.clone()
    } else {
        to_time(now)
    };
    if *existing == updated {
        return false;
    }
    *existing = updated;
    true
}

/// Remove the condition of type `type_`. Returns true if there was one.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of type `type_`, if any.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` exists and has status `"True"`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == STATUS_TRUE)
}

/// Whether the condition of type `type_` exists and has status `"False"`.
pub fn is_false(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == STATUS_FALSE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
    }

    fn ready(status: &str, reason: &str, message: &str) -> Condition {
        Condition::new("Ready", status, reason, message)
    }

    /// The one condition in `conds`, as (type, status, reason, message).
    fn only(conds: &[Condition]) -> (&str, &str, &str, &str) {
        assert_eq!(conds.len(), 1, "{conds:?}");
        let c = &conds[0];
        (&c.type_, &c.status, &c.reason, &c.message)
    }

    #[test]
    fn adds_missing_condition_with_now() {
        let mut conds = vec![];
        let changed = set_condition(&mut conds, ready("True", "Done", "all good"), t(0));
        assert!(changed);
        assert_eq!(only(&conds), ("Ready", "True", "Done", "all good"));
        assert_eq!(
            serde_json::to_value(&conds[0].last_transition_time).unwrap(),
            "2023-11-14T22:13:20Z"
        );
    }

    #[test]
    fn supplied_timestamp_is_ignored() {
        let mut conds = vec![];
        let mut c = ready("True", "Done", "");
        c.last_transition_time = to_time(t(-1_000_000));
        set_condition(&mut conds, c, t(0));
        assert_eq!(conds[0].last_transition_time, to_time(t(0)));
    }

    #[test]
    fn status_change_moves_transition_time() {
        let mut conds = vec![];
        set_condition(&mut conds, ready("False", "Pending", "waiting"), t(0));
        let changed = set_condition(&mut conds, ready("True", "Done", "ok"), t(60));
        assert!(changed);
        assert_eq!(only(&conds), ("Ready", "True", "Done", "ok"));
        assert_eq!(conds[0].last_transition_time, to_time(t(60)));
    }

    #[test]
    fn same_status_keeps_transition_time_but_updates_reason_message_generation() {
        let mut conds = vec![];
        set_condition(&mut conds, ready("False", "Pending", "waiting"), t(0));
        let changed = set_condition(
            &mut conds,
            ready("False", "Scaling", "2 of 3 replicas").with_observed_generation(Some(4)),
            t(60),
        );
        assert!(changed);
        assert_eq!(conds[0].reason, "Scaling");
        assert_eq!(conds[0].message, "2 of 3 replicas");
        assert_eq!(conds[0].observed_generation, Some(4));
        assert_eq!(conds[0].last_transition_time, to_time(t(0)));
    }

    #[test]
    fn identical_condition_is_no_change() {
        let mut conds = vec![];
        let c = ready("True", "Done", "ok").with_observed_generation(Some(2));
        set_condition(&mut conds, c.clone(), t(0));
        let before = conds.clone();
        assert!(!set_condition(&mut conds, c, t(600)));
        assert_eq!(conds, before);
    }

    #[test]
    fn other_types_are_untouched_and_order_kept() {
        let mut conds = vec![];
        set_condition(&mut conds, ready("True", "Done", ""), t(0));
        set_condition(
            &mut conds,
            Condition::new("Progressing", "True", "Rolling", ""),
            t(1),
        );
        set_condition(&mut conds, ready("False", "Broken", ""), t(2));
        assert_eq!(
            conds.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            ["Ready", "Progressing"]
        );
        assert_eq!(conds[1].last_transition_time, to_time(t(1)));
        assert_eq!(conds[0].last_transition_time, to_time(t(2)));
    }

    #[test]
    fn find_and_is_true() {
        let mut conds = vec![];
        assert!(find(&conds, "Ready").is_none());
        assert!(!is_true(&conds, "Ready"));
        set_condition(&mut conds, ready("Unknown", "Starting", ""), t(0));
        assert_eq!(
            find(&conds, "Ready").map(|c| c.reason.as_str()),
            Some("Starting")
        );
        assert!(!is_true(&conds, "Ready"));
        assert!(!is_false(&conds, "Ready"));
        let ready_if = |ready: bool, reason: &str| Condition::from_bool("Ready", ready, reason, "");
        set_condition(&mut conds, ready_if(true, "Done"), t(1));
        assert!(is_true(&conds, "Ready"));
        assert!(!is_true(&conds, "Other"));
        set_condition(&mut conds, ready_if(false, "Lost"), t(2));
        assert!(is_false(&conds, "Ready"));
    }

    #[test]
    fn remove() {
        let mut conds = vec![];
        set_condition(&mut conds, ready("True", "Done", ""), t(0));
        assert!(remove_condition(&mut conds, "Ready"));
        assert!(!remove_condition(&mut conds, "Ready"));
        assert!(conds.is_empty());
    }

    #[test]
    fn serde_matches_metav1_condition() {
        let c = ready("True", "Done", "ok").with_observed_generation(Some(3));
        let mut conds = vec![];
        set_condition(&mut conds, c, t(0));
        let json = serde_json::to_value(&conds[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "Ready",
                "status": "True",
                "reason": "Done",
                "message": "ok",
                "lastTransitionTime": "2023-11-14T22:13:20Z",
                "observedGeneration": 3
            })
        );
        let back: Condition = serde_json::from_value(json).unwrap();
        assert_eq!(back, conds[0]);

        let without_gen = serde_json::to_value(ready("False", "X", "")).unwrap();
        assert!(without_gen.get("observedGeneration").is_none());

        // metav1.Condition as the API server returns it, also via k8s-openapi's type.
        let k8s = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Done".into(),
            message: "ok".into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(t(0).timestamp()).unwrap(),
            ),
            observed_generation: Some(3),
        };
        let ours: Condition = serde_json::from_value(serde_json::to_value(&k8s).unwrap()).unwrap();
        assert_eq!(ours, conds[0]);
    }

    #[test]
    fn a_condition_without_transition_time_decodes_as_the_epoch() {
        let c: Condition =
            serde_json::from_value(serde_json::json!({"type": "Ready", "status": "False"}))
                .unwrap();
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "False"));
        assert_eq!(c.last_transition_time, Time(Timestamp::UNIX_EPOCH));
        assert_eq!(c.reason, "");
    }

    #[test]
    fn transition_times_are_whole_seconds() {
        let precise = t(0) + chrono::Duration::milliseconds(750);
        assert_eq!(to_time(precise), to_time(t(0)));
    }
}
