//! The simulated nodes against steady's API server, through kube-rs only: three nodes
//! register Ready, pods spread across them honouring `nodeSelector`, `nodeName`, cordons
//! and taints (a pod that fits nowhere stays Pending, Unschedulable), and a node that
//! stops being Ready is tainted and its pods turn not ready until it recovers.

mod common;

use common::*;
use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use steady_cluster::node::{NOT_READY_TAINT, UNSCHEDULABLE_TAINT};
use steady_test_support::{create_json, eventually, merge_patch};

const NODES: [&str; 3] = ["steady-node-0", "steady-node-1", "steady-node-2"];

/// Three simulated nodes, all registered; no controller beside them.
async fn three_nodes() -> (steady_apiserver::ApiServer, Client) {
    let server = nodes_server(NODES.len()).await;
    let client = server.client();
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("three nodes registered", LIMIT, || async {
        let listed = nodes.list(&ListParams::default()).await.ok()?;
        (listed.items.len() == NODES.len()).then_some(())
    })
    .await;
    (server, client)
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "busybox:1"}]);
    json!({"metadata": {"name": name, "labels": {"app": "spread"}}, "spec": spec})
}

async fn create_pod(client: &Client, name: &str, spec: Value) {
    create_json::<Pod>(&Api::namespaced(client.clone(), NS), pod(name, spec)).await;
}

/// Wait until the pod `name` passes `check`.
async fn pod_when(client: &Client, name: &str, what: &str, check: impl Fn(&Pod) -> bool) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually(what, LIMIT, || async {
        let pod = pods.get(name).await.ok()?;
        check(&pod).then_some(pod)
    })
    .await
}

