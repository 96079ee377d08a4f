//! The real kubectl (the machine image's, dispatching to 1.32 by the server's /version)
//! against a fresh `steady server`, with nothing but the kubeconfig the server writes.
//! Every step checks kubectl's printed output, not just its exit code.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::Server;

/// The longest any single kubectl command may take (it guards against hangs).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

struct Kubectl {
    kubeconfig: PathBuf,
    cache_dir: PathBuf,
}

struct Ran {
    stdout: String,
    stderr: String,
    success: bool,
}

impl From<std::process::Output> for Ran {
    fn from(output: std::process::Output) -> Ran {
        Ran {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            success: output.status.success(),
        }
    }
}

impl Ran {
    /// Stdout of a run that must have succeeded.
    fn succeeded(self, args: &[&str]) -> String {
        assert!(
            self.success,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self.stdout
    }
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command
            .args(args)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        command
    }

    fn try_run(&self, args: &[&str]) -> Ran {
        self.try_run_with_input(args, None)
    }

    /// Run kubectl, with `input` on stdin when given (for `-f -`), killed if it hangs.
    fn try_run_with_input(&self, args: &[&str], input: Option<&str>) -> Ran {
        let mut command = self.command(args);
        if input.is_some() {
            command.stdin(Stdio::piped());
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is on the machine image");
        if let Some(input) = input {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        }
        let (tx, rx) = mpsc::channel();
        let pid = child.id();
        std::thread::spawn(move || {
            if rx.recv_timeout(COMMAND_TIMEOUT).is_err() {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .arg(pid.to_string())
                    .status();
            }
        });
        let output = child.wait_with_output().expect("kubectl ran");
        let _ = tx.send(());
        Ran::from(output)
    }

    /// Run kubectl; it must succeed. Returns stdout.
    fn run(&self, args: &[&str]) -> String {
        self.try_run(args).succeeded(args)
    }

    /// `kubectl get KIND NAME -o jsonpath=PATH`, which must succeed.
    fn jsonpath(&self, kind: &str, name: &str, path: &str) -> String {
        self.run(&["get", kind, name, "-o", &format!("jsonpath={path}")])
    }

    /// Run kubectl with `input` on stdin (for `apply -f -`); it must succeed.
    fn run_with_input(&self, args: &[&str], input: &str) -> String {
        self.try_run_with_input(args, Some(input)).succeeded(args)
    }
}

/// Lines of a table, split on runs of spaces.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn assert_contains(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in:\n{haystack}"
    );
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.steady.dev
spec:
  group: example.steady.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer, minimum: 0, default: 1}
              color: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

const WIDGET: &str = r#"
apiVersion: example.steady.dev/v1
kind: Widget
metadata: {name: w1, labels: {tier: gold}}
spec: {color: red}
"#;

fn workloads(config_value: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: web, labels: {{app: web}}}}
spec:
  containers: [{{name: nginx, image: "nginx:1.27", ports: [{{containerPort: 80}}]}}]
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, labels: {{app: web}}}}
data: {{mode: "{config_value}"}}
"#
    )
}

async fn start(dir: &Path) -> (Server, Kubectl) {
    let server = Server::start(&dir.join("data"), &dir.join("kubeconfig")).await;
    let kubectl = Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache_dir: dir.join("kube-cache"),
    };
    (server, kubectl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovery_and_typed_create_commands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;

    let version = k.run(&["version"]);
    assert_contains(&version, "Server Version: v1.32");

    let resources = k.run(&["api-resources"]);
    let pods = rows(&resources)
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some("pods"))
        .expect("pods listed");
    assert_eq!(pods, ["pods", "po", "v1", "true", "Pod"]);
    assert_contains(&resources, "customresourcedefinitions");
    // The whole built-in API of 1.32, with kube's short names and verbs.
    let wide = rows(&k.run(&["api-resources", "-o", "wide"]));
    let row = |name: &str| {
        wide.iter()
            .find(|r| r.first().map(String::as_str) == Some(name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} listed"))
    };
    assert_eq!(
        row("statefulsets")[..5],
        ["statefulsets", "sts", "apps/v1", "true", "StatefulSet"]
    );
    assert_eq!(row("poddisruptionbudgets")[1..3], ["pdb", "policy/v1"]);
    assert_eq!(
        row("selfsubjectaccessreviews")[3..],
        ["SelfSubjectAccessReview", "create"]
    );

    // Typed create commands send protobuf bodies.
    assert_eq!(
        k.run(&["create", "namespace", "team"]).trim(),
        "namespace/team created"
    );
    assert_eq!(
        k.run(&[
            "create",
            "configmap",
            "cfg",
            "-n",
            "team",
            "--from-literal=a=1",
            "--from-literal=b=2"
        ])
        .trim(),
        "configmap/cfg created"
    );
    assert_eq!(
        k.run(&[
            "create",
            "secret",
            "generic",
            "creds",
            "-n",
            "team",
            "--from-literal=password=s3cret"
        ])
        .trim(),
        "secret/creds created"
    );
    assert_eq!(
        k.run(&["create", "serviceaccount", "bot", "-n", "team"])
            .trim(),
        "serviceaccount/bot created"
    );
    let data = k.run(&[
        "get",
        "configmap",
        "cfg",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.a},{.data.b}",
    ]);
    assert_eq!(data, "1,2");
    let secret = k.run(&[
        "get",
        "secret",
        "creds",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.password}",
    ]);
    assert_eq!(secret, "czNjcmV0", "base64 of s3cret");
    let table = rows(&k.run(&["get", "secrets", "-n", "team"]));
    assert_eq!(table[0], ["NAME", "TYPE", "DATA", "AGE"]);
    assert_eq!(&table[1][..3], ["creds", "Opaque", "1"]);
    let again = k.try_run(&["create", "namespace", "team"]);
    assert!(!again.success);
    assert_contains(&again.stderr, "AlreadyExists");
}

