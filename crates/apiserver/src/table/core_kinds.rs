//! Columns of the core (`""`) group's kinds, and of CRDs and Leases, which
//! steady has always printed: kube-apiserver 1.32's printers as data.

use super::columns::{
    AGE, AGE_DESC, CONTAINERS, CURRENT_REPLICAS, Cell, Column, DESIRED_REPLICAS, IMAGES,
    KindColumns, NAME, NAME_DESC, column, integer, kind, text, wide,
};
use super::{computed, network, pod, storage};

pub(super) static KINDS: &[KindColumns] = &[
    KindColumns {
        row_conditions: Some(pod::row_conditions),
        ..kind("", "Pod", POD)
    },
    kind("", "Service", SERVICE),
    kind("", "ConfigMap", CONFIG_MAP),
    kind("", "Secret", SECRET),
    kind("", "Namespace", NAMESPACE),
    kind("", "Node", NODE),
    kind("", "ServiceAccount", SERVICE_ACCOUNT),
    kind("", "Event", EVENT),
    kind("events.k8s.io", "Event", EVENT),
    kind("", "Endpoints", ENDPOINTS),
    kind("", "PersistentVolume", PERSISTENT_VOLUME),
    kind("", "PersistentVolumeClaim", PERSISTENT_VOLUME_CLAIM),
    kind("", "ReplicationController", REPLICATION_CONTROLLER),
    kind("coordination.k8s.io", "Lease", LEASE),
    kind("apiextensions.k8s.io", "CustomResourceDefinition", CRD),
];

const POD: &[Column] = &[
    NAME,
    column(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
        Cell::Computed(pod::ready),
    ),
    column(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
        Cell::Computed(pod::status),
    ),
    column(
        "Restarts",
        "integer",
        "The number of times the containers in this pod have been restarted.",
        Cell::Computed(pod::restarts),
    ),
    AGE,
    wide(
        "IP",
        "string",
        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        text(&[".status.podIPs[0].ip", ".status.podIP"], "<none>"),
    ),
    wide(
        "Node",
        "string",
        "NodeName indicates in which node this pod is scheduled.",
        text(&[".spec.nodeName"], "<none>"),
    ),
    wide(
        "Nominated Node",
        "string",
        "nominatedNodeName is set only when this pod preempts other pods on the node.",
        text(&[".status.nominatedNodeName"], "<none>"),
    ),
    wide(
        "Readiness Gates",
        "string",
        "If specified, all readiness gates will be evaluated for pod readiness.",
        Cell::Computed(pod::readiness_gates),
    ),
];

const SERVICE: &[Column] = &[
    NAME,
    column(
        "Type",
        "string",
        "type determines how the Service is exposed. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
        text(&[".spec.type"], "ClusterIP"),
    ),
    column(
        "Cluster-IP",
        "string",
        "clusterIP is the IP address of the service and is usually assigned randomly.",
        text(&[".spec.clusterIPs[0]", ".spec.clusterIP"], "<none>"),
    ),
    column(
        "External-IP",
        "string",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        Cell::Computed(computed::service_external_ip),
    ),
    column(
        "Port(s)",
        "string",
        "The list of ports that are exposed by this service.",
        Cell::Computed(computed::service_ports),
    ),
    AGE,
    wide(
        "Selector",
        "string",
        "Route service traffic to pods with label keys and values matching this selector.",
        Cell::Labels(".spec.selector"),
    ),
];

const CONFIG_MAP: &[Column] = &[
    NAME,
    column(
        "Data",
        "string",
        "Data contains the configuration data (number of keys in data and binaryData).",
        Cell::Count(&[".data", ".binaryData"]),
    ),
    AGE,
];

const SECRET: &[Column] = &[
    NAME,
    column(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data.",
        text(&[".type"], "Opaque"),
    ),
    column(
        "Data",
        "string",
        "Data contains the secret data (number of keys).",
        Cell::Count(&[".data"]),
    ),
    AGE,
];

const NAMESPACE: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "The status of the namespace",
        Cell::Computed(computed::namespace_status),
    ),
    AGE,
];

const NODE: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "The status of the node",
        Cell::Computed(computed::node_status),
    ),
    column(
        "Roles",
        "string",
        "The roles of the node",
        Cell::Computed(computed::node_roles),
    ),
    AGE,
    column(
        "Version",
        "string",
        "Kubelet Version reported by the node.",
        text(&[".status.nodeInfo.kubeletVersion"], ""),
    ),
    wide(
        "Internal-IP",
        "string",
        "List of addresses reachable to the node.",
        text(
            &[".status.addresses[?(@.type==\"InternalIP\")].address"],
            "<none>",
        ),
    ),
    wide(
        "External-IP",
        "string",
        "List of addresses reachable to the node.",
        text(
            &[".status.addresses[?(@.type==\"ExternalIP\")].address"],
            "<none>",
        ),
    ),
    wide(
        "OS-Image",
        "string",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        text(&[".status.nodeInfo.osImage"], "<unknown>"),
    ),
    wide(
        "Kernel-Version",
        "string",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        text(&[".status.nodeInfo.kernelVersion"], "<unknown>"),
    ),
    wide(
        "Container-Runtime",
        "string",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        text(&[".status.nodeInfo.containerRuntimeVersion"], "<unknown>"),
    ),
];

