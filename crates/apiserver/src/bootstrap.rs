//! The objects every cluster has at start, created when missing (so restarts change
//! nothing): the `default/kubernetes` Service, the default ClusterRoles `cluster-admin`,
//! `admin`, `edit`, `view`, the `system:aggregate-to-*` roles and
//! `system:auth-delegator`, the `cluster-admin` binding to `system:masters`, and the
//! roles every authenticated client holds (`system:discovery`, `system:basic-user`,
//! `system:public-info-viewer`, bound as kube binds them). The
//! namespaces come first (`objects::ensure_default_namespaces`), then the `default`
//! ServiceAccount of each namespace (the controllers create it in namespaces made later).
//!
//! `admin`, `edit` and `view` are kube-apiserver 1.32's: created without rules, with the
//! aggregation rule that gathers the `system:aggregate-to-*` roles (also kube's, every
//! rule) and any other role so labelled; the aggregation controller
//! (`controllers::aggregation`) fills them in before the server answers.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::ApiServer;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::objects::Target;
use crate::rbac::RBAC_GROUP as RBAC;
use crate::request::WriteOptions;

/// The ClusterIP of `default/kubernetes`: the first address of kube's default service range.
const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
const READ: &[&str] = &["get", "list", "watch"];

/// `create delete deletecollection patch update`: what `edit` adds to what it reads.
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
/// Every verb of a fully served kind: what kube's roles grant on leases, roles, bindings.
const READ_WRITE: &[&str] = crate::builtin::ALL_VERBS;

/// One policy rule of a bootstrap role: API group, resources, verbs.
type Rule = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

/// `system:aggregate-to-view`, as kube-apiserver 1.32 bootstraps it (its bootstrap
/// policy's `cluster-roles.yaml`), `extensions` included though neither serves it.
const AGGREGATE_TO_VIEW: &[Rule] = &[
    (
        "",
        &[
            "configmaps",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
        ],
        READ,
    ),
    (
        "",
        &[
            "bindings",
            "events",
            "limitranges",
            "namespaces/status",
            "pods/log",
            "pods/status",
            "replicationcontrollers/status",
            "resourcequotas",
            "resourcequotas/status",
        ],
        READ,
    ),
    ("", &["namespaces"], READ),
    ("discovery.k8s.io", &["endpointslices"], READ),
    (
        "apps",
        &[
            "controllerrevisions",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets",
            "statefulsets/scale",
            "statefulsets/status",
        ],
        READ,
    ),
    (
        "autoscaling",
        &[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ],
        READ,
    ),
    (
        "batch",
        &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
        READ,
    ),
    (
        "extensions",
        &[
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/scale",
            "deployments/status",
            "ingresses",
            "ingresses/status",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicasets/status",
            "replicationcontrollers/scale",
        ],
        READ,
    ),
    (
        "policy",
        &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        READ,
    ),
    (
        "networking.k8s.io",
        &["ingresses", "ingresses/status", "networkpolicies"],
        READ,
    ),
];

/// `system:aggregate-to-edit` (kube 1.32).
const AGGREGATE_TO_EDIT: &[Rule] = &[
    (
        "",
        &[
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
            "secrets",
            "services/proxy",
        ],
        READ,
    ),
    ("", &["serviceaccounts"], &["impersonate"]),
    (
        "",
        &[
            "pods",
            "pods/attach",
            "pods/exec",
            "pods/portforward",
            "pods/proxy",
        ],
        WRITE,
    ),
    ("", &["pods/eviction"], &["create"]),
    (
        "",
        &[
            "configmaps",
            "events",
            "persistentvolumeclaims",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "secrets",
            "serviceaccounts",
            "services",
            "services/proxy",
        ],
        WRITE,
    ),
    ("", &["serviceaccounts/token"], &["create"]),
    (
        "apps",
        &[
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "replicasets",
            "replicasets/scale",
            "statefulsets",
            "statefulsets/scale",
        ],
        WRITE,
    ),
    ("autoscaling", &["horizontalpodautoscalers"], WRITE),
    ("batch", &["cronjobs", "jobs"], WRITE),
    (
        "extensions",
        &[
            "daemonsets",
            "deployments",
            "deployments/rollback",
            "deployments/scale",
            "ingresses",
            "networkpolicies",
            "replicasets",
            "replicasets/scale",
            "replicationcontrollers/scale",
        ],
        WRITE,
    ),
    ("policy", &["poddisruptionbudgets"], WRITE),
    (
        "networking.k8s.io",
        &["ingresses", "networkpolicies"],
        WRITE,
    ),
    ("coordination.k8s.io", &["leases"], READ_WRITE),
];

/// `system:aggregate-to-admin` (kube 1.32).
const AGGREGATE_TO_ADMIN: &[Rule] = &[
    (
        "authorization.k8s.io",
        &["localsubjectaccessreviews"],
        &["create"],
    ),
    (RBAC, &["rolebindings", "roles"], READ_WRITE),
];

