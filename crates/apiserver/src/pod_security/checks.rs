//! The Pod Security Standards checks, as kube-apiserver 1.32's PodSecurity admission runs
//! them at policy version "latest" (which 1.32 resolves to v1.32).
//!
//! Owns: every baseline and restricted check (kube's check IDs are named on each function),
//! the exact `ForbiddenReason` / `ForbiddenDetail` text each one produces, the order kube
//! reports them in (baseline check IDs sorted, then restricted check IDs sorted, with the
//! baseline checks a restricted check overrides left out), and the joining of failures into
//! kube's aggregate text ([`describe`]).
//!
//! Works on a pod's `metadata` and `spec` JSON as stored; an absent, `null` or ill-typed field
//! is treated as kube treats a nil field. Feature-gated relaxations that are off by default in
//! 1.32 (user-namespace pods) are not applied.
//!
//! Must not know: HTTP, namespaces or their `pod-security.kubernetes.io/*` labels, exemptions,
//! enforce/audit/warn modes, or admission itself; callers build the surrounding message.

use std::collections::BTreeSet;

use serde_json::Value;

/// A Pod Security Standards level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// Parses kube's level names: `privileged`, `baseline`, `restricted`.
    pub(crate) fn parse(text: &str) -> Option<Level> {
        match text {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    /// kube's name for the level.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// One failed check: kube's ForbiddenReason and ForbiddenDetail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) reason: String,
    pub(crate) detail: String,
}

impl Failure {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Failure {
        Failure {
            reason: reason.into(),
            detail: detail.into(),
        }
    }
}

/// What a check returns: `None` when the pod is allowed.
type Outcome = Option<Failure>;

/// One registered check, as kube's registry knows it.
struct Check {
    /// kube's check ID; the registry orders checks by it.
    id: &'static str,
    level: Level,
    /// Baseline check IDs this restricted check replaces at the restricted level.
    overrides: &'static [&'static str],
    run: fn(&Value, &Value) -> Outcome,
}

/// Every check in force at "latest" in 1.32, each level's IDs in kube's sorted order.
const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        overrides: &[],
        run: app_armor_profile,
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        overrides: &[],
        run: capabilities_baseline,
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        overrides: &[],
        run: host_namespaces,
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        overrides: &[],
        run: host_path_volumes,
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        overrides: &[],
        run: host_ports,
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        overrides: &[],
        run: privileged,
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        overrides: &[],
        run: proc_mount,
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        overrides: &[],
        run: se_linux_options,
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        overrides: &[],
        run: seccomp_profile_baseline,
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        overrides: &[],
        run: sysctls,
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        overrides: &[],
        run: windows_host_process,
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        overrides: &[],
        run: allow_privilege_escalation,
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        overrides: &["capabilities_baseline"],
        run: capabilities_restricted,
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        overrides: &["hostPathVolumes"],
        run: restricted_volumes,
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        overrides: &[],
        run: run_as_non_root,
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        overrides: &[],
        run: run_as_user,
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        overrides: &["seccompProfile_baseline"],
        run: seccomp_profile_restricted,
    },
];

/// Every check of `level` at "latest" (restricted = baseline's checks with restricted's
/// overrides, plus restricted's own), on a pod's `metadata` and `spec` JSON objects as stored,
/// in the order kube reports them. Empty for Privileged.
pub(crate) fn evaluate(level: Level, metadata: &Value, spec: &Value) -> Vec<Failure> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let overridden: BTreeSet<&str> = if level == Level::Restricted {
        CHECKS
            .iter()
            .filter(|check| check.level == Level::Restricted)
            .flat_map(|check| check.overrides.iter().copied())
            .collect()
    } else {
        BTreeSet::new()
    };
    // kube's registry: baseline IDs sorted, then restricted IDs sorted.
    [Level::Baseline, Level::Restricted]
        .into_iter()
        .filter(|&tier| tier <= level)
        .flat_map(|tier| {
            let mut tier_checks: Vec<&Check> =
                CHECKS.iter().filter(|check| check.level == tier).collect();
            tier_checks.sort_by(|a, b| a.id.cmp(b.id));
            tier_checks
        })
        .filter(|check| !overridden.contains(check.id))
        .filter_map(|check| (check.run)(metadata, spec))
        .collect()
}

