//! `steady server`: the control plane alone, over HTTPS; and what every command that runs
//! the control plane shares: its flags, the data directory (private, locked by one
//! process at a time) and the start-up sequence.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use steady_apiserver::{ApiServer, Config, auth, kubeconfig, tls};
use steady_cluster::node::NodeConfig;
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
    /// How many simulated nodes register (named steady-node-0, steady-node-1, …; one is
    /// named steady-node).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub nodes: u16,
    /// Memory for old revisions kept for reads and watches at a past resourceVersion
    /// (e.g. 64MiB, 1GiB). Past it the store compacts early: older resourceVersions
    /// answer 410 Expired and clients relist.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size)]
    pub history_budget: u64,
}

/// `256MiB`, `1GiB`, `64Mi`, `500MB`, `1048576`: a number and an optional unit, binary
/// (`Ki`, `Mi`, `Gi`, with or without a trailing `B`) or decimal (`KB`, `MB`, `GB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let (value, unit) = number_and_unit(text)
        .ok_or_else(|| format!("{text:?} is not a size like 256MiB or 1GiB"))?;
    let multiplier: u64 = match unit {
        "" | "B" => 1,
        "Ki" | "KiB" => 1 << 10,
        "Mi" | "MiB" => 1 << 20,
        "Gi" | "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => {
            return Err(format!(
                "{text:?}: the unit must be B, KiB, MiB, GiB, KB, MB or GB"
            ));
        }
    };
    value
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// The leading decimal number of `text` and what follows it.
fn number_and_unit(text: &str) -> Option<(u64, &str)> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    Some((number.parse().ok()?, unit))
}

/// A listener on `addr` (port 0 picks a free one) for `what`, and the address it got.
pub async fn bind(
    addr: SocketAddr,
    what: &str,
) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot serve {what} on {addr}"))?;
    let bound = listener
        .local_addr()
        .with_context(|| format!("cannot read the address of {what}"))?;
    Ok((listener, bound))
}

/// `250ms`, `2s`, `1m`: a number and a unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (value, unit) = number_and_unit(text)
        .ok_or_else(|| format!("{text:?} is not a duration like 200ms, 2s or 1m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => Ok(Duration::from_secs(value)),
        "m" => Ok(Duration::from_secs(value * 60)),
        _ => Err(format!("{text:?}: the unit must be ms, s or m")),
    }
}

/// The data directory of a running control plane, claimed by this process: it holds the
/// store, the CA key and the token, so it is private (0700), and only one process may use
/// it at a time (two writers on one database make the loser fail every write while it
/// serves stale reads).
///
/// The claim is an exclusive `flock` on `lock` in the directory, which holds the owner's
/// pid; the kernel drops it when the process ends, SIGKILL included, so a crashed server's
/// directory can be reopened at once. Keep the value alive until the store is shut down.
pub struct DataDir {
    _lock: std::fs::File,
}

