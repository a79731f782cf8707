//! The robot model against its own definitions: kinematics round trips, Jacobians against
//! finite differences of the constraints, inverse against forward dynamics.

use arm_hil::model::math::{spherical_direction, Mat3, Vec3};
use arm_hil::model::{JointTrig, ModelError, Robot};

/// Constraint residuals f_i = |b_i - s_i|^2 - l_i2^2 (zero when the chain is closed).
fn constraints(robot: &Robot, p: &Vec3, theta: &Vec3) -> Vec3 {
    let l2 = robot.params().l_distal;
    Vec3::from_fn(|i, _| (robot.attachment(i, p) - robot.tip(i, theta[i])).norm_squared() - l2[i] * l2[i])
}

/// Points on a grid over the box around the forearm sphere that the arm can reach away from
/// singular configurations (|det J| and min |K_i| bounded below).
fn workspace_grid(robot: &Robot) -> Vec<(Vec3, Vec3)> {
    let mut points = Vec::new();
    for ix in 0..=24 {
        for iy in 0..=24 {
            for iz in 0..=24 {
                let p = Vec3::new(-0.25 + 0.04 * ix as f64, -0.25 + 0.04 * iy as f64, -0.2 + 0.04 * iz as f64);
                let Ok(theta) = robot.inverse_kinematics(&p, None) else { continue };
                let (j, k) = robot.constraint_jacobians(&p, &robot.proximal_tips(&JointTrig::new(&theta)));
                if j.determinant().abs() > 1e-4 && k.abs().min() > 1e-3 {
                    points.push((p, theta));
                }
            }
        }
    }
    points
}

#[test]
fn inverse_kinematics_matches_the_reference_test_vector() {
    let robot = Robot::default();
    let theta = robot.inverse_kinematics(&Vec3::new(0.15, 0.0, 0.2), None).unwrap();
    let expected = Vec3::new(-2.7571960, -0.3843965, 2.8479814);
    assert!((theta - expected).amax() < 1e-6, "{theta} vs {expected}");
}

#[test]
fn forward_of_inverse_kinematics_returns_the_point_over_the_workspace() {
    let robot = Robot::default();
    let grid = workspace_grid(&robot);
    assert!(grid.len() > 500, "the grid should cover the workspace, has {} points", grid.len());
    for (p, theta) in grid {
        assert!(constraints(&robot, &p, &theta).amax() < 1e-12);
        let back = robot.forward_kinematics(&theta, &(p + Vec3::repeat(1e-3))).unwrap();
        assert!((back - p).amax() < 1e-9, "FK(IK({p})) = {back}");
    }
}

#[test]
fn inverse_kinematics_keeps_the_branch_continuous_across_pi() {
    let robot = Robot::default();
    let mut previous = robot.inverse_kinematics(&Vec3::new(0.15, 0.0, 0.2), None).unwrap();
    for k in 1..=200 {
        let p = Vec3::new(0.15 - 0.001 * k as f64, 0.0005 * k as f64, 0.2);
        let theta = robot.inverse_kinematics(&p, Some(&previous)).unwrap();
        assert!((theta - previous).amax() < 0.05, "jump at step {k}: {previous} -> {theta}");
        previous = theta;
    }
}

#[test]
fn a_point_outside_the_workspace_is_refused_with_its_coordinates() {
    let robot = Robot::default();
    let far = Vec3::new(3.0, 0.0, 0.0);
    let error = robot.inverse_kinematics(&far, None).unwrap_err();
    assert!(matches!(error, ModelError::Unreachable { point, .. } if point == [3.0, 0.0, 0.0]));
    assert!(error.to_string().contains("(3.000000, 0.000000, 0.000000)"), "{error}");
}

#[test]
fn constraint_jacobians_match_finite_differences() {
    let robot = Robot::default();
    let h = 1e-6;
    for (p, theta) in workspace_grid(&robot).into_iter().step_by(37) {
        let (j, k) = robot.constraint_jacobians(&p, &robot.proximal_tips(&JointTrig::new(&theta)));
        // df/dp = 2 J and df/dth = -2 diag(K).
        let df_dp = Mat3::from_fn(|i, c| {
            let step = Vec3::ith(c, h);
            (constraints(&robot, &(p + step), &theta)[i] - constraints(&robot, &(p - step), &theta)[i]) / (2.0 * h)
        });
        let df_dtheta = Mat3::from_fn(|i, c| {
            let step = Vec3::ith(c, h);
            (constraints(&robot, &p, &(theta + step))[i] - constraints(&robot, &p, &(theta - step))[i]) / (2.0 * h)
        });
        assert!((df_dp - 2.0 * j).amax() < 1e-8);
        assert!((df_dtheta + 2.0 * Mat3::from_diagonal(&k)).amax() < 1e-8);
    }
}

