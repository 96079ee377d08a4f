//! `steady manifests`: YAML that installs the Cache operator on a real cluster.

use steady_cache_operator::manifests::{ManifestOptions, manifests_yaml};

#[derive(clap::Args, Debug)]
pub struct ManifestsArgs {
    /// Namespace for the operator's ServiceAccount and Deployment.
    #[arg(long, default_value = "steady-system")]
    pub namespace: String,
    /// The operator's container image (it runs `steady operator`).
    #[arg(long, default_value = "ghcr.io/steady-dev/steady:latest")]
    pub image: String,
    /// Port of /metrics, /healthz and /readyz in the pod.
    #[arg(long, default_value_t = 8080)]
    pub metrics_port: u16,
}

pub fn run(args: ManifestsArgs) -> anyhow::Result<()> {
    let options = ManifestOptions {
        namespace: args.namespace,
        image: args.image,
        metrics_port: args.metrics_port,
    };
    print!("{}", manifests_yaml(&options)?);
    Ok(())
}
