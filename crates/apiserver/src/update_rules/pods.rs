//! What an update may change in a pod's spec, as kube-apiserver's `ValidatePodUpdate`
//! decides: the spec is fixed once the pod exists, but for its containers' images, an
//! `activeDeadlineSeconds` set or shortened, tolerations added, a negative grace period
//! raised to 1, and scheduling gates removed (and, while the pod is gated, its node
//! selector and affinity).

use serde_json::{Map, Value};

use super::{forbidden, spec_forbidden};
use crate::schema::{FieldError, FieldErrorReason};

/// kube-apiserver's message, before the difference it appends.
const SPEC_FORBIDDEN: &str = "Forbidden: pod updates may not change fields other than \
`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,\
`spec.tolerations` (only additions to existing tolerations),\
`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// The errors of updating the pod `old` to `new`: none when only what may change did.
pub(super) fn validate(old: &Value, new: &Value) -> Vec<FieldError> {
    let empty = Map::new();
    let (old_spec, new_spec) = (
        spec_of(old).unwrap_or(&empty),
        spec_of(new).unwrap_or(&empty),
    );
    let mut errors = Vec::new();
    for list in ["containers", "initContainers"] {
        if items(old_spec, list).len() != items(new_spec, list).len() {
            errors.push(forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            ));
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    errors.extend(active_deadline_error(old_spec, new_spec));
    errors.extend(tolerations_error(old_spec, new_spec));
    errors.extend(scheduling_gates_error(old_spec, new_spec));
    if !errors.is_empty() {
        return errors;
    }
    let munged = with_mutable_fields_of(old_spec, new_spec);
    if munged != *old_spec {
        errors.push(spec_forbidden(SPEC_FORBIDDEN, old_spec, munged));
    }
    errors
}

fn spec_of(pod: &Value) -> Option<&Map<String, Value>> {
    pod.get("spec").and_then(Value::as_object)
}

fn items<'a>(spec: &'a Map<String, Value>, list: &str) -> &'a [Value] {
    spec.get(list)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `new_spec` with every field an update may change taken from `old_spec`: what is left
/// must equal `old_spec`.
fn with_mutable_fields_of(
    old_spec: &Map<String, Value>,
    new_spec: &Map<String, Value>,
) -> Map<String, Value> {
    let mut munged = new_spec.clone();
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = munged.get_mut(list) {
            for (container, before) in containers.iter_mut().zip(items(old_spec, list)) {
                if let Value::Object(container) = container {
                    match before.get("image") {
                        Some(image) => container.insert("image".into(), image.clone()),
                        None => container.remove("image"),
                    };
                }
            }
        }
    }
    let mut take_old = |field: &str| match old_spec.get(field) {
        Some(value) => munged.insert(field.into(), value.clone()),
        None => munged.remove(field),
    };
    // Ephemeral containers change through their subresource, checked there.
    take_old("ephemeralContainers");
    take_old("activeDeadlineSeconds");
    take_old("tolerations");
    take_old("schedulingGates");
    if !items(old_spec, "schedulingGates").is_empty() {
        take_old("nodeSelector");
        take_old("affinity");
    }
    let old_grace = old_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    let new_grace = new_spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && new_grace == Some(1) {
        take_old("terminationGracePeriodSeconds");
    }
    munged
}

/// `activeDeadlineSeconds` may be set, or lowered, never raised or removed.
fn active_deadline_error(
    old_spec: &Map<String, Value>,
    new_spec: &Map<String, Value>,
) -> Option<FieldError> {
    const FIELD: &str = "spec.activeDeadlineSeconds";
    let invalid = |value: String, why: &str| FieldError {
        field: FIELD.into(),
        reason: FieldErrorReason::Invalid,
        message: format!("Invalid value: {value}: {why}"),
    };
    let old = old_spec
        .get("activeDeadlineSeconds")
        .filter(|v| !v.is_null());
    match new_spec
        .get("activeDeadlineSeconds")
        .filter(|v| !v.is_null())
    {
        Some(new) => {
            let seconds = new
                .as_i64()
                .filter(|s| (0..=i64::from(i32::MAX)).contains(s));
            let Some(seconds) = seconds else {
                return Some(invalid(
                    new.to_string(),
                    "must be between 0 and 2147483647, inclusive",
                ));
            };
            old.and_then(Value::as_i64)
                .is_some_and(|before| before < seconds)
                .then(|| {
                    invalid(
                        seconds.to_string(),
                        "must be less than or equal to previous value",
                    )
                })
        }
        None => old.map(|_| {
            invalid(
                "\"null\"".into(),
                "must not update from a positive integer to nil value",
            )
        }),
    }
}

/// Every toleration the pod had stays, but for its `tolerationSeconds`.
fn tolerations_error(
    old_spec: &Map<String, Value>,
    new_spec: &Map<String, Value>,
) -> Option<FieldError> {
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Value::Object(map) = &mut t {
            map.remove("tolerationSeconds");
        }
        t
    };
    let kept: Vec<Value> = items(new_spec, "tolerations")
        .iter()
        .map(without_seconds)
        .collect();
    let modified = items(old_spec, "tolerations")
        .iter()
        .any(|t| !kept.contains(&without_seconds(t)));
    modified.then(|| {
        forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        )
    })
}

