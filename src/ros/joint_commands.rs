//! `~/joint_command` of the parallel arm's nodes (sil_node, hil_node): sensor_msgs/JointState
//! with the three motors' positions, as ros2_control's topic-based hardware plugin streams its
//! controllers' commands.

use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::QosProfile;

use crate::control::Trajectory;
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::refusals::Refusals;
use crate::nodes::sil::joint_goals::JointCommands;

/// Serves `~/joint_command`: each command becomes a move of the controller's reference, from
/// where `reference` says it is (position [m], velocity [m/s], or why the node takes no command)
/// to where the command puts the platform ([`JointCommands`]), handed to `take`; a refusal is
/// logged once while it lasts.
pub fn serve_joint_commands(
    node: &mut r2r::Node,
    pool: &LocalPool,
    robot: &Robot,
    mut commands: JointCommands,
    reference: impl Fn() -> Result<(Vec3, Vec3), String> + 'static,
    mut take: impl FnMut(Trajectory) + 'static,
) -> anyhow::Result<()> {
    let subscription = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    let (robot, started, mut refusals) = (robot.clone(), Instant::now(), Refusals::default());
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let elapsed_s = started.elapsed().as_secs_f64();
        let taken = reference()
            .and_then(|reference| commands.trajectory(&robot, elapsed_s, reference, &message.name, &message.position))
            .map(&mut take);
        if let Some(error) = refusals.said(taken) {
            log::error!("~/joint_command refused: {error} (said once while it lasts)");
        }
        futures::future::ready(())
    }))?;
    Ok(())
}