/// kubectl ≥ 1.30 discovers everything with two aggregated-discovery requests (`/api` and
/// `/apis`, v2) and no per-group-version ones; its typed `create` of workloads and RBAC
/// sends protobuf bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_aggregated_discovery_and_typed_workload_creates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;

    let ran = k.try_run(&["api-resources", "-v=8"]);
    assert!(ran.success, "api-resources failed: {}", ran.stderr);
    assert_contains(
        &ran.stderr,
        "Content-Type: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    );
    let requested: Vec<&str> = ran
        .stderr
        .lines()
        .filter_map(|l| l.split_once("] GET https://").map(|(_, url)| url))
        .filter_map(|url| url.split_once('/').map(|(_, path)| path))
        .collect();
    assert!(
        requested
            .iter()
            .all(|p| p.starts_with("api?") || p.starts_with("apis?")),
        "only aggregated discovery requests: {requested:?}"
    );
    let deployments = rows(&ran.stdout)
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some("deployments"))
        .expect("deployments listed");
    assert_eq!(
        deployments,
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );

    let created = [
        (
            vec![
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=2",
            ],
            "deployment.apps/web created",
        ),
        (
            vec![
                "create",
                "role",
                "reader",
                "--verb=get,list",
                "--resource=pods",
            ],
            "role.rbac.authorization.k8s.io/reader created",
        ),
        (
            vec![
                "create",
                "rolebinding",
                "read",
                "--role=reader",
                "--serviceaccount=default:bot",
            ],
            "rolebinding.rbac.authorization.k8s.io/read created",
        ),
        (
            vec![
                "create",
                "clusterrole",
                "node-reader",
                "--verb=get",
                "--resource=nodes",
            ],
            "clusterrole.rbac.authorization.k8s.io/node-reader created",
        ),
        (
            vec![
                "create",
                "clusterrolebinding",
                "node-read",
                "--clusterrole=node-reader",
                "--user=alice",
            ],
            "clusterrolebinding.rbac.authorization.k8s.io/node-read created",
        ),
    ];
    for (args, printed) in created {
        assert_eq!(k.run(&args).trim(), printed);
    }
    assert_eq!(
        k.jsonpath(
            "deployment",
            "web",
            "{.spec.replicas} {.spec.template.spec.containers[0].image} {.spec.selector.matchLabels.app}"
        ),
        "2 nginx web"
    );
    assert_eq!(
        k.jsonpath("role", "reader", "{.rules[0].verbs} {.rules[0].resources}"),
        r#"["get","list"] ["pods"]"#
    );
    assert_eq!(
        k.jsonpath(
            "rolebinding",
            "read",
            "{.subjects[0].kind}/{.subjects[0].name} {.roleRef.name}"
        ),
        "ServiceAccount/bot reader"
    );
    assert_eq!(
        k.jsonpath("clusterrole", "node-reader", "{.rules[0].resources}"),
        r#"["nodes"]"#
    );
    assert_eq!(
        k.jsonpath(
            "clusterrolebinding",
            "node-read",
            "{.subjects[0].kind}/{.subjects[0].name} {.roleRef.kind}"
        ),
        "User/alice ClusterRole"
    );
}

