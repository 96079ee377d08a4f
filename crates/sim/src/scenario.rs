//! What an operator author writes: the CRDs, the objects "the user" creates and changes at
//! simulated times, how to build and run the controller from a `kube::Client`, and the
//! operator's own invariants. The [`Simulation`](crate::Simulation) does the rest.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use steady_apiserver::auth::Identity;
use steady_runtime::observe::{ReconcileRecord, Recorder, StartHook};
use steady_runtime::{Action, Context, Controller, ObjectKey};

use crate::fault::Trace;
use crate::simulation::Overlaps;
use crate::world::World;

/// A check over a snapshot of the world: `Err` says what is wrong.
pub type Check = Arc<dyn Fn(&World) -> Result<(), String> + Send + Sync>;

type Start = Arc<dyn Fn(Client, Launch) -> BoxFuture<'static, ()> + Send + Sync>;

/// One operator under test: built once, run by a [`Simulation`](crate::Simulation) for as
/// many seeds as wanted.
///
/// ```no_run
/// use std::time::Duration;
/// use kube::Api;
/// use k8s_openapi::api::core::v1::Pod;
/// use steady_cache_operator::Cache;
/// use steady_sim::{Scenario, Simulation, Step};
///
/// let cache: Cache = serde_json::from_value(serde_json::json!({
///     "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
///     "metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": 2},
/// })).unwrap();
/// let scenario = Scenario::new("web-cache")
///     .crd(steady_cache_operator::crd())
///     .create(&cache)
///     .at(Duration::from_secs(5), Step::scale::<Cache>("default", "web", 3))
///     .at(Duration::from_secs(9), Step::delete::<Pod>("default", "web-0"))
///     .controller(|client, launch| async move {
///         let (controller, data) =
///             steady_cache_operator::controller(client, launch.config("cache"), launch.clock());
///         let _ = launch.run(controller, steady_cache_operator::reconcile, data).await;
///     })
///     .invariant("at-most-three-pods", |world| {
///         let pods = world.list::<Pod>().len();
///         if pods <= 3 { Ok(()) } else { Err(format!("{pods} pods")) }
///     });
/// Simulation::default().check(&scenario, 0..20);
/// ```
#[derive(Clone)]
pub struct Scenario {
    pub(crate) name: String,
    pub(crate) crds: Vec<CustomResourceDefinition>,
    pub(crate) setup: Vec<Step>,
    pub(crate) script: Vec<(Duration, Step)>,
    pub(crate) start: Option<Start>,
    pub(crate) invariants: Vec<(String, Check)>,
    pub(crate) goals: Vec<(String, Check)>,
    pub(crate) workloads: bool,
    pub(crate) node_events: bool,
    /// Whom the controller's requests act as (None: the administrator).
    pub(crate) identity: Option<Identity>,
}

impl Scenario {
    /// An empty scenario called `name` (the name appears in reports and replay commands).
    pub fn new(name: impl Into<String>) -> Scenario {
        Scenario {
            name: name.into(),
            crds: Vec::new(),
            setup: Vec::new(),
            script: Vec::new(),
            start: None,
            invariants: Vec::new(),
            goals: Vec::new(),
            workloads: false,
            node_events: true,
            identity: None,
        }
    }

    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Install `crd` before anything else.
    pub fn crd(mut self, crd: CustomResourceDefinition) -> Scenario {
        self.crds.push(crd);
        self
    }

