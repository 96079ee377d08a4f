//! Shared helpers for the end-to-end tests of `steady server`: start the real binary on a
//! data directory, wait for the line that announces its address, build kube-rs clients
//! from the kubeconfig it writes, and stop it (SIGTERM or SIGKILL) or kill it on drop.

#![allow(dead_code)] // Each test binary uses a different subset of these helpers.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// The longest a test waits for the server to start or to stop.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);

/// `steady server listening on https://…` and `steady up: control plane listening on https://…`.
const LISTENING_MARKER: &str = "listening on ";

/// A running `steady server` process. Dropping it kills the process (SIGKILL).
pub struct Server {
    child: Option<Child>,
    /// `https://127.0.0.1:PORT`, as printed by the server.
    pub url: String,
    pub data_dir: PathBuf,
    /// The file passed as `--write-kubeconfig`.
    pub kubeconfig: PathBuf,
    stdout: Arc<Mutex<Vec<u8>>>,
    /// Bumped on every stdout line, so that a test can wait for a line.
    stdout_lines: tokio::sync::watch::Receiver<usize>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
}

/// How to start a server.
#[derive(Clone, Debug)]
pub struct Options {
    /// Address for `--listen`; `127.0.0.1:0` picks a free port.
    pub listen: String,
    /// Extra environment, e.g. `RUST_LOG`.
    pub env: Vec<(String, String)>,
    /// `server` (default) or `up`.
    pub subcommand: String,
    /// Extra arguments after the standard ones.
    pub args: Vec<String>,
    /// Start the process with this open-file limit (soft and hard).
    pub fd_limit: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            listen: "127.0.0.1:0".to_string(),
            env: Vec::new(),
            subcommand: "server".to_string(),
            args: Vec::new(),
            fd_limit: None,
        }
    }
}

impl Server {
    /// Start `steady server` on `data_dir`, writing the client kubeconfig to `kubeconfig`.
    pub async fn start(data_dir: &Path, kubeconfig: &Path) -> Server {
        Self::start_with(data_dir, kubeconfig, Options::default()).await
    }