async fn running_on(client: &Client, name: &str) -> String {
    let pod = pod_when(client, name, "pod running", |p| phase(p) == "Running").await;
    pod.spec.and_then(|s| s.node_name).unwrap_or_default()
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

fn taints(node: &Node) -> Vec<(String, String)> {
    let mut taints: Vec<(String, String)> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect();
    taints.sort();
    taints
}

async fn patch_node(client: &Client, name: &str, patch: Value) {
    merge_patch(&Api::<Node>::all(client.clone()), name, patch)
        .await
        .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

/// Cordon (`true`) or uncordon the node, as `kubectl cordon` does.
async fn cordon(client: &Client, name: &str, cordoned: bool) {
    let unschedulable = if cordoned { json!(true) } else { Value::Null };
    patch_node(
        client,
        name,
        json!({"spec": {"unschedulable": unschedulable}}),
    )
    .await;
}

async fn node_when(client: &Client, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(what, LIMIT, || async {
        let node = nodes.get(name).await.ok()?;
        check(&node).then_some(node)
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn nodes_register_ready_with_capacity_and_addresses() {
    let (_server, client) = three_nodes().await;
    for (index, name) in NODES.iter().enumerate() {
        let node = node_when(&client, name, "node Ready", steady_cluster::node::is_ready).await;
        let status = node.status.expect("status");
        let kinds: Vec<&str> = status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(
            kinds,
            ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        );
        assert!(status.capacity.is_some_and(|c| c.contains_key("pods")));
        assert!(status.allocatable.is_some_and(|c| c.contains_key("cpu")));
        let addresses: Vec<(String, String)> = status
            .addresses
            .into_iter()
            .flatten()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addresses,
            [
                ("InternalIP".to_string(), format!("10.0.0.{}", index + 1)),
                ("Hostname".to_string(), name.to_string()),
            ]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn pods_spread_across_nodes_and_honour_node_selector_and_node_name() {
    let (_server, client) = three_nodes().await;
    let ssd = json!({"metadata": {"labels": {"disk": "ssd"}}});
    patch_node(&client, "steady-node-1", ssd).await;
    for i in 0..6 {
        create_pod(&client, &format!("free-{i}"), json!({})).await;
    }
    create_pod(&client, "picky", json!({"nodeSelector": {"disk": "ssd"}})).await;
    create_pod(&client, "pinned", json!({"nodeName": "steady-node-2"})).await;

    let mut placed = Vec::new();
    for i in 0..6 {
        placed.push(running_on(&client, &format!("free-{i}")).await);
    }
    placed.sort();
    assert_eq!(
        placed,
        [
            "steady-node-0",
            "steady-node-0",
            "steady-node-1",
            "steady-node-1",
            "steady-node-2",
            "steady-node-2"
        ],
        "six pods spread two by two"
    );
    assert_eq!(running_on(&client, "picky").await, "steady-node-1");
    let pinned = pod_when(&client, "pinned", "pinned running", |p| {
        phase(p) == "Running"
    })
    .await;
    assert_eq!(
        pinned.spec.and_then(|s| s.node_name).as_deref(),
        Some("steady-node-2")
    );
    let status = pinned.status.expect("status");
    assert_eq!(status.host_ip.as_deref(), Some("10.0.0.3"));
    assert!(status.pod_ip.is_some_and(|ip| ip.starts_with("10.244.2.")));
}

#[tokio::test(start_paused = true)]
async fn the_scheduler_binds_through_pods_binding_so_a_pod_is_scheduled_when_it_is_bound() {
    let (_server, client) = three_nodes().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    create_pod(&client, "watched", json!({})).await;
    let bound = tokio::time::timeout(LIMIT, async {
        while let Some(event) = events.next().await {
            if let Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) = event
                && pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some()
            {
                return pod;
            }
        }
        panic!("the watch ended before the pod was bound");
    })
    .await
    .expect("the pod is bound in time");
    // One write sets the node and the condition, as kube-apiserver's binding does; the
    // kubelet has not run the pod yet.
    let scheduled = condition(&bound, "PodScheduled").expect("PodScheduled with the node");
    assert_eq!(scheduled.status, "True");
    assert_eq!(phase(&bound), "Pending");
}

#[tokio::test(start_paused = true)]
async fn a_cordoned_node_gets_no_new_pods() {
    let (_server, client) = three_nodes().await;
    cordon(&client, "steady-node-0", true).await;
    node_when(&client, "steady-node-0", "the unschedulable taint", |n| {
        taints(n) == [(UNSCHEDULABLE_TAINT.to_string(), "NoSchedule".to_string())]
    })
    .await;
    for i in 0..4 {
        create_pod(&client, &format!("p{i}"), json!({})).await;
    }
    for i in 0..4 {
        let node = running_on(&client, &format!("p{i}")).await;
        assert_ne!(node, "steady-node-0", "p{i} landed on the cordoned node");
    }

    cordon(&client, "steady-node-0", false).await;
    node_when(&client, "steady-node-0", "the taint lifted", |n| {
        taints(n).is_empty()
    })
    .await;
    create_pod(&client, "after", json!({})).await;
    assert_eq!(
        running_on(&client, "after").await,
        "steady-node-0",
        "the emptiest node again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_that_tolerates_no_taint_stays_pending_unschedulable() {
    let (_server, client) = three_nodes().await;
    let dedicated = json!({"spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}});
    for name in NODES {
        patch_node(&client, name, dedicated.clone()).await;
    }
    create_pod(&client, "intolerant", json!({})).await;
    let pending = pod_when(&client, "intolerant", "PodScheduled=False", |p| {
        condition(p, "PodScheduled").is_some_and(|c| c.status == "False")
    })
    .await;
    let scheduled = condition(&pending, "PodScheduled").expect("condition");
    assert_eq!(scheduled.reason.as_deref(), Some("Unschedulable"));
    let message = scheduled.message.clone().unwrap_or_default();
    assert!(
        message.starts_with(
            "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: infra}."
        ),
        "{message}"
    );
    assert_eq!(phase(&pending), "Pending");
    assert!(pending.spec.and_then(|s| s.node_name).is_none());
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let failed = events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .expect("a FailedScheduling event");
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(failed.message.as_deref(), Some(message.as_str()));

    let tolerant = json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]});
    create_pod(&client, "tolerant", tolerant).await;
    running_on(&client, "tolerant").await;
    // Lifting the taint from one node lets the waiting pod on.
    patch_node(&client, "steady-node-1", json!({"spec": {"taints": null}})).await;
    assert_eq!(running_on(&client, "intolerant").await, "steady-node-1");
}

#[tokio::test(start_paused = true)]
async fn a_node_that_is_not_ready_is_tainted_and_its_pods_turn_not_ready_until_it_recovers() {
    let (_server, client) = three_nodes().await;
    create_pod(&client, "victim", json!({"nodeName": "steady-node-1"})).await;
    create_pod(&client, "bystander", json!({"nodeName": "steady-node-2"})).await;
    for name in ["victim", "bystander"] {
        pod_when(
            &client,
            name,
            "Ready",
            steady_cluster::pod_template::is_ready,
        )
        .await;
    }

    let now = chrono::Utc::now();
    steady_cluster::node::set_ready(&client, "steady-node-1", false, now)
        .await
        .expect("NotReady");
    let not_ready = [
        (NOT_READY_TAINT.to_string(), "NoExecute".to_string()),
        (NOT_READY_TAINT.to_string(), "NoSchedule".to_string()),
    ];
    node_when(&client, "steady-node-1", "not-ready taints", |n| {
        taints(n) == not_ready
    })
    .await;
    let victim = pod_when(&client, "victim", "Ready=False", |p| {
        !steady_cluster::pod_template::is_ready(p)
    })
    .await;
    let statuses = victim
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default();
    assert!(
        !statuses.is_empty() && statuses.iter().all(|c| !c.ready),
        "containers not ready"
    );
    let bystander = Api::<Pod>::namespaced(client.clone(), NS)
        .get("bystander")
        .await
        .expect("pod");
    assert!(
        steady_cluster::pod_template::is_ready(&bystander),
        "other nodes' pods stay Ready"
    );
    // New pods avoid the node that is not Ready.
    create_pod(&client, "newcomer", json!({})).await;
    assert_ne!(running_on(&client, "newcomer").await, "steady-node-1");

    steady_cluster::node::set_ready(&client, "steady-node-1", true, now)
        .await
        .expect("Ready again");
    node_when(&client, "steady-node-1", "taints lifted", |n| {
        taints(n).is_empty()
    })
    .await;
    let victim = pod_when(
        &client,
        "victim",
        "Ready again",
        steady_cluster::pod_template::is_ready,
    )
    .await;
    let statuses = victim
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default();
    assert!(statuses.iter().all(|c| c.ready), "containers ready again");
}

#[tokio::test(start_paused = true)]
async fn a_daemon_set_runs_one_pod_on_each_of_three_nodes() {
    let cluster = daemon_set_cluster().await;
    let client = cluster.client.clone();
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    create_json::<DaemonSet>(&sets, daemon_set("agent", "fluentd", json!({}))).await;
    eventually("three agents ready", LIMIT, || async {
        let set = sets.get("agent").await.ok()?;
        (set.status?.number_ready == 3).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut placed: Vec<String> = pods
        .list(&ListParams::default().labels("app=agent"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter_map(|p| p.spec?.node_name)
        .collect();
    placed.sort();
    assert_eq!(placed, NODES);
    cluster.stop().await;
}

/// Three simulated nodes and the DaemonSet controller.
async fn daemon_set_cluster() -> Cluster {
    controller_cluster_of_nodes(NODES.len(), steady_cluster::daemonset::start, "daemonset").await
}

/// Wait until the scheduler reports no node for the pod `name`, and check its message
/// begins with `why`.
async fn unschedulable_because(client: &Client, name: &str, why: &str) {
    let message = |p: &Pod| {
        condition(p, "PodScheduled")
            .filter(|c| c.reason.as_deref() == Some("Unschedulable"))
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    };
    let pod = pod_when(client, name, "Unschedulable", |p| !message(p).is_empty()).await;
    assert!(message(&pod).starts_with(why), "{}", message(&pod));
}

/// kube-scheduler's NodeAffinity: a pod whose required terms no node matches stays
/// Pending with kube's reason, and is scheduled once a node is labelled to match; a
/// preferred term draws pods to the node it likes even where the load would spread them.
#[tokio::test(start_paused = true)]
async fn pods_honour_required_and_preferred_node_affinity() {
    let (_server, client) = three_nodes().await;
    let required = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd", "nvme"]},
            {"key": "zone", "operator": "NotIn", "values": ["z9"]},
        ]}],
    }}}});
    create_pod(&client, "fussy", required).await;
    unschedulable_because(
        &client,
        "fussy",
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    )
    .await;
    patch_node(
        &client,
        "steady-node-0",
        json!({"metadata": {"labels": {"disk": "nvme", "zone": "z9"}}}),
    )
    .await;
    patch_node(
        &client,
        "steady-node-2",
        json!({"metadata": {"labels": {"disk": "nvme"}}}),
    )
    .await;
    assert_eq!(running_on(&client, "fussy").await, "steady-node-2");

    patch_node(
        &client,
        "steady-node-1",
        json!({"metadata": {"labels": {"tier": "gold"}}}),
    )
    .await;
    let preferred = json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}},
    ]}}});
    for i in 0..3 {
        create_pod(&client, &format!("drawn-{i}"), preferred.clone()).await;
    }
    for i in 0..3 {
        assert_eq!(
            running_on(&client, &format!("drawn-{i}")).await,
            "steady-node-1"
        );
    }
}

