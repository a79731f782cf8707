//! The flags that send a command's topics somewhere besides the console, shared by every command
//! that has them: `--bag DIR` (with `--bag-distro`), `--live [ADDR]`, `--bag-rate HZ` and
//! `--json`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use arm_hil::bag::metadata::BagDistro;
use arm_hil::bag::BagWriter;
use arm_hil::live::LiveServer;
use arm_hil::outputs::{Both, Outputs, Publisher, PublisherThread, SinkError};

use crate::live::LiveArgs;

/// Where a run's topics go: a bag (`--bag`), a live view (`--live`), or both.
pub(crate) type RunSinks = Both<Option<BagWriter>, Option<LiveServer>>;

/// A node's publisher writing a command's run (a simulation, a loop, a device session) into its
/// bag and live view, on a thread of its own.
pub(crate) type RunPublisher<E> = PublisherThread<E, RunSinks>;

/// `--bag`, `--bag-distro` and `--live`.
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Record the command's node topics, as the node publishes them, as a rosbag2 bag (MCAP) in
    /// this new directory (`serve`: a bag per session under it)
    #[arg(long, value_name = "DIR")]
    pub(crate) bag: Option<PathBuf>,
    /// The ROS 2 distro that is to read the bag: humble or jazzy [default: the sourced
    /// ROS_DISTRO's, else jazzy]
    #[arg(long, value_name = "DISTRO", value_parser = BagDistro::from_name)]
    bag_distro: Option<BagDistro>,
    #[command(flatten)]
    pub(crate) live: LiveArgs,
}

impl OutputArgs {
    /// Whether a bag or a live view is asked for.
    pub(crate) fn wanted(&self) -> bool {
        self.bag.is_some() || self.live.wanted()
    }

    pub(crate) fn distro(&self) -> BagDistro {
        self.bag_distro.unwrap_or_else(|| BagDistro::for_sourced(std::env::var("ROS_DISTRO").ok().as_deref()))
    }

    /// The bag and the live view of `node` asked for, if any.
    fn sinks(&self, node: &str) -> anyhow::Result<Option<RunSinks>> {
        let bag = self.bag.as_deref().map(|dir| BagWriter::create(dir, self.distro())).transpose().context("--bag")?;
        Ok(match (bag, self.live.start(node)?) {
            (None, None) => None,
            (bag, live) => Some(Both::new(bag, live)),
        })
    }

    /// Starts `node`'s publisher, set up by `advertise` (see [`PublisherThread::spawn`]), into
    /// the bag and the live view asked for; None when neither is.
    pub(crate) fn start_publisher<P, A>(
        &self,
        node: &str,
        advertise: A,
    ) -> anyhow::Result<Option<RunPublisher<P::Event>>>
    where
        P: Publisher,
        P::Event: Send + 'static,
        A: FnOnce(&mut Outputs<RunSinks>) -> Result<P, SinkError> + Send + 'static,
    {
        let Some(sinks) = self.sinks(node)? else { return Ok(None) };
        Ok(Some(PublisherThread::spawn(sinks, node, advertise).context("cannot record the run")?))
    }
}

/// Finishes a run's bag and live view, the publisher's last word stamped `time_ns`.
pub(crate) fn finish_publisher<E: Send + 'static>(publisher: RunPublisher<E>, time_ns: u64) -> anyhow::Result<()> {
    let (bag, _live) = publisher.finish(time_ns).context("the bag or the live view is incomplete")?;
    if let Some(stats) = bag {
        log::info!("bag {}: {} messages", stats.dir.display(), stats.messages);
    }
    Ok(())
}

/// `--bag-rate`, for commands whose node publishes at a rate of its own.
#[derive(Debug, Args)]
pub(crate) struct RateArg {
    /// Samples per second (of the run's own time) in the bag and the live view, as the node's
    /// publish_rate_hz
    #[arg(long = "bag-rate", value_name = "HZ", default_value_t = 250.0)]
    rate_hz: f64,
}

impl RateArg {
    /// The rate, checked.
    pub(crate) fn hz(&self) -> anyhow::Result<f64> {
        anyhow::ensure!(self.rate_hz > 0.0 && self.rate_hz.is_finite(), "--bag-rate must be a positive number of Hz");
        Ok(self.rate_hz)
    }
}

/// `--json`.
#[derive(Debug, Args)]
pub(crate) struct JsonArg {
    /// Print JSON on standard output: one object a line
    #[arg(long)]
    pub(crate) json: bool,
}