/// Scheduling gates may only be removed.
fn scheduling_gates_error(
    old_spec: &Map<String, Value>,
    new_spec: &Map<String, Value>,
) -> Option<FieldError> {
    let old = items(old_spec, "schedulingGates");
    let added = items(new_spec, "schedulingGates")
        .iter()
        .find(|g| !old.contains(g))?;
    let name = added
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(forbidden(
        "spec.schedulingGates",
        &format!("only deletion is allowed, but found new scheduling gate '{name}'"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    fn base() -> Value {
        json!({
            "containers": [{"name": "app", "image": "a:1", "ports": [{"containerPort": 80}]}],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
            "terminationGracePeriodSeconds": 30,
            "nodeName": "n1"
        })
    }

    fn updated(change: impl FnOnce(&mut Value)) -> Vec<FieldError> {
        let mut spec = base();
        change(&mut spec);
        validate(&pod(base()), &pod(spec))
    }

    #[test]
    fn images_deadlines_tolerations_and_gates_may_change() {
        assert!(updated(|s| s["containers"][0]["image"] = json!("a:2")).is_empty());
        assert!(updated(|s| s["activeDeadlineSeconds"] = json!(100)).is_empty());
        assert!(
            updated(|s| s["tolerations"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "x"})))
            .is_empty()
        );
        assert!(updated(|s| s["tolerations"][0]["tolerationSeconds"] = json!(10)).is_empty());
        assert!(updated(|_| {}).is_empty());
    }

    #[test]
    fn anything_else_is_forbidden_and_named() {
        let errors = updated(|s| s["containers"][0]["ports"][0]["containerPort"] = json!(81));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec");
        assert_eq!(errors[0].reason, FieldErrorReason::Forbidden);
        assert!(
            errors[0].message.starts_with(SPEC_FORBIDDEN),
            "{}",
            errors[0].message
        );
        assert!(
            errors[0]
                .message
                .contains("spec.containers[0].ports[0].containerPort: 80 → 81"),
            "{}",
            errors[0].message
        );
        let moved = updated(|s| s["nodeName"] = json!("n2"));
        assert!(moved[0].message.contains("spec.nodeName: \"n1\" → \"n2\""));
        let unbound = updated(|s| {
            s.as_object_mut().unwrap().remove("nodeName");
        });
        assert!(unbound[0].message.contains("spec.nodeName: removed"));
    }

    #[test]
    fn containers_are_neither_added_nor_removed() {
        let errors = updated(|s| {
            s["containers"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "b", "image": "b"}))
        });
        assert_eq!(errors[0].field, "spec.containers");
        assert_eq!(
            errors[0].message,
            "Forbidden: pod updates may not add or remove containers"
        );
    }

    #[test]
    fn a_deadline_only_shortens() {
        let mut old = base();
        old["activeDeadlineSeconds"] = json!(100);
        let check = |value: Value| {
            let mut new = old.clone();
            new["activeDeadlineSeconds"] = value;
            validate(&pod(old.clone()), &pod(new))
        };
        assert!(check(json!(50)).is_empty());
        assert_eq!(
            check(json!(200))[0].message,
            "Invalid value: 200: must be less than or equal to previous value"
        );
        assert!(
            check(Value::Null)[0]
                .message
                .contains("must not update from a positive integer to nil value")
        );
    }

    #[test]
    fn a_toleration_stays_and_a_gate_only_goes() {
        let errors = updated(|s| s["tolerations"] = json!([]));
        assert_eq!(errors[0].field, "spec.tolerations");
        let mut gated = base();
        gated["schedulingGates"] = json!([{"name": "g1"}]);
        let mut ungated = gated.clone();
        ungated["schedulingGates"] = json!([]);
        ungated["nodeSelector"] = json!({"zone": "a"});
        assert!(validate(&pod(gated.clone()), &pod(ungated)).is_empty());
        let mut more = gated.clone();
        more["schedulingGates"] = json!([{"name": "g1"}, {"name": "g2"}]);
        assert_eq!(
            validate(&pod(gated), &pod(more))[0].message,
            "Forbidden: only deletion is allowed, but found new scheduling gate 'g2'"
        );
    }

    #[test]
    fn a_negative_grace_period_may_become_one() {
        let mut old = base();
        old["terminationGracePeriodSeconds"] = json!(-1);
        let mut new = old.clone();
        new["terminationGracePeriodSeconds"] = json!(1);
        assert!(validate(&pod(old.clone()), &pod(new)).is_empty());
        let mut other = old.clone();
        other["terminationGracePeriodSeconds"] = json!(5);
        assert_eq!(validate(&pod(old), &pod(other)).len(), 1);
    }
}
