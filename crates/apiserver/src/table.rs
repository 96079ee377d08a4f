//! Server-side printing: `meta.k8s.io/v1` `Table` responses.
//!
//! `kubectl get` asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...`
//! and prints whatever columns the server describes. This module turns full
//! JSON objects into such a Table, mirroring kube-apiserver's printers
//! (`pkg/printers/internalversion/printers.go`), the apiextensions table
//! convertor for custom resources, and the generic default convertor.
//!
//! Like kube-apiserver, every row carries the cells of *all* columns, including
//! the `priority: 1` ones; `kubectl get` hides those unless `-o wide` is given.
//!
//! The module is self-contained: it takes everything as parameters and only
//! depends on `serde_json` and `chrono`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// Which columns a kind prints.
#[derive(Clone, Copy, Debug)]
pub enum Columns<'a> {
    /// A built-in kind, by (group, plural): e.g. ("", "pods").
    Builtin { group: &'a str, plural: &'a str },
    /// A custom resource: its CRD's additionalPrinterColumns (JSON array of
    /// {name,type,format?,description?,priority?,jsonPath}); empty = NAME + AGE.
    Custom { printer_columns: &'a [Value] },
}

/// `?includeObject=None|Metadata|Object`; kube-apiserver's default is `Metadata`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter; the empty string means the
    /// default (`Metadata`). Unknown values give `None` (kube answers 400).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "" | "Metadata" => Some(Self::Metadata),
            "None" => Some(Self::None),
            "Object" => Some(Self::Object),
            _ => None,
        }
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS_DESC: &str = "Names of each container in the template.";
const IMAGES_DESC: &str = "Images referenced by each container in the template.";
const NONE: &str = "<none>";
const UNKNOWN: &str = "<unknown>";

/// Builds a Table of `objects` (full JSON objects).
///
/// `now` is used for AGE cells. `list_metadata` (`{"resourceVersion":..,"continue":..}`)
/// is copied into the Table's metadata; null and empty-string values are
/// dropped, as kube's `omitempty` would.
pub fn table(
    columns: &Columns<'_>,
    objects: &[Value],
    now: DateTime<Utc>,
    include: IncludeObject,
    list_metadata: Value,
) -> Value {
    let printer = Printer::new(columns);
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = printer.cells(obj, now);
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if let Some(conditions) = conditions {
                row.insert("conditions".into(), conditions);
            }
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert("object".into(), partial_object_metadata(obj));
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();

    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": table_metadata(list_metadata),
        "columnDefinitions": printer.column_definitions(),
        "rows": rows,
    })
}

