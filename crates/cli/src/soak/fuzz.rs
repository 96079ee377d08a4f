//! `steady soak fuzz`: send seeded requests (see `generate`) with `--concurrency` in flight,
//! judge every answer, and read the whole store back every `--check-every` requests and at
//! the end (see `readback`).
//!
//! What counts as a failure, per request:
//! - any 5xx, except 504 `Timeout` on a request that names a `resourceVersion` (kube-apiserver's
//!   "Too large resource version") and 503 with a `Retry-After` header (the server shedding
//!   load on purpose); both still need a `Status` body;
//! - no answer: the connection closed, was reset or answered nothing (a panicking handler
//!   looks like this), or no answer within `--request-timeout`;
//! - a non-2xx answer whose body is not a `Status` (`kind: Status`, `code` equal to the
//!   HTTP code, a non-empty `reason`); HEAD answers have no body and are exempt;
//! - a 2xx JSON answer (other than a watch stream) that is not valid JSON;
//! - an `ERROR` event with a 5xx code in a watch stream.
//!
//! And for the run: the server (when the fuzzer started it) still running and no panic in
//! its log; the long-lived watches still open.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::generate::{self, FuzzRequest};
use super::readback::{self, LongWatches};
use super::{ChildServer, client_from};

#[derive(clap::Args, Debug)]
pub struct FuzzArgs {
    /// How many fuzzed requests to send.
    #[arg(long, default_value_t = 10_000)]
    pub requests: u64,
    /// Seed of the request sequence: the same seed sends the same requests.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Fuzz the server of this kubeconfig (default: start `steady server` in a temporary
    /// directory).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// With --kubeconfig: use this URL instead of the kubeconfig's server.
    #[arg(long, value_name = "URL", requires = "kubeconfig")]
    pub server_url: Option<String>,
    /// Read every stored object back after this many requests (and at the end).
    #[arg(long, default_value_t = 50_000)]
    pub check_every: u64,
    /// Send only request number N of the seed (to replay one failure).
    #[arg(long, value_name = "N")]
    pub only: Option<u64>,
    /// A request without an answer after this long is a failure.
    #[arg(long, default_value = "30s", value_parser = crate::server::parse_duration)]
    pub request_timeout: Duration,
    /// How many failures to print in full.
    #[arg(long, default_value_t = 20)]
    pub show: usize,
}

/// How long a watch answer is read before the fuzzer moves on.
const WATCH_PEEK: Duration = Duration::from_millis(20);
/// How much of a request body a failure report shows.
const BODY_SHOWN: usize = 300;

/// A failure with what reproduces it.
struct Failure {
    /// The request's number, when one request caused it.
    index: Option<u64>,
    problem: String,
    request: Option<String>,
}

#[derive(Default)]
struct Tally {
    /// Answers by HTTP code, plus `no answer`, `timeout` and `unsendable`.
    by_outcome: BTreeMap<String, u64>,
    failures: Vec<Failure>,
    failure_count: u64,
    objects_read_back: u64,
    checks: u64,
    /// The slowest answers: time, request number, request line.
    slowest: Vec<(Duration, u64, String)>,
    /// Problems not tied to one request, already counted.
    run_problems: HashSet<String>,
}

/// How many of the slowest answers the report lists.
const SLOWEST_SHOWN: usize = 5;

impl Tally {
    fn timed(&mut self, took: Duration, index: u64, request: &FuzzRequest) {
        if self.slowest.len() == SLOWEST_SHOWN && self.slowest[SLOWEST_SHOWN - 1].0 >= took {
            return;
        }
        let line = format!(
            "{} {} ({}, {} bytes)",
            request.method,
            request.uri().chars().take(120).collect::<String>(),
            request.content_type.as_deref().unwrap_or("no content type"),
            request.body.len()
        );
        self.slowest.push((took, index, line));
        self.slowest
            .sort_by_key(|(took, _, _)| std::cmp::Reverse(*took));
        self.slowest.truncate(SLOWEST_SHOWN);
    }

