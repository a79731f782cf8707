//! `arm_hil vr ...`: the Deltarobot VR link. `serve` is the leader for Unity, fed by the
//! simulator; `connect` follows a leader and prints what it sends.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use arm_hil::bridge::vr::{follow, FollowerEvent, VrConfig, VrFeed, VrLeader, VrState};
use arm_hil::model::math::direction_or_zero;
use arm_hil::model::Robot;
use arm_hil::nodes::load_trajectory;
use arm_hil::nodes::sil::run::{run_sil, RunEnd, SilEvent};
use arm_hil::nodes::sil::SilNodeSettings;
use arm_hil::nodes::vr::topics::VrFollowerTopics;
use arm_hil::nodes::vr::VrNodeConfig;
use arm_hil::protocol::deltavr::VrMessage;

use crate::config;
use crate::outputs::{finish_publisher, RunPublisher};
use arm_hil::outputs::wall_clock_ns;

#[derive(Debug, Subcommand)]
pub(crate) enum VrCommand {
    /// Lead Unity VR followers: stream the arm from the simulator running a trajectory in real time.
    Serve(ServeArgs),
    /// Follow a Deltarobot leader and print what it sends.
    Connect(ConnectArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Listening address [default: 127.0.0.1:7777, or the file's vr.bind]
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// `sim` (the built-in arc, looping) or a trajectory CSV run by the simulator
    #[arg(long, value_name = "sim|FILE", default_value = "sim")]
    source: String,
    /// YAML configuration: the sections of `arm_hil sil --config` plus `vr`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ConnectArgs {
    /// The leader's address
    #[arg(value_name = "ADDR")]
    leader: SocketAddr,
    #[command(flatten)]
    outputs: crate::outputs::OutputArgs,
    #[command(flatten)]
    json: crate::outputs::JsonArg,
}

/// The `vr` section beside the SIL ones.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct VrSections {
    #[serde(default)]
    vr: VrConfig,
}

impl config::Sections for VrSections {
    const KEYS: &'static [&'static str] = &["vr"];
}

pub(crate) fn run(command: VrCommand) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    match command {
        VrCommand::Serve(args) => serve(args, &runtime),
        VrCommand::Connect(args) => runtime.block_on(connect(args)),
    }
}

fn serve(args: ServeArgs, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let (sil, VrSections { vr: mut config }) = config::load::<VrSections>(args.config.as_deref())?;
    if let Some(bind) = args.bind {
        config.bind = bind;
    }
    let robot = Robot::new(sil.robot.clone())?;
    let file = match args.source.as_str() {
        "sim" => None,
        file => Some(Path::new(file)),
    };
    let trajectory = Arc::new(load_trajectory(file, &robot)?);
    let feed = VrFeed::new();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_on_signal = stop.clone();
    let shutdown_on_signal = shutdown.clone();
    ctrlc::set_handler(move || {
        stop_on_signal.store(true, Ordering::Relaxed);
        shutdown_on_signal.send_replace(true);
    })
    .context("cannot handle Ctrl-C")?;

    // The simulator feeds the leader in real time, looping over the trajectory.
    let settings = Mutex::new(SilNodeSettings { repeat: true, ..SilNodeSettings::default() });
    let simulator_feed = feed.clone();
    let simulator_stop = stop.clone();
    std::thread::Builder::new().name("vr-source".into()).spawn(move || {
        let (_keep_open, replacements) = channel();
        run_sil(&robot, &sil, &settings, trajectory, &replacements, &simulator_stop, &mut |event| match event {
            SilEvent::RunStarted(trajectory) => {
                simulator_feed.curve.send_replace(Arc::new(trajectory.waypoints().iter().map(|w| w.x).collect()));
            }
            SilEvent::Frame { frame, .. } => {
                simulator_feed.state.send_replace(VrState {
                    position: frame.x,
                    current_direction: direction_or_zero(&frame.x_dot),
                    desired_direction: direction_or_zero(&frame.xd_ref),
                });
            }
            SilEvent::RunEnded { end: RunEnd::Failed(error), .. } => log::error!("the simulation stopped: {error}"),
            SilEvent::RunEnded { .. } | SilEvent::Refused(_) => {}
        });
    })?;
    runtime.block_on(async {
        let leader = VrLeader::bind(config).await.context("cannot start the VR leader")?;
        let address = leader.local_addr()?;
        // Scripts read the bound address (port 0 picks a free one) from this first line.
        println!("listening on {address}");
        log::info!("VR leader listening on {address}");
        leader.serve(feed, shutdown_rx).await?;
        // Give followers a moment to read their End of transmission.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        Ok(())
    })
}