    pub async fn start_with(data_dir: &Path, kubeconfig: &Path, options: Options) -> Server {
        let mut command = steady_child(&[&options.subcommand]);
        command
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--listen")
            .arg(&options.listen)
            .arg("--write-kubeconfig")
            .arg(kubeconfig)
            .args(&options.args)
            .stderr(Stdio::piped());
        for (k, v) in &options.env {
            command.env(k, v);
        }
        #[cfg(unix)]
        if let Some(limit) = options.fd_limit {
            limit_open_files(&mut command, limit);
        }
        let mut child = command.spawn().expect("spawn steady server");

        let stdout_buf = Arc::new(Mutex::new(Vec::new()));
        let stderr_buf = Arc::new(Mutex::new(Vec::new()));
        let (url_tx, url_rx) = oneshot::channel::<String>();
        let (lines_tx, lines_rx) = tokio::sync::watch::channel(0usize);

        // Read stdout line by line: hand over the address once, keep everything.
        let stdout = child.stdout.take().expect("piped stdout");
        let buf = stdout_buf.clone();
        let stdout_task = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut url_tx = Some(url_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                {
                    let mut b = buf.lock().unwrap();
                    b.extend_from_slice(line.as_bytes());
                    b.push(b'\n');
                }
                lines_tx.send_modify(|n| *n += 1);
                if let Some(url) = line
                    .split_once(LISTENING_MARKER)
                    .map(|(_, url)| url)
                    .filter(|url| url.starts_with("https://"))
                    && let Some(tx) = url_tx.take()
                {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let mut stderr = child.stderr.take().expect("piped stderr");
        let buf = stderr_buf.clone();
        let stderr_task = tokio::spawn(async move {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                buf.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });

        let mut server = Server {
            child: Some(child),
            url: String::new(),
            data_dir: data_dir.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            stdout: stdout_buf,
            stdout_lines: lines_rx,
            stderr: stderr_buf,
            readers: vec![stdout_task, stderr_task],
        };
        match tokio::time::timeout(STARTUP_TIMEOUT, url_rx).await {
            Ok(Ok(url)) => server.url = url,
            Ok(Err(_)) => panic!(
                "steady server closed stdout without announcing its address\n{}",
                server.output()
            ),
            Err(_) => panic!(
                "steady server did not announce its address within {STARTUP_TIMEOUT:?}\n{}",
                server.output()
            ),
        }
        server
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .and_then(Child::id)
            .expect("server is running")
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        self.url
            .strip_prefix("https://")
            .expect("https url")
            .to_string()
    }

    /// Wait until stdout has a line containing `needle` (guarded by [`STARTUP_TIMEOUT`]).
    pub async fn wait_for_stdout(&self, needle: &str) -> String {
        let mut lines = self.stdout_lines.clone();
        let found = tokio::time::timeout(STARTUP_TIMEOUT, async {
            loop {
                let stdout = self.stdout();
                if let Some(line) = stdout.lines().find(|l| l.contains(needle)) {
                    return Some(line.to_string());
                }
                if lines.changed().await.is_err() {
                    // stdout is closed: the last look decides.
                    let stdout = self.stdout();
                    return stdout
                        .lines()
                        .find(|l| l.contains(needle))
                        .map(str::to_string);
                }
            }
        })
        .await;
        match found {
            Ok(Some(line)) => line,
            Ok(None) => panic!("stdout closed without {needle:?}\n{}", self.output()),
            Err(_) => panic!(
                "no {needle:?} on stdout within {STARTUP_TIMEOUT:?}\n{}",
                self.output()
            ),
        }
    }

    /// Everything the server wrote so far to stdout and stderr.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }
    pub fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}",
            self.stdout(),
            self.stderr()
        )
    }

    /// A kube-rs client from the kubeconfig the server wrote.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("kube client")
    }

    /// The kube-rs configuration from the kubeconfig the server wrote.
    pub async fn config(&self) -> kube::Config {
        config_from(&self.kubeconfig).await
    }

    /// Stop with SIGTERM and wait for the exit; the output pipes are drained too.
    pub async fn terminate(&mut self) -> ExitStatus {
        let pid = self.pid();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed");
        self.wait_exit().await
    }

    /// Kill with SIGKILL and wait for the exit.
    pub async fn kill(&mut self) -> ExitStatus {
        self.send_sigkill();
        self.wait_exit().await
    }

    /// Send SIGKILL now, without waiting (see [`Server::wait_exit`]).
    pub fn send_sigkill(&mut self) {
        self.child
            .as_mut()
            .expect("server is running")
            .start_kill()
            .expect("SIGKILL the server");
    }

    /// Wait for the process to exit (guarded by a timeout); the output pipes are drained too.
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("server is running");
        let status = match tokio::time::timeout(SHUTDOWN_TIMEOUT, child.wait()).await {
            Ok(status) => status.expect("wait for the server"),
            Err(_) => {
                let _ = child.start_kill();
                panic!(
                    "steady server did not exit within {SHUTDOWN_TIMEOUT:?}\n{}",
                    self.output()
                );
            }
        };
        // The process is gone, so its pipes reach end-of-file: collect the last output.
        for reader in self.readers.drain(..) {
            let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, reader).await;
        }
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Set the child's `RLIMIT_NOFILE` (soft and hard) between fork and exec.
#[cfg(unix)]
fn limit_open_files(command: &mut Command, limit: u64) {
    let rlimit = libc::rlimit {
        rlim_cur: limit as libc::rlim_t,
        rlim_max: limit as libc::rlim_t,
    };
    // SAFETY: the hook only calls setrlimit, which is async-signal-safe, on a struct it owns.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

impl Server {
    /// The bearer token from the data directory.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("pki/token"))
            .expect("read pki/token")
            .trim()
            .to_string()
    }

    /// CPU time (user + system) the server process has used so far, from /proc.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .expect("read /proc/PID/stat");
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let after_name = &stat[stat.rfind(')').expect("comm field") + 2..];
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }

    /// Resident memory of the server process, from /proc.
    pub fn rss_bytes(&self) -> u64 {
        rss_of(self.pid()).expect("VmRSS in /proc/PID/status")
    }

    /// A TLS connection to the server, trusting its CA and offering the ALPN `protocols`.
    pub async fn tls_connect(
        &self,
        protocols: &[&[u8]],
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        use rustls::pki_types::pem::PemObject;
        let ca = std::fs::read(self.data_dir.join("pki/ca.crt")).expect("read pki/ca.crt");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.expect("CA PEM")).expect("add the CA");
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(self.address())
            .await
            .expect("connect");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
        connector.connect(name, tcp).await.expect("TLS handshake")
    }
}

