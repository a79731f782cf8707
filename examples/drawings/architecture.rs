//! The crate's layers as src/lib.rs orders them (a module uses only those above it,
//! tests/architecture.rs holds it), the executables below them, and what each layer that meets
//! the outside world meets (docs/design.md §2).

use crate::svg::{Anchor, Svg};

/// Each layer: its modules and what it is, top to bottom.
const LAYERS: [(&str, &str); 13] = [
    ("msg", "ROS 2 messages as plain structs, their CDR, type hashes"),
    ("model", "the robot: parameters, kinematics, dynamics"),
    ("control", "trajectories, PID + inverse dynamics, Kalman filter"),
    ("sim", "the SIL engine: integration, sensor, ideal torques"),
    ("hil", "the 1 kHz loop, its hardware, the protective stop"),
    ("protocol", "sans-IO codecs of every wire protocol"),
    ("serial, drivers, bridge", "ports, device drivers, TCP servers"),
    ("emulate", "the devices on pseudo-terminals"),
    ("outputs", "sinks, topic names, QoS, a node's publisher"),
    ("bag", "rosbag2 directories: writer and reader"),
    ("live", "the live view (Foxglove WebSocket)"),
    ("nodes", "each node without ROS: parameters, lifecycle, topics"),
    ("ros", "thin r2r adapters (feature ros)"),
];

/// What lies outside, beside the layer that talks to it.
const OUTSIDE: [(&str, &str, &str); 5] = [
    ("serial, drivers, bridge", "serial: the STM32 arm, finger testbench, rig;", "TCP: port-5555 clients, the VR app"),
    ("emulate", "pseudo-terminals, where tests", "and newcomers find the devices"),
    ("bag", "rosbag2 bags (MCAP),", "for ros2 bag and Foxglove"),
    ("live", "Foxglove or Lichtblick,", "on a WebSocket"),
    ("ros", "the ROS 2 graph:", "rcl and DDS, through r2r"),
];

const STYLE: &str = "\
.layer { fill: #f4f6f8; stroke: #445; stroke-width: 1.2; }
.io { fill: #eef3fb; stroke: #2e5c9a; stroke-width: 1.2; }
.bin { fill: #eef6ee; stroke: #2c7a2c; stroke-width: 1.5; }
.outside { fill: #fff8e8; stroke: #b9770e; stroke-width: 1.2; }
.wire { stroke: #444; stroke-width: 1.5; }
.name { font-family: monospace; font-weight: bold; }
.small { font-size: 12px; fill: #444; }
.heading { font-size: 15px; font-weight: bold; }
";

const ROW_PX: f64 = 34.0;
const TOP_PX: f64 = 60.0;

/// The drawing: the stack, the executables under it, the outside world to its right.
pub(crate) fn drawing() -> String {
    let height = TOP_PX + ROW_PX * LAYERS.len() as f64 + 130.0;
    let mut svg = Svg::new(1000.0, height);
    svg.text((130.0, 30.0), Anchor::Start, "heading", "src/lib.rs: each layer uses only those above it");
    svg.text((712.0, 30.0), Anchor::Start, "heading", "outside");
    svg.arrow((100.0, TOP_PX + ROW_PX * LAYERS.len() as f64), (100.0, TOP_PX + 4.0), "wire");
    svg.text((92.0, TOP_PX + 20.0), Anchor::End, "small", "uses");
    for (i, (name, what)) in LAYERS.iter().enumerate() {
        let top = TOP_PX + ROW_PX * i as f64;
        let talks_out = OUTSIDE.iter().find(|(layer, ..)| layer == name);
        svg.rect((130.0, top), (530.0, ROW_PX - 6.0), if talks_out.is_some() { "io" } else { "layer" });
        svg.text((142.0, top + 19.0), Anchor::Start, "name", name);
        svg.text((340.0, top + 19.0), Anchor::Start, "small", what);
        if let Some((_, first, second)) = talks_out {
            svg.arrow((660.0, top + 14.0), (700.0, top + 14.0), "wire");
            svg.rect((702.0, top - 4.0), (288.0, ROW_PX + 2.0), "outside");
            svg.lines((712.0, top + 10.0), Anchor::Start, "small", 15.0, &[first, second]);
        }
    }
    let bins = TOP_PX + ROW_PX * LAYERS.len() as f64 + 20.0;
    svg.rect((130.0, bins), (255.0, 64.0), "bin");
    svg.lines(
        (142.0, bins + 22.0),
        Anchor::Start,
        "",
        18.0,
        &["arm_hil, the command line", "every layer but ros: no ROS"],
    );
    svg.rect((405.0, bins), (255.0, 64.0), "bin");
    svg.lines((417.0, bins + 22.0), Anchor::Start, "", 18.0, &["the node executables", "src/bin/*.rs, over ros"]);
    svg.text(
        (130.0, bins + 96.0),
        Anchor::Start,
        "small",
        "Blue: layers that meet the outside world. Made by `cargo run --example drawings`.",
    );
    svg.finish("arm_hil's layers, executables and what they talk to", STYLE)
}
