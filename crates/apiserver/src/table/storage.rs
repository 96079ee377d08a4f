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

#[cfg(test)]
mod tests {
    use crate::table::test_support::{ago, builtin, column_names, single, wide_names};
    use serde_json::json;

    #[test]
    fn storage_classes() {
        let (t, c) = single(
            &builtin("storage.k8s.io", "StorageClass"),
            json!({
                "metadata": {
                    "name": "standard",
                    "creationTimestamp": ago(60),
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}
                },
                "provisioner": "rancher.io/local-path",
                "volumeBindingMode": "WaitForFirstConsumer"
            }),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Provisioner",
                "ReclaimPolicy",
                "VolumeBindingMode",
                "AllowVolumeExpansion",
                "Age"
            ]
        );
        assert_eq!(
            c,
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("WaitForFirstConsumer"),
                json!(false),
                json!("60s")
            ]
        );
    }

    #[test]
    fn persistent_volumes() {
        let (t, c) = single(
            &builtin("", "PersistentVolume"),
            json!({
                "metadata": {"name": "pv-1", "creationTimestamp": ago(60)},
                "spec": {
                    "capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": "default", "name": "data"},
                    "storageClassName": "standard"
                },
                "status": {"phase": "Bound"}
            }),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Capacity",
                "Access Modes",
                "Reclaim Policy",
                "Status",
                "Claim",
                "StorageClass",
                "VolumeAttributesClass",
                "Reason",
                "Age",
                "VolumeMode"
            ]
        );
        assert_eq!(wide_names(&t), ["VolumeMode"]);
        assert_eq!(
            c,
            [
                json!("pv-1"),
                json!("10Gi"),
                json!("RWO,RWX"),
                json!("Retain"),
                json!("Bound"),
                json!("default/data"),
                json!("standard"),
                json!("<unset>"),
                json!(""),
                json!("60s"),
                json!("<unset>")
            ]
        );
    }

    #[test]
    fn persistent_volume_claims() {
        let claim = |volume: &str, deleted: bool| {
            let mut pvc = json!({
                "metadata": {"name": "data", "creationTimestamp": ago(60)},
                "spec": {"volumeName": volume, "storageClassName": "standard", "volumeMode": "Filesystem"},
                "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
            });
            if deleted {
                pvc["metadata"]["deletionTimestamp"] = json!(ago(1));
            }
            pvc
        };
        let (t, c) = single(&builtin("", "PersistentVolumeClaim"), claim("pv-1", false));
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Status",
                "Volume",
                "Capacity",
                "Access Modes",
                "StorageClass",
                "VolumeAttributesClass",
                "Age",
                "VolumeMode"
            ]
        );
        assert_eq!(
            c,
            [
                json!("data"),
                json!("Bound"),
                json!("pv-1"),
                json!("1Gi"),
                json!("RWO"),
                json!("standard"),
                json!("<unset>"),
                json!("60s"),
                json!("Filesystem")
            ]
        );
        let (_, c) = single(&builtin("", "PersistentVolumeClaim"), claim("", true));
        assert_eq!(
            c[1..5].to_vec(),
            [json!("Terminating"), json!(""), json!(""), json!("")]
        );
    }
}
