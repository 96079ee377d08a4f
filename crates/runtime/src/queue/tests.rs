use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::advance;

fn k(s: &str) -> String {
    s.to_string()
}

fn owned(name: &str) -> Trigger {
    Trigger::Owned {
        kind: "Pod".into(),
        name: name.into(),
    }
}

fn pop_key(q: &mut WorkQueue<String>) -> Option<String> {
    q.pop().map(|p| p.key)
}

/// Queue and pop `key`, then let a 5 ms backoff retry of it fall due while it runs.
async fn retry_due_while_running(q: &mut WorkQueue<String>, key: &str) -> Popped<String> {
    q.add(k(key), Trigger::Primary, Priority::Normal);
    let p = q.pop().expect("the key just queued");
    q.add_after(
        k(key),
        Trigger::Backoff { attempt: 1 },
        Duration::from_millis(5),
    );
    advance(Duration::from_millis(5)).await;
    q.promote_due(Instant::now());
    p
}

fn drain(q: &mut WorkQueue<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(p) = q.pop() {
        q.done(&p.key);
        out.push(p.key);
    }
    out
}

#[test]
fn trigger_display() {
    assert_eq!(Trigger::Primary.to_string(), "primary");
    assert_eq!(owned("default/x").to_string(), "owned Pod default/x");
    let watched = Trigger::Watched {
        kind: "Secret".into(),
        name: "ns/s".into(),
    };
    assert_eq!(watched.to_string(), "watched Secret ns/s");
    assert_eq!(Trigger::Resync.to_string(), "resync");
    assert_eq!(Trigger::Requeue.to_string(), "requeue");
    assert_eq!(
        Trigger::Backoff { attempt: 3 }.to_string(),
        "backoff retry 3"
    );
    assert!(Priority::Normal > Priority::Low);
}

#[tokio::test(start_paused = true)]
async fn dedup_many_adds_one_pop() {
    let mut q = WorkQueue::new();
    let start = Instant::now();
    for i in 0..100 {
        q.add(k("a"), Trigger::Primary, Priority::Normal);
        if i == 0 {
            advance(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(q.len(), 1);
    let p = q.pop().expect("one entry");
    assert_eq!(p.key, "a");
    assert_eq!(p.triggers, vec![Trigger::Primary]);
    assert_eq!(p.queued_at, start, "first enqueue time is kept");
    assert!(q.pop().is_none());
    q.done(&k("a"));
    assert!(q.pop().is_none());
    assert!(!q.contains(&k("a")));
}

#[tokio::test(start_paused = true)]
async fn merged_triggers_are_deduplicated_and_ordered() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Resync, Priority::Low);
    q.add(k("a"), owned("ns/p2"), Priority::Normal);
    q.add(k("a"), owned("ns/p1"), Priority::Normal);
    q.add(k("a"), owned("ns/p2"), Priority::Normal);
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("a"), Trigger::Resync, Priority::Low);
    let p = q.pop().expect("entry");
    assert_eq!(
        p.triggers,
        vec![
            Trigger::Primary,
            owned("ns/p1"),
            owned("ns/p2"),
            Trigger::Resync
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn coalescing_during_processing() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    let first = q.pop().expect("a");
    assert_eq!(q.processing(), 1);
    advance(Duration::from_secs(1)).await;
    let dirty_at = Instant::now();
    for i in 0..50 {
        q.add(k("a"), owned(&format!("ns/p{}", i % 3)), Priority::Normal);
        q.add(k("a"), Trigger::Primary, Priority::Normal);
        advance(Duration::from_millis(1)).await;
    }
    assert_eq!(q.len(), 0, "dirty key is not ready while processing");
    assert!(q.pop().is_none());
    assert!(q.contains(&k("a")));
    q.done(&first.key);
    assert_eq!(q.len(), 1);
    assert_eq!(q.processing(), 0);
    let second = q.pop().expect("exactly one more run");
    assert_eq!(
        second.triggers,
        vec![
            Trigger::Primary,
            owned("ns/p0"),
            owned("ns/p1"),
            owned("ns/p2")
        ]
    );
    assert_eq!(second.queued_at, dirty_at);
    q.done(&second.key);
    assert!(q.pop().is_none());
    assert!(q.is_empty());
}

#[tokio::test(start_paused = true)]
async fn dirty_key_keeps_priority() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("b"), Trigger::Primary, Priority::Normal);
    let a = q.pop().expect("a");
    // Resync while processing -> re-queued in the Low lane.
    q.add(k("a"), Trigger::Resync, Priority::Low);
    q.done(&a.key);
    q.add(k("c"), Trigger::Primary, Priority::Normal);
    assert_eq!(drain(&mut q), vec!["b", "c", "a"]);

    // Resync then a real event while processing -> Normal lane.
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    let a = q.pop().expect("a");
    q.add(k("a"), Trigger::Resync, Priority::Low);
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("z"), Trigger::Resync, Priority::Low);
    q.done(&a.key);
    assert_eq!(drain(&mut q), vec!["a", "z"]);
}

