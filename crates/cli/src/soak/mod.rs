//! `steady soak`: the long-campaign half of the reliability suite (docs/RELIABILITY.md).
//!
//! - `soak fuzz` sends seeded, mostly valid and partly hostile requests over HTTPS and checks
//!   every answer (no 5xx, no dropped connection, a `Status` for every error) and that
//!   every stored object still reads back.
//! - `soak kill` SIGKILLs a `steady server` under concurrent writers, restarts it on the
//!   same directory and checks every acknowledged write.
//!
//! It talks to the server only as a client does (HTTPS, the token, kube-rs's HTTP stack)
//! and runs the server as a child process (this same binary), so it knows nothing of the
//! apiserver's or the store's insides.

mod fuzz;
mod generate;
mod kill;
pub mod ledger;
mod readback;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    #[command(subcommand)]
    command: SoakCommand,
}

#[derive(clap::Subcommand, Debug)]
enum SoakCommand {
    /// Seeded request fuzzer over the API surface; exits non-zero on any failure.
    Fuzz(fuzz::FuzzArgs),
    /// SIGKILL loop under concurrent writers; exits non-zero if an acknowledged write is lost.
    Kill(kill::KillArgs),
}

pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    match args.command {
        SoakCommand::Fuzz(args) => fuzz::run(args).await,
        SoakCommand::Kill(args) => kill::run(args).await,
    }
}

/// How long a child server may take to announce its address.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A `steady server` child process (this same binary) on a data directory.
/// Dropping it kills the process.
struct ChildServer {
    child: Child,
    kubeconfig: PathBuf,
    /// The server's stderr (its log), kept for the report.
    log: PathBuf,
}

impl ChildServer {
    /// Start `steady server` on `data_dir` listening on a free loopback port, and wait until
    /// it announces its address. The kubeconfig is `data_dir/kubeconfig`; the log goes to
    /// `log` (appended, so restarts keep the earlier runs' logs). `extra` are further
    /// arguments of `steady server`.
    async fn start(data_dir: &Path, log: &Path, extra: &[&str]) -> anyhow::Result<ChildServer> {
        let exe = std::env::current_exe().context("cannot find the steady binary")?;
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let mut child = Command::new(exe)
            .arg("server")
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .context("cannot start steady server")?;
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let mut lines = BufReader::new(stdout).lines();
        let announced = tokio::time::timeout(STARTUP_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if line.contains("listening on https://") {
                    return Ok(true);
                }
            }
            Ok::<bool, std::io::Error>(false)
        })
        .await;
        match announced {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) | Ok(Err(_)) => bail!(
                "steady server exited before listening (log: {})",
                log.display()
            ),
            Err(_) => bail!(
                "steady server did not listen within {STARTUP_TIMEOUT:?} (log: {})",
                log.display()
            ),
        }
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(ChildServer {
            child,
            kubeconfig: data_dir.join("kubeconfig"),
            log: log.to_path_buf(),
        })
    }

    async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from(&self.kubeconfig, None).await
    }

    /// Send SIGKILL now, without waiting.
    fn send_sigkill(&mut self) -> anyhow::Result<()> {
        self.child.start_kill().context("cannot SIGKILL the server")
    }

    async fn wait_exit(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        tokio::time::timeout(STARTUP_TIMEOUT, self.child.wait())
            .await
            .context("the server did not exit")?
            .context("cannot wait for the server")
    }

    /// Whether the process is still running.
    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stop with SIGTERM and wait; an error if it does not exit cleanly.
    async fn terminate(mut self) -> anyhow::Result<()> {
        let pid = self.child.id().context("the server already exited")?;
        let sent = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .context("cannot run kill")?;
        if !sent.success() {
            bail!("kill -TERM {pid} failed");
        }
        let status = self.wait_exit().await?;
        if !status.success() {
            bail!("steady server exited with {status} after SIGTERM");
        }
        Ok(())
    }

    /// Lines of the server's log that show a panic.
    fn panics(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.contains("panicked"))
            .map(str::to_string)
            .collect()
    }
}

/// A kube-rs client from a kubeconfig, without retries (each request is sent once, so
/// what the fuzzer sees is what the server answered), optionally pointed at `server_url`.
async fn client_from(kubeconfig: &Path, server_url: Option<&str>) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read kubeconfig {}", kubeconfig.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .with_context(|| format!("cannot use kubeconfig {}", kubeconfig.display()))?;
    if let Some(url) = server_url {
        config.cluster_url = url
            .parse()
            .with_context(|| format!("{url:?} is not a URL"))?;
    }
    config.default_retry = false;
    config.read_timeout = None;
    kube::Client::try_from(config).context("cannot build a client")
}
