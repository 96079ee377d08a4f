//! `steady up`: the embedded default — control plane, simulated node, the workload
//! controllers (steady-cluster), the Cache CRD and the Cache operator in one process, state
//! kept in the data directory — and the live web view of the operator (`/ui/` on the API's
//! TLS listener, behind a one-time login link).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use futures::FutureExt;
use kube::Client;
use steady_runtime::Recorder;
use steady_runtime::metrics::{self, Health, Metrics};
use steady_ui::{Switch, Ui};

use crate::server::ControlPlaneArgs;
use crate::shutdown::Shutdown;

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub plane: ControlPlaneArgs,
    /// Serve the operator's /metrics, /healthz and /readyz here.
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Do not serve the web view (/ui/).
    #[arg(long)]
    pub no_ui: bool,
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let (plane, kubeconfig_path) = args.plane.start().await?;
    let shutdown = Shutdown::on_signal();
    let client = plane.api.client();
    crate::operator::ensure_crd(&client).await?;
    let recorder = Recorder::new();
    let switch = Switch::new(true);
    let ui = (!args.no_ui).then(|| {
        Ui::new(
            client.clone(),
            recorder.clone(),
            plane.admin_token(),
            Some(switch.clone()),
        )
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "steady up: control plane listening on {}", plane.url)?;
    writeln!(out, "kubeconfig: {}", kubeconfig_path.display())?;
    if let Some(ui) = &ui {
        writeln!(
            out,
            "web view (log in once with this link): {}{}",
            plane.url,
            ui.login_path()
        )?;
    }
    writeln!(out, "the Cache operator is running; try:")?;
    writeln!(out, "  export KUBECONFIG={}", kubeconfig_path.display())?;
    writeln!(
        out,
        "  kubectl apply -f examples/cache.yaml && kubectl get caches,pods -w"
    )?;
    out.flush()?;
    drop(out);
    // kube-controller-manager's part: the workload controllers (Deployments, ReplicaSets,
    // Jobs, StatefulSets, DaemonSets: steady_cluster::CONTROLLERS).
    let cluster = tokio::spawn(steady_cluster::run(client.clone(), shutdown.clone().wait()));
    let operator = tokio::spawn(supervise(
        client,
        args.metrics_addr,
        recorder,
        switch,
        shutdown.clone(),
    ));
    let served = match ui {
        Some(ui) => {
            plane
                .serve_beside(ui.router(), shutdown.clone().wait())
                .await
        }
        None => plane.serve(shutdown.clone().wait()).await,
    };
    let operated = operator
        .await
        .map_err(|e| anyhow::anyhow!("the operator task failed: {e}"))?;
    let clustered = cluster
        .await
        .map_err(|e| anyhow::anyhow!("the cluster controllers' task failed: {e}"))?
        .map_err(anyhow::Error::from);
    served.and(operated).and(clustered)
}

/// `steady operator --ui ADDR`: the Cache operator (under the view's switch) and its web
/// view alone on `addr`, over HTTPS with a self-signed certificate made for this run, and
/// a login link printed as `steady up` does.
pub async fn operate_with_ui(
    client: Client,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    crate::operator::ensure_crd(&client).await?;
    let pki =
        tempfile::tempdir().context("cannot create a directory for the view's certificate")?;
    let credentials = steady_apiserver::tls::load_or_create(pki.path())
        .context("cannot create the view's TLS certificate")?;
    let tls = steady_apiserver::tls::server_config(&credentials).context("cannot configure TLS")?;
    let (listener, bound) = crate::server::bind(addr, "the web view").await?;
    let recorder = Recorder::new();
    let switch = Switch::new(true);
    let ui = Ui::new(
        client.clone(),
        recorder.clone(),
        &credentials.token,
        Some(switch.clone()),
    );
    println!(
        "web view (log in once with this link): https://{bound}{}",
        ui.login_path()
    );
    let operator = tokio::spawn(supervise(
        client,
        metrics_addr,
        recorder,
        switch,
        shutdown.clone(),
    ));
    let serving = steady_apiserver::serve::ServingConfig::from_env()?;
    steady_apiserver::serve::serve(listener, ui.router(), tls, &serving, shutdown.wait()).await;
    operator
        .await
        .map_err(|e| anyhow::anyhow!("the operator task failed: {e}"))?
}

/// Run the Cache operator while `switch` is on (the web view's stop and start buttons),
/// until `shutdown`. A restart begins with empty caches, as a new process would: it
/// converges from what it observes, not from the events it missed while stopped.
async fn supervise(
    client: Client,
    metrics_addr: Option<SocketAddr>,
    recorder: Recorder,
    switch: Switch,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let health = Health::default();
    if let Some(addr) = metrics_addr {
        let bound = metrics::serve(
            addr,
            metrics.clone(),
            health.clone(),
            shutdown.clone().wait(),
        )
        .await
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
        println!("metrics and probes on http://{bound}/metrics (/healthz, /readyz)");
    }
    println!("the Cache operator is running");
    let mut wanted = switch.subscribe();
    loop {
        tokio::select! {
            _ = wanted.wait_for(|on| *on) => {}
            _ = shutdown.clone().wait() => return Ok(()),
        }
        let config = steady_runtime::Config {
            name: "cache".into(),
            ..Default::default()
        };
        let controller = steady_cache_operator::controller(client.clone(), config)
            .with_metrics(metrics.clone())
            .with_health(health.clone())
            .with_recorder(recorder.clone());
        let mut off = switch.subscribe();
        let stop = shutdown.clone();
        let stopped = async move {
            tokio::select! {
                _ = off.wait_for(|on| !*on) => tracing::info!("the Cache operator is stopped (web view)"),
                _ = stop.wait() => {}
            }
        };
        let data = Arc::new(steady_cache_operator::OperatorContext::default());
        controller
            .run(steady_cache_operator::reconcile, data, stopped)
            .await
            .context("the Cache controller stopped")?;
        if shutdown.clone().wait().now_or_never().is_some() {
            return Ok(());
        }
    }
}