/// A kube-rs configuration from a kubeconfig file.
pub async fn config_from(kubeconfig: &Path) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kube config from kubeconfig")
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    kube::Client::try_from(config_from(kubeconfig).await).expect("kube client")
}

/// The `steady` binary under test with `args`, as a child the test reads: stdout piped,
/// no stdin, the test's `RUST_LOG` not passed on (its output is asserted), killed on drop.
pub fn steady_child(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_steady"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// The `steady` binary under test with `args`, ready to run.
pub fn steady(args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_steady"));
    command.args(args);
    command
}

/// Run `command` to completion and return its stdout; panics showing both outputs if it
/// fails.
pub fn stdout_of(command: &mut std::process::Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    steady_test_support::successful_stdout(format!("{command:?}"), &output)
}

/// The resourceVersion of an object as a number (steady's are decimal revisions).
pub fn rv_number(rv: Option<&String>) -> u64 {
    rv.expect("resourceVersion is set")
        .parse()
        .expect("resourceVersion is a decimal number")
}

/// The resourceVersion of `object` as a number.
pub fn object_rv<K: kube::Resource>(object: &K) -> u64 {
    rv_number(object.meta().resource_version.as_ref())
}

/// `object` (what `what` wrote) has a revision above `floor`: revisions never go back,
/// restarts included. Returns that revision.
pub fn assert_rv_above<K: kube::Resource>(object: &K, floor: u64, what: &str) -> u64 {
    let rv = object_rv(object);
    assert!(rv > floor, "{what} got RV {rv}, not above {floor}");
    rv
}

/// Resident memory of the process `pid`, in bytes (Linux: `VmRSS` in /proc/PID/status).
pub fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// A fresh temporary directory (kept alive by the returned guard), with the paths of a
/// server's data directory and of the kubeconfig it writes, both inside it.
pub fn workdir() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    let kubeconfig = dir.path().join("client.kubeconfig");
    (dir, data_dir, kubeconfig)
}

/// A server with `options` in a fresh temporary directory (kept alive by the returned guard).
/// `steady up` (with `args`) in a temporary directory, with its kubeconfig and a kubectl
/// cache of its own: what the kubectl suites drive.
pub struct UpCluster {
    pub server: Server,
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl UpCluster {
    pub async fn start(args: &[&str]) -> UpCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let options = Options {
            subcommand: "up".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            ..Options::default()
        };
        let server = Server::start_with(&dir.path().join("data"), &kubeconfig, options).await;
        UpCluster {
            server,
            kubeconfig,
            cache_dir: dir.path().join("kube-cache"),
            _dir: dir,
        }
    }
}

pub async fn start_in_tempdir(options: Options) -> (tempfile::TempDir, Server) {
    let (dir, data_dir, kubeconfig) = workdir();
    let server = Server::start_with(&data_dir, &kubeconfig, options).await;
    (dir, server)
}
