//! The reliability suite on a small budget: `steady soak fuzz` and `steady soak kill`, run
//! as the real binary exactly as a long campaign runs them (docs/RELIABILITY.md), each
//! starting its own `steady server` in a temporary directory.

use std::process::Stdio;
use std::time::Duration;

mod common;

const BUDGET: Duration = Duration::from_secs(300);

/// Run `steady soak ARGS…`; returns whether it succeeded and what it printed.
async fn soak(args: &[&str]) -> (bool, String) {
    let child = common::steady_child(&["soak"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn steady soak");
    let output = tokio::time::timeout(BUDGET, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("steady soak {args:?} did not finish within {BUDGET:?}"))
        .expect("wait for steady soak");
    let printed = format!(
        "--- stdout ---\n{}--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

/// A few thousand fuzzed requests: no 5xx, no dropped connection, a Status for every
/// error, and every stored object reads back (and decodes) at the checkpoints and the end.
// On the code before the hardening of issue 13 this found the handler panic on
// `watch&timeoutSeconds=9223372036854775807`, objects stored deeper than they can be read
// back (500 "stored object … is corrupt" on later writes), and names that cannot be
// addressed by URL (`q?x=1`, `name#frag`, `tab\there`).
#[tokio::test]
async fn fuzzed_requests_get_a_status_and_leave_a_readable_store() {
    let (ok, printed) = soak(&[
        "fuzz",
        "--requests",
        "5000",
        "--seed",
        "13",
        "--concurrency",
        "8",
        "--check-every",
        "2500",
    ])
    .await;
    assert!(ok, "the fuzzer found failures\n{printed}");
    assert!(printed.contains("failures: 0"), "{printed}");
    // The read-back must have had something to read, or "readable" proves nothing.
    let reads: u64 = printed
        .lines()
        .find_map(|l| l.strip_prefix("store read back ")?.split_once(": "))
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no read-back line\n{printed}"));
    assert!(reads > 0, "the store was empty at the checks\n{printed}");
    assert!(printed.contains("201: "), "nothing was created\n{printed}");
}

/// Three SIGKILLs under four writers: every acknowledged write is there after each restart.
/// A 1 MiB history budget makes the server compact every few hundred writes (2–6 KiB
/// each), so the kills also meet compactions in flight.
#[tokio::test]
async fn sigkill_cycles_lose_no_acknowledged_write() {
    let (ok, printed) = soak(&[
        "kill",
        "--cycles",
        "3",
        "--writers",
        "4",
        "--seed",
        "13",
        "--max-run",
        "700ms",
        "--history-budget",
        "1MiB",
    ])
    .await;
    assert!(ok, "{printed}");
    let summary = printed
        .lines()
        .find(|line| line.starts_with("soak kill:"))
        .unwrap_or_else(|| panic!("no summary line\n{printed}"));
    assert!(summary.contains(" 0 lost"), "{summary}");
    let cycles = printed.lines().filter(|l| l.starts_with("cycle ")).count();
    assert_eq!(cycles, 3, "{printed}");
    // Each cycle acknowledged writes before its kill (the check had something to check).
    for line in printed.lines().filter(|l| l.starts_with("cycle ")) {
        assert!(!line.contains(": 0 writes acknowledged"), "{line}");
    }
}