    fn fail(&mut self, failure: Failure) {
        // A whole-store problem is found again at every check: count it once.
        if failure.index.is_none() && !self.run_problems.insert(failure.problem.clone()) {
            return;
        }
        self.failure_count += 1;
        if self.failures.len() < 1000 {
            self.failures.push(failure);
        }
    }
}

struct Fuzzer {
    client: kube::Client,
    seed: u64,
    request_timeout: Duration,
    tally: Mutex<Tally>,
    next: AtomicU64,
}

pub async fn run(args: FuzzArgs) -> anyhow::Result<()> {
    let workdir = tempfile::tempdir().context("cannot create a temporary directory")?;
    let (server, client) = match &args.kubeconfig {
        Some(path) => (None, client_from(path, args.server_url.as_deref()).await?),
        None => {
            let server = ChildServer::start(
                &workdir.path().join("data"),
                &workdir.path().join("server.log"),
                &[],
            )
            .await?;
            let client = server.client().await?;
            (Some(server), client)
        }
    };
    readback::prepare(&client).await?;
    let watches = LongWatches::open(&client).await?;
    let fuzzer = Arc::new(Fuzzer {
        client: client.clone(),
        seed: args.seed,
        request_timeout: args.request_timeout,
        tally: Mutex::default(),
        next: AtomicU64::new(0),
    });

    let started = Instant::now();
    let sent = match args.only {
        Some(index) => {
            fuzzer.send_one(index).await;
            1
        }
        None => {
            fuzz_all(&fuzzer, &args, &watches).await;
            args.requests
        }
    };
    let elapsed = started.elapsed();

    check_store(&fuzzer, &watches, args.concurrency).await;
    if let Some(mut server) = server {
        let mut problems = Vec::new();
        if !server.is_running() {
            problems.push("the server process exited during the run".to_string());
        }
        problems.extend(
            server
                .panics()
                .into_iter()
                .take(5)
                .map(|line| format!("the server panicked: {line}")),
        );
        if server.is_running()
            && let Err(e) = server.terminate().await
        {
            problems.push(format!("the server did not stop cleanly on SIGTERM: {e:#}"));
        }
        let mut tally = lock(&fuzzer.tally);
        problems
            .into_iter()
            .for_each(|p| tally.fail(Failure::run(p)));
    }
    let tally = lock(&fuzzer.tally);
    print_report(&args, &tally, sent, elapsed);
    if tally.failure_count > 0 {
        bail!(
            "{} failures in {sent} requests (seed {})",
            tally.failure_count,
            args.seed
        );
    }
    Ok(())
}

/// `--concurrency` workers take request numbers in order until `--requests` are sent; the
/// worker that takes a multiple of `--check-every` reads the store back first.
async fn fuzz_all(fuzzer: &Arc<Fuzzer>, args: &FuzzArgs, watches: &Arc<LongWatches>) {
    let progress_every = (args.requests / 20).max(1000);
    let workers: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let fuzzer = fuzzer.clone();
            let watches = watches.clone();
            let (total, check_every, concurrency) =
                (args.requests, args.check_every.max(1), args.concurrency);
            tokio::spawn(async move {
                loop {
                    let index = fuzzer.next.fetch_add(1, Ordering::Relaxed);
                    if index >= total {
                        return;
                    }
                    if index > 0 && index.is_multiple_of(check_every) {
                        check_store(&fuzzer, &watches, concurrency).await;
                    }
                    if index > 0 && index.is_multiple_of(progress_every) {
                        let failures = lock(&fuzzer.tally).failure_count;
                        eprintln!("soak fuzz: {index}/{total} requests, {failures} failures");
                    }
                    fuzzer.send_one(index).await;
                }
            })
        })
        .collect();
    for worker in workers {
        if let Err(e) = worker.await {
            lock(&fuzzer.tally).fail(Failure::run(format!("a fuzz worker failed: {e}")));
        }
    }
}

