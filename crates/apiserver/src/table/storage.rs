//! The cells kube's printers compute for storage: a StorageClass's
//! `(default)` mark, a volume's or claim's phase (`Terminating` once
//! deleted), access modes as `RWO,ROX,RWX,RWOP`, a volume's claim, and a
//! claim's capacity and modes, shown only once it is bound.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::format::{arr_at, is_set, nonempty, str_at, value_text};

const DEFAULT_CLASS_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// NAME, with ` (default)` for the cluster's default class.
pub(super) fn storage_class_name(class: &Value, _: DateTime<Utc>) -> Value {
    let name = str_at(class, &["metadata", "name"]).unwrap_or("");
    let is_default = DEFAULT_CLASS_ANNOTATIONS
        .iter()
        .any(|key| str_at(class, &["metadata", "annotations", key]) == Some("true"));
    json!(if is_default {
        format!("{name} (default)")
    } else {
        name.to_string()
    })
}

/// STATUS of a PersistentVolume or claim.
pub(super) fn phase_or_terminating(obj: &Value, _: DateTime<Utc>) -> Value {
    json!(if is_set(obj, &["metadata", "deletionTimestamp"]) {
        "Terminating"
    } else {
        str_at(obj, &["status", "phase"]).unwrap_or("")
    })
}

/// kube's `GetAccessModesAsString`: abbreviations in a fixed order.
fn access_modes(modes: &[Value]) -> String {
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.iter().any(|m| m.as_str() == Some(mode)))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

pub(super) fn volume_access_modes(pv: &Value, _: DateTime<Utc>) -> Value {
    json!(access_modes(arr_at(pv, &["spec", "accessModes"])))
}

/// CLAIM: `namespace/name` of the bound claim.
pub(super) fn volume_claim(pv: &Value, _: DateTime<Utc>) -> Value {
    json!(
        match pv.pointer("/spec/claimRef").filter(|c| c.is_object()) {
            Some(claim) => format!(
                "{}/{}",
                str_at(claim, &["namespace"]).unwrap_or(""),
                str_at(claim, &["name"]).unwrap_or("")
            ),
            None => String::new(),
        }
    )
}

fn is_bound(pvc: &Value) -> bool {
    nonempty(pvc, &["spec", "volumeName"]).is_some()
}

pub(super) fn claim_capacity(pvc: &Value, _: DateTime<Utc>) -> Value {
    json!(match pvc.pointer("/status/capacity/storage") {
        Some(storage) if is_bound(pvc) => value_text(storage),
        _ => String::new(),
    })
}

pub(super) fn claim_access_modes(pvc: &Value, _: DateTime<Utc>) -> Value {
    json!(if is_bound(pvc) {
        access_modes(arr_at(pvc, &["status", "accessModes"]))
    } else {
        String::new()
    })
}
