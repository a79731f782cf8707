//! `~/joint_command` of the parallel arm's nodes (sil_node, hil_node): sensor_msgs/JointState
//! with the three motors' positions, as ros2_control's topic-based hardware plugin streams its
//! controllers' commands.

use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::QosProfile;

use crate::nodes::refusals::Refusals;

/// Serves `~/joint_command`: each command's names and positions go to `take` with the time it
/// came [s since the node started] and its header's stamp [s] (None where it has none), which
/// follows it or says why not; a refusal is logged once while it lasts.
pub fn serve_joint_commands(
    node: &mut r2r::Node,
    pool: &LocalPool,
    mut take: impl FnMut((f64, Option<f64>), &[String], &[f64]) -> Result<(), String> + 'static,
) -> anyhow::Result<()> {
    let subscription = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    let (started, mut refusals) = (Instant::now(), Refusals::default());
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        let stamp = &message.header.stamp;
        let stamp_s =
            (stamp.sec != 0 || stamp.nanosec != 0).then(|| f64::from(stamp.sec) + f64::from(stamp.nanosec) * 1e-9);
        let taken = take((started.elapsed().as_secs_f64(), stamp_s), &message.name, &message.position);
        refusals.log("~/joint_command", taken);
        futures::future::ready(())
    }))?;
    Ok(())
}
