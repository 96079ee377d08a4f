//! The defaults kube-apiserver 1.32 gives a pod spec, in a pod or in any workload's
//! template: core/v1's `SetDefaults_PodSpec`, `SetDefaults_Container`, `SetDefaults_Volume`
//! and the volume sources', `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`,
//! `SetDefaults_ObjectFieldSelector` and `SetDefaults_ServiceAccountTokenProjection`,
//! walked as the generated `SetObjectDefaults_Pod` walks them. An operator that compares
//! the template it wrote with the one it reads back meets every one of them, as on a
//! cluster (a probe it wrote as `httpGet: {port: 80}` reads back with a path, a scheme,
//! a period, a timeout and thresholds).
//!
//! Only JSON: knows nothing of storage or HTTP.

use serde_json::{Value, json};

use super::default_if_missing;

/// The defaults of a pod spec, in a pod or in a template.
pub(super) fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_if_missing(spec, "restartPolicy", json!("Always"));
    default_if_missing(spec, "terminationGracePeriodSeconds", json!(30));
    default_if_missing(spec, "dnsPolicy", json!("ClusterFirst"));
    default_if_missing(spec, "schedulerName", json!("default-scheduler"));
    default_if_missing(spec, "securityContext", json!({}));
    service_account_alias(spec);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in objects(spec, list) {
            container(c);
        }
    }
    for v in objects(spec, "volumes") {
        volume(v);
    }
}

/// v1's deprecated `serviceAccount` is an alias of `serviceAccountName` (kube's PodSpec
/// conversion): either names the account (`serviceAccountName` wins), and both are
/// written back.
pub(super) fn service_account_alias(spec: &mut Value) {
    let named = |field: &str| {
        spec.get(field)
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .map(str::to_string)
    };
    match named("serviceAccountName").or_else(|| named("serviceAccount")) {
        Some(name) => {
            spec["serviceAccountName"] = json!(name);
            spec["serviceAccount"] = json!(name);
        }
        None => {
            if let Some(fields) = spec.as_object_mut() {
                fields.remove("serviceAccount");
            }
        }
    }
}

/// kube's `SetDefaults_Pod` for a pod on the host's network (pods only, not templates):
/// each container port is also the host's port unless one is named.
pub(super) fn host_network_ports(spec: &mut Value) {
    if spec.get("hostNetwork") != Some(&Value::Bool(true)) {
        return;
    }
    for list in ["containers", "initContainers"] {
        for c in objects(spec, list) {
            for port in objects(c, "ports") {
                if let Some(number) = port.get("containerPort").cloned() {
                    default_unless_set(port, "hostPort", number);
                }
            }
        }
    }
}

/// A StatefulSet's claim template is a whole claim: apps/v1 writes it with its own
/// `apiVersion` and `kind` (kube's conversion keeps what reflective conversion did before
/// 1.17) and defaults it as a claim (a Filesystem volume mode, the Pending phase).
pub(super) fn claim_template(claim: &mut Value) {
    let Some(fields) = claim.as_object_mut() else {
        return;
    };
    fields.insert("apiVersion".into(), json!("v1"));
    fields.insert("kind".into(), json!("PersistentVolumeClaim"));
    super::default_volume(claim, None);
}

fn container(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let untagged = !image.rsplit('/').next().unwrap_or("").contains(':');
    let pull = if image.ends_with(":latest") || untagged {
        "Always"
    } else {
        "IfNotPresent"
    };
    default_if_missing(c, "imagePullPolicy", json!(pull));
    default_if_missing(c, "terminationMessagePath", json!("/dev/termination-log"));
    default_if_missing(c, "terminationMessagePolicy", json!("File"));
    default_if_missing(c, "resources", json!({}));
    for port in objects(c, "ports") {
        default_if_missing(port, "protocol", json!("TCP"));
    }
    for env in objects(c, "env") {
        if let Some(selector) = object_at(env, &["valueFrom", "fieldRef"]) {
            field_selector(selector);
        }
    }
    for which in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = object_at(c, &[which]) {
            probe_defaults(probe);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(action) = object_at(c, &["lifecycle", hook, "httpGet"]) {
            http_get(action);
        }
    }
}