fn table_metadata(list_metadata: Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(map) = list_metadata {
        for (key, value) in map {
            let empty = match &value {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                _ => false,
            };
            if !empty {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}

fn partial_object_metadata(obj: &Value) -> Value {
    let metadata = obj
        .get("metadata")
        .filter(|m| m.is_object())
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
    })
}

/// Kubernetes' `duration.HumanDuration` (k8s.io/apimachinery/pkg/util/duration):
/// ~2-3 significant figures. Thresholds: < 2m → "Ns"; < 10m → "NmSs"; < 3h → "Nm";
/// < 8h → "NhMm"; < 48h → "Nh"; < 8d → "NdHh"; < 2y → "Nd"; < 8y → "NyDd"; else "Ny".
/// Up to one second in the future counts as "0s"; further is "<invalid>".
pub fn human_duration(d: Duration) -> String {
    // Truncation toward zero, like Go's int(d.Seconds()).
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

// ---------------------------------------------------------------------------
// Printers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Pod,
    Service,
    ConfigMap,
    Secret,
    Namespace,
    Node,
    ServiceAccount,
    Event,
    Lease,
    Crd,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Default,
}

impl Kind {
    fn of(group: &str, plural: &str) -> Kind {
        let group = if group == "core" { "" } else { group };
        match (group, plural) {
            ("", "pods") => Kind::Pod,
            ("", "services") => Kind::Service,
            ("", "configmaps") => Kind::ConfigMap,
            ("", "secrets") => Kind::Secret,
            ("", "namespaces") => Kind::Namespace,
            ("", "nodes") => Kind::Node,
            ("", "serviceaccounts") => Kind::ServiceAccount,
            ("", "events") | ("events.k8s.io", "events") => Kind::Event,
            ("coordination.k8s.io", "leases") => Kind::Lease,
            ("apiextensions.k8s.io", "customresourcedefinitions") => Kind::Crd,
            ("apps", "deployments") => Kind::Deployment,
            ("apps", "replicasets") => Kind::ReplicaSet,
            ("apps", "statefulsets") => Kind::StatefulSet,
            ("apps", "daemonsets") => Kind::DaemonSet,
            _ => Kind::Default,
        }
    }
}

struct CustomColumn {
    name: String,
    ty: String,
    format: String,
    description: String,
    priority: i64,
    path: String,
}

enum Printer {
    Builtin(Kind),
    Custom(Vec<CustomColumn>),
}

impl Printer {
    fn new(columns: &Columns<'_>) -> Printer {
        match columns {
            Columns::Builtin { group, plural } => Printer::Builtin(Kind::of(group, plural)),
            Columns::Custom { printer_columns } => Printer::Custom(custom_columns(printer_columns)),
        }
    }

    fn column_definitions(&self) -> Vec<Value> {
        match self {
            Printer::Builtin(kind) => builtin_columns(*kind),
            Printer::Custom(cols) => {
                let mut defs = vec![name_col()];
                defs.extend(
                    cols.iter()
                        .map(|c| col_def(&c.name, &c.ty, &c.format, &c.description, c.priority)),
                );
                defs
            }
        }
    }

    /// The row's cells and, for some kinds, its row conditions.
    fn cells(&self, obj: &Value, now: DateTime<Utc>) -> (Vec<Value>, Option<Value>) {
        match self {
            Printer::Builtin(kind) => builtin_cells(*kind, obj, now),
            Printer::Custom(cols) => {
                let mut cells = vec![name_cell(obj)];
                cells.extend(cols.iter().map(|c| custom_cell(c, obj, now)));
                (cells, None)
            }
        }
    }
}

fn col_def(name: &str, ty: &str, format: &str, description: &str, priority: i64) -> Value {
    json!({
        "name": name,
        "type": ty,
        "format": format,
        "description": description,
        "priority": priority,
    })
}

fn col(name: &str, ty: &str, description: &str) -> Value {
    col_def(name, ty, "", description, 0)
}

fn wide(name: &str, ty: &str, description: &str) -> Value {
    col_def(name, ty, "", description, 1)
}

fn name_col() -> Value {
    col_def("Name", "string", "name", NAME_DESC, 0)
}

fn age_col() -> Value {
    col("Age", "string", AGE_DESC)
}

fn builtin_columns(kind: Kind) -> Vec<Value> {
    match kind {
        Kind::Pod => vec![
            name_col(),
            col(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "integer",
                "The number of times the containers in this pod have been restarted.",
            ),
            age_col(),
            wide(
                "IP",
                "string",
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            wide(
                "Node",
                "string",
                "NodeName indicates in which node this pod is scheduled.",
            ),
            wide(
                "Nominated Node",
                "string",
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
            ),
            wide(
                "Readiness Gates",
                "string",
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        Kind::Service => vec![
            name_col(),
            col(
                "Type",
                "string",
                "type determines how the Service is exposed. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
            ),
            col(
                "Cluster-IP",
                "string",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            col(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            col(
                "Port(s)",
                "string",
                "The list of ports that are exposed by this service.",
            ),
            age_col(),
            wide(
                "Selector",
                "string",
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        Kind::ConfigMap => vec![
            name_col(),
            col(
                "Data",
                "string",
                "Data contains the configuration data (number of keys in data and binaryData).",
            ),
            age_col(),
        ],
        Kind::Secret => vec![
            name_col(),
            col(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data.",
            ),
            col(
                "Data",
                "string",
                "Data contains the secret data (number of keys).",
            ),
            age_col(),
        ],
        Kind::Namespace => vec![
            name_col(),
            col("Status", "string", "The status of the namespace"),
            age_col(),
        ],
        Kind::Node => vec![
            name_col(),
            col("Status", "string", "The status of the node"),
            col("Roles", "string", "The roles of the node"),
            age_col(),
            col("Version", "string", "Kubelet Version reported by the node."),
            wide(
                "Internal-IP",
                "string",
                "List of addresses reachable to the node.",
            ),
            wide(
                "External-IP",
                "string",
                "List of addresses reachable to the node.",
            ),
            wide(
                "OS-Image",
                "string",
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            wide(
                "Kernel-Version",
                "string",
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            wide(
                "Container-Runtime",
                "string",
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        Kind::ServiceAccount => vec![
            name_col(),
            col(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_col(),
        ],
        Kind::Event => vec![
            col(
                "Last Seen",
                "string",
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            col(
                "Type",
                "string",
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            col(
                "Reason",
                "string",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            col("Object", "string", "The object that this event is about."),
            wide(
                "Subobject",
                "string",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
            ),
            wide("Source", "string", "The component reporting this event."),
            col(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
            ),
            wide(
                "First Seen",
                "string",
                "The time at which the event was first recorded.",
            ),
            wide(
                "Count",
                "string",
                "The number of times this event has occurred.",
            ),
            col_def("Name", "string", "name", NAME_DESC, 1),
        ],
        Kind::Lease => vec![
            name_col(),
            col(
                "Holder",
                "string",
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            age_col(),
        ],
        Kind::Crd => vec![name_col(), col("Created At", "date", AGE_DESC)],
        Kind::Deployment => vec![
            name_col(),
            col("Ready", "string", "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "string",
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "string",
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age_col(),
            wide("Containers", "string", CONTAINERS_DESC),
            wide("Images", "string", IMAGES_DESC),
            wide(
                "Selector",
                "string",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        Kind::ReplicaSet => vec![
            name_col(),
            col(
                "Desired",
                "integer",
                "Replicas is the number of desired replicas.",
            ),
            col(
                "Current",
                "integer",
                "Replicas is the most recently observed number of replicas.",
            ),
            col(
                "Ready",
                "integer",
                "The number of ready replicas for this replica set.",
            ),
            age_col(),
            wide("Containers", "string", CONTAINERS_DESC),
            wide("Images", "string", IMAGES_DESC),
            wide(
                "Selector",
                "string",
                "Selector is a label query over pods that should match the replica count.",
            ),
        ],
        Kind::StatefulSet => vec![
            name_col(),
            col("Ready", "string", "Number of the pod with ready state"),
            age_col(),
            wide("Containers", "string", CONTAINERS_DESC),
            wide("Images", "string", IMAGES_DESC),
        ],
        Kind::DaemonSet => vec![
            name_col(),
            col(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod.",
            ),
            col(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            col(
                "Ready",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            col(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
            ),
            col(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            col(
                "Node Selector",
                "string",
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            age_col(),
            wide("Containers", "string", CONTAINERS_DESC),
            wide("Images", "string", IMAGES_DESC),
            wide(
                "Selector",
                "string",
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        Kind::Default => vec![name_col(), age_col()],
    }
}

fn builtin_cells(kind: Kind, obj: &Value, now: DateTime<Utc>) -> (Vec<Value>, Option<Value>) {
    let name = name_cell(obj);
    let age = Value::String(creation_age(obj, now));
    let cells = match kind {
        Kind::Pod => return pod_cells(obj, now),
        Kind::Service => service_cells(obj, name, age),
        Kind::ConfigMap => {
            let n = obj_len(obj, &["data"]) + obj_len(obj, &["binaryData"]);
            vec![name, json!(n), age]
        }
        Kind::Secret => {
            let ty = nonempty(obj, &["type"]).unwrap_or("Opaque");
            vec![name, json!(ty), json!(obj_len(obj, &["data"])), age]
        }
        Kind::Namespace => {
            let phase = nonempty(obj, &["status", "phase"]).unwrap_or_else(|| {
                if is_set(obj, &["metadata", "deletionTimestamp"]) {
                    "Terminating"
                } else {
                    "Active"
                }
            });
            vec![name, json!(phase), age]
        }
        Kind::Node => node_cells(obj, name, age),
        Kind::ServiceAccount => {
            vec![name, json!(arr_at(obj, &["secrets"]).len()), age]
        }
        Kind::Event => event_cells(obj, now),
        Kind::Lease => {
            let holder = str_at(obj, &["spec", "holderIdentity"]).unwrap_or("");
            vec![name, json!(holder), age]
        }
        Kind::Crd => {
            let created = match str_at(obj, &["metadata", "creationTimestamp"]) {
                Some(ts) => match parse_time(ts) {
                    Some(t) => t.to_rfc3339_opts(SecondsFormat::Secs, true),
                    None => ts.to_string(),
                },
                // Go's zero time, as the default table convertor prints it.
                None => "0001-01-01T00:00:00Z".to_string(),
            };
            vec![name, json!(created)]
        }
        Kind::Deployment => {
            let desired = int_at(obj, &["spec", "replicas"]).unwrap_or(1);
            let ready = int_at(obj, &["status", "readyReplicas"]).unwrap_or(0);
            let updated = int_at(obj, &["status", "updatedReplicas"]).unwrap_or(0);
            let available = int_at(obj, &["status", "availableReplicas"]).unwrap_or(0);
            let (containers, images) = container_cells(obj, &["spec", "template"]);
            let selector = label_selector_string(at(obj, &["spec", "selector"]));
            vec![
                name,
                json!(format!("{ready}/{desired}")),
                json!(updated),
                json!(available),
                age,
                json!(containers),
                json!(images),
                json!(selector),
            ]
        }
        Kind::ReplicaSet => {
            let desired = int_at(obj, &["spec", "replicas"]).unwrap_or(1);
            let current = int_at(obj, &["status", "replicas"]).unwrap_or(0);
            let ready = int_at(obj, &["status", "readyReplicas"]).unwrap_or(0);
            let (containers, images) = container_cells(obj, &["spec", "template"]);
            vec![
                name,
                json!(desired),
                json!(current),
                json!(ready),
                age,
                json!(containers),
                json!(images),
                json!(format_label_selector(at(obj, &["spec", "selector"]))),
            ]
        }
        Kind::StatefulSet => {
            let desired = int_at(obj, &["spec", "replicas"]).unwrap_or(1);
            let ready = int_at(obj, &["status", "readyReplicas"]).unwrap_or(0);
            let (containers, images) = container_cells(obj, &["spec", "template"]);
            vec![
                name,
                json!(format!("{ready}/{desired}")),
                age,
                json!(containers),
                json!(images),
            ]
        }
        Kind::DaemonSet => {
            let status = |field: &str| json!(int_at(obj, &["status", field]).unwrap_or(0));
            let node_selector =
                format_labels(at(obj, &["spec", "template", "spec", "nodeSelector"]));
            let (containers, images) = container_cells(obj, &["spec", "template"]);
            vec![
                name,
                status("desiredNumberScheduled"),
                status("currentNumberScheduled"),
                status("numberReady"),
                status("updatedNumberScheduled"),
                status("numberAvailable"),
                json!(node_selector),
                age,
                json!(containers),
                json!(images),
                json!(format_label_selector(at(obj, &["spec", "selector"]))),
            ]
        }
        Kind::Default => vec![name, age],
    };
    (cells, None)
}

// --- pods ------------------------------------------------------------------

/// kubectl's pod STATUS / READY / RESTARTS logic (printPod).
fn pod_cells(pod: &Value, now: DateTime<Utc>) -> (Vec<Value>, Option<Value>) {
    let containers = arr_at(pod, &["spec", "containers"]);
    let init_containers = arr_at(pod, &["spec", "initContainers"]);
    let conditions = arr_at(pod, &["status", "conditions"]);
    let phase = str_at(pod, &["status", "phase"]).unwrap_or("");
    let mut reason = nonempty(pod, &["status", "reason"])
        .unwrap_or(phase)
        .to_string();

    if conditions.iter().any(|c| {
        str_at(c, &["type"]) == Some("PodScheduled")
            && str_at(c, &["reason"]) == Some("SchedulingGated")
    }) {
        reason = "SchedulingGated".to_string();
    }

    // Sidecars: init containers with restartPolicy Always count as containers.
    let restartable: BTreeSet<&str> = init_containers
        .iter()
        .filter(|c| str_at(c, &["restartPolicy"]) == Some("Always"))
        .filter_map(|c| str_at(c, &["name"]))
        .collect();
    let total = containers.len() + restartable.len();

    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut restartable_restarts = 0i64;
    let mut initializing = false;

    for (i, cs) in arr_at(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let restart_count = int_at(cs, &["restartCount"]).unwrap_or(0);
        restarts += restart_count;
        let is_restartable = str_at(cs, &["name"]).is_some_and(|n| restartable.contains(n));
        if is_restartable {
            restartable_restarts += restart_count;
        }
        let terminated = at(cs, &["state", "terminated"]).filter(|t| t.is_object());
        let waiting = at(cs, &["state", "waiting"]).filter(|w| w.is_object());
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]).unwrap_or(0) == 0) {
            continue;
        }
        if is_restartable && at(cs, &["started"]).and_then(Value::as_bool) == Some(true) {
            if at(cs, &["ready"]).and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = match nonempty(t, &["reason"]) {
                Some(r) => format!("Init:{r}"),
                None => terminated_code("Init:", t),
            };
        } else if let Some(r) = waiting
            .and_then(|w| nonempty(w, &["reason"]))
            .filter(|r| *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{i}/{}", init_containers.len());
        }
        initializing = true;
        break;
    }

    let initialized = conditions.iter().any(|c| {
        str_at(c, &["type"]) == Some("Initialized") && str_at(c, &["status"]) == Some("True")
    });
    if !initializing || initialized {
        restarts = restartable_restarts;
        let mut has_running = false;
        for cs in arr_at(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int_at(cs, &["restartCount"]).unwrap_or(0);
            let terminated = at(cs, &["state", "terminated"]).filter(|t| t.is_object());
            let waiting_reason =
                at(cs, &["state", "waiting"]).and_then(|w| nonempty(w, &["reason"]));
            if let Some(r) = waiting_reason {
                reason = r.to_string();
            } else if let Some(t) = terminated {
                reason = match nonempty(t, &["reason"]) {
                    Some(r) => r.to_string(),
                    None => terminated_code("", t),
                };
            } else if at(cs, &["ready"]).and_then(Value::as_bool) == Some(true)
                && at(cs, &["state", "running"]).is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = conditions.iter().any(|c| {
                str_at(c, &["type"]) == Some("Ready") && str_at(c, &["status"]) == Some("True")
            });
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }

    if is_set(pod, &["metadata", "deletionTimestamp"]) {
        if str_at(pod, &["status", "reason"]) == Some("NodeLost") {
            reason = "Unknown".to_string();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".to_string();
        }
    }

    let pod_ip = arr_at(pod, &["status", "podIPs"])
        .first()
        .and_then(|ip| nonempty(ip, &["ip"]))
        .or_else(|| nonempty(pod, &["status", "podIP"]))
        .unwrap_or(NONE);
    let node = nonempty(pod, &["spec", "nodeName"]).unwrap_or(NONE);
    let nominated = nonempty(pod, &["status", "nominatedNodeName"]).unwrap_or(NONE);
    let gates = arr_at(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        NONE.to_string()
    } else {
        let true_count = gates
            .iter()
            .filter(|gate| {
                let Some(ty) = str_at(gate, &["conditionType"]) else {
                    return false;
                };
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == Some(ty))
                    .is_some_and(|c| str_at(c, &["status"]) == Some("True"))
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };

    let row_conditions = match phase {
        "Succeeded" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }])),
        "Failed" => Some(json!([{
            "type": "Completed",
            "status": "True",
            "reason": "Failed",
            "message": "The pod failed.",
        }])),
        _ => None,
    };

    let cells = vec![
        name_cell(pod),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        json!(creation_age(pod, now)),
        json!(pod_ip),
        json!(node),
        json!(nominated),
        json!(readiness_gates),
    ];
    (cells, row_conditions)
}

fn terminated_code(prefix: &str, terminated: &Value) -> String {
    match int_at(terminated, &["signal"]).filter(|s| *s != 0) {
        Some(signal) => format!("{prefix}Signal:{signal}"),
        None => format!(
            "{prefix}ExitCode:{}",
            int_at(terminated, &["exitCode"]).unwrap_or(0)
        ),
    }
}

// --- services --------------------------------------------------------------

fn service_cells(svc: &Value, name: Value, age: Value) -> Vec<Value> {
    let ty = nonempty(svc, &["spec", "type"]).unwrap_or("ClusterIP");
    let cluster_ip = arr_at(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| nonempty(svc, &["spec", "clusterIP"]))
        .unwrap_or(NONE);
    let external_ips: Vec<&str> = arr_at(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match ty {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                NONE.to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            // Server-side printing is always "wide": no truncation.
            let ingress: BTreeSet<&str> = arr_at(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| nonempty(i, &["ip"]).or_else(|| nonempty(i, &["hostname"])))
                .collect();
            let mut all: Vec<&str> = ingress.into_iter().collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, &["spec", "externalName"])
            .unwrap_or("")
            .to_string(),
        _ => UNKNOWN.to_string(),
    };
    let ports: Vec<String> = arr_at(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]).unwrap_or(0);
            let protocol = nonempty(p, &["protocol"]).unwrap_or("TCP");
            match int_at(p, &["nodePort"]).filter(|n| *n > 0) {
                Some(node_port) => format!("{port}:{node_port}/{protocol}"),
                None => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        NONE.to_string()
    } else {
        ports.join(",")
    };
    vec![
        name,
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age,
        json!(format_labels(at(svc, &["spec", "selector"]))),
    ]
}

// --- nodes -----------------------------------------------------------------

fn node_cells(node: &Value, name: Value, age: Value) -> Vec<Value> {
    let ready = arr_at(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| str_at(c, &["type"]) == Some("Ready"));
    let mut status = vec![match ready {
        Some(c) if str_at(c, &["status"]) == Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if at(node, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled");
    }

    let mut roles = BTreeSet::new();
    if let Some(labels) = at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if let Some(v) = value
                .as_str()
                .filter(|v| key == "kubernetes.io/role" && !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    let roles = if roles.is_empty() {
        NONE.to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };

    let address = |ty: &str| {
        arr_at(node, &["status", "addresses"])
            .iter()
            .find(|a| str_at(a, &["type"]) == Some(ty))
            .and_then(|a| str_at(a, &["address"]))
            .unwrap_or(NONE)
    };
    let info = |field: &str| nonempty(node, &["status", "nodeInfo", field]);

    vec![
        name,
        json!(status.join(",")),
        json!(roles),
        age,
        json!(info("kubeletVersion").unwrap_or("")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage").unwrap_or(UNKNOWN)),
        json!(info("kernelVersion").unwrap_or(UNKNOWN)),
        json!(info("containerRuntimeVersion").unwrap_or(UNKNOWN)),
    ]
}

// --- events ----------------------------------------------------------------

/// Core v1 and events.k8s.io/v1 events (the latter use `regarding`, `note`,
/// `deprecated*` fields and `reportingController`).
fn event_cells(ev: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let first_str = |keys: &[&str]| keys.iter().find_map(|k| nonempty(ev, &[k]));
    let age = |ts: &str| match parse_time(ts) {
        Some(t) => human_duration(now - t),
        None => UNKNOWN.to_string(),
    };

    let first_seen = match first_str(&["firstTimestamp", "deprecatedFirstTimestamp"]) {
        Some(ts) => age(ts),
        None => first_str(&["eventTime"]).map_or_else(|| UNKNOWN.to_string(), age),
    };
    let mut last_seen = match first_str(&["lastTimestamp", "deprecatedLastTimestamp"]) {
        Some(ts) => age(ts),
        None => first_seen.clone(),
    };
    let mut count = int_at(ev, &["count"])
        .or_else(|| int_at(ev, &["deprecatedCount"]))
        .unwrap_or(0);
    match at(ev, &["series"]).filter(|s| s.is_object()) {
        Some(series) => {
            last_seen =
                str_at(series, &["lastObservedTime"]).map_or_else(|| UNKNOWN.to_string(), age);
            count = int_at(series, &["count"]).unwrap_or(0);
        }
        None if count == 0 => count = 1,
        None => {}
    }

    let regarding = at(ev, &["involvedObject"])
        .or_else(|| at(ev, &["regarding"]))
        .unwrap_or(&Value::Null);
    let kind = str_at(regarding, &["kind"]).unwrap_or("").to_lowercase();
    let target = match nonempty(regarding, &["name"]) {
        Some(name) => format!("{kind}/{name}"),
        None => kind,
    };
    let field_path = str_at(regarding, &["fieldPath"]).unwrap_or("");

    let source = at(ev, &["source"]).or_else(|| at(ev, &["deprecatedSource"]));
    let component = source
        .and_then(|s| nonempty(s, &["component"]))
        .or_else(|| first_str(&["reportingComponent", "reportingController"]))
        .unwrap_or("");
    let instance = source
        .and_then(|s| nonempty(s, &["host"]))
        .or_else(|| first_str(&["reportingInstance"]))
        .unwrap_or("");
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };

    let message = first_str(&["message", "note"]).unwrap_or("").trim();

    vec![
        json!(last_seen),
        json!(str_at(ev, &["type"]).unwrap_or("")),
        json!(str_at(ev, &["reason"]).unwrap_or("")),
        json!(target),
        json!(field_path),
        json!(source),
        json!(message),
        json!(first_seen),
        json!(count),
        name_cell(ev),
    ]
}

// --- custom resources ------------------------------------------------------

fn custom_columns(defs: &[Value]) -> Vec<CustomColumn> {
    if defs.is_empty() {
        // apiextensions-apiserver's serveDefaultColumnsIfEmpty.
        return vec![CustomColumn {
            name: "Age".to_string(),
            ty: "date".to_string(),
            format: String::new(),
            description: AGE_DESC.to_string(),
            priority: 0,
            path: ".metadata.creationTimestamp".to_string(),
        }];
    }
    defs.iter()
        .filter_map(|d| {
            let name = str_at(d, &["name"])?;
            let path = str_at(d, &["jsonPath"]).or_else(|| str_at(d, &["JSONPath"]))?;
            let description = nonempty(d, &["description"]).map_or_else(
                || format!("Custom resource definition column (in JSONPath format): {path}"),
                str::to_string,
            );
            Some(CustomColumn {
                name: name.to_string(),
                ty: str_at(d, &["type"]).unwrap_or("string").to_string(),
                format: str_at(d, &["format"]).unwrap_or("").to_string(),
                description,
                priority: int_at(d, &["priority"]).unwrap_or(0),
                path: path.to_string(),
            })
        })
        .collect()
}

/// One custom-column cell, following apiextensions' `cellForJSONValue`:
/// nothing found (or JSON null) → null (kubectl prints an empty cell);
/// "string" → text, all matches joined with ","; "integer"/"number"/"boolean"
/// → the first match as a JSON number/bool (null on type mismatch);
/// "date" → the first match as a human age like AGE ("<invalid>" if unparsable).
fn custom_cell(col: &CustomColumn, obj: &Value, now: DateTime<Utc>) -> Value {
    let results: Vec<&Value> = json_path(obj, &col.path)
        .into_iter()
        .filter(|v| !v.is_null())
        .collect();
    let Some(first) = results.first() else {
        return Value::Null;
    };
    match col.ty.as_str() {
        "string" => Value::String(
            results
                .iter()
                .map(|v| value_text(v))
                .collect::<Vec<_>>()
                .join(","),
        ),
        "integer" => first
            .as_i64()
            .or_else(|| first.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        "number" => first.as_f64().map_or(Value::Null, Value::from),
        "boolean" => first.as_bool().map_or(Value::Null, Value::Bool),
        "date" => match first.as_str() {
            Some("") => Value::String(UNKNOWN.to_string()),
            Some(s) => Value::String(match parse_time(s) {
                Some(t) => human_duration(now - t),
                None => "<invalid>".to_string(),
            }),
            None => Value::Null,
        },
        _ => Value::Null,
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            items.iter().map(value_text).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(*key))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn nonempty<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    str_at(v, path).filter(|s| !s.is_empty())
}

fn is_set(v: &Value, path: &[&str]) -> bool {
    at(v, path).is_some_and(|x| !x.is_null())
}

fn int_at(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path).and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64)))
}

fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn obj_len(v: &Value, path: &[&str]) -> usize {
    at(v, path).and_then(Value::as_object).map_or(0, Map::len)
}

fn name_cell(obj: &Value) -> Value {
    json!(str_at(obj, &["metadata", "name"]).unwrap_or(""))
}

fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn creation_age(obj: &Value, now: DateTime<Utc>) -> String {
    match str_at(obj, &["metadata", "creationTimestamp"]).and_then(parse_time) {
        Some(t) => human_duration(now - t),
        None => UNKNOWN.to_string(),
    }
}

/// `containers` / `images` cells of a pod template (layoutContainerCells).
fn container_cells(obj: &Value, template: &[&str]) -> (String, String) {
    let mut path = template.to_vec();
    path.extend(["spec", "containers"]);
    let containers = arr_at(obj, &path);
    let names: Vec<&str> = containers
        .iter()
        .map(|c| str_at(c, &["name"]).unwrap_or(""))
        .collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| str_at(c, &["image"]).unwrap_or(""))
        .collect();
    (names.join(","), images.join(","))
}

/// labels.FormatLabels: sorted "k=v,k2=v2", "<none>" when empty.
fn format_labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, String> = map
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), value_text(v))).collect())
        .unwrap_or_default();
    if pairs.is_empty() {
        return NONE.to_string();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// metav1.LabelSelector as a selector string ("" when it selects everything).
fn label_selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector.filter(|s| s.is_object()) else {
        return String::new();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = at(selector, &["matchLabels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", value_text(v))));
        }
    }
    for expr in arr_at(selector, &["matchExpressions"]) {
        let key = str_at(expr, &["key"]).unwrap_or("");
        let mut values: Vec<String> = arr_at(expr, &["values"]).iter().map(value_text).collect();
        values.sort();
        let text = match str_at(expr, &["operator"]).unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".to_string(),
        };
        reqs.push((key.to_string(), text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// metav1.FormatLabelSelector: like [`label_selector_string`] but "<none>" when empty.
fn format_label_selector(selector: Option<&Value>) -> String {
    let s = label_selector_string(selector);
    if s.is_empty() { NONE.to_string() } else { s }
}

// ---------------------------------------------------------------------------
// JSONPath
// ---------------------------------------------------------------------------

/// Evaluates a CRD printer-column JSONPath (the subset kubectl/client-go
/// support): `.a.b`, optional `{}` / `$` wrapper, `['key']`, `[0]`, `[-1]`,
/// `[0,2]`, `[1:3]`, `[*]`, `.*`, `..key` (recursive descent) and filters
/// `[?(@.type=="Ready")]` with `== != < <= > >=` or bare existence `[?(@.x)]`.
/// Dots inside a key can be escaped: `.metadata.labels.app\.kubernetes\.io/name`.
///
/// Returns every match in document order; an empty vector when the path does
/// not resolve (or does not parse).
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    match parse_path(path) {
        Some(steps) => eval_steps(&steps, obj),
        None => Vec::new(),
    }
}

#[derive(Debug, Clone)]
enum Step {
    Keys(Vec<String>),
    Wildcard,
    Indices(Vec<i64>),
    Slice(Option<i64>, Option<i64>, Option<i64>),
    Filter(Box<Filter>),
    Descend,
}

#[derive(Debug, Clone)]
struct Filter {
    lhs: Vec<Step>,
    cmp: Option<(CmpOp, Operand)>,
}

#[derive(Debug, Clone, Copy)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone)]
enum Operand {
    Literal(Value),
    Path(Vec<Step>),
}

fn parse_path(path: &str) -> Option<Vec<Step>> {
    let mut p = path.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        p = inner.trim();
    }
    let chars: Vec<char> = p.chars().collect();
    let len = chars.len();
    let mut i = 0;
    if matches!(chars.first(), Some('$') | Some('@')) {
        i = 1;
    }
    let mut steps = Vec::new();
    // kubectl tolerates a missing leading dot ("spec.replicas").
    if i < len && chars[i] != '.' && chars[i] != '[' {
        let (name, next) = parse_name(&chars, i);
        if name.is_empty() {
            return None;
        }
        steps.push(Step::Keys(vec![name]));
        i = next;
    }
    while i < len {
        match chars[i] {
            '.' => {
                i += 1;
                if i < len && chars[i] == '.' {
                    steps.push(Step::Descend);
                    i += 1;
                    if i >= len {
                        return None;
                    }
                }
                if i >= len {
                    break; // "." alone: the root itself
                }
                match chars[i] {
                    '*' => {
                        steps.push(Step::Wildcard);
                        i += 1;
                    }
                    '[' => {}
                    '.' => return None,
                    _ => {
                        let (name, next) = parse_name(&chars, i);
                        if name.is_empty() {
                            return None;
                        }
                        steps.push(Step::Keys(vec![name]));
                        i = next;
                    }
                }
            }
            '[' => {
                let end = bracket_end(&chars, i)?;
                let inner: String = chars[i + 1..end].iter().collect();
                steps.push(parse_bracket(inner.trim())?);
                i = end + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

/// Reads a field name up to the next unescaped '.' or '['.
fn parse_name(chars: &[char], mut i: usize) -> (String, usize) {
    let mut name = String::new();
    while i < chars.len() {
        match chars[i] {
            '\\' if i + 1 < chars.len() => {
                name.push(chars[i + 1]);
                i += 2;
            }
            '.' | '[' => break,
            c => {
                name.push(c);
                i += 1;
            }
        }
    }
    (name.trim_end().to_string(), i)
}

/// Index of the ']' closing the '[' at `open`, skipping quotes and nesting.
fn bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut i = open;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) => {
                if c == '\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '[' | '(' => depth += 1,
                ']' | ')' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 && c == ']' {
                        return Some(i);
                    }
                }
                _ => {}
            },
        }
        i += 1;
    }
    None
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::Wildcard);
    }
    if let Some(expr) = inner.strip_prefix('?') {
        let expr = expr.trim().strip_prefix('(')?.strip_suffix(')')?;
        return Some(Step::Filter(Box::new(parse_filter(expr.trim())?)));
    }
    if inner.starts_with('\'') || inner.starts_with('"') {
        let keys = split_outside_quotes(inner, ',')
            .into_iter()
            .map(|k| unquote(k.trim()))
            .collect::<Option<Vec<_>>>()?;
        return Some(Step::Keys(keys));
    }
    if inner.contains(':') {
        let parts: Vec<&str> = inner.split(':').map(str::trim).collect();
        if parts.len() > 3 {
            return None;
        }
        let num = |s: Option<&&str>| -> Option<Option<i64>> {
            match s {
                None | Some(&"") => Some(None),
                Some(s) => s.parse().ok().map(Some),
            }
        };
        return Some(Step::Slice(
            num(parts.first())?,
            num(parts.get(1))?,
            num(parts.get(2))?,
        ));
    }
    let indices = inner
        .split(',')
        .map(|s| s.trim().parse::<i64>().ok())
        .collect::<Option<Vec<_>>>()?;
    Some(Step::Indices(indices))
}

fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quote: Option<char> = None;
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match quote {
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == sep => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            None => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn unquote(s: &str) -> Option<String> {
    let q = s.chars().next()?;
    if (q != '\'' && q != '"') || s.len() < 2 || !s.ends_with(q) {
        return None;
    }
    let body = &s[1..s.len() - 1];
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next()?);
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn parse_filter(expr: &str) -> Option<Filter> {
    let Some((pos, op, op_len)) = find_operator(expr) else {
        if !expr.starts_with('@') {
            return None;
        }
        return Some(Filter {
            lhs: parse_path(expr)?,
            cmp: None,
        });
    };
    let lhs = expr[..pos].trim();
    let rhs = expr[pos + op_len..].trim();
    if !lhs.starts_with('@') {
        return None;
    }
    Some(Filter {
        lhs: parse_path(lhs)?,
        cmp: Some((op, parse_operand(rhs)?)),
    })
}

fn find_operator(expr: &str) -> Option<(usize, CmpOp, usize)> {
    let bytes = expr.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        let next = bytes.get(i + 1).copied();
        match (c, next) {
            (b'\'' | b'"', _) => quote = Some(c),
            (b'=', Some(b'=')) => return Some((i, CmpOp::Eq, 2)),
            (b'!', Some(b'=')) => return Some((i, CmpOp::Ne, 2)),
            (b'<', Some(b'=')) => return Some((i, CmpOp::Le, 2)),
            (b'>', Some(b'=')) => return Some((i, CmpOp::Ge, 2)),
            (b'<', _) => return Some((i, CmpOp::Lt, 1)),
            (b'>', _) => return Some((i, CmpOp::Gt, 1)),
            _ => {}
        }
        i += 1;
    }
    None
}

fn parse_operand(s: &str) -> Option<Operand> {
    if s.starts_with('@') {
        return parse_path(s).map(Operand::Path);
    }
    if s.starts_with('\'') || s.starts_with('"') {
        return unquote(s).map(|u| Operand::Literal(Value::String(u)));
    }
    match s {
        "true" => Some(Operand::Literal(Value::Bool(true))),
        "false" => Some(Operand::Literal(Value::Bool(false))),
        "null" | "nil" => Some(Operand::Literal(Value::Null)),
        _ => serde_json::from_str::<serde_json::Number>(s)
            .ok()
            .map(|n| Operand::Literal(Value::Number(n))),
    }
}

fn eval_steps<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for value in current {
            match step {
                Step::Keys(keys) => {
                    if let Value::Object(map) = value {
                        next.extend(keys.iter().filter_map(|k| map.get(k)));
                    }
                }
                Step::Wildcard => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Indices(indices) => {
                    if let Value::Array(items) = value {
                        next.extend(indices.iter().filter_map(|&i| index(items, i)));
                    }
                }
                Step::Slice(start, end, step) => {
                    if let Value::Array(items) = value {
                        next.extend(slice(items, *start, *end, *step));
                    }
                }
                Step::Filter(filter) => {
                    if let Value::Array(items) = value {
                        next.extend(items.iter().filter(|item| filter.matches(item)));
                    }
                }
                Step::Descend => descend(value, &mut next),
            }
        }
        current = next;
    }
    current
}

fn index(items: &[Value], i: i64) -> Option<&Value> {
    let len = i64::try_from(items.len()).ok()?;
    let i = if i < 0 { i + len } else { i };
    usize::try_from(i).ok().and_then(|i| items.get(i))
}

fn slice(items: &[Value], start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<&Value> {
    let Ok(len) = i64::try_from(items.len()) else {
        return Vec::new();
    };
    let step = step.unwrap_or(1);
    if step <= 0 {
        return Vec::new();
    }
    let clamp = |v: i64| {
        let v = if v < 0 { v + len } else { v };
        v.clamp(0, len)
    };
    let start = clamp(start.unwrap_or(0));
    let end = clamp(end.unwrap_or(len));
    let mut out = Vec::new();
    let mut i = start;
    while i < end {
        if let Some(v) = usize::try_from(i).ok().and_then(|i| items.get(i)) {
            out.push(v);
        }
        i += step;
    }
    out
}

fn descend<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(value);
    match value {
        Value::Array(items) => items.iter().for_each(|v| descend(v, out)),
        Value::Object(map) => map.values().for_each(|v| descend(v, out)),
        _ => {}
    }
}

impl Filter {
    fn matches(&self, item: &Value) -> bool {
        let left = eval_steps(&self.lhs, item);
        let Some((op, operand)) = &self.cmp else {
            return left.iter().any(|v| !v.is_null());
        };
        let Some(l) = left.first() else {
            return false;
        };
        let right = match operand {
            Operand::Literal(v) => Some(v),
            Operand::Path(p) => eval_steps(p, item).first().copied(),
        };
        let Some(r) = right else {
            return false;
        };
        compare(*op, l, r)
    }
}

fn compare(op: CmpOp, l: &Value, r: &Value) -> bool {
    let ordering = match (l, r) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        _ => None,
    };
    match (op, ordering) {
        (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
        (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
        (CmpOp::Eq, None) => l == r,
        (CmpOp::Ne, None) => l != r,
        (CmpOp::Lt, Some(o)) => o == Ordering::Less,
        (CmpOp::Le, Some(o)) => o != Ordering::Greater,
        (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
        (CmpOp::Ge, Some(o)) => o != Ordering::Less,
        (_, None) => false,
    }
}

/// The Table of stored objects of resource `rt` (the server's entry point).
pub fn of_resource(
    rt: &crate::registry::ResourceType,
    items: &[bytes::Bytes],
    now: DateTime<Utc>,
    include: IncludeObject,
    list_metadata: Value,
) -> Result<bytes::Bytes, crate::error::ApiError> {
    let objects = items
        .iter()
        .map(|b| serde_json::from_slice::<Value>(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| crate::error::ApiError::internal(format!("stored object is corrupt: {e}")))?;
    let columns = if rt.builtin {
        Columns::Builtin {
            group: &rt.group,
            plural: &rt.plural,
        }
    } else {
        Columns::Custom {
            printer_columns: &rt.printer_columns,
        }
    };
    let table = table(&columns, &objects, now, include, list_metadata);
    serde_json::to_vec(&table)
        .map(bytes::Bytes::from)
        .map_err(|e| crate::error::ApiError::internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2024, 5, 10, 12, 0, 0)
            .single()
            .expect("valid time")
    }

    /// A timestamp `secs` seconds before `now()`.
    fn ago(secs: i64) -> String {
        (now() - Duration::seconds(secs)).to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    fn builtin(group: &'static str, plural: &'static str) -> Columns<'static> {
        Columns::Builtin { group, plural }
    }

    fn render(columns: &Columns<'_>, objects: &[Value]) -> Value {
        table(
            columns,
            objects,
            now(),
            IncludeObject::None,
            json!({"resourceVersion": "42"}),
        )
    }

    fn column_names(t: &Value) -> Vec<String> {
        t["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .map(|c| c["name"].as_str().expect("name").to_string())
            .collect()
    }

    fn wide_names(t: &Value) -> Vec<String> {
        t["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter(|c| c["priority"] == json!(1))
            .map(|c| c["name"].as_str().expect("name").to_string())
            .collect()
    }

    fn cells(t: &Value, row: usize) -> Vec<Value> {
        t["rows"][row]["cells"].as_array().expect("cells").clone()
    }

    fn assert_shape(t: &Value) {
        let n = t["columnDefinitions"].as_array().expect("columns").len();
        for row in t["rows"].as_array().expect("rows") {
            assert_eq!(row["cells"].as_array().expect("cells").len(), n, "{row}");
        }
    }

    fn single(columns: &Columns<'_>, obj: Value) -> (Value, Vec<Value>) {
        let t = render(columns, &[obj]);
        assert_shape(&t);
        let c = cells(&t, 0);
        (t, c)
    }

    // --- human_duration --------------------------------------------------

    #[test]
    fn human_duration_thresholds() {
        let cases: &[(i64, &str)] = &[
            (-5, "<invalid>"),
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (121, "2m1s"),
            (9 * 60 + 59, "9m59s"),
            (10 * 60, "10m"),
            (10 * 60 + 30, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (7 * 3600 + 59 * 60, "7h59m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (7 * 86400 + 23 * 3600, "7d23h"),
            (8 * 86400, "8d"),
            (729 * 86400 + 23 * 3600, "729d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (8 * 365 * 86400 - 1, "7y364d"),
            (8 * 365 * 86400, "8y"),
            (20 * 365 * 86400, "20y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::seconds(*secs)), *want, "{secs}s");
        }
        // Fractions truncate toward zero like Go's int(d.Seconds()).
        assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
        assert_eq!(human_duration(Duration::milliseconds(119_999)), "119s");
    }

    // --- table envelope / include modes -----------------------------------

    fn configmap() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "settings",
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "7",
                "creationTimestamp": ago(3 * 86400),
                "labels": {"app": "web"}
            },
            "data": {"a": "1", "b": "2"},
            "binaryData": {"c": "AA=="}
        })
    }

    #[test]
    fn envelope_and_include_modes() {
        let cols = builtin("", "configmaps");
        let objs = [configmap()];
        let meta = json!({"resourceVersion": "42", "continue": "", "remainingItemCount": null});

        let t = table(&cols, &objs, now(), IncludeObject::Metadata, meta.clone());
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "42"}));
        assert_eq!(
            t["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0})
        );
        assert_eq!(
            t["rows"][0]["object"],
            json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": objs[0]["metadata"].clone()
            })
        );
        assert!(t["rows"][0].get("conditions").is_none());

        let t = table(&cols, &objs, now(), IncludeObject::Object, meta.clone());
        assert_eq!(t["rows"][0]["object"], objs[0]);

        let t = table(&cols, &objs, now(), IncludeObject::None, meta);
        assert!(t["rows"][0].get("object").is_none());

        let t = table(
            &cols,
            &objs,
            now(),
            IncludeObject::None,
            json!({"resourceVersion": "9", "continue": "tok"}),
        );
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "9", "continue": "tok"})
        );

        // Non-object metadata and empty lists.
        let t = table(&cols, &[], now(), IncludeObject::default(), Value::Null);
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(t["rows"], json!([]));
        assert_eq!(column_names(&t), ["Name", "Data", "Age"]);
    }

    #[test]
    fn include_object_parse() {
        assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
        assert_eq!(IncludeObject::parse(""), Some(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse("Metadata"),
            Some(IncludeObject::Metadata)
        );
        assert_eq!(IncludeObject::parse("None"), Some(IncludeObject::None));
        assert_eq!(IncludeObject::parse("Object"), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse("object"), None);
    }

    #[test]
    fn partial_metadata_without_metadata() {
        let t = table(
            &builtin("", "configmaps"),
            &[json!({"data": {}})],
            now(),
            IncludeObject::Metadata,
            json!({}),
        );
        assert_eq!(t["rows"][0]["object"]["metadata"], json!({}));
        assert_eq!(cells(&t, 0), [json!(""), json!(0), json!("<unknown>")]);
    }

    // --- configmaps / secrets / namespaces / serviceaccounts / leases ------

    #[test]
    fn configmaps() {
        let (_, c) = single(&builtin("", "configmaps"), configmap());
        assert_eq!(c, [json!("settings"), json!(3), json!("3d")]);
    }

    #[test]
    fn secrets() {
        let cols = builtin("", "secrets");
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
        let cols = builtin("", "namespaces");
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
            &builtin("", "serviceaccounts"),
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
        let cols = builtin("coordination.k8s.io", "leases");
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
            &builtin("apiextensions.k8s.io", "customresourcedefinitions"),
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
            &builtin("apiextensions.k8s.io", "customresourcedefinitions"),
            json!({"metadata": {"name": "x", "creationTimestamp": "2024-05-01T10:30:00.123+02:00"}}),
        );
        assert_eq!(c[1], json!("2024-05-01T08:30:00Z"));
    }

    #[test]
    fn other_builtins_print_name_and_age() {
        for (group, plural) in [
            ("", "endpoints"),
            ("rbac.authorization.k8s.io", "roles"),
            ("batch", "jobs"),
            ("", "leases"),
        ] {
            let (t, c) = single(
                &builtin(group, plural),
                json!({"metadata": {"name": "thing", "creationTimestamp": ago(7200)}}),
            );
            assert_eq!(column_names(&t), ["Name", "Age"], "{group}/{plural}");
            assert_eq!(c, [json!("thing"), json!("120m")]);
        }
    }

    // --- pods --------------------------------------------------------------

    fn pod(status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web-7d4b9c-x2x9z", "namespace": "default", "creationTimestamp": ago(300)},
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "sidecar", "image": "envoy:1"}]
            },
            "status": status
        })
    }

    fn running(name: &str, ready: bool, restarts: i64) -> Value {
        json!({
            "name": name,
            "ready": ready,
            "restartCount": restarts,
            "state": {"running": {"startedAt": ago(200)}}
        })
    }

    #[test]
    fn pod_columns_and_running() {
        let (t, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Running",
                "podIP": "10.244.0.5",
                "podIPs": [{"ip": "10.244.0.5"}, {"ip": "fd00::5"}],
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [running("app", true, 1), running("sidecar", false, 2)]
            })),
        );
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(
            wide_names(&t),
            ["IP", "Node", "Nominated Node", "Readiness Gates"]
        );
        assert_eq!(t["columnDefinitions"][3]["type"], "integer");
        assert_eq!(
            c,
            [
                json!("web-7d4b9c-x2x9z"),
                json!("1/2"),
                json!("Running"),
                json!(3),
                json!("5m"),
                json!("10.244.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        assert!(t["rows"][0].get("conditions").is_none());
    }

    #[test]
    fn pod_pending_without_statuses() {
        let mut p = pod(json!({"phase": "Pending"}));
        p["spec"].as_object_mut().expect("spec").remove("nodeName");
        let (_, c) = single(&builtin("", "pods"), p);
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("Pending"));
        assert_eq!(c[3], json!(0));
        assert_eq!(c[5], json!("<none>"));
        assert_eq!(c[6], json!("<none>"));
    }

    #[test]
    fn pod_waiting_reasons() {
        for reason in ["ContainerCreating", "CrashLoopBackOff", "ImagePullBackOff"] {
            let (_, c) = single(
                &builtin("", "pods"),
                pod(json!({
                    "phase": "Pending",
                    "containerStatuses": [
                        {"name": "app", "ready": false, "restartCount": 4, "state": {"waiting": {"reason": reason}}},
                        running("sidecar", true, 0)
                    ]
                })),
            );
            assert_eq!(c[1], json!("1/2"));
            assert_eq!(c[2], json!(reason));
            assert_eq!(c[3], json!(4));
        }
    }

    #[test]
    fn pod_terminated_reasons() {
        let (_, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
                    running("sidecar", true, 0)
                ]
            })),
        );
        assert_eq!(c[2], json!("Error"));

        let (_, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 137}}},
                    {"name": "sidecar", "state": {"terminated": {"exitCode": 0, "signal": 9}}}
                ]
            })),
        );
        // Statuses are walked last-to-first, so the first container wins.
        assert_eq!(c[2], json!("ExitCode:137"));

        let (_, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Running",
                "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "signal": 15}}}]
            })),
        );
        assert_eq!(c[2], json!("Signal:15"));
    }

    #[test]
    fn pod_completed_and_failed() {
        let (t, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Succeeded",
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "sidecar", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ]
            })),
        );
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("Completed"));
        assert_eq!(
            t["rows"][0]["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}])
        );

        let (t, c) = single(
            &builtin("", "pods"),
            pod(json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"})),
        );
        assert_eq!(c[2], json!("Evicted"));
        assert_eq!(t["rows"][0]["conditions"][0]["reason"], "Failed");
    }

    #[test]
    fn pod_completed_with_running_container() {
        let status = |ready: &str| {
            json!({
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": ready}],
                "containerStatuses": [
                    {"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    running("sidecar", true, 0)
                ]
            })
        };
        let (_, c) = single(&builtin("", "pods"), pod(status("True")));
        assert_eq!(c[2], json!("Running"));
        let (_, c) = single(&builtin("", "pods"), pod(status("False")));
        assert_eq!(c[2], json!("NotReady"));
    }

    #[test]
    fn pod_terminating_and_unknown() {
        let mut p = pod(json!({
            "phase": "Running",
            "containerStatuses": [running("app", true, 0), running("sidecar", true, 0)]
        }));
        p["metadata"]["deletionTimestamp"] = json!(ago(3));
        let (_, c) = single(&builtin("", "pods"), p.clone());
        assert_eq!(c[1], json!("2/2"));
        assert_eq!(c[2], json!("Terminating"));

        p["status"]["reason"] = json!("NodeLost");
        let (_, c) = single(&builtin("", "pods"), p);
        assert_eq!(c[2], json!("Unknown"));

        // A terminal pod being deleted keeps its status.
        let mut p = pod(json!({
            "phase": "Succeeded",
            "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
        }));
        p["metadata"]["deletionTimestamp"] = json!(ago(3));
        let (_, c) = single(&builtin("", "pods"), p);
        assert_eq!(c[2], json!("Completed"));
    }

    #[test]
    fn pod_init_containers() {
        let with_init = |init_status: Value, extra: Value| {
            let mut p = pod(json!({
                "phase": "Pending",
                "initContainerStatuses": init_status,
                "containerStatuses": [
                    {"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
                ]
            }));
            p["spec"]["initContainers"] =
                json!([{"name": "migrate", "image": "tool"}, {"name": "seed", "image": "tool"}]);
            if let Value::Object(extra) = extra {
                for (k, v) in extra {
                    p["status"][k.as_str()] = v;
                }
            }
            p
        };

        let (_, c) = single(
            &builtin("", "pods"),
            with_init(
                json!([{"name": "migrate", "restartCount": 0, "state": {"running": {}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:0/2"));

        let (_, c) = single(
            &builtin("", "pods"),
            with_init(
                json!([
                    {"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "seed", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:CrashLoopBackOff"));
        assert_eq!(c[3], json!(3));

        let (_, c) = single(
            &builtin("", "pods"),
            with_init(
                json!([{"name": "migrate", "restartCount": 1, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:Error"));

        let (_, c) = single(
            &builtin("", "pods"),
            with_init(
                json!([{"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("Init:ExitCode:2"));

        // All init containers done: main containers decide.
        let (_, c) = single(
            &builtin("", "pods"),
            with_init(
                json!([
                    {"name": "migrate", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "seed", "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
                ]),
                json!({}),
            ),
        );
        assert_eq!(c[2], json!("PodInitializing"));
    }

    #[test]
    fn pod_sidecar_counts_as_container() {
        let mut p = pod(json!({
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
            "initContainerStatuses": [
                {"name": "proxy", "ready": true, "started": true, "restartCount": 2, "state": {"running": {}}}
            ],
            "containerStatuses": [running("app", true, 1), running("sidecar", true, 0)]
        }));
        p["spec"]["initContainers"] =
            json!([{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]);
        let (_, c) = single(&builtin("", "pods"), p);
        assert_eq!(c[1], json!("3/3"));
        assert_eq!(c[2], json!("Running"));
        assert_eq!(c[3], json!(3));
    }

    #[test]
    fn pod_wide_columns() {
        let mut p = pod(json!({
            "phase": "Running",
            "podIP": "10.0.0.9",
            "nominatedNodeName": "node-2",
            "conditions": [
                {"type": "example.com/feature-1", "status": "True"},
                {"type": "example.com/feature-2", "status": "False"}
            ],
            "containerStatuses": [running("app", true, 0), running("sidecar", true, 0)]
        }));
        p["spec"]["readinessGates"] = json!([
            {"conditionType": "example.com/feature-1"},
            {"conditionType": "example.com/feature-2"},
            {"conditionType": "example.com/feature-3"}
        ]);
        let (_, c) = single(&builtin("", "pods"), p);
        assert_eq!(
            c[5..].to_vec(),
            [
                json!("10.0.0.9"),
                json!("node-1"),
                json!("node-2"),
                json!("1/3")
            ]
        );
    }

    #[test]
    fn pod_scheduling_gated() {
        let (_, c) = single(
            &builtin("", "pods"),
            pod(json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]
            })),
        );
        assert_eq!(c[2], json!("SchedulingGated"));
    }

    // --- services ----------------------------------------------------------

    fn service(spec: Value, status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(86400)},
            "spec": spec,
            "status": status
        })
    }

    #[test]
    fn services() {
        let cols = builtin("", "services");
        let t = render(
            &cols,
            &[
                service(
                    json!({
                        "type": "ClusterIP",
                        "clusterIP": "10.96.0.10",
                        "clusterIPs": ["10.96.0.10"],
                        "ports": [
                            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                            {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}
                        ],
                        "selector": {"tier": "frontend", "app": "web"}
                    }),
                    json!({}),
                ),
                service(
                    json!({
                        "type": "NodePort",
                        "clusterIP": "10.96.1.1",
                        "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP", "nodePort": 30053}],
                        "externalIPs": ["192.0.2.1", "192.0.2.2"]
                    }),
                    json!({}),
                ),
                service(
                    json!({"type": "LoadBalancer", "clusterIP": "10.96.2.2", "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}),
                    json!({"loadBalancer": {}}),
                ),
                service(
                    json!({"type": "LoadBalancer", "clusterIP": "10.96.2.3", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 31080}], "externalIPs": ["192.0.2.9"]}),
                    json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}}),
                ),
                service(
                    json!({"type": "ExternalName", "externalName": "db.example.com"}),
                    json!({}),
                ),
                service(
                    json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"], "selector": {"app": "db"}}),
                    json!({}),
                ),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        assert_eq!(wide_names(&t), ["Selector"]);
        assert_eq!(
            cells(&t, 0),
            [
                json!("web"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80/TCP,443/TCP"),
                json!("24h"),
                json!("app=web,tier=frontend")
            ]
        );
        assert_eq!(
            cells(&t, 1)[1..5].to_vec(),
            [
                json!("NodePort"),
                json!("10.96.1.1"),
                json!("192.0.2.1,192.0.2.2"),
                json!("80:30080/TCP,53:30053/UDP")
            ]
        );
        assert_eq!(cells(&t, 1)[6], json!("<none>"));
        assert_eq!(
            cells(&t, 2)[1..5].to_vec(),
            [
                json!("LoadBalancer"),
                json!("10.96.2.2"),
                json!("<pending>"),
                json!("443:31443/TCP")
            ]
        );
        assert_eq!(
            cells(&t, 3)[3],
            json!("203.0.113.7,lb.example.com,192.0.2.9")
        );
        assert_eq!(
            cells(&t, 4)[1..5].to_vec(),
            [
                json!("ExternalName"),
                json!("<none>"),
                json!("db.example.com"),
                json!("<none>")
            ]
        );
        assert_eq!(cells(&t, 5)[2], json!("None"));
        assert_eq!(cells(&t, 5)[4], json!("<none>"));
        assert_eq!(cells(&t, 5)[6], json!("app=db"));
    }

    // --- nodes -------------------------------------------------------------

    fn node(labels: Value, ready: &str, unschedulable: bool) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1", "creationTimestamp": ago(10 * 86400), "labels": labels},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": ready}
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "172.18.0.2"},
                    {"type": "Hostname", "address": "node-1"}
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.30.0",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "kernelVersion": "6.1.0-18-amd64",
                    "containerRuntimeVersion": "containerd://1.7.13"
                }
            }
        })
    }

    #[test]
    fn nodes() {
        let cols = builtin("", "nodes");
        let t = render(
            &cols,
            &[
                node(
                    json!({
                        "kubernetes.io/hostname": "node-1",
                        "node-role.kubernetes.io/control-plane": "",
                        "node-role.kubernetes.io/etcd": "true"
                    }),
                    "True",
                    false,
                ),
                node(json!({"kubernetes.io/role": "worker"}), "False", true),
                node(json!({}), "Unknown", false),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            wide_names(&t),
            [
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime"
            ]
        );
        assert_eq!(
            cells(&t, 0),
            [
                json!("node-1"),
                json!("Ready"),
                json!("control-plane,etcd"),
                json!("10d"),
                json!("v1.30.0"),
                json!("172.18.0.2"),
                json!("<none>"),
                json!("Debian GNU/Linux 12 (bookworm)"),
                json!("6.1.0-18-amd64"),
                json!("containerd://1.7.13")
            ]
        );
        assert_eq!(cells(&t, 1)[1], json!("NotReady,SchedulingDisabled"));
        assert_eq!(cells(&t, 1)[2], json!("worker"));
        assert_eq!(cells(&t, 2)[1], json!("NotReady"));
        assert_eq!(cells(&t, 2)[2], json!("<none>"));

        let (_, c) = single(
            &cols,
            json!({"metadata": {"name": "bare"}, "spec": {"unschedulable": true}}),
        );
        assert_eq!(
            c,
            [
                json!("bare"),
                json!("Unknown,SchedulingDisabled"),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!("<none>"),
                json!("<none>"),
                json!("<unknown>"),
                json!("<unknown>"),
                json!("<unknown>")
            ]
        );
    }

    // --- events ------------------------------------------------------------

    #[test]
    fn core_events() {
        let cols = builtin("", "events");
        let t = render(
            &cols,
            &[
                json!({
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": "web.17c3a", "namespace": "default", "creationTimestamp": ago(600)},
                    "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default", "fieldPath": "spec.containers{app}"},
                    "reason": "BackOff",
                    "message": "Back-off restarting failed container\n",
                    "type": "Warning",
                    "source": {"component": "kubelet", "host": "node-1"},
                    "firstTimestamp": ago(600),
                    "lastTimestamp": ago(45),
                    "count": 12
                }),
                json!({
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": "web.17c3b", "creationTimestamp": ago(30)},
                    "involvedObject": {"kind": "Deployment", "name": "web"},
                    "reason": "ScalingReplicaSet",
                    "message": "Scaled up replica set web-7d4b9c to 3",
                    "type": "Normal",
                    "eventTime": "2024-05-10T11:59:30.000000Z",
                    "reportingComponent": "deployment-controller",
                    "reportingInstance": ""
                }),
                json!({
                    "metadata": {"name": "series"},
                    "involvedObject": {"kind": "Node"},
                    "type": "Normal",
                    "reason": "Ping",
                    "message": "m",
                    "eventTime": ago(7200),
                    "series": {"count": 5, "lastObservedTime": ago(10)}
                }),
            ],
        );
        assert_shape(&t);
        assert_eq!(
            column_names(&t),
            [
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name"
            ]
        );
        assert_eq!(
            wide_names(&t),
            ["Subobject", "Source", "First Seen", "Count", "Name"]
        );
        assert_eq!(
            cells(&t, 0),
            [
                json!("45s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/web-1"),
                json!("spec.containers{app}"),
                json!("kubelet, node-1"),
                json!("Back-off restarting failed container"),
                json!("10m"),
                json!(12),
                json!("web.17c3a")
            ]
        );
        assert_eq!(
            cells(&t, 1),
            [
                json!("30s"),
                json!("Normal"),
                json!("ScalingReplicaSet"),
                json!("deployment/web"),
                json!(""),
                json!("deployment-controller"),
                json!("Scaled up replica set web-7d4b9c to 3"),
                json!("30s"),
                json!(1),
                json!("web.17c3b")
            ]
        );
        let c = cells(&t, 2);
        assert_eq!(c[0], json!("10s"));
        assert_eq!(c[3], json!("node"));
        assert_eq!(c[7], json!("120m"));
        assert_eq!(c[8], json!(5));
    }

    #[test]
    fn events_k8s_io_events() {
        let (t, c) = single(
            &builtin("events.k8s.io", "events"),
            json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": "lease.1", "namespace": "kube-system"},
                "eventTime": ago(3600),
                "reportingController": "kube-controller-manager",
                "reportingInstance": "cp-1",
                "action": "Elected",
                "reason": "LeaderElection",
                "regarding": {"kind": "Lease", "name": "kube-controller-manager", "namespace": "kube-system"},
                "note": "cp-1 became leader",
                "type": "Normal",
                "deprecatedCount": 2,
                "deprecatedLastTimestamp": ago(100)
            }),
        );
        assert_eq!(
            column_names(&t)[..4],
            ["Last Seen", "Type", "Reason", "Object"]
        );
        assert_eq!(
            c,
            [
                json!("100s"),
                json!("Normal"),
                json!("LeaderElection"),
                json!("lease/kube-controller-manager"),
                json!(""),
                json!("kube-controller-manager, cp-1"),
                json!("cp-1 became leader"),
                json!("60m"),
                json!(2),
                json!("lease.1")
            ]
        );

        let (_, c) = single(
            &builtin("events.k8s.io", "events"),
            json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "p"}}),
        );
        assert_eq!(c[0], json!("<unknown>"));
        assert_eq!(c[7], json!("<unknown>"));
        assert_eq!(c[8], json!(1));
    }

    // --- apps --------------------------------------------------------------

    fn template() -> Value {
        json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}]}})
    }

    #[test]
    fn deployments_replicasets_statefulsets_daemonsets() {
        let (t, c) = single(
            &builtin("apps", "deployments"),
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
            &builtin("apps", "replicasets"),
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
            &builtin("apps", "statefulsets"),
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
            &builtin("apps", "daemonsets"),
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
            &builtin("apps", "replicasets"),
            json!({"metadata": {"name": "r"}}),
        );
        assert_eq!(c[7], json!("<none>"));
        let (_, c) = single(
            &builtin("apps", "deployments"),
            json!({"metadata": {"name": "d"}}),
        );
        assert_eq!(c[1], json!("0/1"));
        assert_eq!(c[7], json!(""));
    }

    // --- custom resources --------------------------------------------------

    fn widget() -> Value {
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {
                "name": "w1",
                "namespace": "default",
                "creationTimestamp": ago(3 * 3600),
                "labels": {"app.kubernetes.io/name": "shop"}
            },
            "spec": {
                "replicas": 3,
                "ratio": 0.5,
                "paused": false,
                "size": "large",
                "items": [{"name": "a", "qty": 1}, {"name": "b", "qty": 2}, {"name": "c", "qty": 3}],
                "tags": ["x", "y"],
                "selector": {"tier": "front"}
            },
            "status": {
                "conditions": [
                    {"type": "Synced", "status": "False", "lastTransitionTime": ago(60)},
                    {"type": "Ready", "status": "True", "lastTransitionTime": ago(120)}
                ],
                "observedGeneration": 4
            }
        })
    }

    #[test]
    fn custom_printer_columns() {
        let printer_columns = [
            json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}),
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status", "description": "Readiness"}),
            json!({"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1}),
            json!({"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"}),
            json!({"name": "Items", "type": "string", "jsonPath": ".spec.items[*].name"}),
            json!({"name": "Tags", "type": "string", "jsonPath": ".spec.tags"}),
            json!({"name": "Selector", "type": "string", "jsonPath": ".spec.selector"}),
            json!({"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"}),
            json!({"name": "Generation", "type": "string", "format": "int32", "jsonPath": ".status.observedGeneration"}),
            json!({"name": "Transitioned", "type": "date", "jsonPath": ".status.conditions[?(@.type=='Ready')].lastTransitionTime"}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
            json!({"name": "WrongType", "type": "integer", "jsonPath": ".spec.size"}),
            json!({"name": "BadDate", "type": "date", "jsonPath": ".spec.size"}),
        ];
        let cols = Columns::Custom {
            printer_columns: &printer_columns,
        };
        let (t, c) = single(&cols, widget());
        assert_eq!(
            column_names(&t),
            [
                "Name",
                "Replicas",
                "Ready",
                "Ratio",
                "Paused",
                "Items",
                "Tags",
                "Selector",
                "Missing",
                "Generation",
                "Transitioned",
                "Age",
                "WrongType",
                "BadDate"
            ]
        );
        assert_eq!(wide_names(&t), ["Ratio"]);
        assert_eq!(
            t["columnDefinitions"][1],
            json!({
                "name": "Replicas",
                "type": "integer",
                "format": "",
                "description": "Custom resource definition column (in JSONPath format): .spec.replicas",
                "priority": 0
            })
        );
        assert_eq!(t["columnDefinitions"][2]["description"], "Readiness");
        assert_eq!(t["columnDefinitions"][9]["format"], "int32");
        assert_eq!(
            c,
            [
                json!("w1"),
                json!(3),
                json!("True"),
                json!(0.5),
                json!(false),
                json!("a,b,c"),
                json!("x,y"),
                json!("{\"tier\":\"front\"}"),
                Value::Null,
                json!("4"),
                json!("2m"),
                json!("3h"),
                Value::Null,
                json!("<invalid>")
            ]
        );
    }

    #[test]
    fn custom_without_printer_columns_prints_name_and_age() {
        let (t, c) = single(
            &Columns::Custom {
                printer_columns: &[],
            },
            widget(),
        );
        assert_eq!(column_names(&t), ["Name", "Age"]);
        assert_eq!(t["columnDefinitions"][1]["type"], "date");
        assert_eq!(c, [json!("w1"), json!("3h")]);

        let (_, c) = single(
            &Columns::Custom {
                printer_columns: &[],
            },
            json!({"metadata": {"name": "no-ts"}}),
        );
        assert_eq!(c, [json!("no-ts"), Value::Null]);
    }

    #[test]
    fn custom_columns_v1beta1_spelling_and_invalid_entries() {
        let printer_columns = [
            json!({"name": "Size", "type": "string", "JSONPath": ".spec.size"}),
            json!({"type": "string", "jsonPath": ".spec.size"}),
            json!({"name": "Broken", "type": "string", "jsonPath": ".spec[?(@.x"}),
        ];
        let (t, c) = single(
            &Columns::Custom {
                printer_columns: &printer_columns,
            },
            widget(),
        );
        assert_eq!(column_names(&t), ["Name", "Size", "Broken"]);
        assert_eq!(c, [json!("w1"), json!("large"), Value::Null]);
    }

    // --- json_path -----------------------------------------------------------

    fn jp(obj: &Value, path: &str) -> Vec<Value> {
        json_path(obj, path).into_iter().cloned().collect()
    }

    #[test]
    fn json_path_fields_and_indices() {
        let w = widget();
        assert_eq!(jp(&w, ".spec.replicas"), [json!(3)]);
        assert_eq!(jp(&w, "{.spec.replicas}"), [json!(3)]);
        assert_eq!(jp(&w, "$.spec.replicas"), [json!(3)]);
        assert_eq!(jp(&w, "spec.replicas"), [json!(3)]);
        assert_eq!(
            jp(&w, ".metadata.creationTimestamp"),
            [json!(ago(3 * 3600))]
        );
        assert_eq!(jp(&w, ".spec.items[0].name"), [json!("a")]);
        assert_eq!(jp(&w, ".spec.items[-1].name"), [json!("c")]);
        assert_eq!(jp(&w, ".spec.items[0,2].name"), [json!("a"), json!("c")]);
        assert_eq!(jp(&w, ".spec.items[1:].name"), [json!("b"), json!("c")]);
        assert_eq!(jp(&w, ".spec.items[:2].qty"), [json!(1), json!(2)]);
        assert_eq!(jp(&w, ".spec.items[0:3:2].name"), [json!("a"), json!("c")]);
        assert_eq!(
            jp(&w, ".spec.items[*].name"),
            [json!("a"), json!("b"), json!("c")]
        );
        assert_eq!(jp(&w, ".spec.tags[*]"), [json!("x"), json!("y")]);
        assert_eq!(jp(&w, ".spec.selector.*"), [json!("front")]);
        assert_eq!(jp(&w, ".spec['size']"), [json!("large")]);
        assert_eq!(
            jp(&w, ".metadata.labels['app.kubernetes.io/name']"),
            [json!("shop")]
        );
        assert_eq!(
            jp(&w, ".metadata.labels.app\\.kubernetes\\.io/name"),
            [json!("shop")]
        );
        assert_eq!(jp(&w, "..qty"), [json!(1), json!(2), json!(3)]);
        assert_eq!(jp(&w, "."), std::slice::from_ref(&w));
    }

    #[test]
    fn json_path_filters() {
        let w = widget();
        assert_eq!(
            jp(&w, ".status.conditions[?(@.type==\"Ready\")].status"),
            [json!("True")]
        );
        assert_eq!(
            jp(&w, ".status.conditions[?(@.type == 'Synced')].status"),
            [json!("False")]
        );
        assert_eq!(
            jp(&w, ".status.conditions[?(@.type!=\"Ready\")].type"),
            [json!("Synced")]
        );
        assert_eq!(
            jp(&w, ".spec.items[?(@.qty>1)].name"),
            [json!("b"), json!("c")]
        );
        assert_eq!(
            jp(&w, ".spec.items[?(@.qty<=2)].name"),
            [json!("a"), json!("b")]
        );
        assert_eq!(jp(&w, ".spec.items[?(@.qty==3)].name"), [json!("c")]);
        assert_eq!(jp(&w, ".spec.items[?(@.qty)].name").len(), 3);
        assert_eq!(jp(&w, ".spec.items[?(@.nope)].name"), Vec::<Value>::new());
        assert_eq!(
            jp(&w, ".status.conditions[?(@.type==\"Missing\")].status"),
            Vec::<Value>::new()
        );
    }

    #[test]
    fn json_path_unresolved_and_invalid() {
        let w = widget();
        for path in [
            ".spec.nothing",
            ".spec.items[7].name",
            ".spec.items[-9]",
            ".spec.replicas.deeper",
            ".spec.items.name",
            ".spec[",
            ".spec.items[abc]",
            ".spec.items[?(@.qty>)]",
            ".spec..",
            "",
            "]",
        ] {
            if path.is_empty() {
                // Empty path is the root, like "{}".
                assert_eq!(jp(&w, path), std::slice::from_ref(&w));
                continue;
            }
            assert!(jp(&w, path).is_empty(), "{path}");
        }
    }
}