/// `kubectl auth` sends its reviews as protobuf, and so do `create job|cronjob|token`;
/// the administrator may do anything, as `system:masters` on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_whoami_and_typed_job_and_token_creates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;

    assert_eq!(
        k.run(&["auth", "can-i", "create", "deployments"]).trim(),
        "yes"
    );
    assert_eq!(
        k.run(&[
            "auth",
            "can-i",
            "get",
            "pods",
            "--subresource=log",
            "-n",
            "kube-system"
        ])
        .trim(),
        "yes"
    );
    assert_eq!(k.run(&["auth", "can-i", "get", "/logs"]).trim(), "yes");
    let rules = rows(&k.run(&["auth", "can-i", "--list"]));
    assert_eq!(
        rules[0],
        [
            "Resources",
            "Non-Resource",
            "URLs",
            "Resource",
            "Names",
            "Verbs"
        ]
    );
    assert_eq!(rules[1], ["*.*", "[]", "[]", "[*]"]);
    let whoami = rows(&k.run(&["auth", "whoami"]));
    assert_eq!(whoami[1], ["Username", "kubernetes-admin"]);

    assert_eq!(
        k.run(&["create", "job", "j", "--image=busybox"]).trim(),
        "job.batch/j created"
    );
    assert_eq!(
        k.run(&[
            "create",
            "cronjob",
            "c",
            "--image=busybox",
            "--schedule=*/1 * * * *"
        ])
        .trim(),
        "cronjob.batch/c created"
    );
    assert_eq!(
        k.jsonpath(
            "job",
            "j",
            "{.spec.template.spec.containers[0].name} {.spec.template.spec.containers[0].image} {.spec.template.spec.restartPolicy}"
        ),
        "j busybox Never"
    );
    let job_template = ".spec.jobTemplate.spec.template.spec";
    assert_eq!(
        k.jsonpath(
            "cronjob",
            "c",
            &format!(
                "{{.spec.schedule}}|{{.spec.jobTemplate.metadata.name}} {{{job_template}.containers[0].image}} {{{job_template}.restartPolicy}}"
            )
        ),
        "*/1 * * * *|c busybox OnFailure"
    );

    // The token kubectl prints is one the server then authenticates as the service account.
    let token = k.run(&["create", "token", "default"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let review = format!(
        "{{\"apiVersion\": \"authentication.k8s.io/v1\", \"kind\": \"TokenReview\", \"spec\": {{\"token\": \"{token}\"}}}}"
    );
    assert_eq!(
        k.run_with_input(
            &[
                "create",
                "-f",
                "-",
                "-o",
                "jsonpath={.status.authenticated} {.status.user.username}"
            ],
            &review
        ),
        "true system:serviceaccount:default:default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_patch_scale_and_delete() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;

    // apply: a CRD, a custom resource of it, a pod, a service, a configmap.
    assert_contains(
        &k.run_with_input(&["apply", "-f", "-"], CRD),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.steady.dev created",
    );
    assert_contains(
        &k.run_with_input(&["apply", "-f", "-"], WIDGET),
        "widget.example.steady.dev/w1 created",
    );
    let applied = k.run_with_input(&["apply", "-f", "-"], &workloads("fast"));
    assert_contains(&applied, "pod/web created");
    assert_contains(&applied, "service/web created");
    assert_contains(&applied, "configmap/settings created");
    // Applying again with a change patches; what did not change stays unchanged.
    let reapplied = k.run_with_input(&["apply", "-f", "-"], &workloads("safe"));
    assert_contains(&reapplied, "pod/web unchanged");
    assert_contains(&reapplied, "configmap/settings configured");
    assert_eq!(k.jsonpath("cm", "settings", "{.data.mode}"), "safe");

    // The simulated node runs the pod.
    assert_eq!(
        k.run(&["wait", "--for=condition=Ready", "pod/web", "--timeout=30s"])
            .trim(),
        "pod/web condition met"
    );
    let pods = rows(&k.run(&["get", "pods"]));
    assert_eq!(pods[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert_eq!(&pods[1][..4], ["web", "1/1", "Running", "0"]);
    let wide = rows(&k.run(&["get", "pods", "-o", "wide"]));
    assert_eq!(&wide[0][5..7], ["IP", "NODE"]);
    assert_eq!(wide[1][6], "steady-node");
    let services = rows(&k.run(&["get", "services"]));
    assert_eq!(
        services[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    // `kubernetes` (the API server's own Service, present from the start) sorts first.
    assert_eq!(
        services[1][..5],
        ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    );
    assert_eq!(services[2][0], "web");
    assert_eq!(services[2][1], "ClusterIP");
    assert_eq!(services[2][4], "80/TCP");
    let svc_wide = k.run(&["get", "service", "web", "-o", "wide"]);
    assert_contains(&svc_wide, "app=web");
    let nodes = rows(&k.run(&["get", "nodes"]));
    assert_eq!(&nodes[1][..2], ["steady-node", "Ready"]);
    let namespaces = rows(&k.run(&["get", "namespaces"]));
    assert!(namespaces.iter().any(|r| r[..2] == ["default", "Active"]));
    let yaml = k.run(&["get", "pod", "web", "-o", "yaml"]);
    assert_contains(&yaml, "phase: Running");
    assert_contains(&yaml, "nodeName: steady-node");
    let json: serde_json::Value =
        serde_json::from_str(&k.run(&["get", "configmap", "settings", "-o", "json"]))
            .expect("json");
    assert_eq!(json["data"]["mode"], "safe");
    assert_contains(&k.run(&["get", "configmaps", "--show-labels"]), "app=web");
    let selected = rows(&k.run(&["get", "configmaps", "-l", "app=web", "-o", "name"]));
    assert_eq!(selected, [["configmap/settings"]]);

    // Custom resources print their additionalPrinterColumns.
    let widgets = rows(&k.run(&["get", "widgets"]));
    assert_eq!(widgets[0], ["NAME", "REPLICAS", "COLOR", "AGE"]);
    assert_eq!(&widgets[1][..3], ["w1", "1", "red"]);

    // describe shows the pod's lifecycle events.
    let described = k.run(&["describe", "pod", "web"]);
    assert_contains(&described, "Node:");
    assert_contains(&described, "steady-node");
    assert_contains(&described, "Scheduled");
    assert_contains(&described, "Started container nginx");
    let events = k.run(&["get", "events"]);
    assert_contains(&events, "pod/web");

    // label, annotate, patch (three types), scale.
    let merge_extra = [
        "patch",
        "configmap",
        "settings",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"extra":"1"}}"#,
    ];
    let remove_extra = r#"[{"op":"remove","path":"/data/extra"}]"#;
    let label_release = r#"{"metadata":{"labels":{"release":"1"}}}"#;
    for (args, answer) in [
        (
            &["label", "configmap", "settings", "env=dev"][..],
            "configmap/settings labeled",
        ),
        (
            &["annotate", "configmap", "settings", "owner=team-a"],
            "configmap/settings annotated",
        ),
        (&merge_extra, "configmap/settings patched"),
        // The same patch again changes nothing.
        (&merge_extra, "configmap/settings patched (no change)"),
        (
            &[
                "patch",
                "configmap",
                "settings",
                "--type",
                "json",
                "-p",
                remove_extra,
            ],
            "configmap/settings patched",
        ),
        (
            &["patch", "pod", "web", "-p", label_release],
            "pod/web patched",
        ),
    ] {
        assert_eq!(k.run(args).trim(), answer, "kubectl {args:?}");
    }
    assert_eq!(k.jsonpath("pod", "web", "{.metadata.labels.release}"), "1");
    let strategic_cr = k.try_run(&[
        "patch",
        "widget",
        "w1",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ]);
    assert!(
        !strategic_cr.success,
        "strategic merge on a custom resource is refused"
    );
    assert_contains(&strategic_cr.stderr, "strategic-merge-patch");
    assert_eq!(
        k.run(&["scale", "widget/w1", "--replicas=3"]).trim(),
        "widget.example.steady.dev/w1 scaled"
    );
    assert_eq!(k.jsonpath("widget", "w1", "{.spec.replicas}"), "3");
    // --sort-by orders by a field, not by name.
    k.run(&["create", "configmap", "zeta", "--from-literal=rank=1"]);
    k.run(&["create", "configmap", "alpha", "--from-literal=rank=2"]);
    let sorted = rows(&k.run(&[
        "get",
        "configmaps",
        "-l",
        "!app",
        "--sort-by=.data.rank",
        "-o",
        "name",
    ]));
    // kube-root-ca.crt (in every namespace, as on a cluster) has no rank: kubectl sorts
    // it first.
    assert_eq!(
        sorted,
        [
            ["configmap/kube-root-ca.crt"],
            ["configmap/zeta"],
            ["configmap/alpha"]
        ]
    );

    // Logs: a clear error instead of a hang.
    let logs = k.try_run(&["logs", "web"]);
    assert!(!logs.success);
    assert_contains(&logs.stderr, "simulated node runs no containers");

    // delete: the pod's graceful deletion completes; wait --for=delete returns.
    k.run(&["delete", "pod", "web", "--wait=false"]);
    let waited = k.run(&["wait", "--for=delete", "pod/web", "--timeout=30s"]);
    assert!(
        waited.is_empty() || waited.contains("condition met"),
        "{waited}"
    );
    let gone = k.try_run(&["get", "pod", "web"]);
    assert_contains(&gone.stderr, "NotFound");
    assert_eq!(
        k.run(&["delete", "service", "web"]).trim(),
        "service \"web\" deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_namespace_and_watch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    k.run(&["create", "namespace", "doomed"]);
    k.run(&[
        "create",
        "configmap",
        "c",
        "-n",
        "doomed",
        "--from-literal=a=b",
    ]);
    k.run(&["run", "p", "-n", "doomed", "--image=busybox:1.36"]);
    k.run(&[
        "wait",
        "--for=condition=Ready",
        "-n",
        "doomed",
        "pod/p",
        "--timeout=30s",
    ]);
    assert_eq!(
        k.run(&["delete", "namespace", "doomed"]).trim(),
        "namespace \"doomed\" deleted"
    );
    let gone = k.try_run(&["get", "namespace", "doomed"]);
    assert_contains(&gone.stderr, "namespaces \"doomed\" not found");
    let leftovers = k.run(&["get", "configmaps,pods", "-n", "doomed", "-o", "name"]);
    assert!(leftovers.trim().is_empty(), "contents must go: {leftovers}");

    // get -w prints the change made while it watches.
    k.run(&["create", "configmap", "watched", "--from-literal=a=1"]);
    let mut watch = k
        .command(&[
            "get",
            "configmaps",
            "--field-selector=metadata.name=watched",
            "--watch",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = watch.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let next_line = || {
        lines_rx
            .recv_timeout(COMMAND_TIMEOUT)
            .expect("kubectl get -w printed a line")
    };
    assert_eq!(rows(&next_line())[0], ["EVENT", "NAME", "DATA", "AGE"]);
    let initial = rows(&next_line());
    assert_eq!(&initial[0][..3], ["ADDED", "watched", "1"]);
    k.run(&[
        "patch",
        "configmap",
        "watched",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"b":"2"}}"#,
    ]);
    let modified = rows(&next_line());
    assert_eq!(&modified[0][..3], ["MODIFIED", "watched", "2"]);
    k.run(&["delete", "configmap", "watched"]);
    let deleted = rows(&next_line());
    assert_eq!(&deleted[0][..2], ["DELETED", "watched"]);
    let _ = watch.kill();
    let _ = watch.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_manifests_pass_kubectl_client_side_dry_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let manifests = Command::new(env!("CARGO_BIN_EXE_steady"))
        .arg("manifests")
        .output()
        .expect("steady manifests");
    assert!(manifests.status.success());
    let yaml = String::from_utf8(manifests.stdout).expect("utf-8");
    let applied = k.run_with_input(&["apply", "--dry-run=client", "-f", "-"], &yaml);
    for line in [
        "customresourcedefinition.apiextensions.k8s.io/caches.steady.dev created (dry run)",
        "namespace/steady-system created (dry run)",
        "serviceaccount/steady-cache-operator created (dry run)",
        "clusterrole.rbac.authorization.k8s.io/steady-cache-operator created (dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/steady-cache-operator created (dry run)",
        "deployment.apps/steady-cache-operator created (dry run)",
    ] {
        assert_contains(&applied, line);
    }
}

fn settings(data: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa}}\ndata: {{{data}}}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_conflicts_and_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let file = dir.path().join("ssa.yaml");
    let file_arg = file.to_str().expect("utf-8 path");
    let apply = |data: &str, extra: &[&str]| {
        std::fs::write(&file, settings(data)).expect("write manifest");
        let mut args = vec!["apply", "--server-side", "-f", file_arg];
        args.extend_from_slice(extra);
        k.try_run(&args)
    };

    let first = apply("mode: fast, extra: x", &[]);
    assert!(first.success, "{}", first.stderr);
    assert_contains(&first.stdout, "configmap/ssa serverside-applied");
    assert!(apply("mode: fast", &[]).success);
    let data = k.run(&["get", "configmap", "ssa", "-o", "jsonpath={.data}"]);
    assert_eq!(data, r#"{"mode":"fast"}"#, "the dropped field is removed");

    let conflict = apply("mode: slow", &["--field-manager=other"]);
    assert!(!conflict.success, "{}", conflict.stdout);
    assert_contains(
        &conflict.stderr,
        r#"Apply failed with 1 conflict: conflict with "kubectl": .data.mode"#,
    );
    assert_contains(&conflict.stderr, "--force-conflicts");

    let forced = apply(
        "mode: slow",
        &["--field-manager=other", "--force-conflicts"],
    );
    assert!(forced.success, "{}", forced.stderr);
    assert_contains(&forced.stdout, "configmap/ssa serverside-applied");
    let shown = k.run(&[
        "get",
        "configmap",
        "ssa",
        "-o",
        "yaml",
        "--show-managed-fields",
    ]);
    assert_contains(&shown, "mode: slow");
    assert_contains(&shown, "manager: other");
    assert_contains(&shown, "operation: Apply");
    assert_contains(&shown, "f:mode: {}");
}

/// A DNS server's container listens on port 53 twice, over UDP and TCP: server-side apply
/// keys container and Service ports by port and protocol (as kube's `+listMapKey` tags
/// say), a port that leaves `protocol` out means TCP, and dropping one port from the
/// applied configuration removes that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_keys_ports_by_port_and_protocol() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let apply = |ports: &str| {
        let manifest = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: dns}}\nspec:\n  \
             selector: {{matchLabels: {{app: dns}}}}\n  template:\n    \
             metadata: {{labels: {{app: dns}}}}\n    spec:\n      containers:\n      \
             - name: dns\n        image: coredns\n        ports: [{ports}]\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {{name: dns}}\nspec:\n  \
             selector: {{app: dns}}\n  ports: [{{port: 53, protocol: UDP, name: dns}}, \
             {{port: 53, name: dns-tcp}}]\n"
        );
        k.try_run_with_input(&["apply", "--server-side", "-f", "-"], Some(&manifest))
    };
    let ports = |resource: &str, path: &str| {
        k.run(&[
            "get",
            resource,
            "dns",
            "-o",
            &format!("jsonpath={{range {path}[*]}}{{.name}}={{.protocol}} {{end}}"),
        ])
    };

    let both =
        apply("{containerPort: 53, protocol: UDP, name: dns}, {containerPort: 53, name: dns-tcp}");
    assert!(both.success, "{}", both.stderr);
    let deployment_ports = ".spec.template.spec.containers[0].ports";
    assert_eq!(
        ports("deployment", deployment_ports),
        "dns=UDP dns-tcp=TCP "
    );
    assert_eq!(ports("service", ".spec.ports"), "dns=UDP dns-tcp=TCP ");
    let shown = k.run(&[
        "get",
        "deployment",
        "dns",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    for key in [
        r#"k:{\"containerPort\":53,\"protocol\":\"TCP\"}"#,
        r#"k:{\"containerPort\":53,\"protocol\":\"UDP\"}"#,
    ] {
        assert_contains(&shown, key);
    }

    let udp_only = apply("{containerPort: 53, protocol: UDP, name: dns}");
    assert!(udp_only.success, "{}", udp_only.stderr);
    assert_eq!(ports("deployment", deployment_ports), "dns=UDP ");
}

/// A pod's spec is fixed once it exists, but for what kube-apiserver lets an update
/// change: `kubectl set image` works, a patch of a port is refused as on a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_pod_spec_updates_are_limited_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    k.run(&["run", "web", "--image=nginx:1.27", "--port=80"]);
    let set = k.try_run(&["set", "image", "pod/web", "web=nginx:1.28"]);
    assert!(set.success, "{}", set.stderr);
    let image = k.run(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.spec.containers[0].image}",
    ]);
    assert_eq!(image, "nginx:1.28");
    let labelled = k.try_run(&["label", "pod", "web", "tier=front"]);
    assert!(labelled.success, "{}", labelled.stderr);

    let port = k.try_run(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"containers":[{"name":"web","ports":[{"containerPort":81}]}]}}"#,
    ]);
    assert!(!port.success, "{}", port.stdout);
    assert_contains(
        &port.stderr,
        "The Pod \"web\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`",
    );
    assert_contains(&port.stderr, "spec.containers[0].ports");
    let kept = k.run(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.spec.containers[0].ports[*].containerPort}",
    ]);
    assert_eq!(kept, "80", "the refused patch changed nothing");
}

