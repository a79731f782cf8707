//! The `sim` backend: the SIL plant and its simulated sensor, stepped in real time, so the HIL
//! loop runs with no hardware at all.

use crate::control::Waypoint;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::sim::{plant_state, BogackiShampine, Plant, PlantState, SilConfig, SimulatedSensor, StepOutcome};

use super::{ActuatorCommand, Hardware, HardwareError, SensorInput};

/// The simulated arm behind the [`Hardware`] interface. Each `read` integrates the plant up to
/// the loop's time with the torque of the last `write`, then reads the sensor.
#[derive(Debug, Clone)]
pub struct SimulatedRig {
    plant: Plant,
    integrator: BogackiShampine<6>,
    sensor: SimulatedSensor,
    elbow: Vec3,
    /// Plant time relative to the loop start [s].
    t: f64,
    y: PlantState,
}

impl SimulatedRig {
    /// A rig at rest on `start`, the first waypoint; `elbow` [m] is where the sensor sits.
    pub fn new(robot: Robot, config: &SilConfig, start: &Waypoint, elbow: Vec3) -> Result<SimulatedRig, HardwareError> {
        let plant_error = |error: &dyn std::fmt::Display| HardwareError::Plant(error.to_string());
        let motion = robot.motion_from_task(&start.x, &start.xd, None, 0.0).map_err(|e| plant_error(&e))?;
        let plant = Plant::new(robot, &motion.theta, &motion.theta_dot, &start.x).map_err(|e| plant_error(&e))?;
        Ok(SimulatedRig {
            plant,
            integrator: BogackiShampine::new(config.integrator.clone()),
            sensor: SimulatedSensor::new(&config.sensor).map_err(|e| plant_error(&e))?,
            elbow,
            t: 0.0,
            y: plant_state(&motion.theta, &motion.theta_dot),
        })
    }

    /// Integrates the plant to `until` [s] with the held torque.
    fn advance(&mut self, until: f64) -> Result<(), HardwareError> {
        while self.t < until {
            let outcome = self
                .integrator
                .step(&mut self.plant, self.t, &self.y, until - self.t)
                .map_err(|error| HardwareError::Plant(error.to_string()))?;
            if let StepOutcome::Accepted { t, y, .. } = outcome {
                if !y.iter().all(|value| value.is_finite()) {
                    return Err(HardwareError::Plant(format!("the state became non-finite at t = {t:.6} s")));
                }
                self.t = if (until - t).abs() < 1e-12 { until } else { t };
                self.y = y;
                self.plant.accept(&y);
            }
        }
        Ok(())
    }
}

impl Hardware for SimulatedRig {
    /// The arm stays as the last loop left it; its clock restarts with the loop's (the plant is
    /// time-invariant).
    fn begin(&mut self) {
        self.t = 0.0;
        self.integrator.invalidate();
    }

    fn read(&mut self, now: f64, _period: f64, input: &mut SensorInput) -> Result<(), HardwareError> {
        self.advance(now)?;
        input.reading = Some(self.sensor.measure(&self.plant.motion().p, &self.elbow));
        Ok(())
    }

    fn write(&mut self, _now: f64, _period: f64, command: &ActuatorCommand) -> Result<(), HardwareError> {
        self.plant.set_torque(command.tau);
        self.integrator.invalidate();
        Ok(())
    }

    /// The motors stop the arm where it is, as the rig's steppers do when they stop stepping: a
    /// plant left with the velocity it had would set off with it when the next loop begins.
    fn stop(&mut self) {
        self.plant.set_torque(Vec3::zeros());
        self.y.fixed_rows_mut::<3>(3).fill(0.0);
        self.integrator.invalidate();
    }

    fn true_position(&self) -> Option<Vec3> {
        Some(self.plant.motion().p)
    }
}
