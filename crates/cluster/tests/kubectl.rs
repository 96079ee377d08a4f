//! The real kubectl against steady's API server served over HTTPS, with this crate's
//! controllers running beside it as `steady up` runs them: what a user types to wait for
//! a workload, or to drain a node past a disruption budget, works.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use steady_apiserver::{kubeconfig, serve, tls};

/// Serve `server` over HTTPS on a free port; returns a kubeconfig for it.
async fn serve_https(server: &steady_apiserver::ApiServer, dir: &Path) -> std::path::PathBuf {
    let credentials = tls::load_or_create(&dir.join("pki")).expect("credentials");
    let tls_config = tls::server_config(&credentials).expect("tls config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("https://{}", listener.local_addr().expect("address"));
    let app = steady_apiserver::auth::authenticate(server.router(), server, &credentials.token);
    tokio::spawn(async move {
        let config = serve::ServingConfig::default();
        serve::serve(listener, app, tls_config, &config, std::future::pending()).await;
    });
    let path = dir.join("kubeconfig");
    let contents = kubeconfig::render(&url, &credentials.ca_cert_pem, &credentials.token);
    kubeconfig::write_private(&path, &contents).expect("kubeconfig");
    path
}

/// Run kubectl (off the runtime's workers) with `stdin`; it must succeed. Returns stdout.
async fn kubectl(dir: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let described = format!("kubectl {args:?}");
    let output = kubectl_output(dir, args, stdin).await;
    steady_test_support::successful_stdout(described, &output)
}

/// Run kubectl (off the runtime's workers) with `stdin`, however it ends.
async fn kubectl_output(dir: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let stdin = stdin.map(str::to_string);
    let described = format!("kubectl {args:?}");
    let output = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().expect("kubectl is on the machine image");
        if let (Some(mut pipe), Some(input)) = (child.stdin.take(), stdin) {
            pipe.write_all(input.as_bytes()).expect("write stdin");
        }
        child.wait_with_output().expect("kubectl ran")
    });
    tokio::time::timeout(Duration::from_secs(90), output)
        .await
        .unwrap_or_else(|_| panic!("{described} hung"))
        .expect("kubectl task")
}

/// `kubectl rollout status target`, bounded to a minute.
async fn rollout_status(dir: &Path, target: &str) -> String {
    kubectl(dir, &["rollout", "status", target, "--timeout=60s"], None).await
}

/// `kubectl wait --for=condition=… target`, bounded to a minute: its one line.
async fn wait_for_condition(dir: &Path, condition: &str, target: &str) -> String {
    let condition = format!("--for=condition={condition}");
    let waited = kubectl(dir, &["wait", &condition, target, "--timeout=60s"], None).await;
    waited.trim().to_string()
}

/// `kubectl get what… -o jsonpath=path`.
async fn get_jsonpath(dir: &Path, what: &[&str], path: &str) -> String {
    let output = format!("jsonpath={path}");
    let args: Vec<&str> = ["get"]
        .into_iter()
        .chain(what.iter().copied())
        .chain(["-o", &output])
        .collect();
    kubectl(dir, &args, None).await
}

const JOBS: &str = r#"
apiVersion: batch/v1
kind: Job
metadata: {name: three}
spec:
  completions: 3
  template:
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox, command: ["true"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: doomed}
spec:
  backoffLimit: 0
  template:
    metadata: {annotations: {steady.dev/simulate: fail}}
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox, command: ["false"]}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: vetoed}
spec:
  backoffLimit: 6
  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {containerName: work, operator: In, values: [1]}
  template:
    metadata: {annotations: {steady.dev/simulate: fail}}
    spec:
      restartPolicy: Never
      containers: [{name: work, image: busybox, command: ["false"]}]
"#;

const WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 3
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: fluentd}]}
"#;

/// A test server over HTTPS with every controller of this crate running beside it, as
/// `steady up` would run them; dropping the returned guard's sender stops them.
struct Running {
    _server: steady_apiserver::ApiServer,
    stop: tokio::sync::oneshot::Sender<()>,
    controllers: tokio::task::JoinHandle<Result<(), steady_cluster::Stopped>>,
}

async fn start(dir: &Path) -> Running {
    start_with_nodes(dir, 1).await
}