/// kube's aggregate of failures (`AggregateCheckResults`' forbidden text):
/// `reason (detail), reason (detail)`; a failure without detail is its reason alone.
pub(crate) fn describe(failures: &[Failure]) -> String {
    failures
        .iter()
        .map(|failure| {
            let reason = if failure.reason.is_empty() {
                "unknown forbidden reason"
            } else {
                failure.reason.as_str()
            };
            if failure.detail.is_empty() {
                reason.to_string()
            } else {
                format!("{reason} ({})", failure.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------
// JSON access: an absent, null or ill-typed field reads as kube's nil.

/// The value at `path` through nested objects, unless absent or `null`.
fn field<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let found = path
        .iter()
        .try_fold(value, |current, key| current.as_object()?.get(*key))?;
    (!found.is_null()).then_some(found)
}

fn object_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    field(value, path).filter(|found| found.is_object())
}

fn bool_at(value: &Value, path: &[&str]) -> Option<bool> {
    field(value, path).and_then(Value::as_bool)
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    field(value, path).and_then(Value::as_str)
}

fn int_at(value: &Value, path: &[&str]) -> Option<i64> {
    field(value, path).and_then(Value::as_i64)
}

fn array_at<'a>(value: &'a Value, path: &[&str]) -> &'a [Value] {
    field(value, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The strings of a string list, skipping ill-typed items.
fn strings_at<'a>(value: &'a Value, path: &[&str]) -> impl Iterator<Item = &'a str> {
    array_at(value, path).iter().filter_map(Value::as_str)
}

/// Every container as kube's visitor walks them: init, regular, then ephemeral containers.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(move |key| array_at(spec, &[key]))
        .filter(|container| container.is_object())
}

/// The `name` of a container or volume ("" when unset, as in kube).
fn name_of(item: &Value) -> String {
    str_at(item, &["name"]).unwrap_or_default().to_string()
}

/// A pod or container `securityContext`, if set.
fn security_context(owner: &Value) -> Option<&Value> {
    object_at(owner, &["securityContext"])
}

/// Pods declaring `spec.os.name: windows` are exempt from some restricted checks since 1.25.
fn is_windows(spec: &Value) -> bool {
    str_at(spec, &["os", "name"]) == Some("windows")
}

/// Names of the containers for which `bad` holds, in visiting order.
fn bad_containers(spec: &Value, mut bad: impl FnMut(&Value) -> bool) -> Vec<String> {
    containers(spec)
        .filter(|container| bad(container))
        .map(name_of)
        .collect()
}

// ---------------------------------------------------------------------------------------
// kube's message helpers.

fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// kube's `joinQuote`: `"a", "b"` (no escaping), empty for no items.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let joined: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", joined.join("\", \""))
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase(names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// Who set a forbidden value: `pod`, `container(s) ...`, or both joined by ` and `.
fn setters_phrase(pod: bool, names: &[String]) -> String {
    let mut setters = Vec::new();
    if pod {
        setters.push("pod".to_string());
    }
    if !names.is_empty() {
        setters.push(containers_phrase(names));
    }
    setters.join(" and ")
}

// ---------------------------------------------------------------------------------------
// Fields settable on the pod and overridable per container.

/// How one `securityContext` (pod's or a container's) stands on the checked field.
enum Setting {
    /// The field is not set here.
    Unset,
    /// Set to an allowed value.
    Allowed,
    /// Set to a forbidden value, which is reported when `Some`.
    Forbidden(Option<String>),
}

/// The pod-level and per-container verdicts on one layered field.
#[derive(Default)]
struct Layered {
    pod_forbidden: bool,
    pod_allowed: bool,
    /// Containers that set a forbidden value themselves.
    explicit: Vec<String>,
    /// Containers that leave the field unset while the pod does not allow it either.
    implicit: Vec<String>,
    /// Forbidden values seen, sorted as kube's string sets are.
    values: BTreeSet<String>,
}

impl Layered {
    /// `pod`, `container "a"` or `pod and containers "a", "b"`: who set forbidden values.
    fn setters(&self) -> String {
        setters_phrase(self.pod_forbidden, &self.explicit)
    }

    fn any_forbidden(&self) -> bool {
        self.pod_forbidden || !self.explicit.is_empty()
    }

    fn values(&self) -> Vec<String> {
        self.values.iter().cloned().collect()
    }
}

/// Classifies the pod's `securityContext` (when `with_pod`) and every container's with
/// `classify`; a missing `securityContext` counts as [`Setting::Unset`].
fn layered(spec: &Value, with_pod: bool, mut classify: impl FnMut(&Value) -> Setting) -> Layered {
    let mut result = Layered::default();
    let mut judge = |owner: &Value, result: &mut Layered| -> Setting {
        match security_context(owner).map(&mut classify) {
            Some(Setting::Forbidden(value)) => {
                result.values.extend(value);
                Setting::Forbidden(None)
            }
            Some(setting) => setting,
            None => Setting::Unset,
        }
    };
    if with_pod {
        match judge(spec, &mut result) {
            Setting::Forbidden(_) => result.pod_forbidden = true,
            Setting::Allowed => result.pod_allowed = true,
            Setting::Unset => {}
        }
    }
    for container in containers(spec) {
        match judge(container, &mut result) {
            Setting::Forbidden(_) => result.explicit.push(name_of(container)),
            Setting::Unset if !result.pod_allowed => {
                result.implicit.push(name_of(container));
            }
            _ => {}
        }
    }
    result
}

/// Classifies a profile object (`seccompProfile`, `appArmorProfile`) by its `type`.
fn profile_type(security_context: &Value, key: &str) -> Setting {
    match object_at(security_context, &[key]) {
        None => Setting::Unset,
        Some(profile) => match str_at(profile, &["type"]).unwrap_or_default() {
            "RuntimeDefault" | "Localhost" => Setting::Allowed,
            other => Setting::Forbidden(Some(other.to_string())),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Baseline checks.

const APP_ARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `appArmorProfile`: profile types other than RuntimeDefault/Localhost, and legacy
/// annotations other than empty, `runtime/default` or `localhost/*`.
fn app_armor_profile(metadata: &Value, spec: &Value) -> Outcome {
    let fields = layered(spec, true, |sc| profile_type(sc, "appArmorProfile"));
    let mut setters = Vec::new();
    if fields.any_forbidden() {
        setters.push(fields.setters());
    }
    let mut values = fields.values();

    let mut annotations: Vec<String> = field(metadata, &["annotations"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(key, _)| key.starts_with(APP_ARMOR_ANNOTATION_PREFIX))
        .filter_map(|(key, value)| Some((key, value.as_str()?)))
        .filter(|(_, value)| {
            !(value.is_empty() || *value == "runtime/default" || value.starts_with("localhost/"))
        })
        .map(|(key, value)| format!("{key}={}", crate::go_text::quote(value)))
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }

    if setters.is_empty() {
        return None;
    }
    Some(Failure::new(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quote(&values)
        ),
    ))
}

const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Capabilities in a container's `securityContext.capabilities.add` that `allowed` rejects.
fn added_capabilities_outside(container: &Value, allowed: impl Fn(&str) -> bool) -> Vec<&str> {
    strings_at(container, &["securityContext", "capabilities", "add"])
        .filter(|capability| !allowed(capability))
        .collect()
}

/// `containers "a" must not include "X", "Y" in securityContext.capabilities.add`.
fn forbidden_add_detail(names: &[String], capabilities: &BTreeSet<String>) -> String {
    let capabilities: Vec<&String> = capabilities.iter().collect();
    format!(
        "{} must not include {} in securityContext.capabilities.add",
        containers_phrase(names),
        join_quote(&capabilities)
    )
}

/// `capabilities_baseline`: only the default capability set may be added.
fn capabilities_baseline(_metadata: &Value, spec: &Value) -> Outcome {
    let mut forbidden = BTreeSet::new();
    let names = bad_containers(spec, |container| {
        let extra = added_capabilities_outside(container, |c| BASELINE_CAPABILITIES.contains(&c));
        forbidden.extend(extra.iter().map(|c| c.to_string()));
        !extra.is_empty()
    });
    (!names.is_empty()).then(|| {
        Failure::new(
            "non-default capabilities",
            forbidden_add_detail(&names, &forbidden),
        )
    })
}

/// `hostNamespaces`: hostNetwork, hostPID and hostIPC must not be true.
fn host_namespaces(_metadata: &Value, spec: &Value) -> Outcome {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|key| bool_at(spec, &[key]) == Some(true))
        .map(|key| format!("{key}=true"))
        .collect();
    (!set.is_empty()).then(|| Failure::new("host namespaces", set.join(", ")))
}

/// The pod's volumes, as objects.
fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    array_at(spec, &["volumes"])
        .iter()
        .filter(|volume| volume.is_object())
}

/// `hostPathVolumes`: no hostPath volumes (overridden by `restrictedVolumes`).
fn host_path_volumes(_metadata: &Value, spec: &Value) -> Outcome {
    let names: Vec<String> = volumes(spec)
        .filter(|volume| object_at(volume, &["hostPath"]).is_some())
        .map(name_of)
        .collect();
    (!names.is_empty()).then(|| {
        Failure::new(
            "hostPath volumes",
            format!(
                "{} {}",
                pluralize("volume", "volumes", names.len()),
                join_quote(&names)
            ),
        )
    })
}

/// `hostPorts`: no container port may set a non-zero hostPort.
fn host_ports(_metadata: &Value, spec: &Value) -> Outcome {
    let mut ports = BTreeSet::new();
    let names = bad_containers(spec, |container| {
        let used: Vec<i64> = array_at(container, &["ports"])
            .iter()
            .filter_map(|port| int_at(port, &["hostPort"]))
            .filter(|&port| port != 0)
            .collect();
        ports.extend(used.iter().map(i64::to_string));
        !used.is_empty()
    });
    if names.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    Some(Failure::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&names),
            pluralize("uses", "use", names.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    ))
}