/// kube's DaemonSet controller runs a pod only on the nodes the template's required node
/// affinity matches, and pins each pod to its node while keeping the template's
/// preferred affinity.
#[tokio::test(start_paused = true)]
async fn a_daemon_set_runs_only_where_its_node_affinity_allows() {
    let cluster = daemon_set_cluster().await;
    let client = cluster.client.clone();
    for name in ["steady-node-0", "steady-node-2"] {
        patch_node(
            &client,
            name,
            json!({"metadata": {"labels": {"role": "edge"}}}),
        )
        .await;
    }
    let affinity = json!({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "role", "operator": "In", "values": ["edge"]}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "role", "operator": "Exists"}]}},
        ],
    }});
    let daemon = daemon_set("edge", "envoy", json!({"affinity": affinity}));
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), NS);
    create_json::<DaemonSet>(&sets, daemon).await;
    let set = eventually("two edge proxies ready", LIMIT, || async {
        let set = sets.get("edge").await.ok()?;
        (set.status.as_ref()?.number_ready == 2).then_some(set)
    })
    .await;
    assert_eq!(set.status.map(|s| s.desired_number_scheduled), Some(2));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let listed = pods
        .list(&ListParams::default().labels("app=edge"))
        .await
        .expect("pods")
        .items;
    let mut placed: Vec<String> = listed
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    placed.sort();
    assert_eq!(placed, ["steady-node-0", "steady-node-2"]);
    for pod in &listed {
        let node_affinity = pod
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .expect("node affinity");
        let required = serde_json::to_value(
            &node_affinity.required_during_scheduling_ignored_during_execution,
        )
        .expect("json");
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(
            required,
            json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]},
            ]}]})
        );
        let preferred = node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .as_ref()
            .map(Vec::len);
        assert_eq!(preferred, Some(1), "the template's preference kept");
    }
    cluster.stop().await;
}

