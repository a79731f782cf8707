//! legacy_bridge: the port-5555 server as a ROS 2 node, republishing every session's frames on
//! sil_node's topics with the server's sessions on /diagnostics (see
//! [`crate::nodes::legacy::publisher`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use futures::executor::LocalPool;

use super::params::{nothing_at_run_time, serve_parameters};
use super::publisher::NodePublisher;
use super::{node_params, spin};
use crate::bridge::legacy::LegacyServer;
use crate::model::Robot;
use crate::nodes::legacy::publisher::{LegacyPublisher, SessionEvents};
use crate::nodes::legacy::{legacy_bridge_config, LEGACY_BRIDGE_PARAMS};
use crate::nodes::param_server::ParameterServer;

/// How long the end waits for the sessions' threads once the `H` session's loop has ended.
const SESSIONS_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs the node until interrupted.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = legacy_bridge_config(&node_params(&node)).context("legacy_bridge parameters")?;
    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), LEGACY_BRIDGE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;

    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let server = runtime.block_on(LegacyServer::bind(config.server, config.sil.clone(), config.hil))?;
    let listening = server.local_addr()?;
    log::info!("port-5555 server listening on {listening}");
    // robot_state_publisher publishes the URDF and /tf beside the node.
    let (robot, settings) = (Robot::new(config.sil.robot.clone())?, &config.settings);
    let publisher = NodePublisher::new(&mut node, |out| {
        LegacyPublisher::advertise(out, robot, &settings.frame_id, settings.publish_rate_hz, listening, None, 0)
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let ticks = publisher.spawn_ticks(stop.clone())?;
    let server = server.with_observer(Arc::new(SessionEvents(move |event| publisher.event(&event))));
    // On a signal the server ends the `H` session's loop (the rig stopped); the other sessions are
    // cut when the process exits.
    let serving = std::thread::Builder::new().name("legacy-server".into()).spawn(move || {
        let served = runtime.block_on(server.serve_until_exit());
        runtime.shutdown_timeout(SESSIONS_WAIT);
        served
    })?;
    spin(node, pool, &stop)?;
    let _ = ticks.join();
    if let Ok(Err(error)) = serving.join() {
        log::error!("the port-5555 server stopped: {error}");
    }
    Ok(())
}