#[tokio::test(start_paused = true)]
async fn per_key_exclusivity() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("b"), Trigger::Primary, Priority::Normal);
    assert_eq!(pop_key(&mut q).as_deref(), Some("a"));
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add_after(k("a"), Trigger::Requeue, Duration::ZERO);
    assert_eq!(pop_key(&mut q).as_deref(), Some("b"));
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    assert!(q.pop().is_none(), "a is processing, b is processing");
    // A delayed entry coming due while processing does not break exclusivity either.
    q.add_after(k("b"), Trigger::Requeue, Duration::from_millis(5));
    advance(Duration::from_millis(5)).await;
    q.promote_due(Instant::now());
    assert!(q.pop().is_none());
    assert_eq!(q.processing(), 2);
    q.done(&k("b"));
    assert_eq!(pop_key(&mut q).as_deref(), Some("b"));
    assert!(q.pop().is_none());
    q.done(&k("a"));
    assert_eq!(pop_key(&mut q).as_deref(), Some("a"));
    assert!(q.pop().is_none());
}

#[tokio::test(start_paused = true)]
async fn fifo_within_lane() {
    let mut q = WorkQueue::new();
    for name in ["c", "a", "d", "b"] {
        q.add(k(name), Trigger::Primary, Priority::Normal);
    }
    // Re-adding a ready key does not move it.
    q.add(k("c"), Trigger::Primary, Priority::Normal);
    for name in ["z", "x", "y"] {
        q.add(k(name), Trigger::Resync, Priority::Low);
    }
    q.add(k("z"), Trigger::Resync, Priority::Low);
    assert_eq!(drain(&mut q), vec!["c", "a", "d", "b", "z", "x", "y"]);
}

#[tokio::test(start_paused = true)]
async fn normal_before_low_resync_wave() {
    let mut q = WorkQueue::new();
    for i in 0..1000 {
        q.add(format!("ns/obj-{i:04}"), Trigger::Resync, Priority::Low);
    }
    // Half of the wave is already being worked on when a real event arrives.
    for _ in 0..500 {
        let p = q.pop().expect("low key");
        q.done(&p.key);
    }
    q.add(k("ns/changed"), Trigger::Primary, Priority::Normal);
    let p = q.pop().expect("normal key");
    assert_eq!(p.key, "ns/changed");
    assert_eq!(p.triggers, vec![Trigger::Primary]);
    q.done(&p.key);
    assert_eq!(q.pop().expect("low").key, "ns/obj-0500");
}

