//! `steady up`: the embedded default — control plane, simulated node, the Cache CRD and the
//! Cache operator in one process, state kept in the data directory.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use steady_apiserver::node::NodeConfig;
use steady_apiserver::{Config, kubeconfig};

use crate::server::{ControlPlane, parse_duration};
use crate::shutdown::Shutdown;

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Directory for the database, certificates and token (created if missing).
    #[arg(long, default_value = ".steady")]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Also write a kubeconfig for this cluster to FILE.
    #[arg(long, value_name = "FILE")]
    pub write_kubeconfig: Option<PathBuf>,
    /// How long the simulated node takes to start a pod (e.g. 200ms, 2s).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub pod_start_delay: Duration,
    /// Serve the operator's /metrics, /healthz and /readyz here.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let config = Config {
        node: Some(NodeConfig {
            pod_start_delay: args.pod_start_delay,
            ..NodeConfig::default()
        }),
        ..Config::default()
    };
    let plane = ControlPlane::start(&args.data_dir, args.listen, config).await?;
    let kubeconfig_path = args
        .write_kubeconfig
        .clone()
        .unwrap_or_else(|| args.data_dir.join("kubeconfig"));
    if let Some(path) = &args.write_kubeconfig {
        kubeconfig::write_private(path, &plane.kubeconfig)?;
    }
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