async fn start_with_nodes(dir: &Path, nodes: usize) -> Running {
    let server = common::nodes_server(nodes).await;
    serve_https(&server, dir).await;
    // As `steady up` starts: kind's default StorageClass.
    steady_cluster::volumes::ensure_default_class(&server.client())
        .await
        .expect("the default class");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controllers = tokio::spawn(steady_cluster::run(server.client(), async move {
        let _ = stopped.await;
    }));
    Running {
        _server: server,
        stop,
        controllers,
    }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.controllers
            .await
            .expect("controllers task")
            .expect("controllers stopped cleanly");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_status_follows_a_statefulset_and_a_daemonset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(WORKLOADS)).await;
    let rolled = rollout_status(dir.path(), "statefulset/web").await;
    assert!(
        rolled.contains("roll out complete: 3 new pods have been updated"),
        "{rolled}"
    );
    let rolled = rollout_status(dir.path(), "daemonset/agent").await;
    assert!(
        rolled.contains("daemon set \"agent\" successfully rolled out"),
        "{rolled}"
    );
    let pods = get_jsonpath(
        dir.path(),
        &["pods", "-l", "app=web"],
        "{.items[*].metadata.name}",
    )
    .await;
    assert_eq!(pods, "web-0 web-1 web-2");
    running.stop().await;
}

/// How a user changes what a StatefulSet may not change: `kubectl delete --cascade=orphan`,
/// then apply it again. The new set adopts the running pods (the same uids, now
/// controlled by it), and its rollout is complete without a pod replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_recreates_a_statefulset_around_its_orphaned_pods() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(WORKLOADS)).await;
    rollout_status(dir.path(), "statefulset/web").await;
    let pod_uids = || {
        get_jsonpath(
            dir.path(),
            &["pods", "-l", "app=web"],
            "{.items[*].metadata.uid}",
        )
    };
    let before = pod_uids().await;
    kubectl_line(dir.path(), "delete statefulset web --cascade=orphan").await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(WORKLOADS)).await;
    let rolled = rollout_status(dir.path(), "statefulset/web").await;
    assert!(rolled.contains("roll out complete: 3 new pods"), "{rolled}");
    let set_uid = get_jsonpath(dir.path(), &["statefulset", "web"], "{.metadata.uid}").await;
    let owners = || {
        get_jsonpath(
            dir.path(),
            &["pods", "-l", "app=web"],
            "{.items[*].metadata.ownerReferences[0].uid}",
        )
    };
    let adopted = [set_uid.as_str(); 3].join(" ");
    steady_test_support::eventually("the pods adopted", Duration::from_secs(60), || async {
        (owners().await == adopted).then_some(())
    })
    .await;
    assert_eq!(pod_uids().await, before, "no pod was replaced");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_waits_for_a_job_to_complete_and_another_to_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;

    kubectl(dir.path(), &["apply", "-f", "-"], Some(JOBS)).await;
    let waited = wait_for_condition(dir.path(), "complete", "job/three").await;
    assert_eq!(waited, "job.batch/three condition met");
    let succeeded = get_jsonpath(dir.path(), &["job", "three"], "{.status.succeeded}").await;
    assert_eq!(succeeded, "3");
    let listed = kubectl(dir.path(), &["get", "job", "three"], None).await;
    assert!(
        listed.contains("Complete") && listed.contains("3/3"),
        "{listed}"
    );

    let waited = wait_for_condition(dir.path(), "failed", "job/doomed").await;
    assert_eq!(waited, "job.batch/doomed condition met");
    let reason = get_jsonpath(
        dir.path(),
        &["job", "doomed"],
        "{.status.conditions[?(@.type==\"Failed\")].reason}",
    )
    .await;
    assert_eq!(reason, "BackoffLimitExceeded");

    wait_for_condition(dir.path(), "failed", "job/vetoed").await;
    let failed = "{.status.conditions[?(@.type==\"Failed\")].reason} {.status.failed}";
    let reason = get_jsonpath(dir.path(), &["job", "vetoed"], failed).await;
    assert_eq!(reason, "PodFailurePolicy 1", "the first failure fails it");

    // `kubectl delete` waits for the Jobs; their pods follow (none held by a finalizer).
    kubectl_line(dir.path(), "delete job three doomed vetoed").await;
    steady_test_support::eventually("no pod left", common::LIMIT, || async {
        let pods = kubectl_line(dir.path(), "get pods -o name").await;
        pods.trim().is_empty().then_some(())
    })
    .await;
    running.stop().await;
}