/// `system:auth-delegator`: what a server that delegates authentication and authorization
/// to the API (an aggregated API server, kube-rbac-proxy) is bound to.
const AUTH_DELEGATOR: &[Rule] = &[
    ("authentication.k8s.io", &["tokenreviews"], &["create"]),
    (
        "authorization.k8s.io",
        &["subjectaccessreviews"],
        &["create"],
    ),
];

fn rules(rules: &[Rule]) -> Vec<Value> {
    rules
        .iter()
        .map(|(group, resources, verbs)| {
            json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
        })
        .collect()
}

/// The label that gathers a role into the aggregated role `into`.
fn aggregate_to(into: &str) -> String {
    format!("rbac.authorization.k8s.io/aggregate-to-{into}")
}

/// A ClusterRole whose rules are aggregated into the role `into`.
fn aggregated_into(mut role: Value, into: &str) -> Value {
    role["metadata"]["labels"][aggregate_to(into)] = json!("true");
    role
}

fn bootstrap_metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": bootstrap_metadata(name),
        "rules": rules,
    })
}

/// A user-facing role whose rules the aggregation controller gathers from the roles
/// labelled `aggregate-to-<name>`; kube bootstraps it without rules.
fn aggregated_role(name: &str) -> Value {
    let mut role = cluster_role(name, Vec::new());
    role.as_object_mut().map(|role| role.remove("rules"));
    role["aggregationRule"] = json!({"clusterRoleSelectors": [
        {"matchLabels": {aggregate_to(name): "true"}}
    ]});
    role
}

fn cluster_admin() -> Value {
    cluster_role(
        "cluster-admin",
        vec![
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
            json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
        ],
    )
}

/// `system:discovery`: what every authenticated client reads before anything else.
fn discovery_role() -> Value {
    let urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ];
    cluster_role(
        "system:discovery",
        vec![json!({"nonResourceURLs": urls, "verbs": ["get"]})],
    )
}

/// `system:basic-user`: asking what one may do, and who one is.
fn basic_user_role() -> Value {
    cluster_role(
        "system:basic-user",
        vec![
            json!({"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}),
            json!({"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}),
        ],
    )
}

/// `system:public-info-viewer`: health and version, for anyone.
fn public_info_role() -> Value {
    let urls = ["/healthz", "/livez", "/readyz", "/version", "/version/"];
    cluster_role(
        "system:public-info-viewer",
        vec![json!({"nonResourceURLs": urls, "verbs": ["get"]})],
    )
}

/// A bootstrap ClusterRoleBinding of the ClusterRole `name` to `groups`.
fn binding_to_groups(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|group| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": bootstrap_metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

fn kubernetes_service(port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
            "sessionAffinity": "None",
        },
    })
}

/// Create each bootstrap object that does not exist yet.
pub async fn ensure(server: &ApiServer) -> ApiResult<()> {
    let port = server.config().api_port.unwrap_or(6443);
    reconcile_kubernetes_service(server, kubernetes_service(port)).await?;
    for (group, plural, object) in BOOTSTRAP_OBJECTS.iter() {
        create_if_missing(server, group, plural, None, object).await?;
    }
    for namespace in live_namespaces(server)? {
        default_service_account(server, &namespace).await?;
    }
    move_events_to_core(server).await
}

/// The cluster-scoped objects every server starts with, built once per process: every
/// start checks them all (and a simulated run starts a server per seed), but creates
/// them only on a fresh store.
static BOOTSTRAP_OBJECTS: LazyLock<Vec<(&str, &str, Value)>> = LazyLock::new(bootstrap_objects);

fn bootstrap_objects() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (RBAC, "clusterroles", cluster_admin()),
        (RBAC, "clusterroles", aggregated_role("admin")),
        (
            RBAC,
            "clusterroles",
            aggregated_into(aggregated_role("edit"), "admin"),
        ),
        (
            RBAC,
            "clusterroles",
            aggregated_into(aggregated_role("view"), "edit"),
        ),
        (
            RBAC,
            "clusterroles",
            aggregated_into(
                cluster_role("system:aggregate-to-admin", rules(AGGREGATE_TO_ADMIN)),
                "admin",
            ),
        ),
        (
            RBAC,
            "clusterroles",
            aggregated_into(
                cluster_role("system:aggregate-to-edit", rules(AGGREGATE_TO_EDIT)),
                "edit",
            ),
        ),
        (
            RBAC,
            "clusterroles",
            aggregated_into(
                cluster_role("system:aggregate-to-view", rules(AGGREGATE_TO_VIEW)),
                "view",
            ),
        ),
        (
            RBAC,
            "clusterroles",
            cluster_role("system:auth-delegator", rules(AUTH_DELEGATOR)),
        ),
        (RBAC, "clusterroles", discovery_role()),
        (RBAC, "clusterroles", basic_user_role()),
        (RBAC, "clusterroles", public_info_role()),
        (
            RBAC,
            "clusterrolebindings",
            binding_to_groups("cluster-admin", &["system:masters"]),
        ),
        (
            RBAC,
            "clusterrolebindings",
            binding_to_groups("system:discovery", &["system:authenticated"]),
        ),
        (
            RBAC,
            "clusterrolebindings",
            binding_to_groups("system:basic-user", &["system:authenticated"]),
        ),
        (
            RBAC,
            "clusterrolebindings",
            binding_to_groups(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
        (
            "scheduling.k8s.io",
            "priorityclasses",
            system_priority_class(
                "system-node-critical",
                2_000_001_000,
                "Used for system critical pods that must not be moved from their current node.",
            ),
        ),
        (
            "scheduling.k8s.io",
            "priorityclasses",
            system_priority_class(
                "system-cluster-critical",
                2_000_000_000,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
            ),
        ),
    ]
}

/// One of the two PriorityClasses kube-apiserver creates at start.
fn system_priority_class(name: &str, value: i64, description: &str) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": description,
        "preemptionPolicy": "PreemptLowerPriority",
    })
}

