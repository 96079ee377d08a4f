//! A pod spec's volumes, as kube 1.32's `ValidateVolumes` and `validateVolumeSource`
//! check them: each named with a unique DNS label and from exactly one source; the
//! sources operators write checked whole (a Secret's or ConfigMap's name, its items' keys
//! and relative paths and file modes, a claim's name, a host path and its type, an empty
//! dir's size, downward-API files and projections, projected tokens' lifetimes). The
//! sources of cloud and network disks are counted, not checked. A container's mounts of
//! them are checked here too (`mounts`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::claims::claim_spec;
use super::env::{field_selector, resource_selector};
use super::{error, invalid, list, not_supported, required, text, unique_label};
use crate::schema::{FieldError, FieldErrorReason, Path};
use steady_quota::Quantity;

/// Every volume source, in the order kube's `validateVolumeSource` looks at them (the
/// second found is the one refused).
const SOURCES: &[&str] = &[
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
];

/// The fields a downward-API file may hold (kube's
/// `validVolumeDownwardAPIFieldPathExpressions`, sorted).
const VOLUME_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
];

const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

const FILE_MODE_MSG: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// The volumes of the pod spec at `at`, checked; their names, for the mounts.
pub(super) fn volumes(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let all = Path::Field(at, "volumes");
    for (i, volume) in list(spec, "volumes").iter().enumerate() {
        let item = Path::Item(&all, i);
        let field = Path::Field(&item, "name");
        unique_label(text(volume, "name"), &field, &mut names, errors);
        source(volume, &item, errors);
    }
    names
}