/// `SetDefaults_Probe` (a zero counts as unset, as Go cannot tell them apart), and its
/// handler's: an HTTP GET's path and scheme, a gRPC check's service (declared
/// `+default=""`).
fn probe_defaults(probe: &mut Value) {
    default_unless_set(probe, "timeoutSeconds", json!(1));
    default_unless_set(probe, "periodSeconds", json!(10));
    default_unless_set(probe, "successThreshold", json!(1));
    default_unless_set(probe, "failureThreshold", json!(3));
    if let Some(action) = object_at(probe, &["httpGet"]) {
        http_get(action);
    }
    if let Some(grpc) = object_at(probe, &["grpc"]) {
        default_if_missing(grpc, "service", json!(""));
    }
}

fn http_get(action: &mut Value) {
    default_unless_set(action, "path", json!("/"));
    default_unless_set(action, "scheme", json!("HTTP"));
}

/// `SetDefaults_ObjectFieldSelector`: a field path is read from v1 unless it says.
fn field_selector(selector: &mut Value) {
    default_unless_set(selector, "apiVersion", json!("v1"));
}

/// `SetDefaults_Volume` (a volume that names no source is an empty dir) and the
/// defaults of its source: files written `0644` (`defaultMode: 420`), a host path of
/// no particular type, projected tokens that last an hour, downward API fields read
/// from v1, and an ephemeral claim's Filesystem mode.
fn volume(v: &mut Value) {
    let Some(fields) = v.as_object_mut() else {
        return;
    };
    if fields
        .iter()
        .all(|(k, source)| k == "name" || source.is_null())
    {
        fields.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = object_at(v, &[source]) {
            default_if_missing(source, "defaultMode", json!(420));
        }
    }
    if let Some(host_path) = object_at(v, &["hostPath"]) {
        default_if_missing(host_path, "type", json!(""));
    }
    if let Some(downward) = object_at(v, &["downwardAPI"]) {
        downward_items(downward);
    }
    if let Some(projected) = object_at(v, &["projected"]) {
        for source in objects(projected, "sources") {
            if let Some(downward) = object_at(source, &["downwardAPI"]) {
                downward_items(downward);
            }
            if let Some(token) = object_at(source, &["serviceAccountToken"]) {
                default_if_missing(token, "expirationSeconds", json!(3600));
            }
        }
    }
    if let Some(claim) = object_at(v, &["ephemeral", "volumeClaimTemplate", "spec"]) {
        default_if_missing(claim, "volumeMode", json!("Filesystem"));
    }
}

fn downward_items(downward: &mut Value) {
    for item in objects(downward, "items") {
        if let Some(selector) = object_at(item, &["fieldRef"]) {
            field_selector(selector);
        }
    }
}

/// Set `field` where Go would see its zero value: absent, null, `0` or `""`.
fn default_unless_set(obj: &mut Value, field: &str, value: Value) {
    let Some(fields) = obj.as_object_mut() else {
        return;
    };
    let unset = match fields.get(field) {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if unset {
        fields.insert(field.to_owned(), value);
    }
}

/// The object at `path` below `value`, when every step is an object.
fn object_at<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter()
        .try_fold(value, |at, field| at.get_mut(*field))
        .filter(|found| found.is_object())
}