#[tokio::test(start_paused = true)]
async fn priority_raise_on_readd() {
    let mut q = WorkQueue::new();
    let t0 = Instant::now();
    q.add(k("r1"), Trigger::Resync, Priority::Low);
    q.add(k("r2"), Trigger::Resync, Priority::Low);
    advance(Duration::from_secs(2)).await;
    q.add(k("n1"), Trigger::Primary, Priority::Normal);
    q.add(k("r2"), owned("ns/p"), Priority::Normal);
    // A Low add never lowers a Normal key.
    q.add(k("n1"), Trigger::Resync, Priority::Low);
    assert_eq!(q.len(), 3);
    let n1 = q.pop().expect("n1");
    assert_eq!(n1.key, "n1");
    assert_eq!(n1.triggers, vec![Trigger::Primary, Trigger::Resync]);
    let r2 = q.pop().expect("r2 raised to Normal, behind n1");
    assert_eq!(r2.key, "r2");
    assert_eq!(r2.triggers, vec![owned("ns/p"), Trigger::Resync]);
    assert_eq!(r2.queued_at, t0, "original enqueue time kept");
    assert_eq!(q.pop().expect("r1").key, "r1");
    assert!(q.pop().is_none());
}

#[tokio::test(start_paused = true)]
async fn add_after_fires_at_deadline() {
    let mut q = WorkQueue::new();
    let t0 = Instant::now();
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(10));
    assert_eq!(q.len(), 0);
    assert_eq!(q.delayed(), 1);
    assert!(q.contains(&k("a")));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(10)));
    advance(Duration::from_millis(9_999)).await;
    q.promote_due(Instant::now());
    assert!(q.pop().is_none());
    advance(Duration::from_millis(1)).await;
    q.promote_due(Instant::now());
    assert_eq!(q.delayed(), 0);
    assert_eq!(q.next_deadline(), None);
    let p = q.pop().expect("due");
    assert_eq!(p.key, "a");
    assert_eq!(p.triggers, vec![Trigger::Requeue]);
    assert_eq!(p.queued_at, t0 + Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn promoted_entries_go_to_normal_lane_in_deadline_order() {
    let mut q = WorkQueue::new();
    for i in 0..5 {
        q.add(format!("low{i}"), Trigger::Resync, Priority::Low);
    }
    q.add_after(
        k("b"),
        Trigger::Backoff { attempt: 2 },
        Duration::from_secs(3),
    );
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(5));
    q.add_after(k("c"), Trigger::Requeue, Duration::from_secs(3));
    advance(Duration::from_secs(60)).await;
    // Promotion is late: all are due at once, still ordered by deadline then insertion.
    q.promote_due(Instant::now());
    let order = drain(&mut q);
    assert_eq!(&order[..3], ["b", "c", "a"]);
    assert_eq!(order.len(), 8);
}

#[tokio::test(start_paused = true)]
async fn earliest_deadline_kept() {
    let mut q = WorkQueue::new();
    let t0 = Instant::now();
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(30));
    q.add_after(
        k("a"),
        Trigger::Backoff { attempt: 1 },
        Duration::from_secs(5),
    );
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(60));
    assert_eq!(q.delayed(), 2, "one requested requeue and one retry");
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(5)));
    advance(Duration::from_secs(5)).await;
    q.promote_due(Instant::now());
    let p = q.pop().expect("the retry fires first");
    assert_eq!(p.triggers, vec![Trigger::Backoff { attempt: 1 }]);
    q.done(&p.key);
    // The requested requeue is not consumed by the retry: the earliest one (30 s) fires.
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(30)));
    advance(Duration::from_secs(25)).await;
    q.promote_due(Instant::now());
    let p = q.pop().expect("the requeue fires at 30 s");
    assert_eq!(p.triggers, vec![Trigger::Requeue]);
    q.done(&p.key);
    assert_eq!(
        q.next_deadline(),
        None,
        "the later 60 s request merged into the 30 s one"
    );
    advance(Duration::from_secs(120)).await;
    q.promote_due(Instant::now());
    assert!(q.pop().is_none());
    assert!(!q.contains(&k("a")));
}

