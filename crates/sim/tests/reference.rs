//! The fault-free reference does not depend on the seed (for a deterministic reconciler),
//! which is what lets a campaign compute it once.

use steady_sim::{Options, cache_reconciler, reference_run};

#[test]
fn the_fault_free_reference_is_the_same_for_every_seed() {
    let reconciler = cache_reconciler();
    let first = reference_run(0, &Options::default(), &reconciler);
    assert!(first.violations.is_empty(), "{:?}", first.violations);
    for seed in 1..20 {
        let other = reference_run(seed, &Options::default(), &reconciler);
        assert_eq!(
            (other.end_state.as_str(), other.pod_creates),
            (first.end_state.as_str(), first.pod_creates),
            "seed {seed}"
        );
    }
}
