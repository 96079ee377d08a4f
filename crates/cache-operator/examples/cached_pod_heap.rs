//! Heap bytes per pod in the Cache operator's pod cache: pods shaped as the simulated node
//! leaves them (Running, Ready, five conditions, managed fields), decoded from JSON as the
//! watch decodes them, then cached as the decoded `Pod` and as the Cache controller's
//! projection (`CachedPod`: the runtime's metadata and a `PodSummary`). Counts bytes
//! requested from the allocator (not RSS: no allocator overhead or fragmentation), so the
//! numbers are exact and the same in debug and release builds.
//!
//! `cargo run -p steady-cache-operator --example cached_pod_heap [pods]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};
use steady_cache_operator::Cache;
use steady_cache_operator::resources::{CachedPod, desired_pod, template_hash};
use steady_runtime::{Cached, ObjectCache};

/// The system allocator, keeping count of the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, which is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above, with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PODS_PER_CACHE: usize = 10;

/// Pod `i` (of Cache `i / 10`) as the API server sends it once the simulated node ran it.
fn served_pod(i: usize) -> serde_json::Result<String> {
    let cache: Cache = serde_json::from_value(json!({
        "apiVersion": "steady.dev/v1alpha1", "kind": "Cache",
        "metadata": {
            "name": format!("cache-{}", i / PODS_PER_CACHE),
            "namespace": "bench",
            "uid": format!("0a1b2c3d-0000-4000-8000-{:012}", i / PODS_PER_CACHE),
        },
        "spec": {"replicas": PODS_PER_CACHE},
    }))?;
    let ordinal = i32::try_from(i % PODS_PER_CACHE).unwrap_or_default();
    let mut pod = serde_json::to_value(desired_pod(&cache, ordinal, &template_hash(&cache.spec)))?;
    let now = "2026-12-03T10:00:00Z";
    let metadata = &mut pod["metadata"];
    metadata["uid"] = json!(format!("9f8e7d6c-0000-4000-8000-{i:012}"));
    metadata["resourceVersion"] = json!((100_000 + i).to_string());
    metadata["creationTimestamp"] = json!(now);
    metadata["managedFields"] = json!([{
        "manager": "steady", "operation": "Update", "apiVersion": "v1", "time": now,
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}},
    }]);
    pod["spec"]["nodeName"] = json!("steady-node");
    let condition = |kind: &str| -> Value {
        json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now})
    };
    let conditions = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .map(condition);
    pod["status"] = json!({
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
        "startTime": now,
        "containerStatuses": [{
            "name": "memcached", "image": "memcached:1.6", "imageID": "", "ready": true,
            "restartCount": 0, "started": true, "state": {"running": {"startedAt": now}},
        }],
        "qosClass": "Burstable",
    });
    serde_json::to_string(&pod)
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Heap bytes per pod of a cache holding `served`, each cached as `cached` makes it from
/// the decoded pod, and of one cached pod alone (the rest is the cache's key and owner
/// index).
fn measure<C: Cached + Clone>(
    served: &[String],
    cached: impl Fn(Pod) -> C,
) -> serde_json::Result<(isize, isize)> {
    let cache = ObjectCache::<C>::default();
    let before = live();
    for json in served {
        let pod: Pod = serde_json::from_str(json)?;
        cache.remember(cached(pod));
    }
    let per_pod = (live() - before) / served.len().max(1) as isize;
    let first = cache.list().into_iter().next();
    let before = live();
    let copy = first.map(|pod| std::sync::Arc::new((*pod).clone()));
    let one_pod = live() - before;
    drop(copy);
    Ok((per_pod, one_pod))
}

fn report(name: &str, (per_pod, one_pod): (isize, isize)) {
    println!(
        "{name}: {per_pod} heap bytes per cached pod ({one_pod} the pod, {} key and index)",
        per_pod - one_pod
    );
}

fn main() -> serde_json::Result<()> {
    let pods: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let served = (0..pods).map(served_pod).collect::<Result<Vec<_>, _>>()?;
    let json_bytes = served.iter().map(String::len).sum::<usize>() / pods.max(1);
    println!("{pods} pods, {json_bytes} bytes of JSON each");
    println!(
        "size_of: Pod {} (ObjectMeta {}, Option<PodSpec> {}, Option<PodStatus> {})",
        size_of::<Pod>(),
        size_of::<ObjectMeta>(),
        size_of::<Option<PodSpec>>(),
        size_of::<Option<PodStatus>>()
    );
    println!(
        "size_of: CachedPod {} (in its Arc: {})",
        size_of::<CachedPod>(),
        size_of::<CachedPod>() + 2 * size_of::<usize>()
    );
    report("Pod", measure(&served, |pod| pod)?);
    report("CachedPod", measure(&served, |pod| CachedPod::of(&pod))?);
    Ok(())
}