#[tokio::test(start_paused = true)]
async fn delayed_key_already_ready_is_not_duplicated() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(1));
    assert_eq!(q.len(), 1);
    assert_eq!(q.delayed(), 1, "the delayed request is remembered");
    advance(Duration::from_secs(1)).await;
    q.promote_due(Instant::now());
    assert_eq!(q.len(), 1);
    assert_eq!(q.delayed(), 0);
    let p = q.pop().expect("a");
    assert_eq!(p.triggers, vec![Trigger::Primary, Trigger::Requeue]);
    q.done(&p.key);
    assert!(q.pop().is_none());
}

#[tokio::test(start_paused = true)]
async fn delay_kept_across_processing_cycle_unless_forgotten() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(10));
    q.add(k("b"), Trigger::Primary, Priority::Normal);
    q.add_after(k("b"), Trigger::Requeue, Duration::from_secs(10));

    // Both run early because of the ready entries.
    for _ in 0..2 {
        let p = q.pop().expect("ready");
        q.done(&p.key);
    }
    assert_eq!(q.delayed(), 2);
    // The reconcile of b produced a newer outcome that supersedes its delayed entry.
    q.forget_delayed(&k("b"));
    q.forget_delayed(&k("nope"));
    assert_eq!(q.delayed(), 1);
    assert!(!q.contains(&k("b")));
    advance(Duration::from_secs(10)).await;
    q.promote_due(Instant::now());
    let p = q.pop().expect("a's delay survived the processing cycle");
    assert_eq!(p.key, "a");
    assert_eq!(p.triggers, vec![Trigger::Requeue]);
    q.done(&p.key);
    assert!(q.pop().is_none());
}

#[tokio::test(start_paused = true)]
async fn delayed_entry_due_while_processing_runs_once_after_done() {
    let mut q = WorkQueue::new();
    let p = retry_due_while_running(&mut q, "a").await;
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    assert!(q.pop().is_none());
    q.done(&p.key);
    let p = q.pop().expect("one more run");
    assert_eq!(
        p.triggers,
        vec![Trigger::Primary, Trigger::Backoff { attempt: 1 }]
    );
    q.done(&p.key);
    assert!(q.pop().is_none());
}

#[tokio::test(start_paused = true)]
async fn next_deadline_tracks_earliest() {
    let mut q: WorkQueue<String> = WorkQueue::new();
    assert_eq!(q.next_deadline(), None);
    let t0 = Instant::now();
    q.add_after(k("a"), Trigger::Requeue, Duration::from_secs(30));
    q.add_after(k("b"), Trigger::Requeue, Duration::from_secs(20));
    q.add_after(k("c"), Trigger::Requeue, Duration::from_secs(40));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(20)));
    q.forget_delayed(&k("b"));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(30)));
    q.add_after(k("c"), Trigger::Requeue, Duration::from_secs(1));
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(1)));
    advance(Duration::from_secs(1)).await;
    q.promote_due(Instant::now());
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(30)));
    // Absurd delays saturate instead of panicking.
    q.add_after(k("d"), Trigger::Requeue, Duration::MAX);
    assert_eq!(q.delayed(), 2);
    assert_eq!(q.next_deadline(), Some(t0 + Duration::from_secs(30)));
}

#[tokio::test(start_paused = true)]
async fn zero_delay_is_immediate() {
    let mut q = WorkQueue::new();
    q.add_after(k("a"), Trigger::Requeue, Duration::ZERO);
    assert_eq!(q.delayed(), 0);
    assert_eq!(q.len(), 1);
    assert_eq!(q.pop().expect("a").triggers, vec![Trigger::Requeue]);
}

