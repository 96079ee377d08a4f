//! The same seed gives the same trace, byte for byte (and so the same trace hash, which
//! `steady sim --seed` prints: crates/cli/tests/sim.rs compares it with this binary's).

use steady_sim::{Simulation, cache};

#[test]
fn one_seed_run_twice_yields_identical_traces() {
    let scenario = cache::scenario();
    let simulation = Simulation::default();
    for seed in [3, 5, 8] {
        let a = simulation.run(&scenario, seed);
        let b = simulation.run(&scenario, seed);
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
        assert_eq!(a.trace_hash(), b.trace_hash());
    }
}

#[test]
fn different_seeds_draw_different_faults() {
    let scenario = cache::scenario();
    let simulation = Simulation::default();
    let a = simulation.run(&scenario, 3);
    let b = simulation.run(&scenario, 4);
    assert_ne!(a.trace_hash(), b.trace_hash());
}
