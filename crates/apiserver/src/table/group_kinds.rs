//! Columns of the kinds outside the core group (apps, batch, networking,
//! policy, storage, scheduling, discovery, autoscaling): kube-apiserver
//! 1.32's printers as data. Kinds not registered yet are harmless here.

use super::columns::{
    AGE, CONTAINERS, Cell, Column, IMAGES, KindColumns, NAME, column, integer, wide,
};
use super::computed;

const fn kind(group: &'static str, kind: &'static str, columns: &'static [Column]) -> KindColumns {
    KindColumns {
        group,
        kind,
        columns,
        row_conditions: None,
    }
}

pub(super) static KINDS: &[KindColumns] = &[
    kind("apps", "Deployment", DEPLOYMENT),
    kind("apps", "ReplicaSet", REPLICA_SET),
    kind("apps", "StatefulSet", STATEFUL_SET),
    kind("apps", "DaemonSet", DAEMON_SET),
];

const DEPLOYMENT: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        "Number of the pod with ready state",
        Cell::Computed(computed::ready_of_desired),
    ),
    column(
        "Up-to-date",
        "string",
        "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        integer(".status.updatedReplicas"),
    ),
    column(
        "Available",
        "string",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        integer(".status.availableReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
        Cell::Selector {
            path: ".spec.selector",
            empty: "",
        },
    ),
];

const REPLICA_SET: &[Column] = &[
    NAME,
    column(
        "Desired",
        "integer",
        "Replicas is the number of desired replicas.",
        Cell::Integer {
            path: ".spec.replicas",
            or: 1,
        },
    ),
    column(
        "Current",
        "integer",
        "Replicas is the most recently observed number of replicas.",
        integer(".status.replicas"),
    ),
    column(
        "Ready",
        "integer",
        "The number of ready replicas for this replica set.",
        integer(".status.readyReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the replica count.",
        SELECTOR_OR_NONE,
    ),
];

const SELECTOR_OR_NONE: Cell = Cell::Selector {
    path: ".spec.selector",
    empty: "<none>",
};

const STATEFUL_SET: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        "Number of the pod with ready state",
        Cell::Computed(computed::ready_of_desired),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
];

const DAEMON_SET: &[Column] = &[
    NAME,
    column(
        "Desired",
        "integer",
        "The total number of nodes that should be running the daemon pod.",
        integer(".status.desiredNumberScheduled"),
    ),
    column(
        "Current",
        "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        integer(".status.currentNumberScheduled"),
    ),
    column(
        "Ready",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        integer(".status.numberReady"),
    ),
    column(
        "Up-to-date",
        "integer",
        "The total number of nodes that are running updated daemon pod",
        integer(".status.updatedNumberScheduled"),
    ),
    column(
        "Available",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        integer(".status.numberAvailable"),
    ),
    column(
        "Node Selector",
        "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node.",
        Cell::Labels(".spec.template.spec.nodeSelector"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "A label query over pods that are managed by the daemon set.",
        SELECTOR_OR_NONE,
    ),
];

#[cfg(test)]
mod tests {
    use crate::table::test_support::{ago, builtin, column_names, single};
    use serde_json::{Value, json};

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
}