/// What kube-apiserver never lets an update change, refused with its messages: a
/// Deployment's selector, a StatefulSet's volume claim templates, a Service's cluster IP,
/// a claim's access modes, an immutable ConfigMap's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_immutable_fields_are_refused_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let apply = |manifest: String| k.try_run_with_input(&["apply", "-f", "-"], Some(&manifest));
    let deployment = |app: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n  \
             selector: {{matchLabels: {{app: {app}}}}}\n  template:\n    \
             metadata: {{labels: {{app: {app}}}}}\n    \
             spec: {{containers: [{{name: web, image: nginx}}]}}\n"
        )
    };
    assert!(apply(deployment("a")).success);
    let relabelled = apply(deployment("b"));
    assert!(!relabelled.success, "{}", relabelled.stdout);
    assert_contains(
        &relabelled.stderr,
        r#"Deployment.apps "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"b"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#,
    );

    let statefulset = |size: &str| {
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: db}}\nspec:\n  \
             serviceName: db\n  selector: {{matchLabels: {{app: db}}}}\n  template:\n    \
             metadata: {{labels: {{app: db}}}}\n    \
             spec: {{containers: [{{name: db, image: postgres}}]}}\n  \
             volumeClaimTemplates:\n  - metadata: {{name: data}}\n    \
             spec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: {size}}}}}}}\n"
        )
    };
    assert!(apply(statefulset("1Gi")).success);
    let scaled = k.try_run(&["scale", "statefulset", "db", "--replicas=2"]);
    assert!(scaled.success, "{}", scaled.stderr);
    let grown = apply(statefulset("2Gi"));
    assert!(!grown.success, "{}", grown.stdout);
    assert_contains(
        &grown.stderr,
        "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    );

    let service = |cluster_ip: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: db}}\nspec:\n  \
             {cluster_ip}ports: [{{port: 5432}}]\n  selector: {{app: db}}\n"
        )
    };
    assert!(apply(service("")).success);
    let headless = apply(service("clusterIP: None\n  "));
    assert!(!headless.success, "{}", headless.stdout);
    assert_contains(
        &headless.stderr,
        r#"The Service "db" is invalid: spec.clusterIPs[0]: Invalid value: []string{"None"}: may not change once set"#,
    );
    let kept = k.run(&["get", "service", "db", "-o", "jsonpath={.spec.clusterIP}"]);
    // Drawn from kube's default service range, 10.96.0.0/12.
    let ip: std::net::Ipv4Addr = kept.parse().expect("an IPv4 cluster IP");
    assert_eq!(u32::from(ip) >> 20, 0x0A6, "{kept}");
    let created_headless = k.try_run(&[
        "create",
        "service",
        "clusterip",
        "db-headless",
        "--clusterip=None",
    ]);
    assert!(created_headless.success, "{}", created_headless.stderr);
    let ips = k.run(&[
        "get",
        "service",
        "db-headless",
        "-o",
        "jsonpath={.spec.clusterIPs}",
    ]);
    assert_eq!(
        ips, r#"["None"]"#,
        "a headless Service lists its cluster IP too"
    );

    // A claim no class provisions stays Pending: its whole spec is fixed.
    let claim = |mode: &str| {
        format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec:\n  \
             storageClassName: \"\"\n  accessModes: [{mode}]\n  \
             resources: {{requests: {{storage: 1Gi}}}}\n"
        )
    };
    assert!(apply(claim("ReadWriteOnce")).success);
    let shared = apply(claim("ReadWriteMany"));
    assert!(!shared.success, "{}", shared.stdout);
    assert_contains(
        &shared.stderr,
        "The PersistentVolumeClaim \"data\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    );

    let config = |value: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: fixed}}\nimmutable: true\ndata: {{k: {value}}}\n"
        )
    };
    assert!(apply(config("v1")).success);
    let edited = apply(config("v2"));
    assert!(!edited.success, "{}", edited.stdout);
    assert_contains(
        &edited.stderr,
        "ConfigMap \"fixed\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
    );
    assert_eq!(
        k.run(&["get", "configmap", "fixed", "-o", "jsonpath={.data.k}"]),
        "v1"
    );
}

