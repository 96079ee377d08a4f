//! Exploration (temporary).

#[path = "bugs/reconcilers.rs"]
mod reconcilers;

use steady_sim::harness::ReconcileFn;
use steady_sim::{FaultKind, FaultRates, Options, cache_reconciler, run_seed};

fn scan(label: &str, r: &ReconcileFn, kinds: &[FaultKind], n: u64) {
    let options = Options {
        faults: FaultRates::only(kinds),
        ..Options::default()
    };
    let mut hits = Vec::new();
    for seed in 0..n {
        let rep = run_seed(seed, &options, r);
        if !rep.violations.is_empty() {
            let props: Vec<_> = rep.violations.iter().map(|v| v.property).collect();
            hits.push((
                seed,
                props,
                rep.violations[0]
                    .message
                    .chars()
                    .take(160)
                    .collect::<String>(),
            ));
        }
    }
    eprintln!("{label} {kinds:?}: {}/{} flagged", hits.len(), n);
    let creates: Vec<u64> = (0..n)
        .map(|seed| run_seed(seed, &options, r).pod_creates)
        .collect();
    eprintln!("   creates {creates:?}");
    for h in hits.iter().take(4) {
        eprintln!("   {h:?}");
    }
}

#[test]
#[ignore]
fn explore() {
    use FaultKind::*;
    let which = std::env::var("BUG").unwrap_or_default();
    let n = 50;
    let none: &[FaultKind] = &[];
    let sets: Vec<(&str, ReconcileFn, Vec<Vec<FaultKind>>)> = vec![
        (
            "ref",
            cache_reconciler(),
            vec![
                vec![StaleList, DropEvent, DelayEvent, LostResponse],
                vec![DropEvent, PodDeletion],
                vec![Crash, LostResponse],
                vec![PodDeletion, Conflict, ServerError],
            ],
        ),
        (
            "bug1",
            reconcilers::generate_name_trusting_stale_cache(),
            vec![
                none.to_vec(),
                vec![StaleList, DropEvent, DelayEvent, LostResponse],
                vec![StaleList, Crash],
                vec![DropEvent],
                vec![DelayEvent],
                vec![LostResponse],
            ],
        ),
        (
            "bug2",
            reconcilers::edge_triggered(),
            vec![
                none.to_vec(),
                vec![DropEvent, PodDeletion],
                vec![PodDeletion, Conflict, ServerError],
                vec![PodDeletion, Crash],
            ],
        ),
        (
            "bug3",
            reconcilers::record_then_create(),
            vec![
                none.to_vec(),
                vec![Crash],
                vec![Crash, LostResponse],
                vec![LostResponse],
            ],
        ),
        (
            "bug4",
            reconcilers::status_on_every_reconcile(),
            vec![none.to_vec()],
        ),
    ];
    for (label, r, fsets) in sets {
        if !which.is_empty() && which != label {
            continue;
        }
        for f in fsets {
            scan(label, &r, &f, if f.is_empty() { 3 } else { n });
        }
    }
}

#[test]
#[ignore]
fn dump() {
    let r = match std::env::var("BUG").unwrap_or_default().as_str() {
        "bug1" => reconcilers::generate_name_trusting_stale_cache(),
        "bug2" => reconcilers::edge_triggered(),
        "bug3" => reconcilers::record_then_create(),
        _ => reconcilers::status_on_every_reconcile(),
    };
    let seed: u64 = std::env::var("SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let kinds: Vec<FaultKind> = std::env::var("FAULTS")
        .unwrap_or_default()
        .split(',')
        .filter_map(FaultKind::parse)
        .collect();
    let rep = run_seed(
        seed,
        &Options {
            faults: FaultRates::only(&kinds),
            ..Options::default()
        },
        &r,
    );
    for l in &rep.trace {
        eprintln!("{l}");
    }
    eprintln!(
        "{:?} {:?} creates={}",
        rep.violations, rep.injected, rep.pod_creates
    );
}