/// [`kubectl`] with the arguments of `line` (split at spaces) and no stdin.
async fn kubectl_line(dir: &Path, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    kubectl(dir, &args, None).await
}

/// A cluster as [`start`] runs it, in a new directory, once kubectl ran each of `lines`.
async fn started_after(lines: &[&str]) -> (tempfile::TempDir, Running) {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;
    for line in lines {
        kubectl_line(dir.path(), line).await;
    }
    (dir, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_lists_the_endpoints_of_an_exposed_deployment() {
    let (tmp, running) = started_after(&[
        "create deployment web --image=nginx --replicas=2 --port=80",
        "rollout status deployment/web --timeout=60s",
        "expose deployment web --port=8080 --target-port=80",
    ])
    .await;
    let dir = tmp.path();
    let ips = "get endpoints web -o jsonpath={.subsets[*].addresses[*].ip}";
    let listed = steady_test_support::eventually("two ready addresses", common::LIMIT, || async {
        let listed = kubectl_line(dir, ips).await;
        (listed.split_whitespace().count() == 2).then_some(listed)
    })
    .await;
    let shown = kubectl_line(dir, "get endpoints,endpointslices").await;
    for ip in listed.split_whitespace() {
        assert!(shown.contains(&format!("{ip}:80")), "{shown}");
    }
    for expected in [
        "endpoints/web",
        "endpointslice.discovery.k8s.io/web-",
        "IPv4",
    ] {
        assert!(shown.contains(expected), "{shown}");
    }
    running.stop().await;
}

/// `kubectl rollout pause`, `set image` and `scale`: the paused Deployment's one
/// ReplicaSet takes the new size and nothing rolls out until `kubectl rollout resume`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scales_a_paused_deployment_and_rolls_it_out_on_resume() {
    let (tmp, running) = started_after(&[
        "create deployment web --image=nginx:1.26 --replicas=2",
        "rollout status deployment/web --timeout=60s",
        "rollout pause deployment/web",
        "set image deployment/web nginx=nginx:1.27",
        "scale deployment/web --replicas=4",
    ])
    .await;
    let dir = tmp.path();
    let sizes = || async {
        let listed = kubectl_line(
            dir,
            "get rs -l app=web -o jsonpath={.items[*].spec.replicas}",
        )
        .await;
        let mut sizes: Vec<String> = listed.split_whitespace().map(String::from).collect();
        sizes.sort();
        sizes
    };
    steady_test_support::eventually("the paused ReplicaSet at 4", common::LIMIT, || async {
        (sizes().await == ["4"]).then_some(())
    })
    .await;
    // None of the 4 runs the paused template (kube omits the zero).
    let counts = "get deployment web -o jsonpath={.status.updatedReplicas}/{.status.replicas}";
    steady_test_support::eventually("a status of 4 not updated", common::LIMIT, || async {
        (kubectl_line(dir, counts).await.trim() == "/4").then_some(())
    })
    .await;
    kubectl_line(dir, "rollout resume deployment/web").await;
    rollout_status(dir, "deployment/web").await;
    assert_eq!(sizes().await, ["0", "4"]);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_runs_a_cronjob_by_hand() {
    let (tmp, running) = started_after(&[
        "create cronjob nightly --image=busybox --schedule=@daily",
        "create job now --from=cronjob/nightly",
    ])
    .await;
    let dir = tmp.path();
    let waited = kubectl_line(dir, "wait --for=condition=complete job/now --timeout=60s").await;
    assert_eq!(waited.trim(), "job.batch/now condition met");
    let owner = "get job now -o jsonpath={.metadata.ownerReferences[0].kind}";
    assert_eq!(kubectl_line(dir, owner).await, "CronJob");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_nodes_lists_every_simulated_node_ready() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start_with_nodes(dir.path(), 3).await;
    kubectl(
        dir.path(),
        &[
            "wait",
            "--for=condition=Ready",
            "node",
            "--all",
            "--timeout=60s",
        ],
        None,
    )
    .await;
    let listed = kubectl(dir.path(), &["get", "nodes", "--no-headers"], None).await;
    let rows: Vec<Vec<&str>> = listed
        .lines()
        .map(|line| line.split_whitespace().take(2).collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["steady-node-0", "Ready"],
            ["steady-node-1", "Ready"],
            ["steady-node-2", "Ready"],
        ],
        "{listed}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drain_stops_at_a_disruption_budget() {
    let (tmp, running) = started_after(&[
        "create deployment web --image=nginx --replicas=3",
        "rollout status deployment/web --timeout=60s",
        "create poddisruptionbudget web --selector=app=web --min-available=2",
        "cordon steady-node",
    ])
    .await;
    let dir = tmp.path();
    let allowed = "get pdb web -o jsonpath={.status.disruptionsAllowed}";
    steady_test_support::eventually("one disruption allowed", common::LIMIT, || async {
        (kubectl_line(dir, allowed).await == "1").then_some(())
    })
    .await;
    // One pod may go; its replacement cannot be scheduled on the cordoned node, so the
    // budget protects the other two until the drain gives up, as on a one-node cluster.
    let args = [
        "drain",
        "steady-node",
        "--ignore-daemonsets",
        "--timeout=6s",
    ];
    let drained = kubectl_output(dir, &args, None).await;
    let stdout = String::from_utf8_lossy(&drained.stdout);
    let stderr = String::from_utf8_lossy(&drained.stderr);
    assert!(!drained.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.matches(" evicted").count(), 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    let running_pods =
        "get pods -l app=web --field-selector=status.phase=Running -o name --no-headers";
    assert_eq!(kubectl_line(dir, running_pods).await.lines().count(), 2);
    running.stop().await;
}

const SIZED_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: sized}
spec:
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {cpu: 0.25, memory: 1.5Gi}
      limits: {cpu: 1, memory: 2048Mi}
"#;

/// What a user sees of quotas and quantities through kubectl: YAML numbers and
/// non-canonical quantities read back as kube prints them, a Deployment past its pod
/// quota reports `ReplicaFailure` and `describe` shows why, and `get quota` counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_quantities_and_a_deployment_past_its_quota() {
    let (tmp, running) = started_after(&["create quota pods --hard=pods=3"]).await;
    let dir = tmp.path();
    kubectl(dir, &["apply", "-f", "-"], Some(SIZED_POD)).await;
    kubectl_line(dir, "create deployment web --image=nginx --replicas=3").await;
    let resources = get_jsonpath(dir, &["pod", "sized"], "{.spec.containers[0].resources}").await;
    assert_eq!(
        resources,
        r#"{"limits":{"cpu":"1","memory":"2Gi"},"requests":{"cpu":"250m","memory":"1536Mi"}}"#
    );
    let class = get_jsonpath(dir, &["pod", "sized"], "{.status.qosClass}").await;
    assert_eq!(class, "Burstable");

    let waited = wait_for_condition(dir, "ReplicaFailure", "deployment/web").await;
    assert_eq!(waited, "deployment.apps/web condition met");
    let described = kubectl_line(dir, "describe replicaset").await;
    assert!(
        described.contains("FailedCreate")
            && described
                .contains("exceeded quota: pods, requested: pods=1, used: pods=3, limited: pods=3"),
        "{described}"
    );
    let quota = kubectl_line(dir, "get quota pods").await;
    assert!(quota.contains("pods: 3/3"), "{quota}");

    kubectl_line(dir, "delete pod sized").await;
    let ready = steady_test_support::eventually("three ready replicas", common::LIMIT, || async {
        let ready = get_jsonpath(dir, &["deployment", "web"], "{.status.readyReplicas}").await;
        (ready == "3").then_some(ready)
    })
    .await;
    assert_eq!(ready, "3");
    running.stop().await;
}

const DATABASE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 5Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: db}
spec:
  containers: [{name: postgres, image: "postgres:17"}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"#;

/// A claim of the default class waits for its pod, as on kind, then binds to a volume
/// provisioned on the pod's node; `kubectl wait` and `get pv` read it as on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_claim_bound_for_its_first_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;
    let classes = kubectl(dir.path(), &["get", "storageclass"], None).await;
    assert!(classes.contains("standard (default)"), "{classes}");
    kubectl(dir.path(), &["apply", "-f", "-"], Some(DATABASE)).await;
    let bound = kubectl(
        dir.path(),
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Bound",
            "pvc/data",
            "--timeout=60s",
        ],
        None,
    )
    .await;
    assert!(bound.contains("condition met"), "{bound}");
    wait_for_condition(dir.path(), "Ready", "pod/db").await;
    let volume = get_jsonpath(dir.path(), &["pvc", "data"], "{.spec.volumeName}").await;
    let listed = kubectl(dir.path(), &["get", "pv", &volume, "--no-headers"], None).await;
    let columns: Vec<&str> = listed.split_whitespace().collect();
    assert_eq!(
        &columns[1..7],
        ["5Gi", "RWO", "Delete", "Bound", "default/data", "standard"],
        "{listed}"
    );
    // Deleted under its pod, the claim is Terminating until the pod is gone.
    kubectl(dir.path(), &["delete", "pvc", "data", "--wait=false"], None).await;
    let claim = kubectl(dir.path(), &["get", "pvc", "data", "--no-headers"], None).await;
    assert_eq!(
        claim.split_whitespace().nth(1),
        Some("Terminating"),
        "{claim}"
    );
    let finalizers = get_jsonpath(dir.path(), &["pvc", "data"], "{.metadata.finalizers}").await;
    assert_eq!(finalizers, r#"["kubernetes.io/pvc-protection"]"#);
    kubectl(dir.path(), &["delete", "pod", "db"], None).await;
    kubectl(
        dir.path(),
        &[
            "wait",
            "--for=delete",
            "pvc/data",
            &format!("pv/{volume}"),
            "--timeout=60s",
        ],
        None,
    )
    .await;
    running.stop().await;
}

