//! The fault-free run passes every property, and its end state does not depend on the
//! seed (for a deterministic controller), which is what lets a campaign compute it once.

use steady_sim::{Simulation, cache};

#[test]
fn the_fault_free_reference_passes_and_is_the_same_for_every_seed() {
    let scenario = cache::scenario();
    let simulation = Simulation::default();
    let first = simulation.reference(&scenario, 0);
    assert!(first.passed(), "{:?}", first.violations);
    let pods = first
        .end_state
        .iter()
        .filter(|l| l.starts_with("/core/pods/"));
    assert_eq!(pods.count(), 2, "the end state lists the pods");
    for seed in 1..10 {
        let other = simulation.reference(&scenario, seed);
        assert!(other.passed(), "seed {seed}: {:?}", other.violations);
        let differs = other
            .end_state
            .iter()
            .zip(&first.end_state)
            .find(|(a, b)| a != b);
        assert_eq!(differs, None, "seed {seed}");
        assert_eq!(other.end_state.len(), first.end_state.len(), "seed {seed}");
    }
}
