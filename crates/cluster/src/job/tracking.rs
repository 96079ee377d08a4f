//! Job tracking with finalizers, as kube-controller-manager 1.26+ counts a Job's pods:
//! every pod it creates carries `batch.kubernetes.io/job-tracking`, so a finished pod
//! cannot vanish (deleted by a user, the garbage collector, a node) before the Job counted
//! it. A finished pod's uid goes into `status.uncountedTerminatedPods` first, then its
//! finalizer is removed, then the uid moves into `succeeded`/`failed`: a crash between any
//! two steps loses no count and counts nothing twice, and the counts never go down.
//!
//! Also here: releasing the finalizers of pods whose Job is gone or finished (kube's
//! orphan queue), a controller of its own over the Jobs' labelled pods.

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use steady_runtime::{Action, CachingApi, Context, Controller, ObjectCache, ObjectKey};

use super::CONTROLLER_UID_LABEL;
use crate::{Error, Running, Shutdown, pod_template};

/// The finalizer that keeps a Job's pod until the Job counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// At most this many uids wait in `uncountedTerminatedPods` (kube's `MaxUncountedPods`):
/// a sync that reaches it flushes and leaves the rest to the next.
pub(super) const MAX_UNCOUNTED: usize = 500;

/// Whether `pod` still holds the tracking finalizer.
pub fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER)
}

/// `status.uncountedTerminatedPods`: the uids of finished pods whose finalizers are being
/// removed, in the order they were added.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Uncounted {
    pub(super) succeeded: Vec<String>,
    pub(super) failed: Vec<String>,
}

impl Uncounted {
    pub(super) fn of(status: &JobStatus) -> Uncounted {
        let pods = status.uncounted_terminated_pods.clone().unwrap_or_default();
        Uncounted {
            succeeded: pods.succeeded.unwrap_or_default(),
            failed: pods.failed.unwrap_or_default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.succeeded.len() + self.failed.len()
    }

    /// Write these into `status` (empty lists left out, as kube's encoder drops them).
    pub(super) fn store(&self, status: &mut JobStatus) {
        let list = |uids: &Vec<String>| (!uids.is_empty()).then(|| uids.clone());
        status.uncounted_terminated_pods = Some(UncountedTerminatedPods {
            succeeded: list(&self.succeeded),
            failed: list(&self.failed),
        });
    }

    /// Count the uids whose pods no longer hold the finalizer (it was removed, or the pod
    /// is gone) into `status`'s counters; keep the others. Whether anything moved.
    pub(super) fn settle(
        &mut self,
        status: &mut JobStatus,
        still_tracked: impl Fn(&str) -> bool,
    ) -> bool {
        let before = self.len();
        let settled = |uids: &mut Vec<String>| {
            let held = uids.len();
            uids.retain(|uid| still_tracked(uid));
            i32::try_from(held - uids.len()).unwrap_or(i32::MAX)
        };
        let (succeeded, failed) = (settled(&mut self.succeeded), settled(&mut self.failed));
        let add = |count: Option<i32>, more: i32| {
            let total = count.unwrap_or(0).saturating_add(more);
            (total != 0).then_some(total)
        };
        status.succeeded = add(status.succeeded, succeeded);
        status.failed = add(status.failed, failed);
        self.store(status);
        self.len() != before
    }
}

/// Remove the tracking finalizer from `pod` (the strategic merge patch kube sends). True
/// when the pod no longer holds it, gone pods included.
pub(super) async fn release(api: &CachingApi<Pod>, pod: &Pod) -> Result<bool, kube::Error> {
    if !has_tracking_finalizer(pod) {
        return Ok(true);
    }
    let patch = Patch::Strategic(json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}
    }));
    match api
        .patch(&pod.name_any(), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(true),
        Err(e) => Err(e),
    }
}

/// Start the controller that releases orphaned pods' finalizers: a pod holding the
/// tracking finalizer whose controller Job is gone, replaced (another uid) or finished
/// (but for one another controller manages), or that lost its controller reference (an
/// orphaning delete), would otherwise stay Terminating for ever.
pub(super) fn start_orphan_release(
    client: &Client,
    config: steady_runtime::Config,
    shutdown: Shutdown,
) -> Running {
    let labelled = watcher::Config::default().labels(CONTROLLER_UID_LABEL);
    let mut controller = Controller::new_with(Api::<Pod>::all(client.clone()), labelled, config);
    let pods = controller.primary_cache();
    let jobs_slot: Arc<OnceLock<ObjectCache<Job>>> = Arc::default();
    let seen = jobs_slot.clone();
    let jobs = controller.watches(Api::<Job>::all(client.clone()), move |job: &Job| {
        // Only a Job that finished or went leaves pods to release.
        let gone = seen.get().is_none_or(|jobs| {
            jobs.get(&ObjectKey::of(job))
                .is_none_or(|cached| cached.uid() != job.uid())
        });
        if !gone && (!super::is_finished(job) || super::managed_by_other(job).is_some()) {
            return Vec::new();
        }
        let uid = job.uid().unwrap_or_default();
        pods.owned_by(&uid)
            .iter()
            .filter(|p| has_tracking_finalizer(p))
            .map(|p| ObjectKey::of(p.as_ref()))
            .collect()
    });
    let _ = jobs_slot.set(jobs.clone());
    let data = Arc::new(Orphans { jobs });
    Box::pin(controller.run(release_orphan, data, shutdown))
}

struct Orphans {
    jobs: ObjectCache<Job>,
}

async fn release_orphan(pod: Arc<Pod>, ctx: Arc<Context<Orphans>>) -> Result<Action, Error> {
    if !has_tracking_finalizer(&pod) {
        return Ok(Action::done());
    }
    let namespace = pod_template::namespace_of(pod.as_ref());
    if let Some(owner) = pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true) && r.kind == "Job" && r.api_version == "batch/v1")
    {
        // kube leaves the pods of a Job another controller manages to that controller.
        let live = |job: &Job| {
            job.uid().as_deref() == Some(&owner.uid)
                && (!super::is_finished(job) || super::managed_by_other(job).is_some())
        };
        let key = ObjectKey::new(Some(&namespace), &owner.name);
        if ctx.data().jobs.get(&key).is_some_and(|job| live(&job)) {
            return Ok(Action::done());
        }
        // The cache may not have seen the Job yet: only the API's answer releases a pod.
        let jobs = Api::<Job>::namespaced(ctx.client(), &namespace);
        if jobs
            .get_opt(&owner.name)
            .await?
            .is_some_and(|job| live(&job))
        {
            return Ok(Action::done());
        }
    }
    release(&ctx.api::<Pod>(&namespace), &pod).await?;
    Ok(Action::done())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_counts_the_uids_whose_pods_were_released_and_keeps_the_others() {
        let mut status = JobStatus {
            succeeded: Some(2),
            ..JobStatus::default()
        };
        let mut uncounted = Uncounted {
            succeeded: vec!["a".into(), "b".into()],
            failed: vec!["c".into()],
        };
        assert!(uncounted.settle(&mut status, |uid| uid == "b"));
        assert_eq!((status.succeeded, status.failed), (Some(3), Some(1)));
        assert_eq!(uncounted.succeeded, ["b"]);
        let stored = status.uncounted_terminated_pods.clone().expect("stored");
        assert_eq!(stored.succeeded, Some(vec!["b".to_string()]));
        assert_eq!(stored.failed, None, "an empty list is left out");
        assert!(!uncounted.settle(&mut status, |_| true), "nothing moved");
    }
}