    /// Create `object` before the controller starts (its namespace and name come from it).
    pub fn create<K>(self, object: &K) -> Scenario
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        self.setup(Step::create(object))
    }

    /// Run `step` before the controller starts.
    pub fn setup(mut self, step: Step) -> Scenario {
        self.setup.push(step);
        self
    }

    /// Run `step` at simulated time `at` after the controller started (while faults are on
    /// if `at` falls in the fault window; the step itself never meets a fault).
    pub fn at(mut self, at: Duration, step: Step) -> Scenario {
        self.script.push((at, step));
        self.script.sort_by_key(|(at, _)| *at);
        self
    }

    /// Run the cluster's workload controllers beside the simulated node, as
    /// kube-controller-manager runs them on a cluster: Deployments roll out ReplicaSets,
    /// ReplicaSets create pods, the node runs them, and their status (`availableReplicas`,
    /// the `Available` condition, a Job's `Complete`) is written as on a cluster — so an
    /// operator that owns a Deployment (or a StatefulSet, a Job, a DaemonSet) sees it come up.
    ///
    /// The controllers are the cluster, not what is under test: no fault touches them, their
    /// writes do not count as the operator's (the generic properties judge the operator's
    /// writes only), and an operator crash leaves them running. Off by default, so a
    /// scenario without workloads pays nothing for them.
    ///
    /// ```no_run
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use steady_sim::{Scenario, Simulation};
    ///
    /// # fn my_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition { unimplemented!() }
    /// # async fn run_my_operator(client: kube::Client, launch: steady_sim::Launch) {}
    /// let scenario = Scenario::new("web-deployment")
    ///     .crd(my_crd())
    ///     .with_workloads()
    ///     .controller(run_my_operator)
    ///     .goal("the deployment is available", |world| {
    ///         let web = world.get::<Deployment>("default", "web").ok_or("no deployment")?;
    ///         let status = web.status.unwrap_or_default();
    ///         let available = status.conditions.iter().flatten()
    ///             .any(|c| c.type_ == "Available" && c.status == "True");
    ///         if available { Ok(()) } else { Err(format!("not available: {status:?}")) }
    ///     });
    /// Simulation::default().check(&scenario, 0..10);
    /// ```
    pub fn with_workloads(mut self) -> Scenario {
        self.workloads = true;
        self
    }

    /// Leave out the Events the simulated kubelets and scheduler record (`Scheduled`,
    /// `Pulled`, `Started`, `Killing`, ...), which real ones record. They are most of the
    /// nodes' writes, and no property looks at them (they are history, not state): a
    /// scenario whose controller reads no Events runs faster without them.
    pub fn without_node_events(mut self) -> Scenario {
        self.node_events = false;
        self
    }

    /// Run the controller as the service account `namespace/name`, bound to a ClusterRole
    /// granting `rules` (what the operator's RBAC manifests grant, as JSON
    /// `PolicyRule`s): each of its requests is authorized as on a cluster, and a rule it
    /// lacks shows as 403 Forbidden in the trace and in the properties it breaks. Without
    /// this the controller acts as the administrator, whom RBAC never refuses.
    pub fn service_account(mut self, namespace: &str, name: &str, rules: Value) -> Scenario {
        let role = format!("{name}-simulated");
        let cluster_role: Result<ClusterRole, _> = serde_json::from_value(json!({
            "metadata": {"name": role}, "rules": rules,
        }));
        let binding: Result<ClusterRoleBinding, _> = serde_json::from_value(json!({
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }));
        // Rules that are not PolicyRules bind nothing: the controller then meets its 403s.
        if let (Ok(cluster_role), Ok(binding)) = (cluster_role, binding) {
            self.setup.push(Step::create(&cluster_role));
            self.setup.push(Step::create(&binding));
        }
        self.identity = Some(Identity::service_account(namespace, name, None));
        self
    }

    /// How to build and run the controller under test from a client (whose every request
    /// goes through the fault layer). Called at start and again after every crash, with a
    /// fresh client: build everything (caches, data) inside, as a process would at start.
    /// Hand the controller to [`Launch::run`] so the simulation can trace and check it.
    pub fn controller<F, Fut>(mut self, start: F) -> Scenario
    where
        F: Fn(Client, Launch) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.start = Some(Arc::new(move |client, launch| {
            Box::pin(start(client, launch))
        }));
        self
    }

    /// A property of the world that must hold at every simulated second and at the end,
    /// faults or not (e.g. "never two pods for one ordinal").
    pub fn invariant<F>(mut self, name: impl Into<String>, check: F) -> Scenario
    where
        F: Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    {
        self.invariants.push((name.into(), Arc::new(check)));
        self
    }

    /// A property of the world once the controller has settled (e.g. "the pods match the
    /// spec"); checked at the end only. The generic properties already compare the end
    /// with the fault-free run; a goal also holds the fault-free run to account.
    pub fn goal<F>(mut self, name: impl Into<String>, check: F) -> Scenario
    where
        F: Fn(&World) -> Result<(), String> + Send + Sync + 'static,
    {
        self.goals.push((name.into(), Arc::new(check)));
        self
    }

    /// The names of the scenario's own invariants and goals.
    pub fn properties(&self) -> Vec<String> {
        self.invariants
            .iter()
            .chain(&self.goals)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// One action of "the user" (never subject to faults), built from a typed kind.
///
/// ```
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use steady_sim::Step;
/// let steps = [
///     Step::patch::<ConfigMap>("default", "settings", serde_json::json!({"data": {"mode": "fast"}})),
///     Step::delete::<Pod>("default", "web-1"),
///     Step::fail_pod("default", "web-0"),
/// ];
/// assert_eq!(steps[1].to_string(), "delete Pod default/web-1");
/// ```
#[derive(Debug, Clone)]
pub struct Step {
    resource: ApiResource,
    namespace: String,
    name: String,
    op: Op,
}

#[derive(Debug, Clone)]
enum Op {
    Create(Value),
    Patch(Value),
    PatchStatus(Value),
    Delete,
}

impl Step {
    fn of<K: Resource<DynamicType = ()>>(namespace: &str, name: &str, op: Op) -> Step {
        Step {
            resource: ApiResource::erase::<K>(&()),
            namespace: namespace.into(),
            name: name.into(),
            op,
        }
    }

    /// Create `object`.
    pub fn create<K>(object: &K) -> Step
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let meta = object.meta();
        let value = serde_json::to_value(object).unwrap_or_default();
        Step::of::<K>(
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or(""),
            Op::Create(value),
        )
    }

    /// Merge-patch the object of kind `K` named `name` in `namespace` (`""` when
    /// cluster-scoped): an update of its spec, labels, …
    pub fn patch<K: Resource<DynamicType = ()>>(namespace: &str, name: &str, patch: Value) -> Step {
        Step::of::<K>(namespace, name, Op::Patch(patch))
    }

    /// Set `spec.replicas`.
    pub fn scale<K: Resource<DynamicType = ()>>(
        namespace: &str,
        name: &str,
        replicas: i32,
    ) -> Step {
        Step::patch::<K>(
            namespace,
            name,
            serde_json::json!({"spec": {"replicas": replicas}}),
        )
    }

    /// Delete the object (owned objects included: "someone else deletes my pod").
    pub fn delete<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> Step {
        Step::of::<K>(namespace, name, Op::Delete)
    }

    /// The pod fails, as if its container exited (phase Failed, not Ready).
    pub fn fail_pod(namespace: &str, name: &str) -> Step {
        let status = serde_json::json!({"status": {"phase": "Failed",
            "conditions": [{"type": "Ready", "status": "False"}]}});
        Step::of::<Pod>(namespace, name, Op::PatchStatus(status))
    }

    /// Apply the step, traced as done by "the user" when `trace` is given.
    pub(crate) async fn apply(
        &self,
        admin: &Client,
        trace: Option<&Trace>,
    ) -> Result<(), kube::Error> {
        if let Some(trace) = trace {
            trace.log(format!("user: {self}"));
        }
        let api: Api<DynamicObject> = match self.namespace.as_str() {
            "" => Api::all_with(admin.clone(), &self.resource),
            ns => Api::namespaced_with(admin.clone(), ns, &self.resource),
        };
        // Built as `Api` builds them, but the reply is only checked, never decoded: a user
        // step needs to know that it worked, not what the server answered.
        let requests = kube::core::Request::new(api.resource_url());
        let request = match &self.op {
            Op::Create(value) => {
                let body = serde_json::to_vec(value).map_err(kube::Error::SerdeError)?;
                requests.create(&PostParams::default(), body)
            }
            Op::Patch(patch) => {
                requests.patch(&self.name, &PatchParams::default(), &Patch::Merge(patch))
            }
            Op::PatchStatus(patch) => requests.patch_subresource(
                "status",
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(patch),
            ),
            Op::Delete => requests.delete(&self.name, &DeleteParams::default()),
        };
        let request = request.map_err(kube::Error::BuildRequest)?;
        admin.request_text(request).await.map(drop)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.op {
            Op::Create(_) => "create".to_string(),
            Op::Patch(p) => format!("patch {p}"),
            Op::PatchStatus(p) => format!("patch status {p}"),
            Op::Delete => "delete".to_string(),
        };
        let (verb, rest) = what.split_once(' ').unwrap_or((what.as_str(), ""));
        let key = match self.namespace.as_str() {
            "" => self.name.clone(),
            ns => format!("{ns}/{}", self.name),
        };
        write!(f, "{verb} {} {key}", self.resource.kind)?;
        if !rest.is_empty() {
            write!(f, " {rest}")?;
        }
        Ok(())
    }
}

