//! What cargo builds for the two colcon profiles (Cargo.toml, docs/testing.md), read from its
//! unit graph (`cargo build --unit-graph`: resolved, nothing compiled, no ROS needed):
//! - the ROS suite's `colcon-test` build compiles each crate once, the build scripts' copy and the
//!   nodes' being one: a new dependency, or an update that changes a shared crate's features,
//!   would otherwise bring back the second copies silently (55 units, 2026-12-07);
//! - `resolver = "1"`, which that needs, gives a user's `colcon` build no feature that a
//!   dependency is declared without on purpose (a dev-dependency's features reach the nodes
//!   under it).

use std::collections::BTreeMap;
use std::process::Command;

/// The units of `cargo build --profile PROFILE --features ros --bins`, as cargo's unit graph
/// gives them. The graph is an unstable output of cargo, hence RUSTC_BOOTSTRAP.
fn units(profile: &str) -> Vec<serde_json::Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = std::env::temp_dir().join(format!("arm_hil_unit_graph_{}", std::process::id()));
    let output = Command::new(cargo)
        .args(["build", "--locked", "--profile", profile, "--features", "ros", "--bins"])
        .args(["--unit-graph", "-Z", "unstable-options"])
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    let _ = std::fs::remove_dir_all(&target);
    assert!(output.status.success(), "cargo's unit graph: {}", String::from_utf8_lossy(&output.stderr));
    let graph: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the unit graph is JSON");
    graph["units"].as_array().expect("the graph has units").clone()
}

/// `name@version` of a unit (its package id ends with it).
fn package(unit: &serde_json::Value) -> String {
    let id = unit["pkg_id"].as_str().unwrap_or_default();
    id.rsplit(['#', '/']).next().unwrap_or(id).to_owned()
}

#[test]
fn the_suites_build_compiles_each_crate_once() {
    let mut copies: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for unit in units("colcon-test") {
        let target = &unit["target"];
        let key = (package(&unit), target["name"].to_string(), format!("{}{}", target["kind"], unit["mode"]));
        let profile = &unit["profile"];
        copies
            .entry(key)
            .or_default()
            .push(format!("opt-level {}, features {}", profile["opt_level"], unit["features"]));
    }
    let twice: Vec<String> = copies
        .into_iter()
        .filter(|(_, copies)| copies.len() > 1)
        .map(|((package, _, _), copies)| format!("{package}: {}", copies.join(" / ")))
        .collect();
    assert!(
        twice.is_empty(),
        "built twice, for the build scripts and for the nodes (give both copies the same opt-level in \
         [profile.colcon-test.package.NAME]; the same features come from resolver 1):\n{}",
        twice.join("\n")
    );
}

#[test]
fn the_users_build_keeps_the_dependencies_features_as_declared() {
    // serialport as Cargo.toml declares it: without its default libudev, which a machine would
    // then need (its -dev package) to build the nodes.
    let users = units("colcon");
    let serialport: Vec<&serde_json::Value> =
        users.iter().filter(|unit| package(unit).starts_with("serialport@")).collect();
    assert!(!serialport.is_empty(), "the nodes build serialport");
    for unit in serialport {
        let features = unit["features"].as_array().cloned().unwrap_or_default();
        assert!(!features.iter().any(|feature| feature == "libudev"), "serialport with libudev: {features:?}");
    }
}