/// Objects kube-apiserver refuses as invalid are refused here, every problem named: the
/// pod an operator got wrong, a Deployment with negative replicas and no image, a Service
/// port out of range, a CronJob's schedule. Nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_invalid_builtin_objects_are_refused_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let create = |manifest: &str| k.try_run_with_input(&["create", "-f", "-"], Some(manifest));
    let pod = create(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n  \
         - name: Web_Server\n    image: nginx\n    \
         ports: [{containerPort: 80, name: this-port-name-is-too-long}]\n  \
         - name: Web_Server\n",
    );
    assert!(!pod.success, "{}", pod.stdout);
    for problem in [
        "The Pod \"bad\" is invalid: ",
        "spec.containers[0].name: Invalid value: \"Web_Server\": a lowercase RFC 1123 label must consist of",
        "spec.containers[0].ports[0].name: Invalid value: \"this-port-name-is-too-long\": must be no more than 15 characters",
        "spec.containers[1].name: Duplicate value: \"Web_Server\"",
        "spec.containers[1].image: Required value",
    ] {
        assert_contains(&pod.stderr, problem);
    }
    let deployment = create(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  replicas: -1\n  \
         selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    \
         spec: {containers: [{name: x}]}\n",
    );
    assert!(!deployment.success, "{}", deployment.stdout);
    assert_contains(
        &deployment.stderr,
        "spec.template.spec.containers[0].image: Required value",
    );
    assert_contains(
        &deployment.stderr,
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
    );
    let service = create(
        "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec:\n  ports: [{port: 99999}]\n",
    );
    assert!(!service.success, "{}", service.stdout);
    // The target port defaults to the port, and is refused with it.
    for field in ["port", "targetPort"] {
        assert_contains(
            &service.stderr,
            &format!(
                "spec.ports[0].{field}: Invalid value: 99999: must be between 1 and 65535, inclusive"
            ),
        );
    }
    // kubectl's typed `create cronjob` sends the schedule as it was typed.
    let cron_job = k.try_run(&[
        "create",
        "cronjob",
        "bad",
        "--image=busybox",
        "--schedule=*/5 * *",
    ]);
    assert!(!cron_job.success, "{}", cron_job.stdout);
    assert_contains(
        &cron_job.stderr,
        "CronJob.batch \"bad\" is invalid: spec.schedule: Invalid value: \"*/5 * *\": expected exactly 5 fields, found 3: [*/5 * *]",
    );
    // What operators write to place and harden pods: an anti-affinity term needs its
    // topology key, a toleration that exists takes no value, and a container that may
    // not escalate cannot be privileged.
    let placed = create(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  \
         selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    \
         spec:\n      containers: [{name: x, image: app:1, securityContext: \
         {allowPrivilegeEscalation: false, privileged: true}}]\n      \
         tolerations: [{key: dedicated, operator: Exists, value: db}]\n      \
         affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
         [{labelSelector: {matchLabels: {a: b}}}]}}\n",
    );
    assert!(!placed.success, "{}", placed.stdout);
    let spec = "spec.template.spec";
    for problem in [
        format!("{spec}.containers[0].securityContext: Invalid value: core.SecurityContext{{"),
        "cannot set `allowPrivilegeEscalation` to false and `privileged` to true".to_string(),
        format!(
            "{spec}.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty"
        ),
        format!(
            "{spec}.tolerations[0].operator: Invalid value: core.Toleration{{Key:\"dedicated\", Operator:\"Exists\", Value:\"db\""
        ),
    ] {
        assert_contains(&placed.stderr, &problem);
    }
    let affinity = create(
        "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec:\n  ports: [{port: 80}]\n  \
         sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}\n  \
         externalIPs: [127.0.0.1]\n",
    );
    assert!(!affinity.success, "{}", affinity.stdout);
    for problem in [
        "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less than 86400",
        "spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
    ] {
        assert_contains(&affinity.stderr, problem);
    }
    let listed = k.run(&["get", "pods,deployments,services,cronjobs", "-o", "name"]);
    assert!(!listed.contains("bad"), "{listed}");
}

