//! The fuzz targets (fuzz/, run with cargo-fuzz) without the fuzzer: every target on its seed
//! inputs and on every input that ever made it fail, kept in fuzz/regressions/TARGET/.

#[path = "../fuzz/src/lib.rs"]
#[allow(unreachable_pub)] // public for the fuzz crate, private to this test
mod harness;

use std::path::Path;

#[test]
fn every_target_takes_its_seeds() {
    for (name, target) in harness::TARGETS {
        let seeds = harness::seeds(name);
        assert!(!seeds.is_empty(), "{name} has no seeds");
        for seed in seeds {
            target(&seed);
        }
    }
}

#[test]
fn every_input_that_ever_failed_a_target_passes_it_now() {
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut ran = 0;
    for (name, target) in harness::TARGETS {
        let Ok(entries) = std::fs::read_dir(regressions.join(name)) else { continue };
        for entry in entries {
            let path = entry.expect("a readable folder").path();
            let input = std::fs::read(&path).expect("a readable input");
            eprintln!("{name}: {}", path.display());
            target(&input);
            ran += 1;
        }
    }
    eprintln!("{ran} regression inputs");
}
