//! The StatefulSet controller.
use kube::Client;
use std::future::Future;
/// Run the StatefulSet controller until `shutdown` completes.
pub async fn run(
    _client: Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), steady_runtime::Error> {
    shutdown.await;
    Ok(())
}
