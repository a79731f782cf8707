//! The arm as the model builds it (src/model, docs/model.md): the lab's robot at the platform
//! point of docs/model.md's K2 example, seen from the front (x right, z up) and from above (x right,
//! y up), every part named as /joint_states and the URDF name it.

use arm_hil::model::math::Vec3;
use arm_hil::model::{Robot, RobotParams};

use crate::svg::{Anchor, Px, Svg};

/// The platform point drawn [m]: K2's example, where the motors are at
/// (-2.757, -0.384, 2.848) rad.
const PLATFORM_M: [f64; 3] = [0.15, 0.0, 0.2];
/// Pixels per metre.
const SCALE: f64 = 430.0;

/// One orthographic view: world axes `right` and `up` (0 = x, 1 = y, 2 = z), the world origin at
/// `origin` on the page.
struct View {
    origin: Px,
    right: usize,
    up: usize,
}

impl View {
    fn at(&self, point: &Vec3) -> Px {
        (self.origin.0 + SCALE * point[self.right], self.origin.1 - SCALE * point[self.up])
    }
}

/// Where each part of the arm is [m].
struct Pose {
    motors: [Vec3; 3],
    tips: [Vec3; 3],
    attachments: [Vec3; 3],
    platform: Vec3,
    elbow: Vec3,
}

fn pose(robot: &Robot) -> Pose {
    let platform = Vec3::from(PLATFORM_M);
    let theta = robot.inverse_kinematics(&platform, None).expect("K2's example point is in reach");
    let h = robot.params().h;
    Pose {
        motors: [0, 1, 2].map(|leg| Vec3::new(0.0, 0.0, h[leg])),
        tips: [0, 1, 2].map(|leg| robot.tip(leg, theta[leg])),
        attachments: [0, 1, 2].map(|leg| robot.attachment(leg, &platform)),
        platform,
        elbow: robot.elbow(),
    }
}

fn draw_view(svg: &mut Svg, view: &View, pose: &Pose, robot: &Robot) {
    svg.circle(view.at(&Vec3::zeros()), 3.0, "origin");
    for leg in 0..3 {
        let class = format!("leg{}", leg + 1);
        let (axis, _) = robot.leg_frame(leg);
        let motor = view.at(&pose.motors[leg]);
        let axis_end = view.at(&(pose.motors[leg] + axis * 0.04));
        let axis_start = view.at(&(pose.motors[leg] - axis * 0.04));
        svg.line(axis_start, axis_end, "axis");
        svg.line(motor, view.at(&pose.tips[leg]), &format!("{class} proximal"));
        svg.line(view.at(&pose.tips[leg]), view.at(&pose.attachments[leg]), &format!("{class} distal"));
        svg.circle(motor, 7.0, &format!("{class} motor"));
        svg.circle(view.at(&pose.tips[leg]), 4.0, &format!("{class} joint"));
        svg.circle(view.at(&pose.attachments[leg]), 3.5, &format!("{class} joint"));
    }
    let top = pose.attachments.iter().map(|b| b.z).fold(pose.platform.z, f64::max);
    svg.line(view.at(&pose.platform), view.at(&Vec3::new(pose.platform.x, pose.platform.y, top)), "platform");
    svg.line(view.at(&pose.elbow), view.at(&pose.platform), "forearm");
    svg.circle(view.at(&pose.elbow), 6.0, "elbow");
    svg.circle(view.at(&pose.platform), 6.0, "platform-point");
}