#[test]
fn jacobian_rates_match_finite_differences_along_a_motion() {
    let robot = Robot::default();
    let elbow = robot.elbow();
    let h = 1e-6;
    // A motion on the forearm sphere: phi(t) = -2.4 + 0.3 t, theta(t) = 1.2 + 0.1 t.
    let point = |t: f64| elbow + spherical_direction(1.2 + 0.1 * t, -2.4 + 0.3 * t) * 0.45;
    for t in [0.0, 0.5, 1.0] {
        let p_dot = (point(t + h) - point(t - h)) / (2.0 * h);
        let motion = robot.motion_from_task(&point(t), &p_dot, None, 0.0).unwrap();
        let at = |t: f64| {
            let p = point(t);
            let theta = robot.inverse_kinematics(&p, Some(&motion.theta)).unwrap();
            robot.constraint_jacobians(&p, &robot.proximal_tips(&JointTrig::new(&theta)))
        };
        let ((j_plus, k_plus), (j_minus, k_minus)) = (at(t + h), at(t - h));
        let tips = robot.proximal_tips(&JointTrig::new(&motion.theta));
        let (j_dot, k_dot) = robot.constraint_jacobian_rates(&motion.p, &tips, &motion.p_dot, &motion.theta_dot);
        assert!(((j_plus - j_minus) / (2.0 * h) - j_dot).amax() < 1e-7);
        assert!(((k_plus - k_minus) / (2.0 * h) - k_dot).amax() < 1e-7);
        // The velocity map agrees with the differentiated inverse kinematics.
        assert!((motion.velocity_map * motion.theta_dot - p_dot).amax() < 1e-9);
    }
}

#[test]
fn inverse_then_forward_dynamics_returns_the_accelerations() {
    let robot = Robot::default();
    for (index, (p, _)) in workspace_grid(&robot).into_iter().step_by(23).enumerate() {
        let p_dot = Vec3::new(0.1, -0.05, 0.02) * (index % 3) as f64;
        let motion = robot.motion_from_task(&p, &p_dot, None, 0.0).unwrap();
        let theta_ddot = Vec3::new(1.5, -2.0, 0.7);
        let tau = robot.inverse_dynamics(&motion, &theta_ddot);
        let back = robot.forward_dynamics(&motion, &tau).unwrap();
        assert!((back - theta_ddot).amax() < 1e-9, "{back} vs {theta_ddot}");
    }
}

#[test]
fn joint_accelerations_produce_the_requested_platform_acceleration() {
    let robot = Robot::default();
    let p = Vec3::new(0.15, 0.0, 0.2);
    let motion = robot.motion_from_task(&p, &Vec3::new(0.05, 0.02, -0.03), None, 0.0).unwrap();
    let p_ddot = Vec3::new(0.3, -0.2, 0.1);
    let theta_ddot = robot.joint_acceleration(&motion, &p_ddot, 0.0);
    let produced = motion.velocity_map * theta_ddot + motion.acceleration_bias;
    assert!((produced - p_ddot).amax() < 1e-12, "{produced} vs {p_ddot}");
}

proptest::proptest! {
    /// The integrator's stages take sines and cosines by rotating the accepted angles' values;
    /// near or far, the tips equal those from sin_cos to rounding.
    #[test]
    fn joint_trig_near_other_angles_matches_sin_cos(
        base in proptest::array::uniform3(-7.0f64..7.0),
        offset in proptest::array::uniform3(-0.2f64..0.2),
    ) {
        let robot = Robot::default();
        let (base, theta) = (Vec3::from(base), Vec3::from(base) + Vec3::from(offset));
        let rotated = robot.proximal_tips(&JointTrig::new(&base).near(&theta));
        let exact = robot.proximal_tips(&JointTrig::new(&theta));
        for leg in 0..3 {
            proptest::prop_assert!((rotated.positions[leg] - exact.positions[leg]).amax() < 1e-15);
            proptest::prop_assert!((rotated.derivatives[leg] - exact.derivatives[leg]).amax() < 1e-15);
        }
    }
}

#[test]
fn the_platform_carries_the_mass_docs_model_md_gives() {
    // docs/model.md: m_P = m_d + (m12 + m22 + m32) / 2 + m_arm / 2 = 2.675 kg by default.
    assert!((Robot::default().platform_mass() - 2.675).abs() < 1e-12);
}
