//! The Cache operator end to end, as a user meets it: the real binary (`steady up`, or
//! `steady server` + `steady operator` as separate processes) driven by the real kubectl,
//! with state checked through kube-rs.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::{Options, Server, UpCluster};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams};
use steady_cache_operator::Cache;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

const WAIT: Duration = Duration::from_secs(60);

fn kubectl(kubeconfig: &Path, cache_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new("kubectl")
        .args(args)
        .arg("--cache-dir")
        .arg(cache_dir)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .output()
        .expect("kubectl is on the machine image");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl UpCluster {
    fn kubectl(&self, args: &[&str]) -> String {
        let (ok, stdout, stderr) = kubectl(&self.kubeconfig, &self.cache_dir, args);
        assert!(ok, "kubectl {args:?} failed:\n{stdout}\n{stderr}");
        stdout
    }

    fn apply(&self, yaml: &str) -> String {
        let file = self.cache_dir.with_extension("yaml");
        std::fs::write(&file, yaml).expect("write manifest");
        self.kubectl(&["apply", "-f", file.to_str().expect("utf-8 path")])
    }
}

fn cache_yaml(name: &str, replicas: i32, image: &str) -> String {
    format!(
        "apiVersion: steady.dev/v1alpha1\nkind: Cache\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  image: \"{image}\"\n"
    )
}

/// Poll `check` until it returns Some, failing after [`WAIT`].
async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    steady_test_support::eventually(what, WAIT, check).await
}

/// Pod name → (ready, image, uid), for pods not being deleted.
async fn pods(client: &kube::Client) -> BTreeMap<String, (bool, String, String)> {
    in_default::<Pod>(client)
        .await
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (
                p.metadata.name.unwrap_or_default(),
                (ready, image, p.metadata.uid.unwrap_or_default()),
            )
        })
        .collect()
}