const STYLE: &str = "\
.ground { stroke: #888; stroke-width: 1.5; }
.origin { fill: #888; }
.axis { stroke: #333; stroke-width: 2; stroke-dasharray: 3 2; }
.proximal { stroke-width: 7; stroke-linecap: round; }
.distal { stroke-width: 3; }
.leg1 { stroke: #1f77b4; } .leg2 { stroke: #e67300; } .leg3 { stroke: #2ca02c; }
.motor { fill: white; stroke-width: 3; }
.joint { fill: white; stroke-width: 2; }
.platform { stroke: #222; stroke-width: 5; }
.forearm { stroke: #9b59b6; stroke-width: 9; stroke-linecap: round; opacity: 0.85; }
.elbow { fill: #9b59b6; }
.platform-point { fill: #222; }
.heading { font-size: 15px; font-weight: bold; }
.small { font-size: 12px; fill: #444; }
.name1 { fill: #1f77b4; } .name2 { fill: #e67300; } .name3 { fill: #2ca02c; } .name4 { fill: #7d3c98; }
";

/// The drawing: both views, the parts named beside them, and a key.
pub(crate) fn drawing() -> String {
    let robot = Robot::new(RobotParams::default()).expect("the reference parameters are valid");
    let pose = pose(&robot);
    let mut svg = Svg::new(900.0, 840.0);
    let front = View { origin: (190.0, 620.0), right: 0, up: 2 };
    let above = View { origin: (600.0, 300.0), right: 0, up: 1 };
    svg.line((front.origin.0 - 60.0, front.origin.1), (front.origin.0 + 280.0, front.origin.1), "ground");
    draw_view(&mut svg, &front, &pose, &robot);
    draw_view(&mut svg, &above, &pose, &robot);
    svg.text((20.0, 28.0), Anchor::Start, "heading", "From the front (x right, z up)");
    svg.text((470.0, 28.0), Anchor::Start, "heading", "From above (x right, y up)");

    let label = |svg: &mut Svg, view: &View, point: &Vec3, offset: Px, anchor: Anchor, class: &str, text: &str| {
        let at = view.at(point);
        svg.text((at.0 + offset.0, at.1 + offset.1), anchor, class, text);
    };
    label(&mut svg, &front, &pose.motors[0], (-14.0, 16.0), Anchor::End, "name1", "joint1 (motor 1)");
    label(&mut svg, &front, &pose.motors[1], (-14.0, -6.0), Anchor::End, "name2", "joint2 (motor 2)");
    label(&mut svg, &front, &pose.motors[2], (-14.0, 5.0), Anchor::End, "name3", "joint3 (motor 3)");
    label(
        &mut svg,
        &front,
        &pose.attachments[2],
        (12.0, 4.0),
        Anchor::Start,
        "small",
        "platform: the legs' attachments",
    );
    label(&mut svg, &front, &pose.elbow, (10.0, 20.0), Anchor::Start, "name4", "elbow (fixed)");
    let forearm_middle = (pose.elbow + pose.platform) / 2.0;
    label(&mut svg, &front, &forearm_middle, (14.0, -4.0), Anchor::Start, "name4", "forearm");
    label(&mut svg, &front, &pose.platform, (-14.0, 5.0), Anchor::End, "", "p");
    label(&mut svg, &front, &pose.platform, (-14.0, 21.0), Anchor::End, "small", "platform_x, _y, _z");
    label(&mut svg, &front, &Vec3::zeros(), (-6.0, 18.0), Anchor::Middle, "small", "base_link");
    label(&mut svg, &above, &pose.motors[0], (-14.0, -10.0), Anchor::End, "small", "motor axes");
    label(&mut svg, &above, &pose.elbow, (10.0, -10.0), Anchor::Start, "name4", "elbow");
    label(&mut svg, &above, &pose.tips[0], (-10.0, 16.0), Anchor::End, "name1", "leg 1");
    label(&mut svg, &above, &pose.tips[1], (-10.0, -8.0), Anchor::End, "name2", "leg 2");
    label(&mut svg, &above, &pose.platform, (12.0, 18.0), Anchor::Start, "", "p");

    // The key from the model itself, so that it says what the drawing shows.
    let params = robot.params();
    let axis_name = |leg: usize| match robot.leg_frame(leg).0.map(f64::abs).imax() {
        0 => "x",
        1 => "y",
        _ => "z",
    };
    let mut key: Vec<(String, String)> = (0..3)
        .map(|leg| {
            let n = leg + 1;
            let text = format!(
                "leg {n}: joint{n} turns leg{n}_proximal about {} at {:.2} m; leg{n}_distal hangs on leg{n}_distal_yaw, _pitch",
                axis_name(leg),
                params.h[leg]
            );
            (format!("name{n}"), text)
        })
        .collect();
    key.push((
        "name4".into(),
        format!("the prosthetic forearm: from the fixed elbow to p, on forearm_yaw, _pitch ({:.2} m)", params.l_arm),
    ));
    for (i, (class, text)) in key.iter().enumerate() {
        svg.text((20.0, 690.0 + 20.0 * i as f64), Anchor::Start, class, text);
    }
    let [x, y, z] = PLATFORM_M;
    let made = format!("at p = ({x}, {y}, {z}) m. Made by `cargo run --example drawings`.");
    svg.lines(
        (20.0, 784.0),
        Anchor::Start,
        "small",
        16.0,
        &[
            "Thick: a proximal link, turned by its motor. Thin: a distal link, free at both ends. The distal links close on the platform,",
            "which keeps its orientation; its point p (x, y, z) is what the controller moves. The reference robot (docs/model.md)",
            &made,
        ],
    );
    svg.finish("The parallel arm and its forearm, named as /joint_states names them", STYLE)
}