/// kube-scheduler's NodeResourcesFit: a pod asking more than any node has left stays
/// Pending with `Insufficient <resource>` per node, and is scheduled once a pod that
/// held the room is gone.
#[tokio::test(start_paused = true)]
async fn pods_fit_the_resources_nodes_have_left() {
    let (_server, client) = three_nodes().await;
    let big = |name: &str, cpu: &str| {
        let mut body = pod(name, json!({}));
        body["spec"]["containers"][0]["resources"] =
            json!({"requests": {"cpu": cpu, "memory": "1Gi"}});
        body
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let short_of_cpu = "0/3 nodes are available: 3 Insufficient cpu.";
    create_json::<Pod>(&pods, big("huge", "40")).await;
    unschedulable_because(&client, "huge", short_of_cpu).await;
    for i in 0..3 {
        create_json::<Pod>(&pods, big(&format!("half-{i}"), "20")).await;
    }
    let mut placed = Vec::new();
    for i in 0..3 {
        placed.push(running_on(&client, &format!("half-{i}")).await);
    }
    placed.sort();
    assert_eq!(placed, NODES, "one 20-CPU pod per 32-CPU node");
    create_json::<Pod>(&pods, big("late", "20")).await;
    unschedulable_because(&client, "late", short_of_cpu).await;
    pods.delete("half-1", &Default::default())
        .await
        .expect("delete half-1");
    assert_eq!(running_on(&client, "late").await, placed[1]);

    let mut gpu = pod("gpu", json!({}));
    gpu["spec"]["containers"][0]["resources"] =
        json!({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}});
    create_json::<Pod>(&pods, gpu).await;
    let no_gpu = "0/3 nodes are available: 3 Insufficient example.com/gpu.";
    unschedulable_because(&client, "gpu", no_gpu).await;
}

/// A pod labelled `app: <app>` with `spec` (its containers added).
async fn create_app_pod(client: &Client, name: &str, app: &str, spec: Value) {
    let mut body = pod(name, spec);
    body["metadata"]["labels"] = json!({"app": app});
    create_json::<Pod>(&Api::namespaced(client.clone(), NS), body).await;
}

/// A pod affinity term over pods labelled `app: <app>` in one node's domain.
fn on_hosts_with(app: &str) -> Value {
    json!({"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"})
}

/// kube-scheduler's InterPodAffinity: a pod's required anti-affinity keeps it off the
/// nodes where a matching pod runs (Pending when none is left, with kube's message and
/// preemption note), a running pod's anti-affinity keeps others off its node, and a
/// required affinity waits for a pod to follow.
#[tokio::test(start_paused = true)]
async fn pods_honour_required_pod_affinity_and_anti_affinity() {
    let (_server, client) = three_nodes().await;
    let apart = json!({"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [on_hosts_with("db")],
    }}});
    // Created at once, as a ReplicaSet's burst: each decision sees the ones before it.
    let names: Vec<String> = (0..4).map(|i| format!("db-{i}")).collect();
    let creates = names
        .iter()
        .map(|name| create_app_pod(&client, name, "db", apart.clone()));
    futures::future::join_all(creates).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let (mut placed, waiting) = eventually("three dbs running", LIMIT, || async {
        let listed = pods
            .list(&ListParams::default().labels("app=db"))
            .await
            .ok()?;
        let (running, waiting): (Vec<Pod>, Vec<Pod>) = listed
            .items
            .into_iter()
            .partition(|p| phase(p) == "Running");
        let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
        let nodes: Vec<String> = running.iter().filter_map(node).collect();
        let waiting: Vec<String> = waiting
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (nodes.len() == 3 && waiting.len() == 1).then_some((nodes, waiting))
    })
    .await;
    placed.sort();
    assert_eq!(placed, NODES, "one db per node");
    let waiting = &waiting[0];
    unschedulable_because(
        &client,
        waiting,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: \
         0/3 nodes are available: 3 No preemption victims found for incoming pod..",
    )
    .await;
    let gone = names.iter().find(|n| *n != waiting).expect("a running db");
    pods.delete(gone, &Default::default())
        .await
        .expect("delete a db");
    let freed = running_on(&client, waiting).await;
    assert!(NODES.contains(&freed.as_str()));

    // The db pods' anti-affinity also keeps other db-labelled pods off their nodes.
    let pinned = json!({"nodeSelector": {"kubernetes.io/hostname": "steady-node-0"}});
    let mut pin = pinned.clone();
    pin["nodeSelector"]["kubernetes.io/hostname"] = json!(freed);
    create_app_pod(&client, "intruder", "db", pin).await;
    unschedulable_because(
        &client,
        "intruder",
        "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, \
         2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are \
         available: 1 No preemption victims found for incoming pod, 2 Preemption is not \
         helpful for scheduling..",
    )
    .await;

    // Affinity waits for a pod to join, and follows it.
    let near_cache = json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [on_hosts_with("cache")],
    }}});
    create_app_pod(&client, "web", "web", near_cache).await;
    unschedulable_because(
        &client,
        "web",
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: 0/3 \
         nodes are available: 3 Preemption is not helpful for scheduling..",
    )
    .await;
    let mut on_two = pinned.clone();
    on_two["nodeSelector"]["kubernetes.io/hostname"] = json!("steady-node-2");
    create_app_pod(&client, "cache", "cache", on_two).await;
    assert_eq!(running_on(&client, "web").await, "steady-node-2");

    // A group with affinity to itself: the first goes anywhere, the rest follow it.
    let together = json!({"affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [on_hosts_with("team")],
    }}});
    create_app_pod(&client, "team-0", "team", together.clone()).await;
    let first = running_on(&client, "team-0").await;
    for i in 1..4 {
        create_app_pod(&client, &format!("team-{i}"), "team", together.clone()).await;
    }
    for i in 1..4 {
        assert_eq!(running_on(&client, &format!("team-{i}")).await, first);
    }
}