impl DataDir {
    /// Create `dir` (0700) if missing and lock it, failing at once if another process
    /// holds it; then narrow a looser mode of an existing directory to 0700.
    pub fn claim(dir: &Path) -> anyhow::Result<DataDir> {
        create_private_dir(dir)
            .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
        let lock_path = dir.join("lock");
        let mut lock = open_private_file(&lock_path)
            .with_context(|| format!("cannot open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let owner = std::fs::read_to_string(&lock_path)
                    .ok()
                    .and_then(|text| text.trim().parse::<u32>().ok())
                    .map_or_else(
                        || "another steady process".to_string(),
                        |pid| format!("steady (pid {pid})"),
                    );
                anyhow::bail!(
                    "data directory {} is in use by {owner}: stop it or choose another --data-dir",
                    dir.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", lock_path.display()));
            }
        }
        lock.set_len(0)
            .and_then(|()| writeln!(lock, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", lock_path.display()))?;
        make_private(dir, 0o700)
            .with_context(|| format!("cannot restrict {} to its owner", dir.display()))?;
        Ok(DataDir { _lock: lock })
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Opens (creating it 0600 if missing, never truncating) a file only its owner may read.
fn open_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    make_private(path, 0o600)?;
    Ok(file)
}

/// Narrows `path` to `mode` if group or others have any access to it.
#[cfg(unix)]
fn make_private(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = std::fs::metadata(path)?.permissions().mode();
    if current & 0o077 != 0 {
        tracing::info!(path = %path.display(), from = format!("{:o}", current & 0o777), to = format!("{mode:o}"), "restricting to the owner");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn make_private(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// A running control plane: the API server plus its HTTPS listener address and credentials.
pub struct ControlPlane {
    pub api: ApiServer,
    pub url: String,
    pub kubeconfig: String,
    listener: tokio::net::TcpListener,
    credentials: tls::Credentials,
    /// The simulated nodes' task, if they run beside the API (stopped before the store).
    nodes: Option<tokio::task::JoinHandle<Result<(), steady_cluster::node::Error>>>,
    /// Declared last: dropped (unlocked) only after everything that uses the directory.
    _data_dir: DataDir,
}

impl ControlPlane {
    /// Open the store in `data_dir`, start the API server and bind `listen`.
    pub async fn start(
        data_dir: &Path,
        listen: SocketAddr,
        config: Config,
    ) -> anyhow::Result<ControlPlane> {
        Self::start_with_store(data_dir, listen, config, StoreOptions::default()).await
    }

    /// [`ControlPlane::start`] with these store options. Claims `data_dir` first (see
    /// [`DataDir`]): if another process holds it, this fails before touching anything.
    pub async fn start_with_store(
        data_dir: &Path,
        listen: SocketAddr,
        config: Config,
        store_options: StoreOptions,
    ) -> anyhow::Result<ControlPlane> {
        let claimed = DataDir::claim(data_dir)?;
        let store = Store::sqlite(&data_dir.join("state.db"), store_options)
            .await
            .with_context(|| format!("cannot open the store in {}", data_dir.display()))?;
        let credentials =
            tls::load_or_create(&data_dir.join("pki")).context("cannot prepare TLS credentials")?;
        let (listener, address) = bind(listen, "the API").await?;
        let config = Config {
            admin_token: Some(credentials.token.clone()),
            api_port: Some(address.port()),
            root_ca_pem: Some(credentials.ca_cert_pem.clone()),
            ..config
        };
        let api = ApiServer::start(store, config)
            .await
            .context("cannot start the API server")?;
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
            nodes: None,
            _data_dir: claimed,
        })
    }

    /// Stop the simulated nodes, then the API server (flushing the store).
    pub async fn shutdown(&self) {
        shut_down(&self.api, self.nodes.as_ref()).await;
    }

    /// Run the simulated nodes `config` describes beside the API, through its in-process
    /// client, until the plane shuts down.
    pub fn with_nodes(mut self, config: NodeConfig) -> Self {
        self.nodes = Some(steady_cluster::node::spawn(self.api.client(), config));
        self
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
        let token = self.credentials.token.clone();
        let server = self.api.clone();
        self.serve_composed(
            |api| auth::authenticate(wrap(api), &server, &token),
            shutdown,
        )
        .await
    }

    /// The admin bearer token (what the kubeconfig holds).
    pub fn admin_token(&self) -> &str {
        &self.credentials.token
    }

    /// [`ControlPlane::serve`] with `beside` answering the paths it routes (the web view,
    /// which checks credentials itself) and the token-checked API everything else.
    pub async fn serve_beside(
        self,
        beside: axum::Router,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let token = self.credentials.token.clone();
        let server = self.api.clone();
        self.serve_composed(
            |api| beside.fallback_service(auth::authenticate(api, &server, &token)),
            shutdown,
        )
        .await
    }

    async fn serve_composed(
        self,
        compose: impl FnOnce(axum::Router) -> axum::Router,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let tls_config = tls::server_config(&self.credentials).context("cannot configure TLS")?;
        let app = compose(self.api.router());
        let serving = steady_apiserver::serve::ServingConfig::from_env()?;
        steady_apiserver::serve::serve(self.listener, app, tls_config, &serving, shutdown).await;
        tracing::info!("shutting down");
        shut_down(&self.api, self.nodes.as_ref()).await;
        Ok(())
    }
}

/// Stop the simulated nodes (if they run), then the API server (flushing the store).
async fn shut_down(
    api: &ApiServer,
    nodes: Option<&tokio::task::JoinHandle<Result<(), steady_cluster::node::Error>>>,
) {
    if let Some(nodes) = nodes {
        nodes.abort();
    }
    api.shutdown().await;
}

impl ControlPlaneArgs {
    /// Start the control plane these flags describe; writes `--write-kubeconfig` too.
    /// Returns the plane and the kubeconfig path to tell the user.
    pub async fn start(&self) -> anyhow::Result<(ControlPlane, PathBuf)> {
        if !self.listen.ip().is_loopback() {
            tracing::warn!(listen = %self.listen, "listening beyond loopback: anyone who can reach this address and holds the token can use the API");
        }
        let config = Config::default();
        let nodes = NodeConfig {
            pod_start_delay: self.pod_start_delay,
            nodes: usize::from(self.nodes),
            ..NodeConfig::default()
        };
        let store_options = StoreOptions {
            max_history_bytes: self.history_budget,
            ..StoreOptions::default()
        };
        let plane =
            ControlPlane::start_with_store(&self.data_dir, self.listen, config, store_options)
                .await?
                .with_nodes(nodes);
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

#[cfg(test)]
mod tests {
    use super::*;
    use steady_store::DEFAULT_MAX_HISTORY_BYTES;

    #[test]
    fn sizes_take_binary_and_decimal_units() {
        assert_eq!(parse_size("256MiB"), Ok(DEFAULT_MAX_HISTORY_BYTES));
        assert_eq!(parse_size("64Mi"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 MiB").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("1TiB").is_err());
        assert!(parse_size("99999999999999GiB").is_err());
    }
}
