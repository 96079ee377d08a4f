//! The fault-free run passes every property, and its end state does not depend on the
//! seed (for a deterministic controller), which is what lets a campaign compute it once.

mod common;

#[test]
fn the_fault_free_reference_passes_and_is_the_same_for_every_seed() {
    let (scenario, simulation, first) = common::cache_reference(0);
    let pods = first
        .end_state
        .iter()
        .filter(|l| l.starts_with("/core/pods/"));
    assert_eq!(pods.count(), 2, "the end state lists the pods");
    for seed in 1..10 {
        let other = common::passing_reference(&simulation, &scenario, seed);
        let differs = other
            .end_state
            .iter()
            .zip(&first.end_state)
            .find(|(a, b)| a != b);
        assert_eq!(differs, None, "seed {seed}");
        assert_eq!(other.end_state.len(), first.end_state.len(), "seed {seed}");
    }
}
