//! The built-in kinds' tables, kind by kind: columns and cells of representative objects.

use crate::table::test_support::{
    ago, assert_shape, builtin, cells, column_names, configmap, render, single,
};
use serde_json::{Value, json};

#[test]
fn configmaps() {
    let (_, c) = single(&builtin("", "ConfigMap"), configmap());
    assert_eq!(c, [json!("settings"), json!(3), json!("3d")]);
}

#[test]
fn secrets() {
    let cols = builtin("", "Secret");
    let t = render(
        &cols,
        &[
            json!({
                "metadata": {"name": "tls", "creationTimestamp": ago(90)},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": "AA==", "tls.key": "AA=="}
            }),
            json!({"metadata": {"name": "plain", "creationTimestamp": "garbage"}}),
        ],
    );
    assert_shape(&t);
    assert_eq!(column_names(&t), ["Name", "Type", "Data", "Age"]);
    assert_eq!(
        cells(&t, 0),
        [
            json!("tls"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("90s")
        ]
    );
    assert_eq!(
        cells(&t, 1),
        [
            json!("plain"),
            json!("Opaque"),
            json!(0),
            json!("<unknown>")
        ]
    );
}

#[test]
fn namespaces() {
    let cols = builtin("", "Namespace");
    let t = render(
        &cols,
        &[
            json!({"metadata": {"name": "default", "creationTimestamp": ago(400 * 86400)}, "status": {"phase": "Active"}}),
            json!({"metadata": {"name": "old", "creationTimestamp": ago(600), "deletionTimestamp": ago(5)}, "status": {"phase": "Terminating"}}),
            json!({"metadata": {"name": "fresh", "creationTimestamp": ago(1)}}),
        ],
    );
    assert_shape(&t);
    assert_eq!(column_names(&t), ["Name", "Status", "Age"]);
    assert_eq!(
        cells(&t, 0),
        [json!("default"), json!("Active"), json!("400d")]
    );
    assert_eq!(
        cells(&t, 1),
        [json!("old"), json!("Terminating"), json!("10m")]
    );
    assert_eq!(cells(&t, 2), [json!("fresh"), json!("Active"), json!("1s")]);
}

#[test]
fn serviceaccounts() {
    let (t, c) = single(
        &builtin("", "ServiceAccount"),
        json!({
            "metadata": {"name": "builder", "creationTimestamp": ago(3600)},
            "secrets": [{"name": "builder-token"}, {"name": "builder-dockercfg"}]
        }),
    );
    assert_eq!(column_names(&t), ["Name", "Secrets", "Age"]);
    assert_eq!(c, [json!("builder"), json!(2), json!("60m")]);
}

#[test]
fn leases() {
    let cols = builtin("coordination.k8s.io", "Lease");
    let t = render(
        &cols,
        &[
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "kube-scheduler", "namespace": "kube-system", "creationTimestamp": ago(5 * 3600)},
                "spec": {"holderIdentity": "node-1_abc", "leaseDurationSeconds": 15}
            }),
            json!({"metadata": {"name": "unheld", "creationTimestamp": ago(30)}, "spec": {}}),
        ],
    );
    assert_shape(&t);
    assert_eq!(column_names(&t), ["Name", "Holder", "Age"]);
    assert_eq!(
        cells(&t, 0),
        [json!("kube-scheduler"), json!("node-1_abc"), json!("5h")]
    );
    assert_eq!(cells(&t, 1), [json!("unheld"), json!(""), json!("30s")]);
}

#[test]
fn crds_print_created_at() {
    let (t, c) = single(
        &builtin("apiextensions.k8s.io", "CustomResourceDefinition"),
        json!({
            "metadata": {"name": "widgets.example.com", "creationTimestamp": "2024-05-01T08:30:00Z"},
            "spec": {"group": "example.com"}
        }),
    );
    assert_eq!(column_names(&t), ["Name", "Created At"]);
    assert_eq!(t["columnDefinitions"][1]["type"], "date");
    assert_eq!(
        c,
        [json!("widgets.example.com"), json!("2024-05-01T08:30:00Z")]
    );

    let (_, c) = single(
        &builtin("apiextensions.k8s.io", "CustomResourceDefinition"),
        json!({"metadata": {"name": "x", "creationTimestamp": "2024-05-01T10:30:00.123+02:00"}}),
    );
    assert_eq!(c[1], json!("2024-05-01T08:30:00Z"));
}
fn template() -> Value {
    json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}]}})
}