#[tokio::test(start_paused = true)]
async fn sizes_and_unfinished_work() {
    let mut q = WorkQueue::new();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    q.add(k("b"), Trigger::Resync, Priority::Low);
    q.add_after(k("c"), Trigger::Requeue, Duration::from_secs(1));
    q.add_after(
        k("c"),
        Trigger::Backoff { attempt: 1 },
        Duration::from_secs(2),
    );
    q.add_after(k("d"), Trigger::Backoff { attempt: 4 }, Duration::ZERO);
    assert_eq!((q.len(), q.processing(), q.delayed()), (3, 0, 2));
    let t0 = Instant::now();
    let a = q.pop().expect("a");
    advance(Duration::from_secs(3)).await;
    let d = q.pop().expect("d");
    advance(Duration::from_secs(1)).await;
    assert_eq!((q.len(), q.processing(), q.delayed()), (1, 2, 2));
    assert_eq!(
        q.unfinished_work(Instant::now()),
        (Duration::from_secs(5), Duration::from_secs(4))
    );
    q.promote_due(Instant::now());
    assert_eq!((q.len(), q.delayed()), (2, 0));
    q.done(&a.key);
    q.done(&d.key);
    q.done(&k("never-popped"));
    assert_eq!(q.processing(), 0);
    assert_eq!(q.unfinished_work(t0), (Duration::ZERO, Duration::ZERO));
    assert!(!q.is_empty());
    drain(&mut q);
    assert!(q.is_empty());
    for key in ["a", "b", "c", "d"] {
        assert!(!q.contains(&k(key)));
    }
}

const WINDOW: Duration = Duration::from_millis(100);

/// Pop and finish the next key, returning its triggers.
fn run_next(q: &mut WorkQueue<String>) -> Option<Vec<Trigger>> {
    let p = q.pop()?;
    q.done(&p.key);
    Some(p.triggers)
}

/// A debounced queue in which `a` has just run (its window opened now), and now.
fn debounced_after_a_ran() -> (WorkQueue<String>, Instant) {
    let mut q = WorkQueue::with_debounce(WINDOW);
    let t0 = Instant::now();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    assert_eq!(
        run_next(&mut q),
        Some(vec![Trigger::Primary]),
        "a first event runs at once"
    );
    (q, t0)
}

#[tokio::test(start_paused = true)]
async fn debounce_never_delays_a_first_event() {
    let (mut q, _) = debounced_after_a_ran();
    // Idle for a whole window: the next event is a first event again.
    advance(WINDOW).await;
    q.promote_due(Instant::now());
    q.add(k("a"), owned("p"), Priority::Normal);
    assert_eq!(run_next(&mut q), Some(vec![owned("p")]));
}

#[tokio::test(start_paused = true)]
async fn debounce_merges_a_burst_into_one_run_at_the_window_end() {
    let (mut q, t0) = debounced_after_a_ran();
    for pod in ["p0", "p1", "p2", "p0"] {
        advance(Duration::from_millis(10)).await;
        q.add(k("a"), owned(pod), Priority::Normal);
        q.promote_due(Instant::now());
        assert!(q.pop().is_none(), "held within the window");
    }
    assert!(q.contains(&k("a")));
    assert_eq!(q.next_deadline(), Some(t0 + WINDOW));
    advance(t0 + WINDOW - Instant::now()).await;
    q.promote_due(Instant::now());
    assert_eq!(
        run_next(&mut q),
        Some(vec![owned("p0"), owned("p1"), owned("p2")])
    );
    assert!(q.pop().is_none());
    assert_eq!(q.delayed(), 0);
}

#[tokio::test(start_paused = true)]
async fn debounce_a_trigger_during_a_reconcile_causes_exactly_one_more_run() {
    let mut q = WorkQueue::with_debounce(WINDOW);
    let t0 = Instant::now();
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    let p = q.pop().expect("a");
    q.add(k("a"), owned("p0"), Priority::Normal);
    q.add(k("a"), owned("p1"), Priority::Normal);
    advance(Duration::from_millis(30)).await;
    q.done(&p.key);
    assert!(q.pop().is_none(), "the second run waits for the window");
    q.add(k("a"), Trigger::Primary, Priority::Normal);
    advance(t0 + WINDOW - Instant::now()).await;
    q.promote_due(Instant::now());
    let p = q.pop().expect("exactly one more run");
    assert_eq!(p.triggers, vec![Trigger::Primary, owned("p0"), owned("p1")]);
    assert!(q.pop().is_none(), "never twice at once");
    q.done(&p.key);
    advance(WINDOW * 3).await;
    q.promote_due(Instant::now());
    assert!(q.pop().is_none(), "and no more");

    // A reconcile longer than the window: its dirty mark runs right after `done`.
    q.add(k("b"), Trigger::Primary, Priority::Normal);
    let p = q.pop().expect("b");
    q.add(k("b"), owned("p0"), Priority::Normal);
    advance(WINDOW * 2).await;
    q.done(&p.key);
    assert_eq!(run_next(&mut q), Some(vec![owned("p0")]));
}