/// kube-scheduler's PodTopologySpread: a `DoNotSchedule` constraint refuses the nodes
/// whose domain would be too far ahead of the least-populated one (counted over the
/// nodes its inclusion policy admits) and the nodes without its topology label.
#[tokio::test(start_paused = true)]
async fn pods_honour_topology_spread_constraints() {
    let (_server, client) = three_nodes().await;
    for i in 0..2 {
        let pinned = json!({"nodeName": "steady-node-0"});
        create_app_pod(&client, &format!("early-{i}"), "spread", pinned).await;
        running_on(&client, &format!("early-{i}")).await;
    }
    let constraint = |policy: &str| {
        json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule", "nodeAffinityPolicy": policy,
            "labelSelector": {"matchLabels": {"app": "spread"}}})
    };
    let on_node_0 = |policy: &str| {
        json!({"nodeSelector": {"kubernetes.io/hostname": "steady-node-0"},
            "topologySpreadConstraints": [constraint(policy)]})
    };
    // Counted over node-0 alone, its domain is the least populated: it fits.
    create_app_pod(&client, "honoured", "spread", on_node_0("Honor")).await;
    assert_eq!(running_on(&client, "honoured").await, "steady-node-0");
    // Counted over every node, node-0 (3 + 1) is too far ahead of the empty ones.
    create_app_pod(&client, "ignoring", "spread", on_node_0("Ignore")).await;
    unschedulable_because(
        &client,
        "ignoring",
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, 2 \
         node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are \
         available: 1 No preemption victims found for incoming pod, 2 Preemption is not \
         helpful for scheduling..",
    )
    .await;
    // Free to go anywhere, it goes where the skew allows: not node-0.
    let anywhere = json!({"topologySpreadConstraints": [constraint("Honor")]});
    for i in 0..4 {
        create_app_pod(&client, &format!("late-{i}"), "spread", anywhere.clone()).await;
    }
    for i in 0..4 {
        let node = running_on(&client, &format!("late-{i}")).await;
        assert_ne!(node, "steady-node-0", "late-{i}");
    }
    let zoned = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}}}]});
    create_app_pod(&client, "zoned", "spread", zoned).await;
    unschedulable_because(
        &client,
        "zoned",
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints \
         (missing required label). preemption: 0/3 nodes are available: 3 Preemption is not \
         helpful for scheduling..",
    )
    .await;
}