/// One printed message; the JSON form is an interface (`--json`).
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line<'a> {
    Connected { leader: SocketAddr },
    Curve { points: &'a [[f32; 3]] },
    Position { x: f32, y: f32, z: f32 },
    CurrentDirection { x: f32, y: f32, z: f32 },
    DesiredDirection { x: f32, y: f32, z: f32 },
    Refused { reason: &'a str },
    Disconnected { reason: &'a str, retry_in_s: f64 },
}

/// The link as vr_bridge publishes it as a follower, on its default topics, into the bag and
/// the live view asked for.
fn start_recording(args: &ConnectArgs) -> anyhow::Result<Option<RunPublisher<FollowerEvent>>> {
    let leader = args.leader;
    args.outputs.start_publisher(arm_hil::nodes::vr::NODE, move |out| {
        VrFollowerTopics::advertise(out, &VrNodeConfig::default(), leader)
    })
}

async fn connect(args: ConnectArgs) -> anyhow::Result<()> {
    let mut recording = start_recording(&args)?;
    let followed = follow_and_print(&args, &mut recording).await;
    if let Some(recording) = recording {
        finish_publisher(recording, wall_clock_ns())?;
    }
    followed
}

async fn follow_and_print(
    args: &ConnectArgs,
    recording: &mut Option<RunPublisher<FollowerEvent>>,
) -> anyhow::Result<()> {
    let (events_tx, mut events) = mpsc::channel(1024);
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(follow(args.leader, VrConfig::default(), events_tx, stop_rx));
    // One Ctrl-C listener for the whole run. A listener made anew each turn misses a Ctrl-C that
    // comes while an event is being printed, and the follower ran on.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let event = tokio::select! {
            event = events.recv() => match event {
                Some(event) => event,
                None => return Ok(()),
            },
            _ = &mut interrupted => {
                stop.send_replace(true);
                return Ok(());
            }
        };
        if let Some(recording) = recording {
            recording.event(wall_clock_ns(), event.clone());
        }
        let line = match &event {
            FollowerEvent::Connected(leader) => Line::Connected { leader: *leader },
            FollowerEvent::Message(VrMessage::Curve(points)) => Line::Curve { points },
            FollowerEvent::Message(VrMessage::ActuatorPosition([x, y, z])) => Line::Position { x: *x, y: *y, z: *z },
            FollowerEvent::Message(VrMessage::CurrentDirection([x, y, z])) => {
                Line::CurrentDirection { x: *x, y: *y, z: *z }
            }
            FollowerEvent::Message(VrMessage::DesiredDirection([x, y, z])) => {
                Line::DesiredDirection { x: *x, y: *y, z: *z }
            }
            FollowerEvent::Message(_) => continue,
            FollowerEvent::Refused(reason) => Line::Refused { reason },
            FollowerEvent::Disconnected { reason, retry_in } => {
                Line::Disconnected { reason, retry_in_s: retry_in.as_secs_f64() }
            }
        };
        let mut stdout = std::io::stdout().lock();
        if args.json.json {
            serde_json::to_writer(&mut stdout, &line)?;
            writeln!(stdout)?;
        } else {
            match &line {
                Line::Curve { points } => writeln!(stdout, "curve of {} points", points.len())?,
                other => writeln!(stdout, "{}", serde_json::to_string(other)?)?,
            }
        }
    }
}