const SERVICE_ACCOUNT: &[Column] = &[
    NAME,
    column(
        "Secrets",
        "string",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        Cell::Count(&[".secrets"]),
    ),
    AGE,
];

const EVENT: &[Column] = &[
    column(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
        Cell::Computed(computed::event_last_seen),
    ),
    column(
        "Type",
        "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
        text(&[".type"], ""),
    ),
    column(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        text(&[".reason"], ""),
    ),
    column(
        "Object",
        "string",
        "The object that this event is about.",
        Cell::Computed(computed::event_object),
    ),
    wide(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
        text(&[".involvedObject.fieldPath", ".regarding.fieldPath"], ""),
    ),
    wide(
        "Source",
        "string",
        "The component reporting this event.",
        Cell::Computed(computed::event_source),
    ),
    column(
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
        Cell::Computed(computed::event_message),
    ),
    wide(
        "First Seen",
        "string",
        "The time at which the event was first recorded.",
        Cell::Computed(computed::event_first_seen),
    ),
    wide(
        "Count",
        "string",
        "The number of times this event has occurred.",
        Cell::Computed(computed::event_count),
    ),
    Column {
        format: "name",
        ..wide("Name", "string", NAME_DESC, text(&[".metadata.name"], ""))
    },
];

const LEASE: &[Column] = &[
    NAME,
    column(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease.",
        text(&[".spec.holderIdentity"], ""),
    ),
    AGE,
];

const CRD: &[Column] = &[
    NAME,
    column(
        "Created At",
        "date",
        AGE_DESC,
        Cell::Computed(computed::created_at),
    ),
];

const ENDPOINTS: &[Column] = &[
    NAME,
    column(
        "Endpoints",
        "string",
        "The set of all endpoints is the union of all subsets.",
        Cell::Computed(network::endpoints),
    ),
    AGE,
];

/// kube's `GetPersistentVolume(Claim)Class`: the beta annotation wins.
const STORAGE_CLASS: Cell = text(
    &[
        ".metadata.annotations['volume.beta.kubernetes.io/storage-class']",
        ".spec.storageClassName",
    ],
    "",
);
const VOLUME_ATTRIBUTES_CLASS: Cell = text(&[".spec.volumeAttributesClassName"], "<unset>");
const VOLUME_MODE: Cell = text(&[".spec.volumeMode"], "<unset>");

const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    column(
        "Capacity",
        "string",
        "capacity is the description of the persistent volume's resources and capacity.",
        text(&[".spec.capacity.storage"], ""),
    ),
    column(
        "Access Modes",
        "string",
        "accessModes contains all ways the volume can be mounted.",
        Cell::Computed(storage::volume_access_modes),
    ),
    column(
        "Reclaim Policy",
        "string",
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        text(&[".spec.persistentVolumeReclaimPolicy"], ""),
    ),
    column(
        "Status",
        "string",
        "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        Cell::Computed(storage::phase_or_terminating),
    ),
    column(
        "Claim",
        "string",
        "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        Cell::Computed(storage::volume_claim),
    ),
    column(
        "StorageClass",
        "string",
        "StorageClass of the pv",
        STORAGE_CLASS,
    ),
    column(
        "VolumeAttributesClass",
        "string",
        "VolumeAttributesClass of the pv",
        VOLUME_ATTRIBUTES_CLASS,
    ),
    column(
        "Reason",
        "string",
        "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        text(&[".status.reason"], ""),
    ),
    AGE,
    wide(
        "VolumeMode",
        "string",
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        VOLUME_MODE,
    ),
];

const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    NAME,
    column(
        "Status",
        "string",
        "phase represents the current phase of PersistentVolumeClaim.",
        Cell::Computed(storage::phase_or_terminating),
    ),
    column(
        "Volume",
        "string",
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
        text(&[".spec.volumeName"], ""),
    ),
    column(
        "Capacity",
        "string",
        "capacity represents the actual resources of the underlying volume.",
        Cell::Computed(storage::claim_capacity),
    ),
    column(
        "Access Modes",
        "string",
        "accessModes contains the actual access modes the volume backing the PVC has.",
        Cell::Computed(storage::claim_access_modes),
    ),
    column(
        "StorageClass",
        "string",
        "StorageClass of the pvc",
        STORAGE_CLASS,
    ),
    column(
        "VolumeAttributesClass",
        "string",
        "VolumeAttributesClass of the pvc",
        VOLUME_ATTRIBUTES_CLASS,
    ),
    AGE,
    wide(
        "VolumeMode",
        "string",
        "volumeMode defines what type of volume is required by the claim.",
        VOLUME_MODE,
    ),
];

const REPLICATION_CONTROLLER: &[Column] = &[
    NAME,
    DESIRED_REPLICAS,
    CURRENT_REPLICAS,
    column(
        "Ready",
        "integer",
        "The number of ready replicas for this replication controller.",
        integer(".status.readyReplicas"),
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "string",
        "Selector is a label query over pods that should match the Replicas count.",
        Cell::Labels(".spec.selector"),
    ),
];

#[cfg(test)]
mod tests {
    use crate::table::test_support::{
        ago, assert_shape, builtin, cells, column_names, configmap, render, single,
    };
    use serde_json::json;

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
}
