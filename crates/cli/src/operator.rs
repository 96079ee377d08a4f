//! `steady operator`: the Cache operator alone, against any cluster (steady's own or a real
//! one), with metrics and probes, optionally behind leader election. Flags only: serving,
//! campaigning, gating, draining and releasing are the runtime's [`Operator`]'s. Losing the
//! Lease ends the process with an error, so that it is restarted (as controller-runtime's
//! manager does).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, PostParams};
use steady_runtime::Operator;
use steady_runtime::leader::LeaderElectionConfig;

use crate::shutdown::Shutdown;

#[derive(clap::Args, Debug)]
pub struct OperatorArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_addr: SocketAddr,
    /// Campaign for a Lease and reconcile only while holding it (for several replicas).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease (default: $POD_NAMESPACE or `default`).
    #[arg(long)]
    pub leader_elect_namespace: Option<String>,
    /// How long a Lease stays valid without renewal.
    #[arg(long, default_value = "15s", value_parser = crate::server::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// A leader that cannot renew within this long steps down.
    #[arg(long, default_value = "10s", value_parser = crate::server::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire and leaders renew.
    #[arg(long, default_value = "2s", value_parser = crate::server::parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Serve the live web view here (HTTPS, self-signed; a login link is printed).
    #[arg(long, value_name = "ADDR", conflicts_with = "leader_elect")]
    pub ui: Option<SocketAddr>,
}

const LEASE_NAME: &str = "steady-cache-operator";

/// A client from `--kubeconfig`, or kube-rs's usual inference.
pub async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("kubeconfig {} is not usable", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no kubeconfig found (pass --kubeconfig, set KUBECONFIG, or run in a cluster)",
        )?,
    };
    Client::try_from(config).context("cannot build a Kubernetes client")
}

/// Create the Cache CRD if it is missing (a real cluster's manifests usually install it).
pub async fn ensure_crd(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = steady_cache_operator::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    match crds.get_opt(&name).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {
                tracing::info!(%name, "installed the Cache CRD");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(e) => Err(e).context("cannot install the Cache CRD"),
        },
        Err(kube::Error::Api(status)) if status.code == 403 => {
            tracing::warn!("not allowed to read CRDs; assuming the Cache CRD is installed");
            Ok(())
        }
        Err(e) => Err(e).context("cannot read the Cache CRD"),
    }
}

/// The Cache controller (named `cache` in metrics and the web view) and the context its
/// reconciler reads through, on the wall clock: what every command runs.
pub fn cache_controller(
    client: Client,
) -> (
    steady_runtime::Controller<steady_cache_operator::Cache>,
    Arc<steady_cache_operator::OperatorContext>,
) {
    let config = steady_cache_operator::default_config();
    steady_cache_operator::controller(client, config, steady_cache_operator::system_clock())
}

/// Run the operator with `client` until `shutdown` (the runtime's [`Operator`] serves the
/// probes, campaigns, drains and releases the Lease); announces each step on stdout.
pub async fn run_operator(
    client: Client,
    metrics_addr: Option<SocketAddr>,
    leader: Option<LeaderElectionConfig>,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    ensure_crd(&client).await?;
    let mut operator = Operator::new(client.clone());
    if let Some(addr) = metrics_addr {
        let (listener, bound) = crate::server::bind(addr, "metrics").await?;
        println!("metrics and probes on http://{bound}/metrics (/healthz, /readyz)");
        operator = operator.metrics_listener(listener);
    }
    if let Some(config) = leader {
        println!("waiting to become leader (Lease {})", config.name);
        tokio::spawn(announce_leadership(operator.leadership()));
        operator = operator.leader_election(config);
    }
    let (controller, data) = cache_controller(client);
    println!("the Cache operator is running");
    operator
        .run(
            controller,
            steady_cache_operator::reconcile,
            data,
            shutdown.wait(),
        )
        .await
        .context("the Cache operator stopped")
}

/// Prints each change of leadership, until the runner is gone.
async fn announce_leadership(mut leading: tokio::sync::watch::Receiver<bool>) {
    while leading.changed().await.is_ok() {
        if *leading.borrow_and_update() {
            println!("became leader; reconciling");
        } else {
            println!("no longer leader; stopped reconciling");
        }
    }
}

pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_ref()).await?;
    let leader = args.leader_elect.then(|| {
        let namespace = args
            .leader_elect_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "default".into());
        let identity = format!(
            "{}-{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "steady".into()),
            std::process::id()
        );
        LeaderElectionConfig {
            lease_duration: args.leader_elect_lease_duration,
            renew_deadline: args.leader_elect_renew_deadline,
            retry_period: args.leader_elect_retry_period,
            ..LeaderElectionConfig::new(namespace, LEASE_NAME, identity)
        }
    });
    if let Some(config) = &leader {
        config
            .validate()
            .context("invalid leader-election settings")?;
    }
    if let Some(addr) = args.ui {
        let shutdown = Shutdown::on_signal();
        return crate::up::operate_with_ui(client, addr, Some(args.metrics_addr), shutdown).await;
    }
    run_operator(
        client,
        Some(args.metrics_addr),
        leader,
        Shutdown::on_signal(),
    )
    .await
}