/// How the simulation runs the controller a scenario builds: a seeded, simulated-time
/// configuration, and [`Launch::run`], which runs the controller while tracing every
/// reconcile and checking the runtime's invariants.
#[derive(Clone)]
pub struct Launch {
    pub(crate) seed: u64,
    pub(crate) clock: steady_apiserver::Clock,
    pub(crate) trace: Trace,
    pub(crate) overlaps: Arc<Overlaps>,
    pub(crate) on_start: Option<StartHook>,
}

impl Launch {
    /// Controller settings for a simulation: the runtime's defaults named `name`, made
    /// fit for simulation by [`simulated`](Self::simulated).
    pub fn config(&self, name: &str) -> steady_runtime::Config {
        self.simulated(steady_runtime::Config::named(name))
    }

    /// The operator's settings as it ships them (its debounce, backoff, …), with what a
    /// simulation needs instead: seeded jitter, two reconciles at once whatever the
    /// machine, a resync every 30 s (the idempotency check waits for one). Test the
    /// operator as it runs in production:
    ///
    /// ```no_run
    /// # async fn start(client: kube::Client, launch: steady_sim::Launch) {
    /// let config = launch.simulated(steady_cache_operator::default_config());
    /// let (controller, data) =
    ///     steady_cache_operator::controller(client, config, launch.clock());
    /// let _ = launch.run(controller, steady_cache_operator::reconcile, data).await;
    /// # }
    /// ```
    pub fn simulated(&self, shipped: steady_runtime::Config) -> steady_runtime::Config {
        steady_runtime::Config {
            concurrency: 2,
            resync_period: Some(RESYNC_PERIOD),
            seed: Some(self.seed),
            ..shipped
        }
    }