async fn check_store(fuzzer: &Fuzzer, watches: &LongWatches, concurrency: usize) {
    let report = readback::check(&fuzzer.client, concurrency).await;
    let watch_problems = watches.problems(&fuzzer.client).await;
    let mut tally = lock(&fuzzer.tally);
    tally.checks += 1;
    tally.objects_read_back += report.objects;
    for problem in report.problems.into_iter().chain(watch_problems) {
        tally.fail(Failure::run(problem));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Failure {
    fn run(problem: impl Into<String>) -> Failure {
        Failure {
            index: None,
            problem: problem.into(),
            request: None,
        }
    }
}

/// An answer: the status, headers and (for a watch, the first moments of) the body.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Why a request got no answer.
pub enum NoAnswer {
    /// The client could not even encode it (not the server's fault).
    Unsendable(String),
    /// Connection closed, reset, or a broken response.
    Dropped(String),
    TimedOut,
}

/// Send one request and read its answer (a watch for `peek` only, if given).
pub async fn send(
    client: &kube::Client,
    request: &FuzzRequest,
    timeout: Duration,
    peek: Option<Duration>,
) -> Result<Answer, NoAnswer> {
    let mut builder = http::Request::builder()
        .method(request.method.clone())
        .uri(request.uri());
    if let Some(content_type) = &request.content_type {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    let http_request = builder
        .body(kube::client::Body::from(request.body.clone()))
        .map_err(|e| NoAnswer::Unsendable(e.to_string()))?;
    let exchange = async {
        let response = client.send(http_request).await.map_err(|e| match e {
            kube::Error::HttpError(e) => NoAnswer::Unsendable(e.to_string()),
            other => NoAnswer::Dropped(error_chain(&other)),
        })?;
        let (parts, mut body) = response.into_parts();
        let bytes = match peek.filter(|_| parts.status.is_success()) {
            None => body
                .collect()
                .await
                .map_err(|e| NoAnswer::Dropped(format!("reading the body: {e}")))?
                .to_bytes(),
            Some(peek) => {
                // A stream: keep what arrives within `peek`, then hang up.
                let mut collected = Vec::new();
                let deadline = tokio::time::Instant::now() + peek;
                while let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await {
                    match frame {
                        Some(Ok(frame)) => {
                            if let Some(data) = frame.data_ref() {
                                collected.extend_from_slice(data);
                            }
                        }
                        Some(Err(e)) => {
                            return Err(NoAnswer::Dropped(format!("reading the stream: {e}")));
                        }
                        None => break,
                    }
                }
                Bytes::from(collected)
            }
        };
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body: bytes,
        })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or(Err(NoAnswer::TimedOut))
}

/// An error and its sources, one line: `a: b: c`.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}

impl Fuzzer {
    async fn send_one(&self, index: u64) {
        let request = generate::request(self.seed, index);
        let peek = request.watch.then_some(WATCH_PEEK);
        let started = Instant::now();
        let outcome = send(&self.client, &request, self.request_timeout, peek).await;
        let took = started.elapsed();
        let (label, problem) = match &outcome {
            Ok(answer) => (answer.status.as_u16().to_string(), judge(&request, answer)),
            Err(NoAnswer::Unsendable(_)) => ("unsendable".to_string(), None),
            Err(NoAnswer::Dropped(e)) => ("no answer".to_string(), Some(format!("no answer: {e}"))),
            Err(NoAnswer::TimedOut) => (
                "timeout".to_string(),
                Some(format!("no answer within {:?}", self.request_timeout)),
            ),
        };
        let mut tally = lock(&self.tally);
        *tally.by_outcome.entry(label).or_default() += 1;
        tally.timed(took, index, &request);
        if let Some(problem) = problem {
            tally.fail(Failure {
                index: Some(index),
                problem,
                request: Some(describe(&request)),
            });
        }
    }
}

/// The problem with an answer, if any (see the module doc for the rules).
pub fn judge(request: &FuzzRequest, answer: &Answer) -> Option<String> {
    let code = answer.status.as_u16();
    let status = status_of(&answer.body);
    let reason = status
        .as_ref()
        .and_then(|s| s["reason"].as_str())
        .unwrap_or("");
    let message = status
        .as_ref()
        .and_then(|s| s["message"].as_str())
        .unwrap_or("");
    if answer.status.is_server_error() {
        let documented =
            (code == 504 && reason == "Timeout" && request.has_param("resourceVersion"))
                || (code == 503 && answer.headers.contains_key(http::header::RETRY_AFTER));
        if !documented {
            return Some(format!(
                "{code} {reason}: {}",
                first_line(message, &answer.body)
            ));
        }
    }
    if answer.status.is_success() {
        if request.watch {
            return watch_errors(&answer.body);
        }
        let is_json = answer
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json && serde_json::from_slice::<serde::de::IgnoredAny>(&answer.body).is_err() {
            return Some(format!(
                "{code} with a body that is not JSON: {}",
                first_line("", &answer.body)
            ));
        }
        return None;
    }
    if request.method == http::Method::HEAD {
        return None;
    }
    match status {
        None => Some(format!(
            "{code} without a Status body: {}",
            first_line("", &answer.body)
        )),
        Some(s) if s["kind"] != "Status" => Some(format!(
            "{code}: the body's kind is {}, not Status",
            s["kind"]
        )),
        Some(s) if s["code"].as_u64() != Some(u64::from(code)) => {
            Some(format!("{code}: the Status says code {}", s["code"]))
        }
        Some(_) if reason.is_empty() => {
            Some(format!("{code}: the Status has no reason ({message})"))
        }
        Some(_) => None,
    }
}

/// The body as a JSON object, if it is one.
fn status_of(body: &[u8]) -> Option<Value> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object)
}

