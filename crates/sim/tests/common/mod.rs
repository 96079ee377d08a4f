//! What the simulator's suites share: the fault-free reference run every comparison
//! starts from.

use steady_sim::{Report, Scenario, Simulation, cache};

/// The fault-free run of `seed`, which must pass every property.
pub fn passing_reference(simulation: &Simulation, scenario: &Scenario, seed: u64) -> Report {
    let reference = simulation.reference(scenario, seed);
    assert!(
        reference.passed(),
        "seed {seed}: {:?}",
        reference.violations
    );
    reference
}

/// The Cache scenario under the default simulation, with its passing reference at `seed`.
pub fn cache_reference(seed: u64) -> (Scenario, Simulation, Report) {
    let scenario = cache::scenario();
    let simulation = Simulation::default();
    let reference = passing_reference(&simulation, &scenario, seed);
    (scenario, simulation, reference)
}
