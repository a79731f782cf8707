//! `arm_hil serve`: the port-5555 server for the lab's GUI clients.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use arm_hil::bridge::legacy::{HilSetup, LegacyServer, LegacyServerConfig, SessionObserver};
use arm_hil::drivers::RigSettings;
use arm_hil::model::Robot;
use arm_hil::nodes::legacy::recording::{AllSessions, SessionBags};
use arm_hil::nodes::legacy::{LegacyBridgeSettings, NODE};

use crate::config;

/// How long a shutdown waits for the sessions' threads once the `H` session's loop has ended.
const SESSIONS_WAIT: Duration = Duration::from_millis(100);
use crate::hil::{Backend, HilSections};

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Listening address [default: 127.0.0.1:5555, or the file's server.bind]
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// Hardware for `H` sessions; without it they are refused
    #[arg(long, value_enum, value_name = "KIND")]
    hil_hardware: Option<Backend>,
    /// YAML configuration: the sections of `arm_hil hil --config` plus `server`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    rate: crate::outputs::RateArg,
}

/// The sections of `serve` beside the SIL ones.
#[derive(Debug, Default, Deserialize)]
struct ServeSections {
    #[serde(default)]
    server: LegacyServerConfig,
    #[serde(flatten)]
    hil: HilSections,
}

impl config::Sections for ServeSections {
    const KEYS: &'static [&'static str] = &["server", "hil", "stepper", "rig"];
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let (sil, ServeSections { mut server, hil }) = config::load::<ServeSections>(args.config.as_deref())?;
    if let Some(bind) = args.bind {
        server.bind = bind;
    }
    let hil = args.hil_hardware.map(|backend| HilSetup {
        kind: backend.kind(),
        hil: hil.hil,
        settings: RigSettings { stepper: hil.stepper, rig: hil.rig },
    });
    let robot = Robot::new(sil.robot.clone()).context("robot parameters")?;
    // The live view's server runs on a runtime of its own, which cannot be started or stopped
    // from inside ours: it is made before and finished after.
    let settings = LegacyBridgeSettings { publish_rate_hz: args.rate.hz()?, ..LegacyBridgeSettings::default() };
    let mut view = args.outputs.live.start(NODE)?;
    let mut live = None;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        let mut server = LegacyServer::bind(server, sil, hil).await.context("cannot start the server")?;
        let address = server.local_addr()?;
        let mut observers: Vec<Arc<dyn SessionObserver>> = Vec::new();
        if let Some(dir) = &args.outputs.bag {
            let bags = SessionBags::observer(dir, args.outputs.distro(), robot.clone(), settings.clone(), address)
                .with_context(|| format!("--bag: cannot make {}", dir.display()))?;
            observers.push(bags);
        }
        // Every session on legacy_bridge's topics, as the node publishes them.
        if let Some(view) = view.take() {
            let (sessions, observer) = AllSessions::start(view, robot, &settings, address).context("--live")?;
            observers.push(observer);
            live = Some(sessions);
        }
        if !observers.is_empty() {
            server = server.with_observer(Arc::new(observers));
        }
        // Scripts read the bound address (port 0 picks a free one) from this first line.
        println!("listening on {address}");
        log::info!("port-5555 server listening on {address}");
        server.serve_until_exit().await.context("the server stopped")
    });
    // Sessions still streaming are cut off: their threads end as their sockets close, and none
    // holds the rig any more.
    runtime.shutdown_timeout(SESSIONS_WAIT);
    if let Some(Err(error)) = live.and_then(|live| live.finish()) {
        log::error!("the live view stopped: {error}");
    }
    served
}
