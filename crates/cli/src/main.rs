//! `steady`: the one binary. This is the edge of the program: it parses flags, wires the
//! layers together, turns errors into one-line messages and exit codes. Everything it runs
//! lives in the library crates below it.

mod bench;
mod bench_operators;
mod bench_runtime;
mod bench_workloads;
mod compare;
mod demo;
mod manifests;
mod operator;
mod plot;
mod server;
mod shutdown;
mod sim;
mod soak;
mod up;

use clap::{Parser, Subcommand};

/// jemalloc, not glibc's malloc: every request allocates and frees many small JSON values
/// on tokio's worker threads, often freeing on another thread than the one that allocated,
/// and a profile of the server showed those threads waiting on glibc's arena locks.
/// Measured side by side in docs/BENCHMARKS.md ("The allocator").
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "steady",
    version,
    about = "Write, run and trust Kubernetes operators in Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The embedded default: control plane, simulated node and the Cache operator.
    Up(up::UpArgs),
    /// Run the embedded Kubernetes-compatible control plane (HTTPS, bearer token).
    Server(server::ServerArgs),
    /// Run only the Cache operator, against any cluster (kubeconfig or in-cluster).
    Operator(operator::OperatorArgs),
    /// YAML that installs the Cache operator on a real cluster (kubectl apply -f -).
    Manifests(manifests::ManifestsArgs),
    /// Run the Cache operator under injected faults and check it converges, seed by seed.
    Sim(sim::SimArgs),
    /// The reconciliation loop, narrated on an embedded cluster.
    Demo(demo::DemoArgs),
    /// Measure steady side by side with the alternatives (see docs/BENCHMARKS.md).
    Bench(bench::BenchArgs),
    /// Reliability campaigns: request fuzzer and SIGKILL loop (see docs/RELIABILITY.md).
    Soak(soak::SoakArgs),
}

/// Narrating and measuring commands print their own story; logs would drown it.
fn default_log_level(command: &Command) -> &'static str {
    match command {
        Command::Demo(args) if args.compare => "error",
        Command::Demo(_) | Command::Bench(_) => "warn",
        // The soak commands report every failure themselves; kube-rs would log each 5xx.
        Command::Soak(_) => "error,kube_client=off",
        // Injected faults make the runtime log failures by design; the trace tells the story.
        Command::Sim(_) => "error",
        _ => "info",
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(default_log_level(&cli.command))
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    let command = match cli.command {
        // The simulator builds its own single-threaded runtimes, one per run.
        Command::Demo(args) if args.compare => {
            return match compare::run() {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("steady: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        Command::Sim(args) => {
            return sim::run(args).unwrap_or_else(|e| {
                eprintln!("steady: {e:#}");
                std::process::ExitCode::FAILURE
            });
        }
        other => other,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steady: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Sim(_) => Ok(()),
            Command::Up(args) => up::run(args).await,
            Command::Server(args) => server::run(args).await,
            Command::Operator(args) => operator::run(args).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Manifests(args) => manifests::run(args),
            Command::Soak(args) => soak::run(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("steady: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
