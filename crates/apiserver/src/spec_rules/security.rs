//! Security contexts, as kube's `validatePodSpecSecurityContext` and
//! `ValidateSecurityContext` check them: user and group ids in 0–2147483647, policies kube
//! knows, a seccomp profile whose type and localhost path agree, `Unmasked` proc mounts
//! only in a user namespace, and no container that forbids privilege escalation while
//! being privileged or adding `CAP_SYS_ADMIN`. Hardened operators set these on every pod
//! they create. Sysctls, Windows options and AppArmor profiles are not checked.

use serde_json::Value;

use super::volumes::descending_path;
use super::{error, go_pointer, invalid, list, not_supported};
use crate::schema::{FieldError, FieldErrorReason, Path};

const ID_RANGE: &str = "must be between 0 and 2147483647, inclusive";

/// The pod-level security context of the pod spec `spec` at `at`.
pub(super) fn pod_security_context(spec: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(context) = spec.get("securityContext").filter(|c| c.is_object()) else {
        return;
    };
    let at = Path::Field(at, "securityContext");
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        id(context, field, &at, errors);
    }
    let groups = Path::Field(&at, "supplementalGroups");
    for (i, group) in list(context, "supplementalGroups").iter().enumerate() {
        if group
            .as_i64()
            .is_some_and(|g| !(0..=i64::from(i32::MAX)).contains(&g))
        {
            errors.push(invalid(&Path::Item(&groups, i), group, ID_RANGE));
        }
    }
    let shares = context.get("shareProcessNamespace");
    if shares == Some(&Value::Bool(true)) && spec.get("hostPID") == Some(&Value::Bool(true)) {
        errors.push(invalid(
            &Path::Field(&at, "shareProcessNamespace"),
            &Value::Bool(true),
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    one_of(
        context,
        "fsGroupChangePolicy",
        &["Always", "OnRootMismatch"],
        &at,
        errors,
    );
    seccomp(context, &at, errors);
    one_of(
        context,
        "supplementalGroupsPolicy",
        &["Merge", "Strict"],
        &at,
        errors,
    );
}

/// The security context of the container at `at`; `host_users` unless the pod asks for
/// a user namespace.
pub(super) fn container_security_context(
    container: &Value,
    host_users: bool,
    at: &Path,
    errors: &mut Vec<FieldError>,
) {
    let Some(context) = container.get("securityContext").filter(|c| c.is_object()) else {
        return;
    };
    let at = Path::Field(at, "securityContext");
    for field in ["runAsUser", "runAsGroup"] {
        id(context, field, &at, errors);
    }
    if let Some(mount) = context.get("procMount").filter(|m| !m.is_null()) {
        let mount_at = Path::Field(&at, "procMount");
        if !matches!(mount.as_str(), Some("Default" | "Unmasked")) {
            errors.push(not_supported(&mount_at, mount, &["Default", "Unmasked"]));
        }
        if host_users && mount.as_str() == Some("Unmasked") {
            errors.push(invalid(
                &mount_at,
                mount,
                "`hostUsers` must be false to use `Unmasked`",
            ));
        }
    }
    seccomp(context, &at, errors);
    if context.get("allowPrivilegeEscalation") == Some(&Value::Bool(false)) {
        let shown = go_security_context(context);
        let refuse = |why: &str| {
            error(
                &at,
                FieldErrorReason::Invalid,
                format!("Invalid value: {shown}: {why}"),
            )
        };
        if context.get("privileged") == Some(&Value::Bool(true)) {
            errors.push(refuse(
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let added = context
            .get("capabilities")
            .map_or(&[][..], |c| list(c, "add"));
        for _ in added.iter().filter(|c| c.as_str() == Some("CAP_SYS_ADMIN")) {
            errors.push(refuse(
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
}

/// Whether the pod's containers run in the host's user namespace (`hostUsers`, true
/// unless set false).
pub(super) fn host_users(spec: &Value) -> bool {
    spec.pointer("/securityContext/hostUsers") != Some(&Value::Bool(false))
}

/// A user or group id at `field`, when set: 0 to 2^31-1.
fn id(context: &Value, field: &str, at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(id) = context.get(field).filter(|id| !id.is_null())
        && !id
            .as_i64()
            .is_some_and(|id| (0..=i64::from(i32::MAX)).contains(&id))
    {
        errors.push(invalid(&Path::Field(at, field), id, ID_RANGE));
    }
}

/// A policy at `field`, when set, among `known` (kube lists them sorted).
fn one_of(context: &Value, field: &str, known: &[&str], at: &Path, errors: &mut Vec<FieldError>) {
    if let Some(value) = context.get(field).filter(|v| !v.is_null())
        && !value.as_str().is_some_and(|v| known.contains(&v))
    {
        errors.push(not_supported(&Path::Field(at, field), value, known));
    }
}

/// kube's `validateSeccompProfileField`.
fn seccomp(context: &Value, at: &Path, errors: &mut Vec<FieldError>) {
    let Some(profile) = context.get("seccompProfile").filter(|p| p.is_object()) else {
        return;
    };
    let at = Path::Field(at, "seccompProfile");
    let kind = profile
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match kind {
        "Localhost" | "RuntimeDefault" | "Unconfined" => {}
        "" => errors.push(error(
            &Path::Field(&at, "type"),
            FieldErrorReason::Required,
            "Required value: type is required when seccompProfile is set".into(),
        )),
        other => errors.push(not_supported(
            &Path::Field(&at, "type"),
            &Value::from(other),
            &["Localhost", "RuntimeDefault", "Unconfined"],
        )),
    }
    let local = profile.get("localhostProfile").filter(|p| !p.is_null());
    let local_at = Path::Field(&at, "localhostProfile");
    match (kind, local) {
        ("Localhost", None) => errors.push(error(
            &local_at,
            FieldErrorReason::Required,
            "Required value: must be set when seccomp type is Localhost".into(),
        )),
        ("Localhost", Some(path)) => {
            descending_path(path.as_str().unwrap_or_default(), &local_at, errors);
        }
        (_, Some(_)) => {
            let shown = format!(
                "core.SeccompProfile{{Type:{kind:?}, LocalhostProfile:{}}}",
                go_pointer("*string", local)
            );
            errors.push(error(
                &local_at,
                FieldErrorReason::Invalid,
                format!("Invalid value: {shown}: can only be set when seccomp type is Localhost"),
            ));
        }
        (_, None) => {}
    }
}

/// A container's security context as Go's `%#v` prints kube's struct.
fn go_security_context(context: &Value) -> String {
    const FIELDS: [(&str, &str, &str); 12] = [
        ("Capabilities", "capabilities", "*core.Capabilities"),
        ("Privileged", "privileged", "*bool"),
        ("SELinuxOptions", "seLinuxOptions", "*core.SELinuxOptions"),
        (
            "WindowsOptions",
            "windowsOptions",
            "*core.WindowsSecurityContextOptions",
        ),
        ("RunAsUser", "runAsUser", "*int64"),
        ("RunAsGroup", "runAsGroup", "*int64"),
        ("RunAsNonRoot", "runAsNonRoot", "*bool"),
        ("ReadOnlyRootFilesystem", "readOnlyRootFilesystem", "*bool"),
        (
            "AllowPrivilegeEscalation",
            "allowPrivilegeEscalation",
            "*bool",
        ),
        ("ProcMount", "procMount", "*core.ProcMountType"),
        ("SeccompProfile", "seccompProfile", "*core.SeccompProfile"),
        (
            "AppArmorProfile",
            "appArmorProfile",
            "*core.AppArmorProfile",
        ),
    ];
    let fields: Vec<String> = FIELDS
        .iter()
        .map(|(go, json, pointer)| {
            let set = context.get(*json).filter(|v| !v.is_null());
            format!("{go}:{}", go_pointer(pointer, set))
        })
        .collect();
    format!("core.SecurityContext{{{}}}", fields.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::tests::messages;
    use super::super::validate;
    use serde_json::{Value, json};

    fn spec_errors(pod_context: Value, container_context: Value) -> Vec<String> {
        let pod = json!({"spec": {"securityContext": pod_context,
            "containers": [{"name": "c", "image": "app:1", "securityContext": container_context}]}});
        messages(&validate("", "pods", &pod))
    }

    #[test]
    fn hardened_contexts_pass() {
        let pod = json!({"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000, "supplementalGroups": [3000],
            "fsGroupChangePolicy": "OnRootMismatch", "seccompProfile": {"type": "RuntimeDefault"}});
        let container = json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}});
        assert_eq!(spec_errors(pod, container), Vec::<String>::new());
    }

    #[test]
    fn contexts_kube_refuses_are_refused_with_its_messages() {
        let pod = json!({"runAsUser": -1, "supplementalGroups": [1, 4294967296_i64],
            "fsGroupChangePolicy": "Sometimes", "seccompProfile": {"type": "Localhost"}});
        let container = json!({"runAsGroup": 2147483648_i64, "procMount": "Unmasked",
            "allowPrivilegeEscalation": false, "privileged": true,
            "capabilities": {"add": ["CAP_SYS_ADMIN"]},
            "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "x.json"}});
        let c = "spec.containers[0].securityContext";
        let shown = "core.SecurityContext{Capabilities:(*core.Capabilities)(0xc000000000), Privileged:(*bool)(0xc000000000), SELinuxOptions:(*core.SELinuxOptions)(nil), WindowsOptions:(*core.WindowsSecurityContextOptions)(nil), RunAsUser:(*int64)(nil), RunAsGroup:(*int64)(0xc000000000), RunAsNonRoot:(*bool)(nil), ReadOnlyRootFilesystem:(*bool)(nil), AllowPrivilegeEscalation:(*bool)(0xc000000000), ProcMount:(*core.ProcMountType)(0xc000000000), SeccompProfile:(*core.SeccompProfile)(0xc000000000), AppArmorProfile:(*core.AppArmorProfile)(nil)}";
        assert_eq!(
            spec_errors(pod, container),
            [
                format!("{c}.runAsGroup: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive"),
                format!("{c}.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"),
                format!("{c}.seccompProfile.localhostProfile: Invalid value: core.SeccompProfile{{Type:\"RuntimeDefault\", LocalhostProfile:(*string)(0xc000000000)}}: can only be set when seccomp type is Localhost"),
                format!("{c}: Invalid value: {shown}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
                format!("{c}: Invalid value: {shown}: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"),
                "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive".to_string(),
                "spec.securityContext.supplementalGroups[1]: Invalid value: 4294967296: must be between 0 and 2147483647, inclusive".to_string(),
                "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnRootMismatch\"".to_string(),
                "spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost".to_string(),
            ]
        );
    }
}