    /// The simulated wall clock (for condition timestamps and the like).
    pub fn clock(&self) -> steady_apiserver::Clock {
        self.clock.clone()
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Also call `hook` with the record of every reconcile as it starts, before it runs
    /// (the simulation records the controller with its own [`Recorder`], which traces
    /// each reconcile and then calls this; a recorder the scenario set is replaced).
    pub fn on_reconcile_start(mut self, hook: StartHook) -> Launch {
        self.on_start = Some(hook);
        self
    }

    /// Run `controller` with `reconcile` and `data` until the simulation stops it (at the
    /// end of the run, or by a crash).
    pub async fn run<K, T, R, Fut, E>(
        &self,
        controller: Controller<K>,
        reconcile: R,
        data: Arc<T>,
    ) -> Result<(), steady_runtime::Error>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        T: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Context<T>>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let trace = self.trace.clone();
        let on_start = self.on_start.clone();
        let traced = Recorder::with_start_hook(Arc::new(move |record: &ReconcileRecord| {
            let why: Vec<String> = record.triggers.iter().map(ToString::to_string).collect();
            trace.log(format!("reconcile {} ← {}", record.key, why.join(", ")));
            if let Some(on_start) = &on_start {
                on_start(record);
            }
        }));
        let overlaps = self.overlaps.clone();
        let checked = move |object: Arc<K>, ctx: Arc<Context<T>>| {
            let running = overlaps.enter(ObjectKey::of(object.as_ref()));
            let reconciling = reconcile(object, ctx);
            async move {
                let _running = running;
                reconciling.await
            }
        };
        let outcome = controller
            .with_recorder(traced)
            .run(checked, data, std::future::pending::<()>())
            .await;
        if let Err(e) = &outcome {
            self.trace.log(format!("controller stopped: {e}"));
        }
        outcome
    }
}

/// How often [`Launch::config`] resyncs.
pub(crate) const RESYNC_PERIOD: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(seed: u64) -> Launch {
        Launch {
            seed,
            clock: Arc::new(chrono::Utc::now),
            trace: Trace::default(),
            overlaps: Arc::default(),
            on_start: None,
        }
    }

    /// The simulation tests the operator as it ships: its own settings (the Cache
    /// operator's debounce) survive; only what a simulation needs is replaced.
    #[test]
    fn a_simulated_config_keeps_the_operators_own_settings() {
        let shipped = steady_runtime::Config {
            debounce: Duration::from_millis(50),
            resync_period: Some(Duration::from_secs(600)),
            concurrency: 16,
            ..steady_runtime::Config::named("cache")
        };
        let simulated = launch(7).simulated(shipped);
        assert_eq!(simulated.name, "cache");
        assert_eq!(simulated.debounce, Duration::from_millis(50));
        assert_eq!(simulated.seed, Some(7));
        assert_eq!(simulated.concurrency, 2);
        assert_eq!(simulated.resync_period, Some(RESYNC_PERIOD));
    }

    /// The Cache scenario runs the operator with `default_config()`'s debounce, not the
    /// runtime's default (none).
    #[test]
    fn the_cache_scenario_runs_the_operator_as_shipped() {
        let config = crate::cache::shipped(&launch(1));
        assert_eq!(config.debounce, steady_cache_operator::DEBOUNCE);
        assert!(!config.debounce.is_zero());
    }
}