/// `privileged`: no container may set securityContext.privileged=true.
fn privileged(_metadata: &Value, spec: &Value) -> Outcome {
    let names = bad_containers(spec, |container| {
        bool_at(container, &["securityContext", "privileged"]) == Some(true)
    });
    (!names.is_empty()).then(|| {
        Failure::new(
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                containers_phrase(&names)
            ),
        )
    })
}

/// `procMount`: securityContext.procMount must be unset or `Default`.
fn proc_mount(_metadata: &Value, spec: &Value) -> Outcome {
    let mut types = BTreeSet::new();
    let names = bad_containers(spec, |container| {
        match str_at(container, &["securityContext", "procMount"]) {
            Some(kind) if kind != "Default" => {
                types.insert(kind.to_string());
                true
            }
            _ => false,
        }
    });
    if names.is_empty() {
        return None;
    }
    let types: Vec<String> = types.into_iter().collect();
    Some(Failure::new(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&names),
            join_quote(&types)
        ),
    ))
}

/// SELinux types allowed from policy v1.31.
const SE_LINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// `seLinuxOptions`: only allowed types, and no user or role, on pod or containers.
fn se_linux_options(_metadata: &Value, spec: &Value) -> Outcome {
    let mut set_user = false;
    let mut set_role = false;
    let fields = layered(spec, true, |sc| {
        let Some(options) = object_at(sc, &["seLinuxOptions"]) else {
            return Setting::Unset;
        };
        let mut forbidden = None;
        let kind = str_at(options, &["type"]).unwrap_or_default();
        if !SE_LINUX_TYPES.contains(&kind) {
            forbidden = Some(Some(kind.to_string()));
        }
        let mut set = |key: &str, flag: &mut bool| {
            if !str_at(options, &[key]).unwrap_or_default().is_empty() {
                *flag = true;
                forbidden.get_or_insert(None);
            }
        };
        set("user", &mut set_user);
        set("role", &mut set_role);
        forbidden.map_or(Setting::Allowed, Setting::Forbidden)
    });
    if !fields.any_forbidden() {
        return None;
    }
    let types = fields.values();
    let mut problems = Vec::new();
    if !types.is_empty() {
        problems.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quote(&types)
        ));
    }
    if set_user {
        problems.push("user may not be set".to_string());
    }
    if set_role {
        problems.push("role may not be set".to_string());
    }
    Some(Failure::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            fields.setters(),
            problems.join("; ")
        ),
    ))
}

/// `... must not set securityContext.seccompProfile.type to "X"` for explicit bad values.
fn seccomp_forbidden(fields: &Layered) -> Outcome {
    fields.any_forbidden().then(|| {
        Failure::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                fields.setters(),
                join_quote(&fields.values())
            ),
        )
    })
}

/// `seccompProfile_baseline` (v1.19+): a set seccompProfile.type must be RuntimeDefault or
/// Localhost (overridden by `seccompProfile_restricted`).
fn seccomp_profile_baseline(_metadata: &Value, spec: &Value) -> Outcome {
    seccomp_forbidden(&layered(spec, true, |sc| {
        profile_type(sc, "seccompProfile")
    }))
}