/// The example of kube's "Ephemeral Volumes" page: a pod with a generic ephemeral
/// volume gets its claim `<pod>-<volume>`, bound before the pod runs and deleted with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_an_ephemeral_volume_claimed_for_its_pod_and_deleted_with_it() {
    const SCRATCH: &str = r#"
kind: Pod
apiVersion: v1
metadata: {name: my-app}
spec:
  containers: [{name: my-frontend, image: busybox:1.28, command: [sleep, "1000000"],
                volumeMounts: [{mountPath: /scratch, name: scratch-volume}]}]
  volumes:
  - name: scratch-volume
    ephemeral:
      volumeClaimTemplate:
        metadata: {labels: {type: my-frontend-volume}}
        spec:
          accessModes: [ReadWriteOnce]
          storageClassName: standard
          resources: {requests: {storage: 1Gi}}
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start(dir.path()).await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(SCRATCH)).await;
    wait_for_condition(dir.path(), "Ready", "pod/my-app").await;
    let listed = kubectl_line(
        dir.path(),
        "get pvc -l type=my-frontend-volume --no-headers",
    )
    .await;
    let columns: Vec<&str> = listed.split_whitespace().collect();
    assert_eq!(
        (columns[0], columns[1], columns[3], columns[4], columns[5]),
        ("my-app-scratch-volume", "Bound", "1Gi", "RWO", "standard"),
        "{listed}"
    );
    let owner = "{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}";
    let owned = get_jsonpath(dir.path(), &["pvc", "my-app-scratch-volume"], owner).await;
    assert_eq!(owned, "Pod/my-app");
    kubectl_line(dir.path(), "delete pod my-app").await;
    kubectl_line(
        dir.path(),
        "wait --for=delete pvc/my-app-scratch-volume --timeout=60s",
    )
    .await;
    running.stop().await;
}