/// Workloads read back through kubectl carry kube's pod-spec defaults (a probe's timings,
/// a volume's file mode, claim templates as whole claims). Applying the same Deployment
/// again is `unchanged`; the same StatefulSet is `configured`, as on a cluster (its claim
/// templates are a list kubectl replaces whole, and the live one has the defaults), yet
/// nothing is written. A probe that names no handler is refused with kube's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_templates_read_back_defaulted_and_reapply_as_on_a_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let workload = |kind: &str, probe: &str, extra: &str| {
        format!(
            "apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: db}}\nspec:\n  \
             selector: {{matchLabels: {{app: db}}}}\n  template:\n    \
             metadata: {{labels: {{app: db}}}}\n    spec:\n      containers:\n      \
             - name: db\n        image: postgres:17\n        readinessProbe: {probe}\n      \
             volumes: [{{name: conf, configMap: {{name: db}}}}]\n{extra}"
        )
    };
    let probe = "{tcpSocket: {port: 5432}}";
    let deployment = workload("Deployment", probe, "");
    let claims = "  serviceName: db\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    \
                  spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
    let stateful_set = workload("StatefulSet", probe, claims);
    for manifest in [&deployment, &stateful_set] {
        k.run_with_input(&["apply", "-f", "-"], manifest);
    }
    let template = ".spec.template.spec";
    let defaults = format!(
        "{{{template}.containers[0].readinessProbe.periodSeconds}} {{{template}.volumes[0].configMap.defaultMode}}"
    );
    assert_eq!(k.jsonpath("deployment", "db", &defaults), "10 420");
    assert_eq!(
        k.jsonpath(
            "statefulset",
            "db",
            &format!(
                "{defaults} {{.spec.volumeClaimTemplates[0].kind}} {{.spec.volumeClaimTemplates[0].spec.volumeMode}}"
            )
        ),
        "10 420 PersistentVolumeClaim Filesystem"
    );
    assert_contains(
        &k.run_with_input(&["apply", "-f", "-"], &deployment),
        "deployment.apps/db unchanged",
    );
    let version = "{.metadata.resourceVersion}/{.metadata.generation}";
    let before = k.jsonpath("statefulset", "db", version);
    assert_contains(
        &k.run_with_input(&["apply", "-f", "-"], &stateful_set),
        "statefulset.apps/db configured",
    );
    assert_eq!(k.jsonpath("statefulset", "db", version), before);
    let refused = k.try_run_with_input(
        &["apply", "-f", "-"],
        Some(&workload("Deployment", "{initialDelaySeconds: 5}", "")),
    );
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(
        &refused.stderr,
        "spec.template.spec.containers[0].readinessProbe: Required value: must specify a handler type",
    );
}

