use arm_hil::model::{math::*, Robot};
fn main() {
    let robot = Robot::default();
    let e = robot.elbow();
    print!("     ");
    for pi in (-180..-80).step_by(5) {
        print!("{:>5}", pi);
    }
    println!();
    for ti in (35..=85).step_by(5) {
        print!("{:4} ", ti);
        for pi in (-180..-80).step_by(5) {
            let q = e + 0.45 * spherical_direction((ti as f64).to_radians(), (pi as f64).to_radians());
            let s = match robot.motion_from_task(&q, &Vec3::zeros(), None, 0.0) {
                Ok(m) => {
                    let g = robot.gravity_torques(&m);
                    let w = g[0].abs().max(g[1].abs());
                    if m.j.determinant().abs() < 1e-4 {
                        "  sng".to_string()
                    } else {
                        format!("{:5.1}", w)
                    }
                }
                Err(_) => "    .".to_string(),
            };
            print!("{s}");
        }
        println!();
    }
}
