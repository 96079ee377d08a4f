//! The TTL-after-finished controller: deletes a Job `ttlSecondsAfterFinished` after it
//! finished (the `Complete` or `Failed` condition's transition time, on the cluster's
//! clock), its pods with it (foreground), as kube-controller-manager's
//! `ttl-after-finished-controller` does.
//!
//! Level-triggered: a finished Job with a TTL is requeued for the moment it expires; then
//! a fresh read from the API must agree (the TTL may have been changed or the Job
//! replaced) before the delete, which is preconditioned on the Job's uid.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use steady_runtime::{Action, Context};

use crate::{Clock, Error, Running, Setup, Shutdown, pod_template};

/// Start the controller (an entry of [`crate::CONTROLLERS`]).
pub fn start(setup: Setup, shutdown: Shutdown) -> Running {
    let (client, config, clock) = setup.into_parts();
    let controller = crate::controller_for::<Job>(&client, config);
    controller.run(reconcile, Arc::new(clock), shutdown).boxed()
}

/// When the Job expires, if it finished and has a TTL: how long from `now` (zero once
/// past). A finished Job without the time it finished is an error, as in kube.
fn time_left(job: &Job, now: chrono::DateTime<chrono::Utc>) -> Result<Option<Duration>, Error> {
    let ttl = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished);
    let (Some(ttl), None) = (ttl, &job.metadata.deletion_timestamp) else {
        return Ok(None);
    };
    let conditions = job
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten());
    let finishing = conditions
        .into_iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True");
    let Some(finishing) = finishing else {
        return Ok(None);
    };
    let Some(finished) = &finishing.last_transition_time else {
        let (namespace, name) = (pod_template::namespace_of(job), job.name_any());
        return Err(Error::Incomplete(format!(
            "unable to find the time when the Job {namespace}/{name} finished"
        )));
    };
    let expires = finished.0.as_millisecond() + i64::from(ttl) * 1000;
    let left = u64::try_from(expires - now.timestamp_millis()).unwrap_or(0);
    Ok(Some(Duration::from_millis(left)))
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Context<Clock>>) -> Result<Action, Error> {
    let clock = ctx.data();
    let Some(left) = time_left(&job, clock())? else {
        return Ok(Action::done());
    };
    if !left.is_zero() {
        return Ok(Action::requeue_after(left));
    }
    // The cache may be stale (a TTL raised since, a new Job under the name): the API's
    // copy decides.
    let api = Api::<Job>::namespaced(ctx.client(), &pod_template::namespace_of(job.as_ref()));
    let Some(fresh) = api.get_opt(&job.name_any()).await? else {
        return Ok(Action::done());
    };
    match time_left(&fresh, clock())? {
        Some(left) if left.is_zero() => {}
        Some(left) => return Ok(Action::requeue_after(left)),
        None => return Ok(Action::done()),
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions {
            uid: fresh.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&fresh.name_any(), &params).await {
        Ok(_) => Ok(Action::done()),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            Ok(Action::done())
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn finished_job(ttl: Option<i32>, finished_at: Option<&str>) -> Job {
        let mut condition = json!({"type": "Complete", "status": "True"});
        if let Some(at) = finished_at {
            condition["lastTransitionTime"] = json!(at);
        }
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"template": {}, "ttlSecondsAfterFinished": ttl},
            "status": {"conditions": [condition]},
        }))
        .expect("job")
    }

    #[test]
    fn a_finished_job_expires_its_ttl_after_the_finishing_transition() {
        let now = "2026-01-01T00:01:00Z".parse().expect("now");
        let at = Some("2026-01-01T00:00:00Z");
        let left = |ttl| time_left(&finished_job(ttl, at), now).expect("time left");
        assert_eq!(left(Some(100)), Some(Duration::from_secs(40)));
        assert_eq!(left(Some(0)), Some(Duration::ZERO), "expired");
        assert_eq!(left(None), None, "no TTL: kept");
        let unknown = time_left(&finished_job(Some(1), None), now).expect_err("no time");
        assert_eq!(
            unknown.to_string(),
            "unable to find the time when the Job ns/j finished"
        );
    }
}