/// The objects of the list `field` of `value` (none when it is not a list).
fn objects<'v>(value: &'v mut Value, field: &str) -> impl Iterator<Item = &'v mut Value> {
    value
        .get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter(|item| item.is_object())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(mut spec: Value) -> Value {
        pod_spec(&mut spec);
        spec
    }

    #[test]
    fn probes_and_hooks_get_kubes_defaults() {
        let spec = defaulted(json!({"containers": [{"name": "c", "image": "nginx:1.27",
            "livenessProbe": {"httpGet": {"port": 80}},
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 0, "failureThreshold": 5},
            "startupProbe": {"grpc": {"port": 9000}},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/drain"}}}}]}));
        let c = &spec["containers"][0];
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(c["readinessProbe"]["failureThreshold"], 5);
        assert_eq!(
            c["startupProbe"]["grpc"],
            json!({"port": 9000, "service": ""})
        );
        assert_eq!(
            c["lifecycle"]["preStop"]["httpGet"],
            json!({"port": 80, "path": "/drain", "scheme": "HTTP"})
        );
    }

    #[test]
    fn volumes_get_their_sources_defaults() {
        let spec = defaulted(json!({"containers": [], "volumes": [
            {"name": "scratch"},
            {"name": "conf", "configMap": {"name": "x"}},
            {"name": "creds", "secret": {"secretName": "y", "defaultMode": 256}},
            {"name": "host", "hostPath": {"path": "/tmp"}},
            {"name": "info", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]}},
            {"name": "claim", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
        ]}));
        let v = &spec["volumes"];
        assert_eq!(v[0], json!({"name": "scratch", "emptyDir": {}}));
        assert_eq!(v[1]["configMap"], json!({"name": "x", "defaultMode": 420}));
        assert_eq!(v[2]["secret"]["defaultMode"], 256);
        assert_eq!(v[3]["hostPath"], json!({"path": "/tmp", "type": ""}));
        assert_eq!(v[4]["downwardAPI"]["defaultMode"], 420);
        assert_eq!(
            v[4]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
        let projected = &v[5]["projected"];
        assert_eq!(projected["defaultMode"], 420);
        assert_eq!(
            projected["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3600
        );
        assert_eq!(
            projected["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
        assert_eq!(
            v[6]["ephemeral"]["volumeClaimTemplate"]["spec"]["volumeMode"],
            "Filesystem"
        );
    }

    #[test]
    fn env_field_refs_read_v1_and_ephemeral_containers_are_defaulted() {
        let spec = defaulted(json!({"containers": [{"name": "c", "image": "app",
            "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "PLAIN", "value": "1"}]}],
            "ephemeralContainers": [{"name": "debug", "image": "busybox:1.36"}]}));
        assert_eq!(
            spec["containers"][0]["env"][0]["valueFrom"]["fieldRef"],
            json!({"fieldPath": "metadata.name", "apiVersion": "v1"})
        );
        assert_eq!(
            spec["containers"][0]["env"][1],
            json!({"name": "PLAIN", "value": "1"})
        );
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        let debug = &spec["ephemeralContainers"][0];
        assert_eq!(debug["imagePullPolicy"], "IfNotPresent");
        assert_eq!(debug["terminationMessagePolicy"], "File");
    }

    #[test]
    fn host_network_pods_publish_their_container_ports() {
        let mut spec = json!({"hostNetwork": true, "containers": [{"name": "c",
            "ports": [{"containerPort": 80}, {"containerPort": 443, "hostPort": 8443}]}]});
        host_network_ports(&mut spec);
        let ports = &spec["containers"][0]["ports"];
        assert_eq!(ports[0]["hostPort"], 80);
        assert_eq!(ports[1]["hostPort"], 8443);
        let mut off = json!({"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]});
        host_network_ports(&mut off);
        assert!(off["containers"][0]["ports"][0].get("hostPort").is_none());
    }

    #[test]
    fn a_claim_template_is_a_whole_defaulted_claim() {
        let mut claim = json!({"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"]}});
        claim_template(&mut claim);
        assert_eq!(claim["apiVersion"], "v1");
        assert_eq!(claim["kind"], "PersistentVolumeClaim");
        assert_eq!(claim["spec"]["volumeMode"], "Filesystem");
        assert_eq!(claim["status"], json!({"phase": "Pending"}));
    }

    #[test]
    fn values_of_the_wrong_shape_are_left_for_validation() {
        let spec = defaulted(json!({"containers": [{"name": "c", "livenessProbe": "nope",
            "env": [{"name": "A", "valueFrom": 3}]}], "volumes": ["x", {"name": "v", "secret": null}]}));
        assert_eq!(spec["containers"][0]["livenessProbe"], "nope");
        assert_eq!(spec["volumes"][0], "x");
        assert_eq!(spec["volumes"][1]["emptyDir"], json!({}));
    }
}