/// A Deployment whose container keeps failing, as on a cluster: its pod crash-loops in
/// place (Running, not ready, restarts counted), the rollout stalls past its progress
/// deadline, and `kubectl rollout status` says so and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_crash_looping_rollout_exceed_its_deadline() {
    const CRASHING: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: crashing}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {matchLabels: {app: crashing}}
  template:
    metadata: {labels: {app: crashing}, annotations: {steady.dev/simulate: fail}}
    spec: {containers: [{name: app, image: "app:1"}]}
"#;
    let (dir, running) = started_after(&[]).await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(CRASHING)).await;
    let args = ["rollout", "status", "deployment/crashing", "--timeout=60s"];
    let status = kubectl_output(dir.path(), &args, None).await;
    assert!(!status.status.success(), "the rollout never completes");
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(
        stderr.contains("deployment \"crashing\" exceeded its progress deadline"),
        "{stderr}"
    );
    let listed = kubectl_line(dir.path(), "get pods -l app=crashing --no-headers").await;
    let columns: Vec<&str> = listed.split_whitespace().collect();
    // NAME READY STATUS RESTARTS AGE: one pod, never replaced.
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert_eq!(&columns[1..3], ["0/1", "CrashLoopBackOff"], "{listed}");
    running.stop().await;
}