/// Where steady once stored events.k8s.io Events apart from core ones.
const SEPARATE_EVENTS_PREFIX: &str = "/events.k8s.io/events/";

/// Move the events.k8s.io Events an older steady stored apart to where both Event APIs
/// now read them (core Events, `versions`), once: keys, names, uids and times kept.
async fn move_events_to_core(server: &ApiServer) -> ApiResult<()> {
    let store = server.store();
    let stored_apart = store
        .list(
            SEPARATE_EVENTS_PREFIX,
            &steady_store::ListOptions::default(),
            &|_| true,
        )
        .map_err(|e| ApiError::from_store(e, "events.events.k8s.io", ""))?;
    for object in stored_apart.items {
        let core_key = object
            .key
            .replacen(SEPARATE_EVENTS_PREFIX, "/core/events/", 1);
        if let Ok(event) = serde_json::from_slice::<Value>(&object.value) {
            let mut event = crate::versions::convert(event, "v1");
            event["apiVersion"] = Value::String("v1".into());
            match store.create(&core_key, event).await {
                Ok(_) | Err(steady_store::StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(ApiError::from_store(e, "events", "")),
            }
        }
        match store.delete(&object.key, Some(object.revision)).await {
            Ok(_) | Err(steady_store::StoreError::NotFound { .. }) => {}
            Err(e) => return Err(ApiError::from_store(e, "events.events.k8s.io", "")),
        }
    }
    Ok(())
}

/// Create `default/kubernetes`, or point its ports at this server's port (which changes
/// between restarts with `--listen …:0`), as kube-apiserver reconciles its own Service.
async fn reconcile_kubernetes_service(server: &ApiServer, wanted: Value) -> ApiResult<()> {
    let Some(rt) = server.registry().builtin("", "services") else {
        return Ok(());
    };
    let Ok((mut current, _)) = server.get_value(&rt, Some("default"), "kubernetes") else {
        return create_if_missing(server, "", "services", Some("default"), &wanted).await;
    };
    if current["spec"]["ports"] == wanted["spec"]["ports"] {
        return Ok(());
    }
    current["spec"]["ports"] = wanted["spec"]["ports"].clone();
    let options = WriteOptions::default();
    server
        .update(
            Target::object(&rt, Some("default"), "kubernetes"),
            current,
            &options,
        )
        .await
        .map(|_| ())
}

/// Namespaces that exist and are not terminating.
fn live_namespaces(server: &ApiServer) -> ApiResult<Vec<String>> {
    let Some(rt) = server.registry().builtin("", "namespaces") else {
        return Ok(Vec::new());
    };
    Ok(server
        .current_builtin_objects::<Value>(&rt, None)?
        .into_iter()
        .filter(|ns| meta::deletion_timestamp(ns).is_none())
        .filter_map(|ns| meta::name(&ns).map(str::to_string))
        .collect())
}

/// The `default` ServiceAccount of `namespace` and, served over HTTPS, its
/// `kube-root-ca.crt` ConfigMap, created if missing: at start for the namespaces that
/// exist (so a fresh server has them before it answers), and by the controllers for
/// every namespace created later.
pub async fn default_service_account(server: &ApiServer, namespace: &str) -> ApiResult<()> {
    let account = json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace},
    });
    create_if_missing(server, "", "serviceaccounts", Some(namespace), &account).await?;
    let Some(ca) = server.config().root_ca_pem.clone() else {
        return Ok(());
    };
    let root_ca = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kube-root-ca.crt",
            "namespace": namespace,
            "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
        },
        "data": {"ca.crt": ca},
    });
    create_if_missing(server, "", "configmaps", Some(namespace), &root_ca).await
}

/// kube's root-ca-cert-publisher's words on its ConfigMap.
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Create `object` unless an object of its name exists (a user's edit is kept).
pub async fn create_if_missing(
    server: &ApiServer,
    group: &str,
    plural: &str,
    ns: Option<&str>,
    object: &Value,
) -> ApiResult<()> {
    let Some(rt) = server.registry().builtin(group, plural) else {
        return Ok(());
    };
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    if server.get_stored(&rt, ns, name).is_ok() {
        return Ok(());
    }
    match server
        .create(&rt, ns, object.clone(), &WriteOptions::default())
        .await
    {
        Err(e) if e.reason != "AlreadyExists" => Err(e),
        _ => Ok(()),
    }
}
