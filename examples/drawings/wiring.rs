//! The wiring of the reference rig (docs/rig.md): what is plugged into what, and what each line
//! carries (docs/hil.md, docs/robot-pc.md).

use crate::svg::{Anchor, Px, Svg};

const STYLE: &str = "\
.box { fill: #f4f6f8; stroke: #445; stroke-width: 1.5; }
.arm { fill: #eef6ee; stroke: #2c7a2c; stroke-width: 1.5; }
.stop { fill: #fdeaea; stroke: #c0392b; stroke-width: 2; }
.wire { stroke: #444; stroke-width: 2; }
.power { stroke: #c0392b; stroke-width: 2; stroke-dasharray: 6 3; }
.title { font-weight: bold; }
.small { font-size: 12px; fill: #444; }
.rate { font-size: 12px; fill: #1a5276; font-weight: bold; }
";

/// A box with a bold first line and smaller lines below it.
fn part(svg: &mut Svg, corner: Px, size: Px, class: &str, title: &str, lines: &[&str]) {
    svg.rect(corner, size, class);
    svg.text((corner.0 + 12.0, corner.1 + 22.0), Anchor::Start, "title", title);
    svg.lines((corner.0 + 12.0, corner.1 + 42.0), Anchor::Start, "small", 16.0, lines);
}

/// The drawing: PC, angle sensor, step-driver Arduino, step drivers and motors, the E-stop.
pub(crate) fn drawing() -> String {
    let mut svg = Svg::new(900.0, 470.0);
    part(
        &mut svg,
        (20.0, 150.0),
        (240.0, 130.0),
        "box",
        "Robot PC (Linux)",
        &[
            "arm_hil hil --hardware robotscara",
            "or hil_node, hardware: robotscara",
            "the 1 kHz loop: reads the sensor,",
            "writes step rates",
        ],
    );
    part(
        &mut svg,
        (380.0, 30.0),
        (230.0, 96.0),
        "box",
        "Angle sensor",
        &["the platform point seen from", "the elbow: range, polar angle,", "azimuth (t,r,theta,phi lines)"],
    );
    part(
        &mut svg,
        (380.0, 300.0),
        (230.0, 96.0),
        "box",
        "Step-driver Arduino",
        &["takes F,fx,fy,fz,dirBits lines:", "a step rate per motor, sent on", "each change and every 100 ms"],
    );
    part(
        &mut svg,
        (670.0, 300.0),
        (210.0, 80.0),
        "box",
        "Three step drivers",
        &["one per motor, 1.8° / 8 a pulse;", "the loop asks ≤ 62 500 pulses/s"],
    );
    part(
        &mut svg,
        (670.0, 110.0),
        (210.0, 130.0),
        "arm",
        "The arm",
        &["three stepper motors:", "joint1, joint2, joint3", "(gear ratios 1, 1, 20);", "the forearm on the platform"],
    );
    part(
        &mut svg,
        (20.0, 330.0),
        (240.0, 80.0),
        "stop",
        "E-stop",
        &["cuts the step drivers' power;", "within reach before any run"],
    );

    svg.arrow((380.0, 78.0), (200.0, 148.0), "wire");
    svg.text((292.0, 100.0), Anchor::End, "rate", "USB serial, 115200 8N1");
    svg.arrow((200.0, 282.0), (378.0, 340.0), "wire");
    svg.text((300.0, 292.0), Anchor::Start, "rate", "USB serial, 250000 8N1");
    svg.arrow((610.0, 348.0), (668.0, 348.0), "wire");
    svg.text((640.0, 340.0), Anchor::Middle, "small", "step, dir");
    svg.arrow((775.0, 300.0), (775.0, 242.0), "wire");
    svg.text((785.0, 276.0), Anchor::Start, "small", "motor phases");
    svg.arrow((670.0, 140.0), (612.0, 100.0), "wire");
    svg.text((640.0, 150.0), Anchor::Middle, "small", "measures");
    svg.line((260.0, 372.0), (330.0, 372.0), "power");
    svg.line((330.0, 372.0), (330.0, 440.0), "power");
    svg.line((330.0, 440.0), (775.0, 440.0), "power");
    svg.arrow((775.0, 440.0), (775.0, 382.0), "power");
    svg.text((550.0, 458.0), Anchor::Middle, "small", "the drivers' power, through the E-stop");
    svg.finish("The reference rig's wiring: PC, angle sensor, step-driver Arduino, step drivers, motors", STYLE)
}