async fn ready_cache(client: &kube::Client, name: &str, replicas: i32) -> Cache {
    let caches: Api<Cache> = Api::namespaced(client.clone(), "default");
    eventually(
        &format!("{name} Ready with {replicas} replicas"),
        || async {
            let cache = caches.get(name).await.ok()?;
            let status = cache.status.clone()?;
            let ready = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (ready
                && status.ready_replicas == replicas
                && status.observed_generation == cache.metadata.generation)
                .then_some(cache)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_up_runs_the_cache_operator_for_kubectl() {
    let cluster = UpCluster::start(&["--pod-start-delay", "100ms"]).await;
    let client = cluster.server.client().await;
    assert!(
        cluster
            .apply(&cache_yaml("web", 2, "memcached:1.6"))
            .contains("cache.steady.dev/web created")
    );
    let cache = ready_cache(&client, "web", 2).await;
    assert_eq!(cache.status.as_ref().map(|s| s.replicas), Some(2));
    let table = cluster.kubectl(&["get", "caches"]);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .eq(["NAME", "DESIRED", "READY", "AGE"]),
        "{table}"
    );
    assert!(
        cluster
            .kubectl(&["get", "svc", "web", "-o", "jsonpath={.spec.selector}"])
            .contains("steady.dev/cache")
    );

    // A deleted pod comes back (a new one, with the same name) and becomes Ready.
    let before = pods(&client).await;
    cluster.kubectl(&["delete", "pod", "web-1"]);
    eventually("web-1 recreated and Ready", || async {
        let now = pods(&client).await;
        let (ready, _, uid) = now.get("web-1")?;
        (*ready && *uid != before["web-1"].2).then_some(())
    })
    .await;

    // Scale up, then down: exactly the right ordinals exist.
    cluster.kubectl(&["scale", "cache/web", "--replicas=4"]);
    ready_cache(&client, "web", 4).await;
    assert_eq!(
        pods(&client).await.keys().cloned().collect::<Vec<_>>(),
        ["web-0", "web-1", "web-2", "web-3"]
    );
    cluster.kubectl(&["scale", "cache/web", "--replicas=1"]);
    ready_cache(&client, "web", 1).await;
    eventually("only web-0 left", || async {
        (pods(&client).await.keys().cloned().collect::<Vec<_>>() == ["web-0"]).then_some(())
    })
    .await;

    // An image change rolls pods one at a time: never fewer than replicas-1 Ready.
    cluster.kubectl(&["scale", "cache/web", "--replicas=3"]);
    ready_cache(&client, "web", 3).await;
    cluster.apply(&cache_yaml("web", 3, "memcached:1.6.30"));
    let least_ready = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(3));
    eventually("all pods run the new image", || {
        let client = client.clone();
        let least = least_ready.clone();
        async move {
            let now = pods(&client).await;
            let ready = now.values().filter(|(ready, _, _)| *ready).count();
            least.fetch_min(ready, std::sync::atomic::Ordering::SeqCst);
            let done = now.len() == 3
                && now
                    .values()
                    .all(|(ready, image, _)| *ready && image == "memcached:1.6.30");
            done.then_some(())
        }
    })
    .await;
    let least_ready = least_ready.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        least_ready >= 2,
        "the rollout left only {least_ready} of 3 pods Ready"
    );

    // Invalid Caches are refused by the API with a message naming the field.
    for (bad, field) in [
        ("replicas: -1", "spec.replicas"),
        ("port: 70000", "spec.port"),
    ] {
        let file = cluster.cache_dir.with_extension("bad.yaml");
        std::fs::write(&file, format!("apiVersion: steady.dev/v1alpha1\nkind: Cache\nmetadata:\n  name: bad\nspec:\n  {bad}\n")).expect("write");
        let (ok, _, stderr) = kubectl(
            &cluster.kubeconfig,
            &cluster.cache_dir,
            &["apply", "-f", file.to_str().expect("path")],
        );
        assert!(!ok, "{bad} must be rejected");
        assert!(
            stderr.contains(field) && stderr.contains("Invalid"),
            "{bad}: {stderr}"
        );
    }

    // Deleting the Cache removes its pods and its service.
    cluster.kubectl(&["delete", "cache", "web"]);
    eventually("pods and service garbage-collected", || async {
        let services = Api::<Service>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .ok()?;
        let left = services
            .items
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some("web"));
        (pods(&client).await.is_empty() && !left).then_some(())
    })
    .await;
}