/// A 5xx `ERROR` event in the part of a watch stream read.
fn watch_errors(body: &[u8]) -> Option<String> {
    body.split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .find(|event| {
            event["type"] == "ERROR" && event["object"]["code"].as_u64().unwrap_or(0) >= 500
        })
        .map(|event| format!("watch ERROR event: {}", event["object"]))
}

fn first_line(message: &str, body: &[u8]) -> String {
    let text = if message.is_empty() {
        String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned()
    } else {
        message.chars().take(300).collect()
    };
    if text.is_empty() {
        "(empty body)".to_string()
    } else {
        text
    }
}

/// The request as a report shows it: method, URI, content type and the start of the body.
pub fn describe(request: &FuzzRequest) -> String {
    let uri = request.uri();
    let uri = if uri.len() > 400 {
        format!(
            "{}… ({} bytes)",
            uri.chars().take(400).collect::<String>(),
            uri.len()
        )
    } else {
        uri
    };
    let body = &request.body[..request.body.len().min(BODY_SHOWN)];
    format!(
        "{} {uri}\n      content-type: {}\n      body ({} bytes): {}{}",
        request.method,
        request.content_type.as_deref().unwrap_or("(none)"),
        request.body.len(),
        String::from_utf8_lossy(body).escape_debug(),
        if request.body.len() > BODY_SHOWN {
            "…"
        } else {
            ""
        },
    )
}