/// One replica per node, by required anti-affinity on the pods of the same revision
/// (`matchLabelKeys: [pod-template-hash]`, KEP-3633's example): on three nodes a fourth
/// replica stays Pending with kube-scheduler's message, and a rolling update still
/// completes, each new pod avoiding only its own revision's.
const ONE_PER_NODE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: ha}
spec:
  replicas: 4
  selector: {matchLabels: {app: ha}}
  template:
    metadata: {labels: {app: ha}}
    spec:
      containers: [{name: server, image: "nginx:1.26"}]
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: ha}}
            matchLabelKeys: [pod-template-hash]
            topologyKey: kubernetes.io/hostname
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_anti_affinity_hold_a_replica_pending_and_a_rollout_complete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = start_with_nodes(dir.path(), 3).await;
    kubectl(dir.path(), &["apply", "-f", "-"], Some(ONE_PER_NODE)).await;
    let pending = "get pods -l app=ha --field-selector=status.phase=Pending -o name";
    let events =
        "get events --field-selector=reason=FailedScheduling -o jsonpath={.items[*].message}";
    let message = steady_test_support::eventually("one replica refused", common::LIMIT, || async {
        let pending = kubectl_line(dir.path(), pending).await;
        let messages = kubectl_line(dir.path(), events).await;
        (pending.lines().count() == 1 && !messages.is_empty()).then_some(messages)
    })
    .await;
    assert!(
        message.contains(
            "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. \
             preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
        ),
        "{message}"
    );
    let selector = get_jsonpath(
        dir.path(),
        &["pods", "-l", "app=ha"],
        "{.items[0].spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].key}",
    )
    .await;
    assert_eq!(selector, "pod-template-hash", "the server merged the key");
    kubectl_line(dir.path(), "scale deployment ha --replicas=3").await;
    rollout_status(dir.path(), "deployment/ha").await;
    kubectl_line(dir.path(), "set image deployment/ha server=nginx:1.27").await;
    let rolled = rollout_status(dir.path(), "deployment/ha").await;
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    // Once the old pods have gone, one new pod per node.
    let placed = "get pods -l app=ha -o jsonpath={.items[*].spec.nodeName}";
    let mut nodes = steady_test_support::eventually("three pods", common::LIMIT, || async {
        let nodes = kubectl_line(dir.path(), placed).await;
        let nodes: Vec<String> = nodes.split_whitespace().map(String::from).collect();
        (nodes.len() == 3).then_some(nodes)
    })
    .await;
    nodes.sort();
    assert_eq!(nodes, ["steady-node-0", "steady-node-1", "steady-node-2"]);
    running.stop().await;
}

/// A Deployment filling the one node, and a pod of a higher PriorityClass made with
/// `kubectl create priorityclass`.
const FILLER_AND_URGENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: filler}
spec:
  replicas: 1
  selector: {matchLabels: {app: filler}}
  template:
    metadata: {labels: {app: filler}}
    spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "20"}}}]}
"#;

const URGENT: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priorityClassName: high
  containers: [{name: c, image: busybox, resources: {requests: {cpu: "20"}}}]
"#;

/// kube-scheduler's preemption as a user sees it: the pod of higher priority runs, the
/// Deployment's pod it evicted has a `Preempted` event, and its replacement waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_higher_priority_pod_preempt_a_deployments_pod() {
    let (tmp, running) = started_after(&["create priorityclass high --value=1000"]).await;
    let dir = tmp.path();
    kubectl(dir, &["apply", "-f", "-"], Some(FILLER_AND_URGENT)).await;
    rollout_status(dir, "deployment/filler").await;
    kubectl(dir, &["apply", "-f", "-"], Some(URGENT)).await;
    let ready = wait_for_condition(dir, "Ready", "pod/urgent").await;
    assert_eq!(ready, "pod/urgent condition met");
    let preempted = "get events --field-selector=reason=Preempted -o jsonpath={.items[*].message}";
    let message = kubectl_line(dir, preempted).await;
    assert!(message.starts_with("Preempted by pod "), "{message}");
    assert!(message.ends_with(" on node steady-node"), "{message}");
    let waiting = "get pods -l app=filler --field-selector=status.phase=Pending -o jsonpath={.items[*].status.conditions[0].message}";
    let why = steady_test_support::eventually("the replacement refused", common::LIMIT, || async {
        let why = kubectl_line(dir, waiting).await;
        why.contains("Insufficient cpu").then_some(why)
    })
    .await;
    assert!(
        why.ends_with(
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.."
        ),
        "{why}"
    );
    running.stop().await;
}
