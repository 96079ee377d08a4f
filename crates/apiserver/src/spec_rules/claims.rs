//! A PersistentVolumeClaim's spec, as kube's `ValidatePersistentVolumeClaimSpec` checks
//! it (a claim's, and an ephemeral volume's claim template's): access modes given and
//! known (`ReadWriteOncePod` alone), a positive storage request, a valid class name and
//! volume mode, and data sources that name what they clone. Operators that provision
//! storage write claims; one kube refuses is refused here too.

use serde_json::Value;

use super::rbac::label_selector;
use super::{
    dns_label, dns_subdomain, error, go_pointer, invalid, list, not_supported, present, required,
    text,
};
use crate::schema::{FieldError, FieldErrorReason, Path};
use steady_quota::Quantity;

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// The claim spec `spec` at `at`.
pub(super) fn claim_spec(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let modes_at = Path::Field(at, "accessModes");
    let modes = list(spec, "accessModes");
    if modes.is_empty() {
        errors.push(error(
            &modes_at,
            FieldErrorReason::Required,
            "Required value: at least 1 access mode is required".into(),
        ));
    }
    if let Some(selector) = present(spec, "selector") {
        label_selector(selector, &Path::Field(at, "selector"), errors);
    }
    let (mut once_pod, mut others) = (false, false);
    for mode in modes {
        match mode.as_str() {
            Some("ReadWriteOncePod") => once_pod = true,
            Some(known) if ACCESS_MODES.contains(&known) => others = true,
            _ => errors.push(not_supported(&modes_at, mode, ACCESS_MODES)),
        }
    }
    if once_pod && others {
        errors.push(error(
            &modes_at,
            FieldErrorReason::Forbidden,
            "Forbidden: may not use ReadWriteOncePod with other access modes".into(),
        ));
    }
    storage_request(spec, at, errors);
    let class = text(spec, "storageClassName");
    if !class.is_empty() {
        dns_subdomain(class, &Path::Field(at, "storageClassName"), errors);
    }
    if let Some(mode) = present(spec, "volumeMode")
        && !matches!(mode.as_str(), Some("Block" | "Filesystem"))
    {
        errors.push(not_supported(
            &Path::Field(at, "volumeMode"),
            mode,
            &["Block", "Filesystem"],
        ));
    }
    data_sources(spec, at, errors);
}

/// `resources.requests.storage`, named `resources[storage]` as kube names it.
fn storage_request(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let rendered = format!("{}[storage]", Path::Field(at, "resources").render());
    let storage_at = Path::At(&rendered);
    match spec.pointer("/resources/requests/storage") {
        None => errors.push(required(&storage_at)),
        Some(request) => {
            let quantity = request.as_str().and_then(|q| Quantity::parse(q).ok());
            if let Some(quantity) = quantity.filter(|q| q.is_negative() || q.is_zero()) {
                errors.push(invalid(
                    &storage_at,
                    &Value::from(quantity.to_string()),
                    "must be greater than zero",
                ));
            }
        }
    }
}

/// `dataSource` and `dataSourceRef`: each names a kind and an object (a claim when in the
/// core group), and they agree unless the reference reaches another namespace.
fn data_sources(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let source = present(spec, "dataSource");
    let reference = present(spec, "dataSourceRef");
    if let Some(source) = source {
        data_source(source, &Path::Field(at, "dataSource"), errors);
    }
    if let Some(reference) = reference {
        let reference_at = Path::Field(at, "dataSourceRef");
        data_source(reference, &reference_at, errors);
        let namespace = text(reference, "namespace");
        if !namespace.is_empty() {
            dns_label(namespace, &Path::Field(&reference_at, "namespace"), errors);
        }
    }
    let cross_namespace = reference.is_some_and(|r| !text(r, "namespace").is_empty());
    let why = match (source, reference) {
        (Some(_), Some(_)) if cross_namespace => {
            "may not be specified when dataSourceRef.namespace is specified"
        }
        (Some(source), Some(reference))
            if ["apiGroup", "kind", "name"]
                .iter()
                .any(|field| source.get(*field) != reference.get(*field)) =>
        {
            "must match dataSourceRef"
        }
        _ => return,
    };
    // kube shows the field path itself as the invalid value, a Go struct
    let shown = format!(
        "field.Path{{name:\"dataSource\", index:\"\", parent:{}}}",
        go_pointer("*field.Path", Some(spec))
    );
    errors.push(error(
        at,
        FieldErrorReason::Invalid,
        format!("Invalid value: {shown}: {why}"),
    ));
}

fn data_source(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    for field in ["name", "kind"] {
        if text(source, field).is_empty() {
            errors.push(required(&Path::Field(at, field)));
        }
    }
    let group = text(source, "apiGroup");
    let kind = text(source, "kind");
    if group.is_empty() && kind != "PersistentVolumeClaim" {
        errors.push(invalid(
            at,
            &Value::from(kind),
            "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ));
    }
    if !group.is_empty() {
        dns_subdomain(group, &Path::Field(at, "apiGroup"), errors);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn claim_errors(spec: Value) -> Vec<String> {
        messages(&validate(
            "",
            "persistentvolumeclaims",
            &json!({"spec": spec}),
        ))
    }

    #[test]
    fn claims_operators_write_pass() {
        let spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "standard", "volumeMode": "Filesystem",
            "dataSource": {"kind": "PersistentVolumeClaim", "name": "seed"},
            "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "seed"}});
        assert_eq!(claim_errors(spec), Vec::<String>::new());
    }

    #[test]
    fn claims_kube_refuses_are_refused_with_its_messages() {
        assert_eq!(
            claim_errors(json!({"resources": {}})),
            [
                "spec.accessModes: Required value: at least 1 access mode is required",
                "spec.resources[storage]: Required value",
            ]
        );
        assert_eq!(
            claim_errors(
                json!({"accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "ReadWrite"],
                "resources": {"requests": {"storage": "0"}}, "volumeMode": "Raw",
                "dataSource": {"kind": "VolumeSnapshot", "name": "snap"},
                "dataSourceRef": {"kind": "VolumeSnapshot", "name": "other", "apiGroup": "snapshot.storage.k8s.io"}})
            ),
            [
                "spec.accessModes: Unsupported value: \"ReadWrite\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
                "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\"",
                "spec.dataSource: Invalid value: \"VolumeSnapshot\": must be 'PersistentVolumeClaim' when referencing the default apiGroup",
                "spec: Invalid value: field.Path{name:\"dataSource\", index:\"\", parent:(*field.Path)(0xc000000000)}: must match dataSourceRef",
            ]
        );
    }
}