/// kube-scheduler's NodePorts: a host port is one pod's per node (and protocol).
#[tokio::test(start_paused = true)]
async fn a_host_port_is_held_by_one_pod_per_node() {
    let (_server, client) = three_nodes().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let published = |name: &str| {
        let mut body = pod(name, json!({}));
        body["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}]);
        body
    };
    for i in 0..4 {
        create_json::<Pod>(&pods, published(&format!("proxy-{i}"))).await;
    }
    let mut placed = Vec::new();
    for i in 0..3 {
        placed.push(running_on(&client, &format!("proxy-{i}")).await);
    }
    placed.sort();
    assert_eq!(placed, NODES);
    unschedulable_because(
        &client,
        "proxy-3",
        "0/3 nodes are available: 3 node(s) didn't have free ports for the requested pod \
         ports. preemption: 0/3 nodes are available: 3 No preemption victims found for \
         incoming pod..",
    )
    .await;
}

/// kube-scheduler's DefaultPreemption: a pod no node has room for evicts a pod of lower
/// priority (marked `DisruptionTarget`, with a `Preempted` Event), is nominated to its
/// node, keeps the freed room from pods of lower priority, and runs there; pods that may
/// not preempt, or find nothing of lower priority, say so.
#[tokio::test(start_paused = true)]
async fn a_pod_of_higher_priority_preempts_one_of_lower_priority() {
    let (_server, client) = three_nodes().await;
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    for (name, policy) in [("high", "PreemptLowerPriority"), ("polite", "Never")] {
        let class = json!({"metadata": {"name": name}, "value": 1000, "preemptionPolicy": policy});
        create_json(&classes, class).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let asking = |name: &str, extra: Value| {
        let mut body = pod(name, extra);
        body["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "20"}});
        body
    };
    let mut low_on = BTreeMap::new();
    for i in 0..3 {
        let name = format!("low-{i}");
        create_json::<Pod>(&pods, asking(&name, json!({}))).await;
        low_on.insert(running_on(&client, &name).await, name);
    }
    let never = json!({"priorityClassName": "polite"});
    create_json::<Pod>(&pods, asking("polite", never)).await;
    unschedulable_because(
        &client,
        "polite",
        "0/3 nodes are available: 3 Insufficient cpu. preemption: not eligible due to \
         preemptionPolicy=Never..",
    )
    .await;
    pods.delete("polite", &Default::default())
        .await
        .expect("delete");

    create_json::<Pod>(
        &pods,
        asking("urgent", json!({"priorityClassName": "high"})),
    )
    .await;
    let nominated = pod_when(&client, "urgent", "nominated", |p| {
        p.status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .is_some()
    })
    .await;
    let node = nominated
        .status
        .and_then(|s| s.nominated_node_name)
        .expect("nominated node");
    let victim = &low_on[&node];
    eventually("the victim gone", LIMIT, || async {
        pods.get_opt(victim).await.ok()?.is_none().then_some(())
    })
    .await;
    // A pod of the victim's priority, arriving once it has gone, finds the room kept.
    create_json::<Pod>(&pods, asking("late", json!({}))).await;
    assert_eq!(running_on(&client, "urgent").await, node);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let preempted = eventually("the Preempted event", LIMIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        listed
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("Preempted"))
    })
    .await;
    assert_eq!(
        preempted.involved_object.name.as_deref(),
        Some(victim.as_str())
    );
    let uid = nominated.metadata.uid.unwrap_or_default();
    assert_eq!(
        preempted.message.as_deref(),
        Some(format!("Preempted by pod {uid} on node {node}").as_str())
    );
    unschedulable_because(
        &client,
        "late",
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 \
         No preemption victims found for incoming pod..",
    )
    .await;
}

/// A pod held by a scheduling gate waits, saying so (the API server's condition), until
/// the gate is removed; a pod naming another scheduler is left to it, here a client
/// binding it as a custom scheduler would.
#[tokio::test(start_paused = true)]
async fn gated_pods_and_pods_of_other_schedulers_are_not_scheduled() {
    let (_server, client) = three_nodes().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let gated = json!({"schedulingGates": [{"name": "example.com/quota"}]});
    create_pod(&client, "gated", gated).await;
    create_pod(&client, "custom", json!({"schedulerName": "my-scheduler"})).await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    let held = pods.get("gated").await.expect("gated");
    let scheduled = condition(&held, "PodScheduled").expect("PodScheduled");
    assert_eq!(
        (
            scheduled.status.as_str(),
            scheduled.reason.as_deref(),
            scheduled.message.as_deref()
        ),
        (
            "False",
            Some("SchedulingGated"),
            Some("Scheduling is blocked due to non-empty scheduling gates")
        )
    );
    let custom = pods.get("custom").await.expect("custom");
    assert_eq!(custom.spec.as_ref().and_then(|s| s.node_name.clone()), None);
    assert!(condition(&custom, "PodScheduled").is_none(), "left alone");

    merge_patch(&pods, "gated", json!({"spec": {"schedulingGates": null}}))
        .await
        .expect("the gate removed");
    running_on(&client, "gated").await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "custom"},
        "target": {"kind": "Node", "name": "steady-node-2"}});
    let request = kube::core::Request::new("/api/v1/namespaces/default/pods")
        .create_subresource(
            "binding",
            "custom",
            &Default::default(),
            serde_json::to_vec(&binding).expect("json"),
        )
        .expect("request");
    client
        .request::<Value>(request)
        .await
        .expect("bound by its own scheduler");
    assert_eq!(running_on(&client, "custom").await, "steady-node-2");
}

/// Preferred pod affinity and `ScheduleAnyway` spreading rank the fitting nodes, as
/// kube's scores do, before the load does.
#[tokio::test(start_paused = true)]
async fn preferred_pod_affinity_and_soft_spreading_rank_the_nodes() {
    let (_server, client) = three_nodes().await;
    let on_one = json!({"nodeSelector": {"kubernetes.io/hostname": "steady-node-1"}});
    create_app_pod(&client, "cache", "cache", on_one).await;
    running_on(&client, "cache").await;
    let near_cache = json!({"affinity": {"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": on_hosts_with("cache")},
        ],
    }}});
    for i in 0..3 {
        create_app_pod(&client, &format!("near-{i}"), "near", near_cache.clone()).await;
    }
    for i in 0..3 {
        assert_eq!(
            running_on(&client, &format!("near-{i}")).await,
            "steady-node-1"
        );
    }
    // Five pods on each other node: by load alone the next pod would go to node-1.
    for node in ["steady-node-0", "steady-node-2"] {
        for i in 0..5 {
            let name = format!("filler-{node}-{i}");
            create_app_pod(&client, &name, "filler", json!({"nodeName": node})).await;
            running_on(&client, &name).await;
        }
    }
    // Soft spreading over `app: near` ranks node-1, which runs three, last.
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "near"}}}]});
    create_app_pod(&client, "spread", "near", spread).await;
    assert_eq!(running_on(&client, "spread").await, "steady-node-0");
}

/// The heartbeat of the node's Ready condition, as its kubelet last posted it.
fn last_heartbeat(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready")?;
    Some(ready.last_heartbeat_time.as_ref()?.0.to_string())
}