/// Sysctls allowed from policy v1.32.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// `sysctls`: only the safe sysctls may be set on the pod.
fn sysctls(_metadata: &Value, spec: &Value) -> Outcome {
    let forbidden: Vec<&str> = array_at(spec, &["securityContext", "sysctls"])
        .iter()
        .filter(|sysctl| sysctl.is_object())
        .map(|sysctl| str_at(sysctl, &["name"]).unwrap_or_default())
        .filter(|name| !SAFE_SYSCTLS.contains(name))
        .collect();
    (!forbidden.is_empty()).then(|| Failure::new("forbidden sysctls", forbidden.join(", ")))
}

/// `windowsHostProcess`: windowsOptions.hostProcess must not be true on pod or containers.
fn windows_host_process(_metadata: &Value, spec: &Value) -> Outcome {
    let fields = layered(spec, true, |sc| {
        match bool_at(sc, &["windowsOptions", "hostProcess"]) {
            None => Setting::Unset,
            Some(false) => Setting::Allowed,
            Some(true) => Setting::Forbidden(None),
        }
    });
    fields.any_forbidden().then(|| {
        Failure::new(
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                fields.setters()
            ),
        )
    })
}

// ---------------------------------------------------------------------------------------
// Restricted checks.

/// `allowPrivilegeEscalation` (v1.25): every container must set it to false; Windows pods
/// are exempt.
fn allow_privilege_escalation(_metadata: &Value, spec: &Value) -> Outcome {
    if is_windows(spec) {
        return None;
    }
    let names = bad_containers(spec, |container| {
        bool_at(container, &["securityContext", "allowPrivilegeEscalation"]) != Some(false)
    });
    (!names.is_empty()).then(|| {
        Failure::new(
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                containers_phrase(&names)
            ),
        )
    })
}

/// `capabilities_restricted` (v1.25): drop ALL, add nothing but NET_BIND_SERVICE; Windows
/// pods are exempt. Overrides `capabilities_baseline`.
fn capabilities_restricted(_metadata: &Value, spec: &Value) -> Outcome {
    if is_windows(spec) {
        return None;
    }
    let mut forbidden = BTreeSet::new();
    let missing_drop_all = bad_containers(spec, |container| {
        object_at(container, &["securityContext", "capabilities"]).is_none()
            || !strings_at(container, &["securityContext", "capabilities", "drop"])
                .any(|capability| capability == "ALL")
    });
    let adding = bad_containers(spec, |container| {
        let extra = added_capabilities_outside(container, |c| c == "NET_BIND_SERVICE");
        forbidden.extend(extra.iter().map(|c| c.to_string()));
        !extra.is_empty()
    });
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(forbidden_add_detail(&adding, &forbidden));
    }
    (!details.is_empty()).then(|| Failure::new("unrestricted capabilities", details.join("; ")))
}

/// Volume sources allowed at restricted (1.32: no `image`).
const ALLOWED_VOLUME_SOURCES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Restricted volume sources, in kube's order of precedence when naming a volume's type.
const RESTRICTED_VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

/// `restrictedVolumes`: only the allowed volume sources. Overrides `hostPathVolumes`.
fn restricted_volumes(_metadata: &Value, spec: &Value) -> Outcome {
    let has = |volume: &Value, key: &str| object_at(volume, &[key]).is_some();
    let mut types = BTreeSet::new();
    let names: Vec<String> = volumes(spec)
        .filter(|volume| !ALLOWED_VOLUME_SOURCES.iter().any(|key| has(volume, key)))
        .inspect(|volume| {
            let kind = RESTRICTED_VOLUME_SOURCES
                .iter()
                .find(|key| has(volume, key))
                .copied()
                .unwrap_or("unknown");
            types.insert(kind);
        })
        .map(name_of)
        .collect();
    if names.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    Some(Failure::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names),
            pluralize("uses", "use", names.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    ))
}

