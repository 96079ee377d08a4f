//! `steady server`: the control plane alone, over HTTPS.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use steady_apiserver::node::NodeConfig;
use steady_apiserver::{ApiServer, Config, auth, kubeconfig, tls};
use steady_store::{Store, StoreOptions};

#[derive(clap::Args, Debug)]
pub struct ServerArgs {
    #[command(flatten)]
    pub plane: ControlPlaneArgs,
}

/// Flags of every command that runs the embedded control plane (`server`, `up`).
#[derive(clap::Args, Debug)]
pub struct ControlPlaneArgs {
    /// Directory for the database, certificates and token (created if missing).
    #[arg(long, default_value = ".steady")]
    pub data_dir: PathBuf,
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Also write a kubeconfig for this server to FILE.
    #[arg(long, value_name = "FILE")]
    pub write_kubeconfig: Option<PathBuf>,
    /// How long the simulated node takes to start a pod (e.g. 200ms, 2s).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub pod_start_delay: Duration,
}

/// `250ms`, `2s`, `1m`: a number and a unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 200ms, 2s or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        _ => Err(format!("{text:?}: the unit must be ms, s or m")),
    }
}

/// A running control plane: the API server plus its HTTPS listener address and credentials.
pub struct ControlPlane {
    pub api: ApiServer,
    pub url: String,
    pub kubeconfig: String,
    listener: tokio::net::TcpListener,
    credentials: tls::Credentials,
}

impl ControlPlane {
    /// Open the store in `data_dir`, start the API server and bind `listen`.
    pub async fn start(
        data_dir: &Path,
        listen: SocketAddr,
        config: Config,
    ) -> anyhow::Result<ControlPlane> {
        let store = Store::sqlite(&data_dir.join("state.db"), StoreOptions::default())
            .await
            .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
        let api = ApiServer::start(store, config)
            .await
            .context("cannot start the API server")?;
        let credentials =
            tls::load_or_create(&data_dir.join("pki")).context("cannot prepare TLS credentials")?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let address = listener
            .local_addr()
            .context("cannot read the listening address")?;
        let url = format!("https://{address}");
        let kubeconfig = kubeconfig::render(&url, &credentials.ca_cert_pem, &credentials.token);
        kubeconfig::write_private(&data_dir.join("kubeconfig"), &kubeconfig)
            .with_context(|| format!("cannot write {}", data_dir.join("kubeconfig").display()))?;
        Ok(ControlPlane {
            api,
            url,
            kubeconfig,
            listener,
            credentials,
        })
    }

    /// Serve HTTPS until `shutdown` completes, then flush the store.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        self.serve_with(|router| router, shutdown).await
    }

    /// [`ControlPlane::serve`], with `wrap` applied to the API's Router before the token
    /// check (benchmarks count requests this way).
    pub async fn serve_with(
        self,
        wrap: impl FnOnce(axum::Router) -> axum::Router,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let tls_config = tls::server_config(&self.credentials).context("cannot configure TLS")?;
        let app = auth::require_token(wrap(self.api.router()), &self.credentials.token);
        let serving = steady_apiserver::serve::ServingConfig::from_env()?;
        steady_apiserver::serve::serve(self.listener, app, tls_config, &serving, shutdown).await;
        tracing::info!("shutting down");
        self.api.shutdown().await;
        Ok(())
    }
}

impl ControlPlaneArgs {
    /// Start the control plane these flags describe; writes `--write-kubeconfig` too.
    /// Returns the plane and the kubeconfig path to tell the user.
    pub async fn start(&self) -> anyhow::Result<(ControlPlane, PathBuf)> {
        if !self.listen.ip().is_loopback() {
            tracing::warn!(listen = %self.listen, "listening beyond loopback: anyone who can reach this address and holds the token can use the API");
        }
        let config = Config {
            node: Some(NodeConfig {
                pod_start_delay: self.pod_start_delay,
                ..NodeConfig::default()
            }),
            ..Config::default()
        };
        let plane = ControlPlane::start(&self.data_dir, self.listen, config).await?;
        if let Some(path) = &self.write_kubeconfig {
            kubeconfig::write_private(path, &plane.kubeconfig)
                .with_context(|| format!("cannot write kubeconfig {}", path.display()))?;
        }
        let path = self
            .write_kubeconfig
            .clone()
            .unwrap_or_else(|| self.data_dir.join("kubeconfig"));
        Ok((plane, path))
    }
}

pub async fn run(args: ServerArgs) -> anyhow::Result<()> {
    let (plane, kubeconfig_path) = args.plane.start().await?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "steady server listening on {}", plane.url)?;
    writeln!(out, "kubeconfig: {}", kubeconfig_path.display())?;
    writeln!(
        out,
        "try: kubectl --kubeconfig {} get namespaces",
        kubeconfig_path.display()
    )?;
    out.flush()?;
    drop(out);
    plane.serve(crate::shutdown::signal()).await
}