#[test]
fn deployments_replicasets_statefulsets_daemonsets() {
    let (t, c) = single(
        &builtin("apps", "Deployment"),
        json!({
            "metadata": {"name": "web", "creationTimestamp": ago(86400 * 3)},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "canary"]}]},
                "template": template()
            },
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        }),
    );
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        c,
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("3d"),
            json!("app,log"),
            json!("nginx:1.25,busybox"),
            json!("app=web,env in (canary,prod)")
        ]
    );

    let (t, c) = single(
        &builtin("apps", "ReplicaSet"),
        json!({
            "metadata": {"name": "web-7d4b9c", "creationTimestamp": ago(60)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "7d4b9c"}}, "template": template()},
            "status": {"replicas": 3, "readyReplicas": 1}
        }),
    );
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        c,
        [
            json!("web-7d4b9c"),
            json!(3),
            json!(3),
            json!(1),
            json!("60s"),
            json!("app,log"),
            json!("nginx:1.25,busybox"),
            json!("app=web,pod-template-hash=7d4b9c")
        ]
    );

    let (t, c) = single(
        &builtin("apps", "StatefulSet"),
        json!({
            "metadata": {"name": "db", "creationTimestamp": ago(60)},
            "spec": {"replicas": 2, "template": template()},
            "status": {"readyReplicas": 2}
        }),
    );
    assert_eq!(
        column_names(&t),
        ["Name", "Ready", "Age", "Containers", "Images"]
    );
    assert_eq!(c[..3].to_vec(), [json!("db"), json!("2/2"), json!("60s")]);

    let (t, c) = single(
        &builtin("apps", "DaemonSet"),
        json!({
            "metadata": {"name": "kube-proxy", "creationTimestamp": ago(60)},
            "spec": {
                "selector": {"matchExpressions": [{"key": "k8s-app", "operator": "Exists"}, {"key": "legacy", "operator": "DoesNotExist"}]},
                "template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": [{"name": "kube-proxy", "image": "kube-proxy:v1.30"}]}}
            },
            "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2}
        }),
    );
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        c,
        [
            json!("kube-proxy"),
            json!(3),
            json!(3),
            json!(2),
            json!(3),
            json!(2),
            json!("kubernetes.io/os=linux"),
            json!("60s"),
            json!("kube-proxy"),
            json!("kube-proxy:v1.30"),
            json!("k8s-app,!legacy")
        ]
    );

    // Bare objects.
    let (_, c) = single(
        &builtin("apps", "ReplicaSet"),
        json!({"metadata": {"name": "r"}}),
    );
    assert_eq!(c[7], json!("<none>"));
    let (_, c) = single(
        &builtin("apps", "Deployment"),
        json!({"metadata": {"name": "d"}}),
    );
    assert_eq!(c[1], json!("0/1"));
    assert_eq!(c[7], json!(""));
}

#[test]
fn disruption_budgets_network_policies_and_priority_classes() {
    let (t, c) = single(
        &builtin("policy", "PodDisruptionBudget"),
        json!({
            "metadata": {"name": "web", "creationTimestamp": ago(60)},
            "spec": {"minAvailable": "50%"},
            "status": {"disruptionsAllowed": 1}
        }),
    );
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    assert_eq!(
        c,
        [
            json!("web"),
            json!("50%"),
            json!("N/A"),
            json!(1),
            json!("60s")
        ]
    );

    let (t, c) = single(
        &builtin("networking.k8s.io", "NetworkPolicy"),
        json!({"metadata": {"name": "deny", "creationTimestamp": ago(60)}, "spec": {"podSelector": {}}}),
    );
    assert_eq!(column_names(&t), ["Name", "Pod-Selector", "Age"]);
    assert_eq!(c, [json!("deny"), json!("<none>"), json!("60s")]);
    let (_, c) = single(
        &builtin("networking.k8s.io", "NetworkPolicy"),
        json!({"metadata": {"name": "db"}, "spec": {"podSelector": {"matchLabels": {"app": "db"}}}}),
    );
    assert_eq!(c[1], json!("app=db"));

    let (t, c) = single(
        &builtin("scheduling.k8s.io", "PriorityClass"),
        json!({
            "metadata": {"name": "system-cluster-critical", "creationTimestamp": ago(60)},
            "value": 2000000000,
            "preemptionPolicy": "PreemptLowerPriority"
        }),
    );
    assert_eq!(
        column_names(&t),
        ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    );
    assert_eq!(
        c,
        [
            json!("system-cluster-critical"),
            json!(2000000000),
            json!(false),
            json!("60s"),
            json!("PreemptLowerPriority")
        ]
    );
}
