//! Following a namespace's pods through a watch, for the rollout tests that bound how
//! many pods exist and how few are Ready at any moment (maxSurge, maxUnavailable).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use tokio::task::JoinHandle;

/// The fewest Ready pods and the most pods (neither counting terminating ones) seen
/// after any pod event since the watch synced.
#[derive(Default, Debug, Clone, Copy)]
pub struct PodExtremes {
    /// The fewest Ready pods at once (`None` until the watch has synced).
    pub fewest_ready: Option<usize>,
    /// The most pods at once.
    pub most_pods: usize,
    /// How many times they were judged (once per event after the sync).
    pub events: usize,
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `api`'s pods that are not being deleted.
pub async fn active_pods(api: &Api<Pod>) -> Vec<Pod> {
    api.list(&kube::api::ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Watch `api`'s pods from now on, updating the returned extremes after every change;
/// the task runs until aborted.
pub fn follow_pods(api: Api<Pod>) -> (Arc<Mutex<PodExtremes>>, JoinHandle<()>) {
    let extremes = Arc::new(Mutex::new(PodExtremes::default()));
    let seen = extremes.clone();
    let task = tokio::spawn(async move {
        let (mut pods, mut listing) = (BTreeMap::new(), BTreeMap::new());
        let stream = watcher::watcher(api, watcher::Config::default());
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            // Judged after every change, but not halfway through a (re)list.
            match event {
                Ok(Event::Init) => {
                    listing.clear();
                    continue;
                }
                Ok(Event::InitApply(pod)) => {
                    listing.insert(pod.name_any(), pod);
                    continue;
                }
                Ok(Event::InitDone) => pods = std::mem::take(&mut listing),
                Ok(Event::Apply(pod)) => {
                    pods.insert(pod.name_any(), pod);
                }
                Ok(Event::Delete(pod)) => {
                    pods.remove(&pod.name_any());
                }
                Err(_) => continue,
            }
            let active: Vec<&Pod> = pods
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let ready = active.iter().filter(|p| is_ready(p)).count();
            let mut extremes = seen.lock().unwrap_or_else(|e| e.into_inner());
            extremes.fewest_ready = Some(extremes.fewest_ready.map_or(ready, |f| f.min(ready)));
            extremes.most_pods = extremes.most_pods.max(active.len());
            extremes.events += 1;
        }
    });
    (extremes, task)
}