/// `runAsNonRoot`: pod or every container must set runAsNonRoot=true, none false.
fn run_as_non_root(_metadata: &Value, spec: &Value) -> Outcome {
    let fields = layered(spec, true, |sc| match bool_at(sc, &["runAsNonRoot"]) {
        None => Setting::Unset,
        Some(true) => Setting::Allowed,
        Some(false) => Setting::Forbidden(None),
    });
    if fields.any_forbidden() {
        return Some(Failure::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                fields.setters()
            ),
        ));
    }
    (!fields.implicit.is_empty()).then(|| {
        Failure::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_phrase(&fields.implicit)
            ),
        )
    })
}

/// `runAsUser`: neither pod nor container may set runAsUser=0.
fn run_as_user(_metadata: &Value, spec: &Value) -> Outcome {
    let fields = layered(spec, true, |sc| match int_at(sc, &["runAsUser"]) {
        None => Setting::Unset,
        Some(0) => Setting::Forbidden(None),
        Some(_) => Setting::Allowed,
    });
    fields.any_forbidden().then(|| {
        Failure::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", fields.setters()),
        )
    })
}

/// `seccompProfile_restricted` (v1.25): pod or every container must set seccompProfile.type
/// to RuntimeDefault or Localhost; Windows pods are exempt. Overrides
/// `seccompProfile_baseline`.
fn seccomp_profile_restricted(_metadata: &Value, spec: &Value) -> Outcome {
    if is_windows(spec) {
        return None;
    }
    let fields = layered(spec, true, |sc| profile_type(sc, "seccompProfile"));
    seccomp_forbidden(&fields).or_else(|| {
        (!fields.implicit.is_empty()).then(|| {
            Failure::new(
                "seccompProfile",
                format!(
                    "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                    containers_phrase(&fields.implicit)
                ),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(level: Level, metadata: Value, spec: Value) -> String {
        describe(&evaluate(level, &metadata, &spec))
    }

    fn restricted_container(name: &str) -> Value {
        json!({
            "name": name,
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]}
            }
        })
    }

    fn compliant_spec() -> Value {
        json!({
            "securityContext": {
                "runAsNonRoot": true,
                "seccompProfile": {"type": "RuntimeDefault"}
            },
            "containers": [restricted_container("app")]
        })
    }

    #[test]
    fn registry_lists_each_level_in_kube_sorted_order() {
        for tier in [Level::Baseline, Level::Restricted] {
            let ids: Vec<&str> = CHECKS
                .iter()
                .filter(|c| c.level == tier)
                .map(|c| c.id)
                .collect();
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(ids, sorted);
        }
    }

    #[test]
    fn levels_parse_and_print() {
        for level in [Level::Privileged, Level::Baseline, Level::Restricted] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        assert_eq!(Level::parse("Restricted"), None);
        assert!(Level::Baseline < Level::Restricted);
    }

    #[test]
    fn restricted_bare_container_reproduces_kube_message() {
        let spec = json!({"containers": [{"name": "app", "image": "nginx"}]});
        assert_eq!(
            check(Level::Restricted, json!({"name": "p"}), spec),
            "allowPrivilegeEscalation != false (container \"app\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"app\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"app\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"app\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn bare_container_passes_baseline_and_privileged() {
        let spec = json!({"containers": [{"name": "app"}]});
        assert!(evaluate(Level::Baseline, &json!({}), &spec).is_empty());
        let spec = json!({"hostNetwork": true, "containers": [{"name": "app"}]});
        assert!(evaluate(Level::Privileged, &json!({}), &spec).is_empty());
    }

    #[test]
    fn compliant_restricted_pod_has_no_failures() {
        assert!(evaluate(Level::Restricted, &json!({}), &compliant_spec()).is_empty());
        let mut spec = compliant_spec();
        spec["volumes"] = json!([
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "token", "projected": {"sources": []}}
        ]);
        spec["containers"][0]["securityContext"]["capabilities"]["add"] =
            json!(["NET_BIND_SERVICE"]);
        assert!(evaluate(Level::Restricted, &json!({}), &spec).is_empty());
    }

    #[test]
    fn baseline_privileged_container() {
        let spec = json!({"containers": [
            {"name": "a", "securityContext": {"privileged": true}},
            {"name": "b", "securityContext": {"privileged": false}}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "privileged (container \"a\" must not set securityContext.privileged=true)"
        );
    }

    #[test]
    fn baseline_host_namespaces_keep_kube_order() {
        let spec = json!({"hostPID": true, "hostNetwork": true, "containers": [{"name": "a"}]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "host namespaces (hostNetwork=true, hostPID=true)"
        );
        let spec = json!({"hostIPC": true, "hostPID": true, "hostNetwork": true});
        assert_eq!(
            evaluate(Level::Baseline, &json!({}), &spec),
            vec![Failure::new(
                "host namespaces",
                "hostNetwork=true, hostPID=true, hostIPC=true"
            )]
        );
    }

    #[test]
    fn baseline_host_path_volumes() {
        let spec = json!({"volumes": [
            {"name": "a", "hostPath": {"path": "/"}},
            {"name": "b", "hostPath": {"path": "/etc"}},
            {"name": "c", "emptyDir": {}}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec.clone()),
            "hostPath volumes (volumes \"a\", \"b\")"
        );
        // restricted replaces hostPathVolumes with restrictedVolumes.
        let failures = evaluate(Level::Restricted, &json!({}), &spec);
        assert!(failures.iter().all(|f| f.reason != "hostPath volumes"));
        assert!(failures.contains(&Failure::new(
            "restricted volume types",
            "volumes \"a\", \"b\" use restricted volume type \"hostPath\""
        )));
    }

    #[test]
    fn baseline_host_ports() {
        let spec = json!({"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "hostPort (container \"b\" uses hostPort 20)"
        );
        let spec = json!({"containers": [
            {"name": "a", "ports": [{"hostPort": 0}]},
            {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
            {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "hostPort (containers \"b\", \"c\" use hostPorts 10, 20, 30)"
        );
    }

    #[test]
    fn baseline_non_default_capabilities() {
        let spec = json!({"containers": [
            {"name": "a", "securityContext": {"capabilities": {"add": ["CHOWN", "NET_RAW", "SYS_ADMIN"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["KILL"]}}}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "non-default capabilities (container \"a\" must not include \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add)"
        );
    }

    #[test]
    fn baseline_failures_come_in_registry_order() {
        let spec = json!({
            "hostNetwork": true,
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
            "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
            "containers": [{
                "name": "app",
                "ports": [{"containerPort": 80, "hostPort": 80}],
                "securityContext": {
                    "privileged": true,
                    "capabilities": {"add": ["SYS_ADMIN"]},
                    "seccompProfile": {"type": "Unconfined"}
                }
            }]
        });
        let reasons: Vec<String> = evaluate(Level::Baseline, &json!({}), &spec)
            .into_iter()
            .map(|f| f.reason)
            .collect();
        assert_eq!(
            reasons,
            [
                "non-default capabilities",
                "host namespaces",
                "hostPath volumes",
                "hostPort",
                "privileged",
                "seccompProfile",
                "forbidden sysctls"
            ]
        );
    }

    #[test]
    fn multi_container_grouping() {
        let spec = json!({
            "initContainers": [{"name": "init"}],
            "containers": [
                restricted_container("ok"),
                {"name": "b", "securityContext": {"runAsNonRoot": false}}
            ],
            "ephemeralContainers": [{"name": "debug"}]
        });
        let failures = evaluate(Level::Restricted, &json!({}), &spec);
        assert_eq!(
            failures,
            vec![
                Failure::new(
                    "allowPrivilegeEscalation != false",
                    "containers \"init\", \"b\", \"debug\" must set securityContext.allowPrivilegeEscalation=false"
                ),
                Failure::new(
                    "unrestricted capabilities",
                    "containers \"init\", \"b\", \"debug\" must set securityContext.capabilities.drop=[\"ALL\"]"
                ),
                Failure::new(
                    "runAsNonRoot != true",
                    "container \"b\" must not set securityContext.runAsNonRoot=false"
                ),
                Failure::new(
                    "seccompProfile",
                    "pod or containers \"init\", \"ok\", \"b\", \"debug\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
                ),
            ]
        );
    }

    #[test]
    fn pod_and_container_setters_join_with_and() {
        let spec = json!({
            "securityContext": {"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
            "containers": [
                {"name": "a", "securityContext": {"runAsUser": 0}},
                {"name": "b", "securityContext": {"runAsUser": 1000, "seccompProfile": {"type": "Bogus"}}}
            ]
        });
        let failures = evaluate(Level::Restricted, &json!({}), &spec);
        assert!(failures.contains(&Failure::new(
            "runAsUser=0",
            "pod and container \"a\" must not set runAsUser=0"
        )));
        assert!(failures.contains(&Failure::new(
            "seccompProfile",
            "pod and container \"b\" must not set securityContext.seccompProfile.type to \"Bogus\", \"Unconfined\""
        )));
    }

    #[test]
    fn capabilities_restricted_reports_both_problems() {
        let mut spec = compliant_spec();
        spec["containers"] = json!([
            {"name": "a", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_RAW"]}}}
        ]);
        assert_eq!(
            check(Level::Restricted, json!({}), spec),
            "unrestricted capabilities (container \"a\" must set securityContext.capabilities.drop=[\"ALL\"]; \
             container \"a\" must not include \"NET_RAW\" in securityContext.capabilities.add)"
        );
    }

    #[test]
    fn windows_pods_skip_os_specific_restricted_checks() {
        let spec = json!({
            "os": {"name": "windows"},
            "securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "app"}]
        });
        assert!(evaluate(Level::Restricted, &json!({}), &spec).is_empty());
    }

    #[test]
    fn app_armor_fields_and_annotations() {
        let metadata = json!({"annotations": {
            "container.apparmor.security.beta.kubernetes.io/a": "",
            "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/c": "localhost/foo",
            "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/": "bogus"
        }});
        assert_eq!(
            check(Level::Baseline, metadata, json!({})),
            "forbidden AppArmor profiles (annotations must not set AppArmor profile type to \
             \"container.apparmor.security.beta.kubernetes.io/=\"bogus\"\", \
             \"container.apparmor.security.beta.kubernetes.io/e=\"unconfined\"\")"
        );
        let spec = json!({
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "foo", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]
        });
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "forbidden AppArmor profile (container \"foo\" must not set AppArmor profile type to \"Unconfined\")"
        );
    }

    #[test]
    fn se_linux_user_and_role_are_reported_without_a_bad_type() {
        let spec = json!({"securityContext": {"seLinuxOptions": {"user": "u", "role": "r"}}});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: user may not be set; role may not be set)"
        );
        let spec = json!({"containers": [
            {"name": "a", "securityContext": {"seLinuxOptions": {"type": "spc_t"}}},
            {"name": "b", "securityContext": {"seLinuxOptions": {"type": "container_engine_t"}}}
        ]});
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "seLinuxOptions (container \"a\" set forbidden securityContext.seLinuxOptions: type \"spc_t\")"
        );
    }

    #[test]
    fn remaining_baseline_messages() {
        let spec = json!({
            "securityContext": {
                "sysctls": [{"name": "net.ipv4.tcp_rmem"}, {"name": "net.core.somaxconn"}, {"name": "kernel.msgmax"}],
                "windowsOptions": {"hostProcess": true}
            },
            "containers": [{"name": "a", "securityContext": {"procMount": "Unmasked"}}]
        });
        assert_eq!(
            check(Level::Baseline, json!({}), spec),
            "procMount (container \"a\" must not set securityContext.procMount to \"Unmasked\"), \
             forbidden sysctls (net.core.somaxconn, kernel.msgmax), \
             hostProcess (pod must not set securityContext.windowsOptions.hostProcess=true)"
        );
    }

    #[test]
    fn restricted_volume_types_name_unknown_sources() {
        let mut spec = compliant_spec();
        spec["volumes"] = json!([
            {"name": "repo", "gitRepo": {"repository": "x"}},
            {"name": "img", "image": {"reference": "busybox"}},
            {"name": "ok", "secret": {"secretName": "s"}}
        ]);
        assert_eq!(
            check(Level::Restricted, json!({}), spec),
            "restricted volume types (volumes \"repo\", \"img\" use restricted volume types \"gitRepo\", \"unknown\")"
        );
    }

    #[test]
    fn ill_typed_fields_read_as_unset() {
        let spec = json!({
            "hostNetwork": "true",
            "securityContext": "nope",
            "containers": [{"name": "a", "securityContext": {"privileged": "yes", "ports": 3}}]
        });
        assert!(evaluate(Level::Baseline, &json!(null), &spec).is_empty());
        assert!(evaluate(Level::Baseline, &json!(null), &json!(null)).is_empty());
    }

    #[test]
    fn describe_omits_empty_details() {
        let failures = [Failure::new("a", ""), Failure::new("b", "x")];
        assert_eq!(describe(&failures), "a, b (x)");
        assert_eq!(describe(&[]), "");
    }
}
