//! The Cache scenario: steady's Cache operator (or a deliberately wrong variant of its
//! reconciler) scaled, re-templated and scaled back under faults, with the Cache's domain
//! invariant (never two live pods for one ordinal, never a pod that is not an ordinal) and
//! its goal (the pods, Service and status the spec asks for).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota, Service};
use steady_cache_operator::resources::{
    CACHE_LABEL, TEMPLATE_HASH_LABEL, is_ready, ordinal_of, template_hash,
};
use steady_cache_operator::{Cache, OperatorContext};
use steady_runtime::observe::ReconcileRecord;
use steady_runtime::{Action, Context, Trigger};

use crate::scenario::{Launch, Scenario, Step};
use crate::world::World;

/// The Cache's namespace in the scenario.
pub const NAMESPACE: &str = "default";
/// The Cache's name in the scenario.
pub const NAME: &str = "sim";
/// The name of the Cache's domain invariant.
pub const ORDINALS: &str = "cache-ordinals";
/// The name of the Cache's goal.
pub const CONVERGED: &str = "cache-converged";

/// A reconciler under test in place of the real one (see [`crate::wrong`]).
pub type ReconcileFn = Arc<
    dyn Fn(Arc<Cache>, Arc<Context<Subject>>) -> BoxFuture<'static, Result<Action, String>>
        + Send
        + Sync,
>;

/// What a reconciler under test gets as context data: the operator's context, plus what
/// triggered the current reconcile (only an edge-triggered reconciler would look).
pub struct Subject {
    /// The Cache operator's own context.
    pub operator: Arc<OperatorContext>,
    /// The triggers of the latest reconcile of each key (`namespace/name`).
    pub last_triggers: Mutex<BTreeMap<String, Vec<Trigger>>>,
}

/// The operator's reconcile takes `Context<OperatorContext>`; a wrong reconciler's context
/// wraps it. Re-wrap the same client, caches and data without copying state.
pub fn operator_context(ctx: &Arc<Context<Subject>>) -> Arc<Context<OperatorContext>> {
    Arc::new(ctx.with_data(ctx.data().operator.clone()))
}

/// The Cache scenario with steady's own reconciler, wired as `steady operator` wires it.
pub fn scenario() -> Scenario {
    with_the_operator(script(Scenario::new("cache")))
}

/// The Cache scaled 4 → 1 → 3 twice: once back up while the removed pods still
/// terminate, once after they are gone, so each of `<cache>-1` and `<cache>-2` is
/// created again under the name of a pod just deleted (the name's successor).
pub fn rescale_scenario() -> Scenario {
    let cache: Option<Cache> = serde_json::from_value(serde_json::json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {"replicas": 4}
    }))
    .ok();
    let scenario = Scenario::new("cache-rescale")
        .crd(steady_cache_operator::crd())
        .without_node_events();
    let scenario = match &cache {
        Some(cache) => scenario.create(cache),
        None => scenario,
    };
    let scenario = [(5_000, 1), (5_300, 3), (12_000, 1), (16_000, 3)]
        .into_iter()
        .fold(scenario, |scenario, (at_ms, replicas)| {
            scenario.at(
                Duration::from_millis(at_ms),
                Step::scale::<Cache>(NAMESPACE, NAME, replicas),
            )
        });
    with_the_operator(
        scenario
            .invariant(ORDINALS, ordinals)
            .goal(CONVERGED, converged),
    )
}

/// The Cache scenario with the operator running as its service account, held by RBAC to
/// `rules` — by default the ClusterRole `steady manifests` ships, so every seed proves
/// those rules suffice under faults (a rule taken out shows as 403s and a broken property).
pub fn rbac_scenario(rules: serde_json::Value) -> Scenario {
    let manifests = steady_cache_operator::manifests::ManifestOptions::default();
    let scenario = script(Scenario::new("cache-rbac")).service_account(
        &manifests.namespace,
        steady_cache_operator::manifests::NAME,
        rules,
    );
    with_the_operator(scenario)
}

/// `scenario` with steady's own reconciler as its controller.
fn with_the_operator(scenario: Scenario) -> Scenario {
    scenario.controller(|client, launch| async move {
        let (controller, data) =
            steady_cache_operator::controller(client, shipped(&launch), launch.clock());
        let _ = launch
            .run(controller, steady_cache_operator::reconcile, data)
            .await;
    })
}

/// The Cache scenario in a namespace whose ResourceQuota allows 2 pods until the 9th
/// second: the scale to 3 is refused by the API (the operator reports it and backs off),
/// and the raised quota is no event the operator watches, so only its retries converge.
pub fn quota_scenario() -> Scenario {
    let quota: Option<ResourceQuota> = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "pods", "namespace": NAMESPACE},
        "spec": {"hard": {"pods": "2"}},
    }))
    .ok();
    let raised = serde_json::json!({"spec": {"hard": {"pods": "3"}}});
    let scenario = match &quota {
        Some(quota) => Scenario::new("cache-quota").create(quota),
        None => Scenario::new("cache-quota"),
    };
    with_the_operator(script(scenario).at(
        Duration::from_secs(9),
        Step::patch::<ResourceQuota>(NAMESPACE, "pods", raised),
    ))
}

/// The Cache operator's settings as `steady operator` runs it (its debounce included),
/// seeded for the simulation.
pub(crate) fn shipped(launch: &Launch) -> steady_runtime::Config {
    launch.simulated(steady_cache_operator::default_config())
}

