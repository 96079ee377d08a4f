//! `steady up`: the embedded default — control plane, simulated node, the Cache CRD and the
//! Cache operator in one process, state kept in the data directory.

use std::io::Write;
use std::net::SocketAddr;

use crate::server::ControlPlaneArgs;
use crate::shutdown::Shutdown;

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub plane: ControlPlaneArgs,
    /// Serve the operator's /metrics, /healthz and /readyz here.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let (plane, kubeconfig_path) = args.plane.start().await?;
    let shutdown = Shutdown::on_signal();
    let client = plane.api.client();
    crate::operator::ensure_crd(&client).await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "steady up: control plane listening on {}", plane.url)?;
    writeln!(out, "kubeconfig: {}", kubeconfig_path.display())?;
    writeln!(out, "the Cache operator is running; try:")?;
    writeln!(out, "  export KUBECONFIG={}", kubeconfig_path.display())?;
    writeln!(
        out,
        "  kubectl apply -f examples/cache.yaml && kubectl get caches,pods -w"
    )?;
    out.flush()?;
    drop(out);
    let operator = tokio::spawn(crate::operator::run_operator(
        client,
        args.metrics_addr,
        None,
        shutdown.clone(),
    ));
    let served = plane.serve(shutdown.clone().wait()).await;
    let operated = operator
        .await
        .map_err(|e| anyhow::anyhow!("the operator task failed: {e}"))?;
    served.and(operated)
}
