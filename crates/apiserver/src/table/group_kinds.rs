//! Columns of the kinds outside the core group (apps, batch, networking,
//! policy, storage, scheduling, discovery, autoscaling): kube-apiserver
//! 1.32's printers as data. Kinds not registered yet are harmless here.

use super::columns::{
    AGE, CONTAINERS, CONTAINERS_DESC, CURRENT_REPLICAS, Cell, Column, DESIRED_REPLICAS, IMAGES,
    IMAGES_DESC, KindColumns, NAME, column, integer, kind, text, wide,
};
use super::{batch, computed, network, storage};

pub(super) static KINDS: &[KindColumns] = &[
    kind("apps", "Deployment", DEPLOYMENT),
    kind("apps", "ReplicaSet", REPLICA_SET),
    kind("apps", "StatefulSet", STATEFUL_SET),
    kind("apps", "DaemonSet", DAEMON_SET),
    kind("batch", "Job", JOB),
    kind("batch", "CronJob", CRON_JOB),
    kind("policy", "PodDisruptionBudget", POD_DISRUPTION_BUDGET),
    kind("networking.k8s.io", "Ingress", INGRESS),
    kind("networking.k8s.io", "IngressClass", INGRESS_CLASS),
    kind("networking.k8s.io", "NetworkPolicy", NETWORK_POLICY),
    kind("discovery.k8s.io", "EndpointSlice", ENDPOINT_SLICE),
    kind("storage.k8s.io", "StorageClass", STORAGE_CLASS),
    kind("scheduling.k8s.io", "PriorityClass", PRIORITY_CLASS),
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
    DESIRED_REPLICAS,
    CURRENT_REPLICAS,
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

const JOB: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "Status of the job.",
        Cell::Computed(batch::job_status),
    ),
    column(
        "Completions",
        "string",
        "The number of pods which reached phase Succeeded.",
        Cell::Computed(batch::job_completions),
    ),
    column(
        "Duration",
        "string",
        "Time required to complete the job.",
        Cell::Computed(batch::job_duration),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "A label query over pods that should match the pod count.",
        SELECTOR_OR_NONE,
    ),
];

const CRON_JOB: &[Column] = &[
    NAME,
    column(
        "Schedule",
        "string",
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        text(&[".spec.schedule"], ""),
    ),
    column(
        "Timezone",
        "string",
        "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
        text(&[".spec.timeZone"], "<none>"),
    ),
    column(
        "Suspend",
        "boolean",
        "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
        Cell::Computed(batch::cron_job_suspend),
    ),
    column(
        "Active",
        "integer",
        "A list of pointers to currently running jobs.",
        Cell::Count(&[".status.active"]),
    ),
    column(
        "Last Schedule",
        "string",
        "Information when was the last time the job was successfully scheduled.",
        Cell::Computed(batch::cron_job_last_schedule),
    ),
    AGE,
    wide(
        "Containers",
        "string",
        CONTAINERS_DESC,
        Cell::Joined(".spec.jobTemplate.spec.template.spec.containers[*].name"),
    ),
    wide(
        "Images",
        "string",
        IMAGES_DESC,
        Cell::Joined(".spec.jobTemplate.spec.template.spec.containers[*].image"),
    ),
    wide(
        "Selector",
        "string",
        "A label query over pods that should match the pod count.",
        Cell::Selector {
            path: ".spec.jobTemplate.spec.selector",
            empty: "<none>",
        },
    ),
];

const POD_DISRUPTION_BUDGET: &[Column] = &[
    NAME,
    column(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
        text(&[".spec.minAvailable"], "N/A"),
    ),
    column(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
        text(&[".spec.maxUnavailable"], "N/A"),
    ),
    column(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
        integer(".status.disruptionsAllowed"),
    ),
    AGE,
];

const INGRESS: &[Column] = &[
    NAME,
    column(
        "Class",
        "string",
        "The name of the IngressClass resource that should be used for additional configuration",
        text(&[".spec.ingressClassName"], "<none>"),
    ),
    column(
        "Hosts",
        "string",
        "Hosts that incoming requests are matched against before the ingress rule",
        Cell::Computed(network::ingress_hosts),
    ),
    column(
        "Address",
        "string",
        "Address is a list containing ingress points for the load-balancer",
        Cell::Computed(network::ingress_address),
    ),
    column(
        "Ports",
        "string",
        "Ports of TLS configurations that open",
        Cell::Computed(network::ingress_ports),
    ),
    AGE,
];

const INGRESS_CLASS: &[Column] = &[
    NAME,
    column(
        "Controller",
        "string",
        "Controller that is responsible for handling this class",
        text(&[".spec.controller"], ""),
    ),
    column(
        "Parameters",
        "string",
        "A reference to a resource with additional parameters",
        Cell::Computed(network::ingress_class_parameters),
    ),
    AGE,
];

const NETWORK_POLICY: &[Column] = &[
    NAME,
    column(
        "Pod-Selector",
        "string",
        "podSelector selects the pods to which this NetworkPolicy object applies.",
        Cell::Selector {
            path: ".spec.podSelector",
            empty: "<none>",
        },
    ),
    AGE,
];

const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    column(
        "AddressType",
        "string",
        "addressType specifies the type of address carried by this EndpointSlice.",
        text(&[".addressType"], ""),
    ),
    column(
        "Ports",
        "string",
        "ports specifies the list of network ports exposed by each endpoint in this slice.",
        Cell::Computed(network::endpoint_slice_ports),
    ),
    column(
        "Endpoints",
        "string",
        "endpoints is a list of unique endpoints in this slice.",
        Cell::Computed(network::endpoint_slice_endpoints),
    ),
    AGE,
];

const STORAGE_CLASS: &[Column] = &[
    Column {
        cell: Cell::Computed(storage::storage_class_name),
        ..NAME
    },
    column(
        "Provisioner",
        "string",
        "provisioner indicates the type of the provisioner.",
        text(&[".provisioner"], ""),
    ),
    column(
        "ReclaimPolicy",
        "string",
        "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
        text(&[".reclaimPolicy"], "Delete"),
    ),
    column(
        "VolumeBindingMode",
        "string",
        "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
        text(&[".volumeBindingMode"], "Immediate"),
    ),
    column(
        "AllowVolumeExpansion",
        "string",
        "allowVolumeExpansion shows whether the storage class allow volume expand.",
        Cell::Bool(".allowVolumeExpansion"),
    ),
    AGE,
];

const PRIORITY_CLASS: &[Column] = &[
    NAME,
    column(
        "Value",
        "integer",
        "value represents the integer value of this priority class.",
        integer(".value"),
    ),
    column(
        "Global-Default",
        "boolean",
        "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        Cell::Bool(".globalDefault"),
    ),
    AGE,
    column(
        "PreemptionPolicy",
        "string",
        "preemptionPolicy is the Policy for preempting pods with lower priority.",
        text(&[".preemptionPolicy"], ""),
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
}