/// A `steady operator` process with its output captured line by line.
struct Operator {
    child: Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Operator {
    fn start(kubeconfig: &Path, extra: &[&str]) -> Operator {
        let mut child = common::steady_child(&["operator", "--metrics-addr", "127.0.0.1:0"])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(extra)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn steady operator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Operator { child, lines }
    }

    async fn wait_for(&mut self, needle: &str, within: Duration) -> bool {
        tokio::time::timeout(within, async {
            while let Some(line) = self.lines.recv().await {
                if line.contains(needle) {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    }

    /// The address of its /metrics endpoint, from the line it prints at start.
    async fn metrics_address(&mut self) -> String {
        let announced = tokio::time::timeout(WAIT, async {
            while let Some(line) = self.lines.recv().await {
                if let Some(rest) = line.strip_prefix("metrics and probes on http://") {
                    return rest.split('/').next().map(str::to_string);
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        announced.expect("the operator announces its metrics address")
    }

    async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM, as Kubernetes stops a pod; the exit status.
    async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid} failed");
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits after SIGTERM")
            .expect("wait")
    }
}

/// Every object of kind `K` in `default`.
async fn in_default<K>(client: &kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + for<'de> k8s_openapi::serde::Deserialize<'de>
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), "default")
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
}

/// `kind/name` → resourceVersion of every object of kind `K` in `default`.
async fn versions_of<K>(client: &kube::Client, kind: &str) -> BTreeMap<String, String>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + for<'de> k8s_openapi::serde::Deserialize<'de>
        + std::fmt::Debug,
{
    in_default::<K>(client)
        .await
        .iter()
        .map(|o| {
            let meta = o.meta();
            (
                format!("{kind}/{}", meta.name.clone().unwrap_or_default()),
                meta.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// resourceVersion of every object the operator touches.
async fn versions(client: &kube::Client) -> BTreeMap<String, String> {
    let mut all = versions_of::<Pod>(client, "pod").await;
    all.extend(versions_of::<Service>(client, "service").await);
    all.extend(versions_of::<Cache>(client, "cache").await);
    all
}

/// `steady server` with a fast simulated node, and the kubeconfig it wrote.
async fn start_server(dir: &Path) -> (Server, PathBuf) {
    let kubeconfig = dir.join("kubeconfig");
    let options = Options {
        args: vec!["--pod-start-delay".into(), "100ms".into()],
        ..Options::default()
    };
    let server = Server::start_with(&dir.join("data"), &kubeconfig, options).await;
    (server, kubeconfig)
}

/// `kubectl apply` a Cache manifest.
fn apply_cache(kubeconfig: &Path, dir: &Path, name: &str, replicas: i32) {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, cache_yaml(name, replicas, "memcached:1.6")).expect("write");
    let (ok, _, stderr) = kubectl(
        kubeconfig,
        &dir.join("kube-cache"),
        &["apply", "-f", file.to_str().expect("path")],
    );
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_operator_restarts_on_a_converged_world_without_writing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, kubeconfig) = start_server(dir.path()).await;
    let client = server.client().await;
    let mut operator = Operator::start(&kubeconfig, &[]);
    let first_metrics = operator.metrics_address().await;
    assert!(
        operator
            .wait_for("the Cache operator is running", WAIT)
            .await
    );
    apply_cache(&kubeconfig, dir.path(), "kv", 3);
    ready_cache(&client, "kv", 3).await;
    reconciled_and_idle(&first_metrics).await;
    operator.kill().await;
    // Nothing else writes to a converged world: pods are Running and Ready, the status
    // says so, and the only operator is dead.
    let converged = versions(&client).await;

    let mut restarted = Operator::start(&kubeconfig, &[]);
    let metrics = restarted.metrics_address().await;
    // The check means something only once the new operator has looked: its caches have
    // synced and it has reconciled the Cache, with nothing left queued or running.
    reconciled_and_idle(&metrics).await;
    assert_eq!(
        versions(&client).await,
        converged,
        "a restart on a converged world changed objects"
    );
    restarted.kill().await;
}

/// Wait until the operator serving metrics at `address` has finished at least one
/// reconcile and has nothing queued or running.
async fn reconciled_and_idle(address: &str) {
    eventually("the operator reconciled and went idle", || async {
        let sample = scrape(address).await?;
        let reconciled = sample.sum("controller_runtime_reconcile_total{") >= 1.0;
        let idle = sample.sum("workqueue_depth{") == 0.0
            && sample.sum("controller_runtime_active_workers{") == 0.0;
        (reconciled && idle).then_some(())
    })
    .await;
}

/// One scrape of a Prometheus text endpoint.
struct Sample(String);

impl Sample {
    /// The sum over every series whose line starts with `prefix` (a metric name and `{`).
    fn sum(&self, prefix: &str) -> f64 {
        self.0
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

/// `leader_election_master_status` of the operator serving metrics at `address`.
async fn leader_status(address: &str) -> f64 {
    let sample = scrape(address).await.expect("metrics are served");
    sample.sum("leader_election_master_status{")
}

/// GET http://`address`/metrics with a bare HTTP/1.0 request (the endpoint is plain HTTP).
async fn scrape(address: &str) -> Option<Sample> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    Some(Sample(body.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_one_operator_reconciles_and_the_survivor_takes_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, kubeconfig) = start_server(dir.path()).await;
    let client = server.client().await;
    let elect = [
        "--leader-elect",
        "--leader-elect-lease-duration",
        "3s",
        "--leader-elect-renew-deadline",
        "2s",
        "--leader-elect-retry-period",
        "500ms",
    ];
    let mut first = Operator::start(&kubeconfig, &elect);
    let first_metrics = first.metrics_address().await;
    assert!(
        first.wait_for("became leader", WAIT).await,
        "the first operator leads"
    );
    let mut second = Operator::start(&kubeconfig, &elect);
    let second_metrics = second.metrics_address().await;
    assert!(second.wait_for("waiting to become leader", WAIT).await);
    assert!(
        !second
            .wait_for("became leader", Duration::from_secs(4))
            .await,
        "never two leaders"
    );
    assert_eq!(
        leader_status(&first_metrics).await,
        1.0,
        "the leader says 1"
    );
    assert_eq!(
        leader_status(&second_metrics).await,
        0.0,
        "the follower says 0"
    );

    apply_cache(&kubeconfig, dir.path(), "ha", 2);
    let cache_dir = dir.path().join("kube-cache");
    ready_cache(&client, "ha", 2).await;

    first.kill().await;
    assert!(
        second
            .wait_for("became leader", Duration::from_secs(20))
            .await,
        "the survivor takes over after the lease expires"
    );
    let (ok, _, _) = kubectl(
        &kubeconfig,
        &cache_dir,
        &["scale", "cache/ha", "--replicas=3"],
    );
    assert!(ok);
    ready_cache(&client, "ha", 3).await;

    let exit = second.terminate().await;
    assert!(exit.success(), "SIGTERM is a clean shutdown: {exit:?}");
    let lease = Api::<Lease>::namespaced(client.clone(), "default")
        .get("steady-cache-operator")
        .await
        .expect("the Lease");
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(""),
        "released on the way out, so a successor need not wait it out"
    );
}

/// The least-privilege RBAC `steady manifests` ships is enough, and nothing more is
/// assumed: applied for real, the operator runs with its service account's own token
/// (RBAC enforced as on a cluster), elects itself leader and converges a Cache. A rule
/// missing from the manifests fails this test, not a user's first deploy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_runs_with_only_the_rbac_its_manifests_grant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, kubeconfig) = start_server(dir.path()).await;
    let client = server.client().await;
    let manifests = common::stdout_of(&mut common::steady(&["manifests"]));
    let file = dir.path().join("manifests.yaml");
    std::fs::write(&file, manifests).expect("write");
    let cache_dir = dir.path().join("kube-cache");
    let path = file.to_str().expect("path");
    let (ok, _, stderr) = kubectl(&kubeconfig, &cache_dir, &["apply", "-f", path]);
    assert!(ok, "{stderr}");
    let args = [
        "-n",
        "steady-system",
        "create",
        "token",
        "steady-cache-operator",
    ];
    let (ok, token, stderr) = kubectl(&kubeconfig, &cache_dir, &args);
    assert!(ok, "{stderr}");
    let admin = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    assert!(
        admin.contains(&server.token()),
        "the kubeconfig holds the admin token"
    );
    let as_operator = dir.path().join("operator-kubeconfig");
    std::fs::write(&as_operator, admin.replace(&server.token(), token.trim())).expect("write");
    // RBAC holds this identity: what the manifests do not grant is refused.
    let (ok, _, stderr) = kubectl(&as_operator, &cache_dir, &["get", "nodes"]);
    assert!(
        !ok && stderr.contains(
            "nodes is forbidden: User \"system:serviceaccount:steady-system:steady-cache-operator\""
        ),
        "{stderr}"
    );

    let mut operator = Operator::start(&as_operator, &["--leader-elect"]);
    assert!(
        operator.wait_for("became leader", WAIT).await,
        "the operator may keep its Lease"
    );
    apply_cache(&kubeconfig, dir.path(), "kv", 2);
    ready_cache(&client, "kv", 2).await;
    operator.kill().await;
}
