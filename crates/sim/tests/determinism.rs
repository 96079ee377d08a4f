//! The same seed gives the same trace, byte for byte.

use steady_sim::{Options, cache_reconciler, run_seed};

#[test]
fn one_seed_run_twice_yields_identical_traces() {
    for seed in [3, 5, 8] {
        let a = run_seed(seed, &Options::default(), &cache_reconciler());
        let b = run_seed(seed, &Options::default(), &cache_reconciler());
        assert!(
            a.trace.len() > 50,
            "seed {seed}: a real run has a real trace"
        );
        if let Some(i) = a.trace.iter().zip(&b.trace).position(|(x, y)| x != y) {
            panic!(
                "seed {seed}: traces differ at line {i}:\n  {}\n  {}",
                a.trace[i], b.trace[i]
            );
        }
        assert_eq!(a.trace.len(), b.trace.len(), "seed {seed}");
        assert_eq!(a.injected, b.injected);
    }
}
