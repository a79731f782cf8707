//! `arm_hil serve`: the port-5555 server for the lab's GUI clients.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use arm_hil::bag::legacy::SessionBags;
use arm_hil::bridge::legacy::{HilSetup, LegacyServer, LegacyServerConfig};
use arm_hil::drivers::RigSettings;
use arm_hil::model::Robot;

use crate::config;
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
    /// Record each session as a rosbag2 bag (MCAP) with legacy_bridge's topics, in a directory
    /// of its own under DIR named by its start and peer (session_<UTC start>_<ip>-<port>)
    #[arg(long, value_name = "DIR")]
    bag: Option<PathBuf>,
    /// Samples per second of session time in the bags, as legacy_bridge's publish_rate_hz
    #[arg(long, value_name = "HZ", default_value_t = 250.0)]
    bag_rate: f64,
    #[command(flatten)]
    bag_distro: crate::bag::BagDistroArg,
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
    anyhow::ensure!(args.bag_rate > 0.0 && args.bag_rate.is_finite(), "--bag-rate must be a positive number of Hz");
    let robot = Robot::new(sil.robot.clone()).context("robot parameters")?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut server = LegacyServer::bind(server, sil, hil).await.context("cannot start the server")?;
        let address = server.local_addr()?;
        if let Some(dir) = &args.bag {
            let bags = SessionBags::new(dir, args.bag_distro.distro(), robot, args.bag_rate, address)
                .with_context(|| format!("--bag: cannot make {}", dir.display()))?;
            server = server.with_observer(bags);
        }
        // Scripts read the bound address (port 0 picks a free one) from this first line.
        println!("listening on {address}");
        log::info!("port-5555 server listening on {address}");
        tokio::select! {
            served = server.serve() => served.context("the server stopped"),
            _ = tokio::signal::ctrl_c() => {
                log::info!("interrupted, shutting down");
                Ok(())
            }
        }
    })
}