fn print_report(args: &FuzzArgs, tally: &Tally, sent: u64, elapsed: Duration) {
    let rate = sent as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "soak fuzz: seed {}, {sent} requests in {:.1}s ({rate:.0} requests/s, concurrency {})",
        args.seed,
        elapsed.as_secs_f64(),
        args.concurrency
    );
    let outcomes: Vec<String> = tally
        .by_outcome
        .iter()
        .map(|(outcome, count)| format!("{outcome}: {count}"))
        .collect();
    println!("answers: {}", outcomes.join(", "));
    println!(
        "store read back {} times: {} object reads",
        tally.checks, tally.objects_read_back
    );
    let slowest: Vec<String> = tally
        .slowest
        .iter()
        .map(|(took, index, line)| format!("  {:.2}s #{index} {line}", took.as_secs_f64()))
        .collect();
    println!("slowest answers:\n{}", slowest.join("\n"));
    println!("failures: {}", tally.failure_count);
    let target = match &args.kubeconfig {
        Some(path) => format!(" --kubeconfig {}", path.display()),
        None => String::new(),
    };
    for failure in tally.failures.iter().take(args.show) {
        match (failure.index, &failure.request) {
            (Some(index), Some(request)) => {
                println!("  #{index}: {}\n      {request}", failure.problem);
                println!(
                    "      replay: steady soak fuzz --seed {} --only {index}{target}   (with the state before it: --requests {} --concurrency 1)",
                    args.seed,
                    index + 1
                );
            }
            _ => println!("  {}", failure.problem),
        }
    }
    if tally.failures.len() > args.show {
        println!(
            "  … {} more (--show N prints more)",
            tally.failure_count - args.show as u64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: u16, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        Answer {
            status: StatusCode::from_u16(code).unwrap(),
            headers: map,
            body: Bytes::from(body.to_string()),
        }
    }

    fn get(uri: &str) -> FuzzRequest {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        FuzzRequest {
            method: http::Method::GET,
            path: path.to_string(),
            query: query.to_string(),
            content_type: None,
            body: Vec::new(),
            watch: query.contains("watch="),
        }
    }

    fn status(code: u16, reason: &str) -> String {
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","code":{code},"reason":"{reason}","message":"m"}}"#
        )
    }

    #[test]
    fn errors_must_be_status_objects_with_their_code_and_a_reason() {
        let request = get("/api/v1/namespaces/default/configmaps/a");
        assert_eq!(
            judge(&request, &answer(404, &[], &status(404, "NotFound"))),
            None
        );
        assert_eq!(
            judge(
                &request,
                &answer(200, &[("content-type", "application/json")], "{}")
            ),
            None
        );
        for (code, body) in [
            (404, ""),
            (400, "bad request"),
            (404, r#"{"kind":"ConfigMap"}"#),
            (409, &status(400, "Conflict")),
            (422, &status(422, "")),
            (200, "{not json"),
        ] {
            let headers = [("content-type", "application/json")];
            assert!(
                judge(&request, &answer(code, &headers, body)).is_some(),
                "{code} {body:?} passed"
            );
        }
        // HEAD answers carry no body.
        let mut head = request.clone();
        head.method = http::Method::HEAD;
        assert_eq!(judge(&head, &answer(405, &[], "")), None);
    }

    #[test]
    fn server_errors_fail_but_the_documented_ones() {
        let plain = get("/api/v1/configmaps");
        let with_rv = get("/api/v1/configmaps?watch=1&resourceVersion=99999999999");
        assert!(judge(&plain, &answer(500, &[], &status(500, "InternalError"))).is_some());
        assert!(judge(&plain, &answer(504, &[], &status(504, "Timeout"))).is_some());
        assert_eq!(
            judge(&with_rv, &answer(504, &[], &status(504, "Timeout"))),
            None
        );
        assert!(
            judge(&with_rv, &answer(504, &[], "")).is_some(),
            "a 504 needs a Status too"
        );
        assert!(
            judge(
                &plain,
                &answer(503, &[], &status(503, "ServiceUnavailable"))
            )
            .is_some()
        );
        let overloaded = answer(
            503,
            &[("retry-after", "1")],
            &status(503, "ServiceUnavailable"),
        );
        assert_eq!(judge(&plain, &overloaded), None);
    }

    #[test]
    fn a_5xx_error_event_in_a_watch_fails() {
        let watch = get("/api/v1/configmaps?watch=1");
        let ok =
            "{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"ERROR\",\"object\":{\"code\":410}}\n";
        assert_eq!(judge(&watch, &answer(200, &[], ok)), None);
        let broken = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500}}\n";
        assert!(judge(&watch, &answer(200, &[], broken)).is_some());
    }
}