/// kube's `ValidateVolumeMounts` for the container at `at`: each mount names a volume of
/// the pod and a path no other mount of the container uses; a sub-path descends; mount
/// propagation is known (and `Bidirectional` only for a privileged container); a
/// recursive read-only mount is read-only without propagation. kube names the sub-path,
/// propagation and recursive read-only errors after the list, not the mount
/// (`volumeMounts.subPath`), and so does this.
pub(super) fn mounts(
    container: &Value,
    at: &Path,
    volumes: &BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let all = Path::Field(at, "volumeMounts");
    let privileged = container.pointer("/securityContext/privileged") == Some(&Value::Bool(true));
    let mut paths = BTreeSet::new();
    for (i, mount) in list(container, "volumeMounts").iter().enumerate() {
        let item = Path::Item(&all, i);
        let name_at = Path::Field(&item, "name");
        let name = text(mount, "name");
        if name.is_empty() {
            errors.push(required(&name_at));
        }
        if !volumes.contains(name) {
            errors.push(error(
                &name_at,
                FieldErrorReason::NotFound,
                format!("Not found: {name:?}"),
            ));
        }
        let path = text(mount, "mountPath");
        let path_at = Path::Field(&item, "mountPath");
        if path.is_empty() {
            errors.push(required(&path_at));
        }
        if !paths.insert(path) {
            errors.push(invalid(&path_at, &Value::from(path), "must be unique"));
        }
        let sub_path = text(mount, "subPath");
        if !sub_path.is_empty() {
            descending_path(sub_path, &Path::Field(&all, "subPath"), errors);
        }
        let expression = text(mount, "subPathExpr");
        if !expression.is_empty() {
            if !sub_path.is_empty() {
                errors.push(invalid(
                    &Path::Field(&item, "subPathExpr"),
                    &Value::from(expression),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            descending_path(expression, &Path::Field(&all, "subPathExpr"), errors);
        }
        let propagation = mount.get("mountPropagation").filter(|p| !p.is_null());
        if let Some(propagation) = propagation {
            mount_propagation(
                propagation,
                privileged,
                &Path::Field(&all, "mountPropagation"),
                errors,
            );
        }
        recursive_read_only(
            mount,
            propagation,
            &Path::Field(&all, "recursiveReadOnly"),
            errors,
        );
    }
}

fn mount_propagation(
    propagation: &Value,
    privileged: bool,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    const KNOWN: &[&str] = &["Bidirectional", "HostToContainer", "None"];
    if !propagation.as_str().is_some_and(|p| KNOWN.contains(&p)) {
        errors.push(not_supported(at, propagation, KNOWN));
    }
    if propagation.as_str() == Some("Bidirectional") && !privileged {
        errors.push(error(
            at,
            FieldErrorReason::Forbidden,
            "Forbidden: Bidirectional mount propagation is available only to privileged containers"
                .into(),
        ));
    }
}

fn recursive_read_only(
    mount: &Value,
    propagation: Option<&Value>,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let Some(mode) = mount.get("recursiveReadOnly").filter(|m| !m.is_null()) else {
        return;
    };
    let forbidden = |why: &str| error(at, FieldErrorReason::Forbidden, format!("Forbidden: {why}"));
    match mode.as_str() {
        Some("Disabled") => {}
        Some("Enabled" | "IfPossible") => {
            if mount.get("readOnly") != Some(&Value::Bool(true)) {
                errors.push(forbidden("may only be specified when readOnly is true"));
            }
            if propagation.is_some_and(|p| p.as_str() != Some("None")) {
                errors.push(forbidden(
                    "may only be specified when mountPropagation is None or not specified",
                ));
            }
        }
        _ => errors.push(not_supported(
            at,
            mode,
            &["Disabled", "Enabled", "IfPossible"],
        )),
    }
}

fn source(volume: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let mut found = false;
    for kind in SOURCES {
        let Some(source) = volume.get(*kind).filter(|s| !s.is_null()) else {
            continue;
        };
        // kube's own misspellings of two paths, kept so its messages match
        let shown = match *kind {
            "downwardAPI" => "downwarAPI",
            "cephfs" => "cephFS",
            kind => kind,
        };
        if found {
            errors.push(error(
                &Path::Field(at, shown),
                FieldErrorReason::Forbidden,
                "Forbidden: may not specify more than 1 volume type".into(),
            ));
            continue;
        }
        found = true;
        let source_at = Path::Field(at, kind);
        match *kind {
            "emptyDir" => empty_dir(source, &source_at, errors),
            "hostPath" => host_path(source, &source_at, errors),
            "secret" => files(source, "secretName", &source_at, errors),
            "configMap" => files(source, "name", &source_at, errors),
            "persistentVolumeClaim" if text(source, "claimName").is_empty() => {
                errors.push(required(&Path::Field(&source_at, "claimName")));
            }
            "downwardAPI" => {
                default_mode(source, &source_at, errors);
                for file in list(source, "items") {
                    downward_file(file, &source_at, errors);
                }
            }
            "projected" => projected(source, &source_at, errors),
            "ephemeral" => ephemeral(source, &source_at, errors),
            _ => {}
        }
    }
    if !found {
        errors.push(error(
            at,
            FieldErrorReason::Required,
            "Required value: must specify a volume type".into(),
        ));
    }
}

/// kube's `validateEphemeralVolumeSource`: a claim template with a valid claim spec.
fn ephemeral(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let template_at = Path::Field(at, "volumeClaimTemplate");
    match source.get("volumeClaimTemplate").filter(|t| !t.is_null()) {
        None => errors.push(required(&template_at)),
        Some(template) => {
            let spec = template.get("spec").unwrap_or(&Value::Null);
            claim_spec(spec, &Path::Field(&template_at, "spec"), errors);
        }
    }
}

fn empty_dir(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let limit = source.get("sizeLimit").and_then(Value::as_str);
    if limit
        .and_then(|q| Quantity::parse(q).ok())
        .is_some_and(|q| q.is_negative())
    {
        errors.push(error(
            &Path::Field(at, "sizeLimit"),
            FieldErrorReason::Forbidden,
            "Forbidden: SizeLimit field must be a valid resource quantity".into(),
        ));
    }
}

fn host_path(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let path = text(source, "path");
    let path_at = Path::Field(at, "path");
    if path.is_empty() {
        errors.push(required(&path_at));
        return;
    }
    no_backsteps(path, &path_at, errors);
    if let Some(kind) = source.get("type").and_then(Value::as_str)
        && !HOST_PATH_TYPES.contains(&kind)
    {
        errors.push(not_supported(
            &Path::Field(at, "type"),
            &Value::from(kind),
            HOST_PATH_TYPES,
        ));
    }
}

/// A Secret or ConfigMap volume: the object's name (in `name_field`), its file mode and
/// its items.
fn files(source: &Value, name_field: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if text(source, name_field).is_empty() {
        errors.push(required(&Path::Field(at, name_field)));
    }
    default_mode(source, at, errors);
    let items = Path::Field(at, "items");
    for (i, item) in list(source, "items").iter().enumerate() {
        key_to_path(item, &Path::Item(&items, i), errors);
    }
}

fn default_mode(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    file_mode(source, "defaultMode", at, errors);
}

/// A file mode at `field` of `holder`, when set: 0 to 0777.
fn file_mode(holder: &Value, field: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(mode) = holder
        .get(field)
        .filter(|m| !m.as_i64().is_some_and(|m| (0..=0o777).contains(&m)) && !m.is_null())
    {
        errors.push(invalid(&Path::Field(at, field), mode, FILE_MODE_MSG));
    }
}

/// kube's `validateKeyToPath`.
fn key_to_path(item: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    if text(item, "key").is_empty() {
        errors.push(required(&Path::Field(at, "key")));
    }
    let path = text(item, "path");
    let path_at = Path::Field(at, "path");
    if path.is_empty() {
        errors.push(required(&path_at));
    }
    local_path(path, &path_at, errors);
    file_mode(item, "mode", at, errors);
}

/// kube's `validateDownwardAPIVolumeFile`. kube names its errors after the volume source,
/// not the item (`downwardAPI.path`), and so does this.
fn downward_file(file: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let path = text(file, "path");
    let path_at = Path::Field(at, "path");
    if path.is_empty() {
        errors.push(required(&path_at));
    }
    local_path(path, &path_at, errors);
    let field_ref = file.get("fieldRef").filter(|f| !f.is_null());
    let resource_ref = file.get("resourceFieldRef").filter(|r| !r.is_null());
    match (field_ref, resource_ref) {
        (Some(selector), resource) => {
            field_selector(
                selector,
                VOLUME_FIELDS,
                &Path::Field(at, "fieldRef"),
                errors,
            );
            if resource.is_some() {
                errors.push(invalid(
                    at,
                    &Value::from("resource"),
                    "fieldRef and resourceFieldRef can not be specified simultaneously",
                ));
            }
        }
        (None, Some(selector)) => {
            let selector_at = Path::Field(at, "resourceFieldRef");
            resource_selector(selector, true, &selector_at, errors);
        }
        (None, None) => errors.push(error(
            at,
            FieldErrorReason::Required,
            "Required value: one of fieldRef and resourceFieldRef is required".into(),
        )),
    }
    file_mode(file, "mode", at, errors);
}

/// kube's `validateProjectedVolumeSource`: the file mode, and each source one of a Secret,
/// a ConfigMap, downward-API files or a token (a cluster trust bundle is counted), their
/// paths distinct.
fn projected(source: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    default_mode(source, at, errors);
    let mut paths = BTreeSet::new();
    let all = Path::Field(at, "sources");
    for (i, projection) in list(source, "sources").iter().enumerate() {
        let item = Path::Item(&all, i);
        let mut kinds = 0;
        for (kind, name_field) in [("secret", "name"), ("configMap", "name")] {
            let Some(object) = projection.get(kind).filter(|o| !o.is_null()) else {
                continue;
            };
            kinds += 1;
            let object_at = Path::Field(&item, kind);
            let name = text(object, name_field);
            if name.is_empty() {
                errors.push(required(&Path::Field(&object_at, name_field)));
            }
            let items = Path::Field(&object_at, "items");
            for (j, file) in list(object, "items").iter().enumerate() {
                key_to_path(file, &Path::Item(&items, j), errors);
                distinct_path(text(file, "path"), name, at, &mut paths, errors);
            }
        }
        if let Some(downward) = projection.get("downwardAPI").filter(|d| !d.is_null()) {
            kinds += 1;
            let downward_at = Path::Field(&item, "downwardAPI");
            for file in list(downward, "items") {
                downward_file(file, &downward_at, errors);
                let path = text(file, "path");
                distinct_path(path, path, at, &mut paths, errors);
            }
        }
        if let Some(token) = projection
            .get("serviceAccountToken")
            .filter(|t| !t.is_null())
        {
            kinds += 1;
            service_account_token(token, at, &item, errors);
        }
        if projection
            .get("clusterTrustBundle")
            .is_some_and(|b| !b.is_null())
        {
            kinds += 1;
        }
        if kinds > 1 {
            errors.push(error(
                &item,
                FieldErrorReason::Forbidden,
                "Forbidden: may not specify more than 1 volume type".into(),
            ));
        }
    }
}

/// A projected token lives 10 minutes to 2^32 seconds. kube names a missing or wrong
/// path after the projected volume (`projected.path`), and so does this.
fn service_account_token(
    token: &Value,
    projected_at: &Path,
    item: &Path,
    errors: &mut Vec<FieldError>,
) {
    let token_at = Path::Field(item, "serviceAccountToken");
    let expiration = token
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let expiration_at = Path::Field(&token_at, "expirationSeconds");
    if expiration < 600 {
        errors.push(invalid(
            &expiration_at,
            &expiration.into(),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > 1 << 32 {
        errors.push(invalid(
            &expiration_at,
            &expiration.into(),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let path = text(token, "path");
    let path_at = Path::Field(projected_at, "path");
    if path.is_empty() {
        errors.push(required(&path_at));
    } else {
        local_path(path, &path_at, errors);
    }
}

/// A projected file's path, refused when another source of the volume writes it too
/// (kube shows `shown`: the source's name, or the path itself).
fn distinct_path(
    path: &str,
    shown: &str,
    at: &Path,
    seen: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    if !path.is_empty() && !seen.insert(path.to_owned()) {
        errors.push(invalid(
            at,
            &Value::from(shown),
            "conflicting duplicate paths",
        ));
    }
}

/// kube's `validateLocalDescendingPath`: relative, without `..` elements (also a
/// localhost seccomp profile's path).
pub(super) fn descending_path(path: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if path.starts_with('/') {
        errors.push(invalid(at, &Value::from(path), "must be a relative path"));
    }
    no_backsteps(path, at, errors);
}

/// kube's `ValidateLocalNonReservedPath`: a descending path, not `..`-led.
fn local_path(path: &str, at: &Path, errors: &mut Vec<FieldError>) {
    descending_path(path, at, errors);
    if path.starts_with("..") && !path.starts_with("../") {
        errors.push(invalid(at, &Value::from(path), "must not start with '..'"));
    }
}

fn no_backsteps(path: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if path.split('/').any(|element| element == "..") {
        errors.push(invalid(at, &Value::from(path), "must not contain '..'"));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn volume_errors(volumes: Value) -> Vec<String> {
        let pod =
            json!({"spec": {"containers": [{"name": "c", "image": "app:1"}], "volumes": volumes}});
        messages(&validate("", "pods", &pod))
    }

    #[test]
    fn defaulted_volumes_of_every_common_source_pass() {
        let volumes = json!([
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "conf", "configMap": {"name": "app", "defaultMode": 420,
                "items": [{"key": "app.yaml", "path": "conf/app.yaml", "mode": 256}]}},
            {"name": "creds", "secret": {"secretName": "app", "defaultMode": 384}},
            {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
            {"name": "info", "downwardAPI": {"defaultMode": 420, "items": [
                {"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}},
                {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}}]}},
            {"name": "token", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                {"configMap": {"name": "ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}
        ]);
        assert_eq!(volume_errors(volumes), Vec::<String>::new());
    }

    #[test]
    fn volumes_kube_refuses_are_refused_with_its_messages() {
        let v = "spec.volumes";
        assert_eq!(
            volume_errors(json!([
                {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}},
                {"name": "none"},
                {"name": "cm", "configMap": {"defaultMode": 1000, "items": [{"key": "", "path": "/etc/x"}, {"key": "k", "path": "../up"}]}},
                {"name": "secret", "secret": {}},
                {"name": "claim", "persistentVolumeClaim": {}},
                {"name": "host", "hostPath": {"path": "/a/../b", "type": "Dir"}},
                {"name": "size", "emptyDir": {"sizeLimit": "-1Gi"}}
            ])),
            [
                format!("{v}[0].secret: Forbidden: may not specify more than 1 volume type"),
                format!("{v}[1]: Required value: must specify a volume type"),
                format!("{v}[2].configMap.name: Required value"),
                format!(
                    "{v}[2].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive"
                ),
                format!("{v}[2].configMap.items[0].key: Required value"),
                format!(
                    "{v}[2].configMap.items[0].path: Invalid value: \"/etc/x\": must be a relative path"
                ),
                format!(
                    "{v}[2].configMap.items[1].path: Invalid value: \"../up\": must not contain '..'"
                ),
                format!("{v}[3].secret.secretName: Required value"),
                format!("{v}[4].persistentVolumeClaim.claimName: Required value"),
                format!("{v}[5].hostPath.path: Invalid value: \"/a/../b\": must not contain '..'"),
                format!(
                    "{v}[5].hostPath.type: Unsupported value: \"Dir\": supported values: \"\", \"BlockDevice\", \"CharDevice\", \"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\""
                ),
                format!(
                    "{v}[6].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"
                ),
            ]
        );
    }

    #[test]
    fn mounts_kube_refuses_are_refused_with_its_messages() {
        let pod = json!({"spec": {"volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "app:1", "volumeMounts": [
                {"name": "data", "mountPath": "/data", "subPath": "/abs"},
                {"name": "data", "mountPath": "/data", "subPath": "a", "subPathExpr": "$(POD)"},
                {"name": "", "mountPath": "/other", "mountPropagation": "Bidirectional"},
                {"name": "data", "mountPath": "/ro", "recursiveReadOnly": "Enabled"}]}]}});
        let m = "spec.containers[0].volumeMounts";
        assert_eq!(
            messages(&validate("", "pods", &pod)),
            [
                format!("{m}.subPath: Invalid value: \"/abs\": must be a relative path"),
                format!("{m}[1].mountPath: Invalid value: \"/data\": must be unique"),
                format!(
                    "{m}[1].subPathExpr: Invalid value: \"$(POD)\": subPathExpr and subPath are mutually exclusive"
                ),
                format!("{m}[2].name: Required value"),
                format!("{m}[2].name: Not found: \"\""),
                format!(
                    "{m}.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"
                ),
                format!(
                    "{m}.recursiveReadOnly: Forbidden: may only be specified when readOnly is true"
                ),
            ]
        );
    }

    #[test]
    fn downward_and_projected_volumes_follow_kubes_paths() {
        let v = "spec.volumes";
        assert_eq!(
            volume_errors(json!([
                {"name": "info", "downwardAPI": {"items": [
                    {"path": "", "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
                    {"path": "x"}]}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "", "expirationSeconds": 60}},
                    {"configMap": {"name": "a", "items": [{"key": "k", "path": "same"}]},
                     "secret": {"name": "b", "items": [{"key": "k", "path": "same"}]}}]}}
            ])),
            [
                format!("{v}[0].downwardAPI.path: Required value"),
                format!(
                    "{v}[0].downwardAPI.fieldRef.fieldPath: Unsupported value: \"spec.nodeName\": supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\""
                ),
                format!(
                    "{v}[0].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required"
                ),
                format!(
                    "{v}[1].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes"
                ),
                format!("{v}[1].projected.path: Required value"),
                format!("{v}[1].projected: Invalid value: \"a\": conflicting duplicate paths"),
                format!(
                    "{v}[1].projected.sources[1]: Forbidden: may not specify more than 1 volume type"
                ),
            ]
        );
    }
}
