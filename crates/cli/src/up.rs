//! `steady up`: the embedded default — control plane, simulated node, the workload
//! controllers (steady-cluster), the Cache CRD and the Cache operator in one process, state
//! kept in the data directory — and the live web view of the operator (`/ui/` on the API's
//! TLS listener, behind a one-time login link).

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use futures::FutureExt;
use kube::Client;
use steady_runtime::{Operator, Recorder};
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
    steady_cluster::volumes::ensure_default_class(&client).await?;
    let operator = Switched::new();
    let ui = (!args.no_ui).then(|| operator.view(&client, plane.admin_token()));
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
    // kube-controller-manager's part: the workload controllers (steady_cluster::CONTROLLERS).
    let cluster = tokio::spawn(steady_cluster::run(client.clone(), shutdown.clone().wait()));
    let operator = operator
        .spawn(client, args.metrics_addr, shutdown.clone())
        .await?;
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
    let operator = Switched::new();
    let ui = operator.view(&client, &credentials.token);
    println!(
        "web view (log in once with this link): https://{bound}{}",
        ui.login_path()
    );
    let operator = operator
        .spawn(client, metrics_addr, shutdown.clone())
        .await?;
    println!("the Cache operator is running");
    let serving = steady_apiserver::serve::ServingConfig::from_env()?;
    steady_apiserver::serve::serve(listener, ui.router(), tls, &serving, shutdown.wait()).await;
    operator
        .await
        .map_err(|e| anyhow::anyhow!("the operator task failed: {e}"))?
}

/// The Cache operator under the web view: what the view shows (the recorder) and the
/// stop/start switch it turns.
struct Switched {
    recorder: Recorder,
    switch: Switch,
}

impl Switched {
    fn new() -> Self {
        Switched {
            recorder: Recorder::new(),
            switch: Switch::new(true),
        }
    }

    /// The web view of this operator, for whoever logs in with `token`.
    fn view(&self, client: &Client, token: &str) -> Ui {
        Ui::new(
            client.clone(),
            self.recorder.clone(),
            token,
            Some(self.switch.clone()),
        )
    }

    /// Bind the metrics address (if any) and run the operator under the switch in a task.
    async fn spawn(
        self,
        client: Client,
        metrics_addr: Option<SocketAddr>,
        shutdown: Shutdown,
    ) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<()>>> {
        let metrics = MetricsSocket::bind_if(metrics_addr).await?;
        Ok(tokio::spawn(supervise(
            client,
            metrics,
            self.recorder,
            self.switch,
            shutdown,
        )))
    }
}

/// Run the Cache operator while `switch` is on (the web view's stop and start buttons),
/// until `shutdown`. Each run is one run of the runtime's [`Operator`], which serves the
/// metrics and probes, and drains on stop as `steady operator` does. A restart begins
/// with empty caches and a fresh metrics registry, as a new process would: it converges
/// from what it observes, not from the events it missed while stopped.
async fn supervise(
    client: Client,
    metrics_socket: Option<MetricsSocket>,
    recorder: Recorder,
    switch: Switch,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut wanted = switch.subscribe();
    loop {
        tokio::select! {
            _ = wanted.wait_for(|on| *on) => {}
            _ = shutdown.clone().wait() => return Ok(()),
        }
        let mut operator = Operator::new(client.clone());
        if let Some(socket) = &metrics_socket {
            operator = operator.metrics_listener(socket.listener()?);
        }
        let (controller, data) = crate::operator::cache_controller(client.clone());
        let mut off = switch.subscribe();
        let stop = shutdown.clone();
        let stopped = async move {
            tokio::select! {
                _ = off.wait_for(|on| !*on) => tracing::info!("the Cache operator is stopped (web view)"),
                _ = stop.wait() => {}
            }
        };
        operator
            .run(
                controller.with_recorder(recorder.clone()),
                steady_cache_operator::reconcile,
                data,
                stopped,
            )
            .await
            .context("the Cache operator stopped")?;
        if shutdown.clone().wait().now_or_never().is_some() {
            return Ok(());
        }
    }
}

/// The metrics address, bound once so that every run of the operator serves on the same
/// port (`127.0.0.1:0` included).
struct MetricsSocket(std::net::TcpListener);

impl MetricsSocket {
    /// Bind `addr`, if one is asked for, and say where the probes are.
    async fn bind_if(addr: Option<SocketAddr>) -> anyhow::Result<Option<Self>> {
        let Some(addr) = addr else {
            return Ok(None);
        };
        let (listener, bound) = crate::server::bind(addr, "metrics").await?;
        println!("metrics and probes on http://{bound}/metrics (/healthz, /readyz)");
        let listener = listener
            .into_std()
            .context("cannot hand over the metrics socket")?;
        Ok(Some(MetricsSocket(listener)))
    }

    /// The socket again, for one run of the operator (which stops serving when it stops).
    fn listener(&self) -> anyhow::Result<tokio::net::TcpListener> {
        let socket = self
            .0
            .try_clone()
            .context("cannot share the metrics socket")?;
        tokio::net::TcpListener::from_std(socket).context("cannot serve the metrics socket")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    const WAIT: Duration = Duration::from_secs(60);

    /// The status line of `GET path`, or `None` when nothing answers within a second.
    async fn status_line(addr: SocketAddr, path: &str) -> Option<String> {
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).await.ok()?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await.ok()?;
            response.lines().next().map(str::to_string)
        };
        tokio::time::timeout(Duration::from_secs(1), exchange)
            .await
            .ok()
            .flatten()
    }

    async fn ready(addr: SocketAddr) -> bool {
        status_line(addr, "/readyz")
            .await
            .is_some_and(|line| line.contains(" 200 "))
    }

    /// The switch stops the runner (its probes go quiet) and starts a new run, which
    /// serves the probes again on the same address.
    #[tokio::test]
    async fn the_switch_stops_and_restarts_the_runner_on_one_metrics_address() {
        let store = steady_store::Store::in_memory(Default::default())
            .await
            .expect("store");
        let server = steady_apiserver::ApiServer::start(store, Default::default())
            .await
            .expect("server");
        let client = server.client();
        crate::operator::ensure_crd(&client).await.expect("CRD");
        let socket = MetricsSocket::bind_if(Some(([127, 0, 0, 1], 0).into()))
            .await
            .expect("bind")
            .expect("a socket");
        let addr = socket.0.local_addr().expect("address");
        let switch = Switch::new(true);
        let (stop, shutdown) = Shutdown::manual();
        let supervised = tokio::spawn(supervise(
            client,
            Some(socket),
            Recorder::new(),
            switch.clone(),
            shutdown,
        ));

        let polled = |what: &'static str, want: bool| {
            steady_test_support::eventually(what, WAIT, move || async move {
                (ready(addr).await == want).then_some(())
            })
        };
        polled("ready on the first run", true).await;
        switch.set(false);
        polled("the stopped runner no longer answers", false).await;
        switch.set(true);
        polled("ready again on the second run", true).await;

        let _ = stop.send(true);
        tokio::time::timeout(WAIT, supervised)
            .await
            .expect("the supervisor stops on shutdown")
            .expect("joined")
            .expect("a clean stop");
    }
}
