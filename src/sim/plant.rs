//! The simulated arm: joint-space state (th, thdot) driven by held joint torques through the
//! forward dynamics (D7).

use nalgebra::Vector6;

use super::integrator::OdeSystem;
use crate::model::math::Vec3;
use crate::model::{ArmMotion, FactoredDynamics, JointTrig, ModelError, Robot};

/// Plant state: joint angles [rad] then joint rates [rad/s].
pub type PlantState = Vector6<f64>;

/// Builds the plant state from joint angles and rates.
pub fn plant_state(theta: &Vec3, theta_dot: &Vec3) -> PlantState {
    let mut y = PlantState::zeros();
    y.fixed_rows_mut::<3>(0).copy_from(theta);
    y.fixed_rows_mut::<3>(3).copy_from(theta_dot);
    y
}

/// Splits a plant state into joint angles [rad] and joint rates [rad/s].
pub fn joint_state(y: &PlantState) -> (Vec3, Vec3) {
    (y.fixed_rows::<3>(0).into_owned(), y.fixed_rows::<3>(3).into_owned())
}

/// The arm as an ODE system. Forward kinematics takes the root nearest the last accepted
/// platform point, which keeps the assembly mode through the run.
#[derive(Debug, Clone)]
pub struct Plant {
    robot: Robot,
    tau: Vec3,
    /// The accepted state's evaluation and the one under trial; `accepted` and `last_evaluated`
    /// index them, so that accepting a step or reusing the accepted state copies nothing.
    evaluations: [Evaluation; 2],
    accepted: usize,
    last_evaluated: usize,
}

/// One evaluation of the dynamics with the torque left open.
#[derive(Debug, Clone, Copy)]
struct Evaluation {
    trig: JointTrig,
    motion: ArmMotion,
    dynamics: FactoredDynamics,
}

impl Evaluation {
    fn new(robot: &Robot, theta: &Vec3, theta_dot: &Vec3, near: &Vec3) -> Result<Evaluation, ModelError> {
        let trig = JointTrig::new(theta);
        let motion = robot.motion_from_trig(&trig, theta_dot, near)?;
        Ok(Evaluation { trig, motion, dynamics: robot.factored_dynamics(&motion)? })
    }

    /// Evaluates in place: an evaluation is several hundred bytes, and moving it through
    /// return values cost a tenth of a run.
    fn update(&mut self, robot: &Robot, trig: JointTrig, theta_dot: &Vec3, near: &Vec3) -> Result<(), ModelError> {
        self.trig = trig;
        self.motion = robot.motion_from_trig(&self.trig, theta_dot, near)?;
        self.dynamics = robot.factored_dynamics(&self.motion)?;
        Ok(())
    }

    fn is_at(&self, theta: &Vec3, theta_dot: &Vec3) -> bool {
        self.motion.theta == *theta && self.motion.theta_dot == *theta_dot
    }
}

impl Plant {
    /// A plant at rest or moving with the given joint state; `near` [m] picks the assembly.
    pub fn new(robot: Robot, theta: &Vec3, theta_dot: &Vec3, near: &Vec3) -> Result<Plant, ModelError> {
        let evaluation = Evaluation::new(&robot, theta, theta_dot, near)?;
        Ok(Plant { robot, tau: Vec3::zeros(), evaluations: [evaluation; 2], accepted: 0, last_evaluated: 0 })
    }

    pub fn robot(&self) -> &Robot {
        &self.robot
    }

    /// Sets the joint torques held until the next call [N m].
    pub fn set_torque(&mut self, tau: Vec3) {
        self.tau = tau;
    }

    pub fn torque(&self) -> Vec3 {
        self.tau
    }

    /// The motion at the last accepted state.
    pub fn motion(&self) -> &ArmMotion {
        &self.evaluations[self.accepted].motion
    }

    /// Marks the last evaluated state as accepted. With the integrator's FSAL stage order
    /// the last evaluation is at the accepted step's end point, so nothing is recomputed.
    pub fn accept(&mut self, y: &PlantState) -> &ArmMotion {
        debug_assert_eq!(self.evaluations[self.last_evaluated].motion.theta, y.fixed_rows::<3>(0).into_owned());
        self.accepted = self.last_evaluated;
        // The next step's stages start from exact values, so that rounding never accumulates.
        let accepted = &mut self.evaluations[self.accepted];
        accepted.trig = JointTrig::new(&accepted.trig.theta);
        self.motion()
    }

    /// Total mechanical energy at the accepted state [J].
    pub fn energy(&self) -> f64 {
        self.robot.kinetic_energy(self.motion()) + self.robot.potential_energy(self.motion())
    }
}

impl OdeSystem<6> for Plant {
    type Error = ModelError;

    /// At the accepted state (the first stage after a control tick changed the torque) the
    /// kept evaluation answers; anywhere else the dynamics are evaluated.
    fn derivative(&mut self, _t: f64, y: &PlantState) -> Result<PlantState, ModelError> {
        let (theta, theta_dot) = joint_state(y);
        if self.evaluations[self.accepted].is_at(&theta, &theta_dot) {
            self.last_evaluated = self.accepted;
        } else {
            let trial = 1 - self.accepted;
            let accepted = &self.evaluations[self.accepted];
            let (trig, near) = (accepted.trig.near(&theta), accepted.motion.p);
            self.evaluations[trial].update(&self.robot, trig, &theta_dot, &near)?;
            self.last_evaluated = trial;
        }
        let theta_ddot = self.evaluations[self.last_evaluated].dynamics.joint_acceleration(&self.tau);
        let mut dy = PlantState::zeros();
        dy.fixed_rows_mut::<3>(0).copy_from(&theta_dot);
        dy.fixed_rows_mut::<3>(3).copy_from(&theta_ddot);
        Ok(dy)
    }
}