/// A CRD's `x-kubernetes-validations` rules hold what kubectl applies, as on a cluster: a
/// custom resource breaking one is refused with the rule's message, and a transition rule
/// keeps a field immutable; its `selectableFields` serve `--field-selector`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_crd_validation_rules_refuse_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
        metadata: {name: databases.example.steady.dev}\nspec:\n  group: example.steady.dev\n  \
        scope: Namespaced\n  names: {plural: databases, kind: Database}\n  versions:\n  \
        - name: v1\n    served: true\n    storage: true\n    \
        selectableFields: [{jsonPath: .spec.storageClass}]\n    schema:\n      openAPIV3Schema:\n        \
        type: object\n        properties:\n          spec:\n            type: object\n            \
        x-kubernetes-validations:\n            \
        - {rule: 'self.minReplicas <= self.maxReplicas', message: 'minReplicas must not exceed maxReplicas'}\n            \
        - {rule: 'self.storageClass == oldSelf.storageClass', message: 'storageClass is immutable'}\n            \
        properties:\n              minReplicas: {type: integer}\n              \
        maxReplicas: {type: integer}\n              storageClass: {type: string}\n";
    let created = k.try_run_with_input(&["apply", "-f", "-"], Some(crd));
    assert!(created.success, "{}", created.stderr);
    let database = |min: u32, class: &str| {
        format!(
            "apiVersion: example.steady.dev/v1\nkind: Database\nmetadata: {{name: db}}\n\
             spec: {{minReplicas: {min}, maxReplicas: 3, storageClass: {class}}}\n"
        )
    };
    let apply = |manifest: String| k.try_run_with_input(&["apply", "-f", "-"], Some(&manifest));
    let refused = apply(database(5, "fast"));
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(
        &refused.stderr,
        "spec: Invalid value: \"object\": minReplicas must not exceed maxReplicas",
    );
    let created = apply(database(1, "fast"));
    assert!(created.success, "{}", created.stderr);
    let changed = apply(database(1, "slow"));
    assert!(!changed.success, "{}", changed.stdout);
    assert_contains(&changed.stderr, "storageClass is immutable");
    assert_eq!(
        k.run(&[
            "get",
            "database",
            "db",
            "-o",
            "jsonpath={.spec.storageClass}"
        ]),
        "fast"
    );
    // The CRD's selectable field serves `--field-selector`.
    let selected = |selector: &str| {
        k.run(&[
            "get",
            "databases",
            "--field-selector",
            selector,
            "-o",
            "name",
        ])
        .trim()
        .to_string()
    };
    assert_eq!(
        selected("spec.storageClass=fast"),
        "database.example.steady.dev/db"
    );
    assert_eq!(selected("spec.storageClass=slow"), "");
    // A rule naming a field the schema lacks keeps the CRD out (a rule on the spec
    // written as if it were at the root, a common first mistake with the marker).
    let misplaced = crd
        .replace("databases", "caches")
        .replace("Database", "Cache")
        .replace(
            "self.minReplicas <= self.maxReplicas",
            "self.spec.minReplicas <= self.maxReplicas",
        );
    let refused = k.try_run_with_input(&["apply", "-f", "-"], Some(&misplaced));
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(&refused.stderr, "undefined field 'spec'");
    // So does a rule that can cost more than kube allows: a duplicate check over strings
    // of any length (openshift/api#1826). Bounding the strings lets the CRD in.
    let costly = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
        metadata: {name: balancers.example.steady.dev}\nspec:\n  group: example.steady.dev\n  \
        scope: Namespaced\n  names: {plural: balancers, kind: Balancer}\n  versions:\n  \
        - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        \
        type: object\n        properties:\n          spec:\n            type: object\n            \
        properties:\n              eips:\n                type: array\n                \
        maxItems: 10\n                items: {type: string}\n                \
        x-kubernetes-validations:\n                \
        - {rule: 'self.all(x, self.exists_one(y, x == y))', message: 'eips must be unique'}\n";
    let refused = k.try_run_with_input(&["apply", "-f", "-"], Some(costly));
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(
        &refused.stderr,
        "spec.validation.openAPIV3Schema.properties[spec].properties[eips].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 3.1x",
    );
    let bounded = costly.replace(
        "items: {type: string}",
        "items: {type: string, maxLength: 63}",
    );
    let created = k.try_run_with_input(&["apply", "-f", "-"], Some(&bounded));
    assert!(created.success, "{}", created.stderr);
}

/// The ValidatingAdmissionPolicy of Kubernetes' own documentation, applied with kubectl,
/// refuses what it refuses on a cluster with the same words (kubectl's `is invalid: :`
/// included); bound for `Warn` instead, it admits with kubectl's `Warning:` line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_validating_admission_policies_refuse_and_warn_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let policy = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
        metadata: {name: demo-policy.example.com}\nspec:\n  failurePolicy: Fail\n  \
        matchConstraints:\n    resourceRules:\n    - apiGroups: [apps]\n      \
        apiVersions: [v1]\n      operations: [CREATE, UPDATE]\n      resources: [deployments]\n  \
        validations:\n  - expression: object.spec.replicas <= 5\n";
    let binding = |actions: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
            metadata: {{name: demo-binding-test.example.com}}\nspec:\n  \
            policyName: demo-policy.example.com\n  validationActions: [{actions}]\n"
        )
    };
    k.run_with_input(&["apply", "-f", "-"], policy);
    k.run_with_input(&["apply", "-f", "-"], &binding("Deny"));
    let listed = rows(&k.run(&[
        "get",
        "validatingadmissionpolicies,validatingadmissionpolicybindings",
    ]));
    assert_eq!(
        listed[0][..3],
        ["NAME", "VALIDATIONS", "PARAMKIND"],
        "{listed:?}"
    );
    assert_eq!(
        listed[1][..3],
        [
            "validatingadmissionpolicy.admissionregistration.k8s.io/demo-policy.example.com",
            "1",
            "<unset>"
        ],
        "{listed:?}"
    );
    assert_eq!(
        listed[2][..3],
        ["NAME", "POLICYNAME", "PARAMREF"],
        "{listed:?}"
    );
    assert_eq!(
        listed[3][..3],
        [
            "validatingadmissionpolicybinding.admissionregistration.k8s.io/demo-binding-test.example.com",
            "demo-policy.example.com",
            "<unset>"
        ],
        "{listed:?}"
    );
    let big = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx}\nspec:\n  \
        replicas: 6\n  selector: {matchLabels: {app: nginx}}\n  template:\n    \
        metadata: {labels: {app: nginx}}\n    spec:\n      \
        containers: [{name: nginx, image: 'nginx:1.27'}]\n";
    let refused = k.try_run_with_input(&["apply", "-f", "-"], Some(big));
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(
        &refused.stderr,
        "The deployments \"nginx\" is invalid: : ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5",
    );
    let refused = k.try_run(&["get", "deployment", "nginx"]);
    assert!(!refused.success, "nothing was stored: {}", refused.stdout);
    // A dry run is held to the policy too.
    let dry = k.try_run(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=9",
        "--dry-run=server",
    ]);
    assert!(!dry.success, "{}", dry.stdout);
    assert_contains(
        &dry.stderr,
        "denied request: failed expression: object.spec.replicas <= 5",
    );

    k.run_with_input(&["apply", "-f", "-"], &binding("Warn"));
    let warned = k.try_run_with_input(&["apply", "-f", "-"], Some(big));
    assert!(warned.success, "{}", warned.stderr);
    assert_contains(
        &warned.stderr,
        "Warning: Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding 'demo-binding-test.example.com': failed expression: object.spec.replicas <= 5",
    );
    assert_eq!(k.jsonpath("deployment", "nginx", "{.spec.replicas}"), "6");
}