#[tokio::test(start_paused = true)]
async fn a_kubelet_posts_a_heartbeat_every_interval() {
    let server = bare_server().await;
    let client = server.client();
    let start = tokio::time::Instant::now();
    // The nodes' default clock moves with the paused tokio clock.
    let config = steady_cluster::node::NodeConfig::default();
    let interval = config.heartbeat_interval;
    steady_cluster::node::spawn(client.clone(), config);
    let first = node_when(&client, "steady-node", "registered", |n| {
        last_heartbeat(n).is_some()
    })
    .await;
    let first = last_heartbeat(&first);
    tokio::time::sleep(interval / 2).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let early = nodes.get("steady-node").await.expect("node");
    assert_eq!(
        last_heartbeat(&early),
        first,
        "no heartbeat before the interval"
    );
    let later = node_when(&client, "steady-node", "a new heartbeat", |n| {
        last_heartbeat(n) != first
    })
    .await;
    assert!(steady_cluster::node::is_ready(&later));
    // Heartbeats are stamped to the second, as `metav1.Time` is: up to a second early.
    let elapsed = start.elapsed();
    assert!(
        elapsed + std::time::Duration::from_secs(1) >= interval && elapsed < interval * 2,
        "the heartbeat came after {elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn nodes_record_events_unless_told_not_to() {
    for record_events in [true, false] {
        let server = bare_server().await;
        let nodes = steady_cluster::node::NodeConfig {
            seed: Some(1),
            record_events,
            ..Default::default()
        };
        steady_cluster::node::spawn(server.client(), nodes);
        let client = server.client();
        create_pod(&client, "quiet", json!({})).await;
        running_on(&client, "quiet").await;
        pod_when(
            &client,
            "quiet",
            "Ready",
            steady_cluster::pod_template::is_ready,
        )
        .await;
        let events: Api<Event> = Api::namespaced(client.clone(), NS);
        let reasons = || async {
            let listed = events.list(&ListParams::default()).await.expect("events");
            let mut reasons: Vec<String> =
                listed.items.into_iter().filter_map(|e| e.reason).collect();
            reasons.sort();
            reasons
        };
        if record_events {
            eventually("the pod's events", LIMIT, || async {
                let reasons = reasons().await;
                ["Scheduled", "Started"]
                    .iter()
                    .all(|r| reasons.iter().any(|seen| seen == r))
                    .then_some(())
            })
            .await;
        } else {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            assert_eq!(reasons().await, Vec::<String>::new());
        }
    }
}

/// A condition the kubelet does not own (a readiness gate's, set by its controller before
/// the pod starts) survives the kubelet's status writes, as kube's status manager keeps it.
#[tokio::test(start_paused = true)]
async fn the_kubelet_keeps_conditions_it_does_not_own() {
    let (_server, client) = three_nodes().await;
    let gated = json!({"readinessGates": [{"conditionType": "example.com/gate"}],
                       "nodeName": NODES[0]});
    create_pod(&client, "gated", gated).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let gate = json!({"status": {"conditions": [
        {"type": "example.com/gate", "status": "True", "reason": "Opened"}]}});
    let _: Pod = steady_test_support::merge_patch_subresource(&pods, "status", "gated", gate)
        .await
        .expect("gate condition");
    let running = pod_when(&client, "gated", "running", |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await;
    let gate = condition(&running, "example.com/gate").expect("the gate's condition kept");
    assert_eq!(
        (gate.status.as_str(), gate.reason.as_deref()),
        ("True", Some("Opened"))
    );
    assert!(condition(&running, "Ready").is_some());
}

/// kube's taint-eviction controller: a NoExecute taint evicts the pods that do not
/// tolerate it at once, those that tolerate it for a while when that while is over, and
/// leaves those that tolerate it for ever.
#[tokio::test(start_paused = true)]
async fn a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it() {
    let (_server, client) = three_nodes().await;
    let on_node = |tolerations: Value| json!({"nodeName": NODES[1], "tolerations": tolerations});
    let toleration = |seconds: Option<i64>| {
        let mut t = json!({"key": "maintenance", "operator": "Exists", "effect": "NoExecute"});
        if let Some(seconds) = seconds {
            t["tolerationSeconds"] = json!(seconds);
        }
        json!([t])
    };
    create_pod(&client, "plain", on_node(json!([]))).await;
    create_pod(&client, "patient", on_node(toleration(Some(60)))).await;
    create_pod(&client, "loyal", on_node(toleration(None))).await;
    for name in ["plain", "patient", "loyal"] {
        running_on(&client, name).await;
    }
    let started = tokio::time::Instant::now();
    patch_node(
        &client,
        NODES[1],
        json!({"spec": {"taints": [{"key": "maintenance", "value": "now", "effect": "NoExecute"}]}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let gone = |name: &'static str| {
        let pods = pods.clone();
        async move {
            eventually(&format!("{name} evicted"), LIMIT, || async {
                pods.get_opt(name).await.ok()?.is_none().then_some(())
            })
            .await
        }
    };
    gone("plain").await;
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    gone("patient").await;
    assert!(started.elapsed() >= std::time::Duration::from_secs(60));
    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
    assert_eq!(
        phase(&pods.get("loyal").await.expect("loyal stays")),
        "Running"
    );
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let evictions = events
        .list(&ListParams::default().fields("reason=TaintManagerEviction"))
        .await
        .expect("events")
        .items;
    assert_eq!(evictions.len(), 2, "{evictions:?}");
}

/// kubelet 1.27+ gives a pod it stops a terminal phase before confirming its deletion: a
/// container stopped by SIGTERM exits 143, one killed at the end of the grace period 137.
/// A finalizer holds each pod, so its last status can be read.
#[tokio::test(start_paused = true)]
async fn a_deleted_pod_ends_failed_with_its_containers_exit_codes_before_it_goes() {
    let (_server, client) = three_nodes().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (name, annotations) in [
        ("polite", json!({})),
        ("stubborn", json!({"steady.dev/simulate": "ignore-sigterm"})),
    ] {
        let mut held = pod(name, json!({"nodeName": NODES[0]}));
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        held["metadata"]["annotations"] = annotations;
        create_json::<Pod>(&pods, held).await;
        running_on(&client, name).await;
    }
    for name in ["polite", "stubborn"] {
        pods.delete(name, &Default::default())
            .await
            .expect("delete");
    }
    for (name, exit_code) in [("polite", 143), ("stubborn", 137)] {
        let ended = pod_when(&client, name, "a terminal phase", |p| phase(p) == "Failed").await;
        let container = first_container(&ended).expect("reported");
        let terminated = container
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            (terminated.exit_code, terminated.reason.as_deref()),
            (exit_code, Some("Error")),
            "{name}"
        );
        assert!(!container.ready);
        let ready = condition(&ended, "Ready").expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("False", Some("PodFailed"))
        );
        steady_test_support::clear_finalizers(&pods, name).await;
    }
    eventually("both pods gone", LIMIT, || async {
        let listed = pods.list(&ListParams::default()).await.ok()?;
        listed.items.is_empty().then_some(())
    })
    .await;
}

/// A container that fails under `restartPolicy: Always` is restarted in place, as kubelet
/// does: the pod stays Running and not ready, in CrashLoopBackOff, its restart count
/// growing after back-offs of 10 s, 20 s, …; under `Never` the pod fails.
#[tokio::test(start_paused = true)]
async fn a_failing_container_crash_loops_unless_it_is_never_restarted() {
    let (_server, client) = three_nodes().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for (name, restart_policy) in [("looping", "Always"), ("once", "Never")] {
        let mut failing = pod(
            name,
            json!({"nodeName": NODES[0], "restartPolicy": restart_policy}),
        );
        failing["metadata"]["annotations"] = json!({"steady.dev/simulate": "fail"});
        create_json::<Pod>(&pods, failing).await;
    }
    let failed = pod_when(&client, "once", "failed", |p| phase(p) == "Failed").await;
    assert_eq!(first_container(&failed).expect("reported").restart_count, 0);

    let looping = pod_when(&client, "looping", "restarted twice", |p| {
        first_container(p).is_some_and(|c| c.restart_count >= 2)
    })
    .await;
    assert_eq!(phase(&looping), "Running");
    let container = first_container(&looping).expect("reported");
    assert!(!container.ready);
    let waiting = container
        .state
        .as_ref()
        .and_then(|s| s.waiting.as_ref())
        .expect("waiting");
    assert_eq!(waiting.reason.as_deref(), Some("CrashLoopBackOff"));
    let message = waiting.message.as_deref().unwrap_or("");
    assert!(
        message.starts_with("back-off 40s restarting failed container=c pod=looping_default("),
        "{message}"
    );
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("last exit");
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    let ready = condition(&looping, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("ContainersNotReady"))
    );
    let back_off = event_with_reason(&client, "BackOff").await;
    let message = back_off.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Back-off restarting failed container c in pod "),
        "{message}"
    );
    // As client-go's recorder: one Event, its count raised at each back-off.
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let back_offs = eventually("the back-offs counted", LIMIT, || async {
        let listed = events.list(&ListParams::default()).await.ok()?;
        let back_offs: Vec<Event> = listed
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("BackOff"))
            .collect();
        let counted: i32 = back_offs.iter().map(|e| e.count.unwrap_or(0)).sum();
        (counted >= 3).then_some(back_offs)
    })
    .await;
    assert_eq!(back_offs.len(), 1, "{back_offs:?}");
    assert!(back_offs[0].first_timestamp < back_offs[0].last_timestamp);

    // Deleted while it waits to restart, it ends as kubelet's status manager ends it: the
    // container it could not locate `ContainerStatusUnknown`, its last exit and its
    // restarts kept (a finalizer holds the pod to be read).
    let hold = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    steady_test_support::merge_patch(&pods, "looping", hold)
        .await
        .expect("hold");
    pods.delete("looping", &Default::default())
        .await
        .expect("delete");
    let ended = pod_when(&client, "looping", "ended", |p| phase(p) == "Failed").await;
    let container = first_container(&ended).expect("reported");
    let state = container.state.as_ref().and_then(|s| s.terminated.as_ref());
    let state = state.expect("terminated");
    assert_eq!(
        (state.exit_code, state.reason.as_deref()),
        (137, Some("ContainerStatusUnknown"))
    );
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref());
    assert_eq!(last.map(|t| t.exit_code), Some(1), "the last exit kept");
    assert!(container.restart_count >= 2, "the restarts kept");
    steady_test_support::clear_finalizers(&pods, "looping").await;
}

/// The status of the pod's first container, once the kubelet reported one.
fn first_container(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    statuses.and_then(|c| c.first())
}