/// The Cache scenario called `name` with `reconciler` in place of the real one, run with
/// the operator's shipped settings.
pub fn scenario_with(name: &str, reconciler: ReconcileFn) -> Scenario {
    scenario_configured(name, reconciler, shipped)
}

/// [`scenario_with`], the controller configured by `config` instead (e.g.
/// `|launch| launch.config("cache")`: the runtime's defaults, no debounce).
pub fn scenario_configured(
    name: &str,
    reconciler: ReconcileFn,
    config: fn(&Launch) -> steady_runtime::Config,
) -> Scenario {
    script(Scenario::new(name)).controller(move |client, launch| {
        let reconciler = reconciler.clone();
        async move {
            let (controller, operator) =
                steady_cache_operator::controller(client, config(&launch), launch.clock());
            let subject = Arc::new(Subject {
                operator,
                last_triggers: Mutex::new(BTreeMap::new()),
            });
            let observed = subject.clone();
            let on_start = Arc::new(move |record: &ReconcileRecord| {
                if let Ok(mut last) = observed.last_triggers.lock() {
                    last.insert(record.key.clone(), record.triggers.clone());
                }
            });
            let reconcile = move |cache, ctx| reconciler(cache, ctx);
            let _ = launch
                .on_reconcile_start(on_start)
                .run(controller, reconcile, subject)
                .await;
        }
    })
}

/// The CRD, the Cache (2 replicas), then scale to 3, a new image, scale to 2.
fn script(scenario: Scenario) -> Scenario {
    let cache: Option<Cache> = serde_json::from_value(serde_json::json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {"replicas": 2}
    }))
    .ok();
    let image = serde_json::json!({"spec": {"image": "memcached:1.6.31"}});
    // The Cache operator reads no Events: the nodes' would be most of a seed's writes.
    let scenario = scenario
        .crd(steady_cache_operator::crd())
        .without_node_events();
    let scenario = match &cache {
        Some(cache) => scenario.create(cache),
        None => scenario,
    };
    scenario
        .at(
            Duration::from_secs(5),
            Step::scale::<Cache>(NAMESPACE, NAME, 3),
        )
        .at(
            Duration::from_secs(12),
            Step::patch::<Cache>(NAMESPACE, NAME, image),
        )
        .at(
            Duration::from_secs(20),
            Step::scale::<Cache>(NAMESPACE, NAME, 2),
        )
        .invariant(ORDINALS, ordinals)
        .goal(CONVERGED, converged)
}

/// Never two live pods for one ordinal, never a live pod a Cache controls that is not one
/// of its ordinals (`<cache>-<n>`).
pub fn ordinals(world: &World) -> Result<(), String> {
    let caches: BTreeMap<String, String> = world
        .metadata::<Cache>()
        .into_iter()
        .filter_map(|c| Some((c.uid?, c.name?)))
        .collect();
    let mut seen: BTreeMap<(String, i32), String> = BTreeMap::new();
    for pod in world.metadata::<Pod>() {
        if pod.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.name.clone().unwrap_or_default();
        let owner = pod
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true) && r.kind == "Cache");
        let Some(owner) = owner else { continue };
        let cache = caches.get(&owner.uid).unwrap_or(&owner.name);
        let Some(ordinal) = ordinal_of(cache, &name) else {
            return Err(format!(
                "pod {name} of Cache {cache} is not one of its ordinals"
            ));
        };
        if let Some(other) = seen.insert((cache.clone(), ordinal), name.clone()) {
            return Err(format!(
                "pods {other} and {name} are both ordinal {ordinal} of {cache}"
            ));
        }
    }
    Ok(())
}

/// The spec, as observed: the right pods, Running, Ready, on the current template; the
/// Service; the status (replicas, readyReplicas, observedGeneration, Ready=True).
pub fn converged(world: &World) -> Result<(), String> {
    let cache = world
        .get::<Cache>(NAMESPACE, NAME)
        .ok_or("the Cache is gone")?;
    let replicas = cache.spec.replicas;
    let hash = template_hash(&cache.spec);
    let mut names: Vec<String> = Vec::new();
    let label = |pod: &Pod, key: &str| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .cloned()
            .unwrap_or_default()
    };
    for pod in world.list::<Pod>() {
        if label(&pod, CACHE_LABEL) != NAME {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(format!("pod {name} is still terminating"));
        }
        if !is_ready(&pod) {
            return Err(format!("pod {name} is not Ready"));
        }
        let pod_hash = label(&pod, TEMPLATE_HASH_LABEL);
        if pod_hash != hash {
            return Err(format!("pod {name} runs template {pod_hash}, not {hash}"));
        }
        names.push(name);
    }
    names.sort();
    let mut want: Vec<String> = (0..replicas).map(|i| format!("{NAME}-{i}")).collect();
    want.sort();
    if names != want {
        return Err(format!("pods {names:?}, want {want:?}"));
    }
    let service = world.get::<Service>(NAMESPACE, NAME).ok_or("no Service")?;
    let port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port);
    if port != Some(cache.spec.port) {
        return Err(format!("service port {port:?}, want {}", cache.spec.port));
    }
    let status = cache.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if status.replicas != replicas
        || status.ready_replicas != replicas
        || status.observed_generation != cache.metadata.generation
        || !ready
    {
        return Err(format!(
            "status replicas={} ready={} observedGeneration={:?} (generation {:?}) Ready={ready}",
            status.replicas,
            status.ready_replicas,
            status.observed_generation,
            cache.metadata.generation
        ));
    }
    Ok(())
}