/// kubectl validates strictly by default (`fieldValidation=Strict`): a misspelt field is
/// refused as kube-apiserver's decoder refuses it, `--validate=warn` stores the object
/// without it and prints kube's warning, and a value of the wrong type is refused in Go's
/// words whatever the validation asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_unknown_fields_and_wrong_types_are_handled_as_in_kube() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let misspelt = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: typo}\nspec:\n  \
        replica: 3\n  selector: {matchLabels: {a: b}}\n  template:\n    \
        metadata: {labels: {a: b}}\n    \
        spec: {containers: [{name: web, image: nginx, imagePullPolic: Always}]}\n";
    let strict = k.try_run_with_input(&["apply", "-f", "-"], Some(misspelt));
    assert!(!strict.success, "{}", strict.stdout);
    assert_contains(
        &strict.stderr,
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
         unknown field \"spec.replica\", \
         unknown field \"spec.template.spec.containers[0].imagePullPolic\"",
    );
    let missing = k.try_run(&["get", "deployment", "typo"]);
    assert!(!missing.success, "nothing stored: {}", missing.stdout);

    let warned = k.try_run_with_input(&["apply", "--validate=warn", "-f", "-"], Some(misspelt));
    assert!(warned.success, "{}", warned.stderr);
    assert_contains(&warned.stderr, "Warning: unknown field \"spec.replica\"");
    let stored = k.run(&["get", "deployment", "typo", "-o", "json"]);
    assert!(!stored.contains("replica\""), "dropped: {stored}");
    assert!(!stored.contains("imagePullPolic\""), "dropped: {stored}");
    assert_eq!(k.jsonpath("deployment", "typo", "{.spec.replicas}"), "1");

    let numbers = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ports}\ndata: {port: 8080}\n";
    for validate in ["--validate=strict", "--validate=false"] {
        let typed = k.try_run_with_input(&["create", validate, "-f", "-"], Some(numbers));
        assert!(!typed.success, "{}", typed.stdout);
        assert_contains(
            &typed.stderr,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot \
             unmarshal number into Go struct field ConfigMap.data of type string",
        );
    }
}

/// RBAC as a cluster enforces it: a service account's token (`kubectl create token`) and a
/// user impersonated with `--as` may do what their roles allow, and are refused with
/// kube's message otherwise; `auth can-i --as` answers for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rbac_holds_service_accounts_and_impersonated_users_to_their_roles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, k) = start(dir.path()).await;
    let account = "system:serviceaccount:default:operator";
    let as_operator = format!("--as={account}");
    k.run(&["create", "serviceaccount", "operator"]);
    let refused = k.try_run(&["get", "pods", &as_operator]);
    assert!(!refused.success, "{}", refused.stdout);
    assert_contains(
        &refused.stderr,
        &format!(
            "Error from server (Forbidden): pods is forbidden: User \"{account}\" cannot list \
             resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
    );
    let can_i = k.try_run(&["auth", "can-i", "list", "pods", &as_operator]);
    assert_eq!((can_i.success, can_i.stdout.trim()), (false, "no"));

    k.run(&[
        "create",
        "role",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
    ]);
    k.run(&[
        "create",
        "rolebinding",
        "operator-reads-pods",
        "--role=pod-reader",
        "--serviceaccount=default:operator",
    ]);
    assert_eq!(
        k.run(&["auth", "can-i", "list", "pods", &as_operator])
            .trim(),
        "yes"
    );
    k.run(&["get", "pods", &as_operator]);

    // The service account's own token, as the operator would hold it in a cluster.
    let token = k.run(&["create", "token", "operator"]);
    let with_token = format!("--token={}", token.trim());
    k.run(&["get", "pods", &with_token]);
    let nodes = k.try_run(&["get", "nodes", &with_token]);
    assert!(!nodes.success, "{}", nodes.stdout);
    assert_contains(
        &nodes.stderr,
        &format!(
            "nodes is forbidden: User \"{account}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        ),
    );
    let whoami = k.run(&[
        "auth",
        "whoami",
        &with_token,
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(whoami, account);

    // Allowed to write Roles, it still grants only what it holds (kube's escalation check),
    // and `kubectl create clusterrolebinding` to `view` needs view's rules, aggregated.
    k.run(&[
        "create",
        "role",
        "role-writer",
        "--verb=create",
        "--resource=roles,rolebindings",
    ]);
    k.run(&[
        "create",
        "rolebinding",
        "operator-writes-roles",
        "--role=role-writer",
        "--serviceaccount=default:operator",
    ]);
    let widened = k.try_run(&[
        "create",
        "role",
        "pod-admin",
        "--verb=get,delete",
        "--resource=pods",
        &with_token,
    ]);
    assert!(!widened.success, "{}", widened.stdout);
    assert_contains(
        &widened.stderr,
        &format!(
            "roles.rbac.authorization.k8s.io \"pod-admin\" is forbidden: user \"{account}\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:default\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}}"
        ),
    );
    k.run(&[
        "create",
        "role",
        "pod-getter",
        "--verb=get",
        "--resource=pods",
        &with_token,
    ]);
    let view = k.run(&[
        "get",
        "clusterrole",
        "view",
        "-o",
        "jsonpath={.rules[*].resources}",
    ]);
    assert_contains(&view, "endpointslices");
}