#[tokio::test(start_paused = true)]
async fn debounce_keeps_requeue_and_backoff_times() {
    let (mut q, t0) = debounced_after_a_ran();
    q.add_after(k("a"), Trigger::Requeue, Duration::from_millis(20));
    q.add(k("a"), owned("p0"), Priority::Normal);
    advance(Duration::from_millis(20)).await;
    q.promote_due(Instant::now());
    // The requeue is due inside the window: it runs on time, with the held event merged.
    assert_eq!(run_next(&mut q), Some(vec![owned("p0"), Trigger::Requeue]));
    assert_eq!(q.delayed(), 0);

    // A retry due while the key runs, inside the window: runs right after `done`.
    let p = retry_due_while_running(&mut q, "b").await;
    q.done(&p.key);
    assert_eq!(
        run_next(&mut q),
        Some(vec![Trigger::Backoff { attempt: 1 }])
    );
    assert!(Instant::now() < t0 + WINDOW);
    // forget_delayed does not drop held events.
    q.add(k("b"), owned("p1"), Priority::Normal);
    q.forget_delayed(&k("b"));
    assert_eq!(q.delayed(), 1);
    advance(WINDOW).await;
    q.promote_due(Instant::now());
    assert_eq!(run_next(&mut q), Some(vec![owned("p1")]));
}

/// Random operations against the queue's invariants; same seed, same history.
#[tokio::test(start_paused = true)]
async fn randomized_invariants_are_deterministic() {
    async fn run(seed: u64, debounce: Duration) -> Vec<(u32, Vec<Trigger>)> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut q: WorkQueue<u32> = WorkQueue::with_debounce(debounce);
        let mut running: BTreeSet<u32> = BTreeSet::new();
        let mut history = Vec::new();
        for _ in 0..5_000 {
            let key = rng.random_range(0..20u32);
            match rng.random_range(0..10) {
                0..=2 => q.add(key, Trigger::Primary, Priority::Normal),
                3 => q.add(key, Trigger::Resync, Priority::Low),
                4 => q.add_after(
                    key,
                    Trigger::Backoff { attempt: 1 },
                    Duration::from_millis(rng.random_range(0..50)),
                ),
                5 => q.forget_delayed(&key),
                6 | 7 => {
                    if let Some(p) = q.pop() {
                        assert!(running.insert(p.key), "key handed out twice");
                        assert!(!p.triggers.is_empty());
                        assert!(p.queued_at <= Instant::now());
                        history.push((p.key, p.triggers));
                    }
                }
                8 => {
                    if let Some(&done) = running.iter().nth(rng.random_range(0..20)) {
                        running.remove(&done);
                        q.done(&done);
                    }
                }
                _ => {
                    advance(Duration::from_millis(rng.random_range(0..20))).await;
                    q.promote_due(Instant::now());
                }
            }
            assert_eq!(q.processing(), running.len());
            assert_eq!(q.normal.len() + q.low.len(), q.len());
            assert_eq!(q.timers.len(), q.delayed());
            assert!(q.ready.keys().all(|k| !q.processing.contains_key(k)));
            assert!(
                q.held
                    .keys()
                    .all(|k| !q.processing.contains_key(k) && !q.ready.contains_key(k))
            );
        }
        history
    }
    for debounce in [Duration::ZERO, Duration::from_millis(30)] {
        let a = run(5, debounce).await;
        let b = run(5, debounce).await;
        assert!(a.len() > 100);
        assert_eq!(a, b);
    }
}
