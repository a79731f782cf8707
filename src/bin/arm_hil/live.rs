//! `--live [ADDR]`: a command's topics served to Foxglove or Lichtblick while it runs.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;

use arm_hil::bag::BagWriter;
use arm_hil::live::LiveServer;
use arm_hil::nodes::topics::Both;

/// Where a run's topics go: a bag (`--bag`), a live view (`--live`), or both.
pub(crate) type RunSinks = Both<Option<BagWriter>, Option<LiveServer>>;

/// The sinks asked for, if any.
pub(crate) fn run_sinks(bag: Option<BagWriter>, live: Option<LiveServer>) -> Option<RunSinks> {
    match (bag, live) {
        (None, None) => None,
        (bag, live) => Some(Both::new(bag, live)),
    }
}

#[derive(Debug, Args)]
pub(crate) struct LiveArgs {
    /// Serve the run live to Foxglove or Lichtblick (Foxglove WebSocket protocol) on this
    /// address [default: 127.0.0.1:8765; port 0 picks a free one]; the first line printed is
    /// `live on ws://ADDR`
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765")]
    live: Option<SocketAddr>,
    /// Let --live listen on an address that is not loopback (the network can then watch)
    #[arg(long, requires = "live")]
    live_any_address: bool,
}

impl LiveArgs {
    pub(crate) fn wanted(&self) -> bool {
        self.live.is_some()
    }

    /// Starts the live view, if asked for, and says where on the first line of stdout.
    pub(crate) fn start(&self, name: &str) -> anyhow::Result<Option<LiveServer>> {
        let Some(address) = self.live else { return Ok(None) };
        let server = LiveServer::start(address, self.live_any_address, name).context("--live")?;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "live on ws://{}", server.address()).and_then(|()| stdout.flush())?;
        Ok(Some(server))
    }
}
