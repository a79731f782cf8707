//! `--live [ADDR]`: a command's topics served to Foxglove or Lichtblick while it runs.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::OnceLock;

use anyhow::Context;
use clap::Args;

use arm_hil::live::{LiveLog, LiveServer};

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

    /// Starts the live view of `node`'s topics, if asked for, says where on the first line of
    /// stdout, and sends the command's log lines to its /rosout from then on.
    pub(crate) fn start(&self, node: &str) -> anyhow::Result<Option<LiveServer>> {
        let Some(address) = self.live else { return Ok(None) };
        let server =
            LiveServer::start(address, self.live_any_address, &format!("arm_hil: {node}")).context("--live")?;
        let _ = LIVE_LOG.set(server.log_lines(node).context("--live")?);
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "live on ws://{}", server.address()).and_then(|()| stdout.flush())?;
        Ok(Some(server))
    }
}

/// Where log lines go besides the console, once a live view runs.
static LIVE_LOG: OnceLock<LiveLog> = OnceLock::new();

/// Loggers whose lines stay off the live view: the view's own server and its runtime (a line
/// about a client's full queue must not go into that queue).
const OWN_TARGETS: [&str; 3] = ["foxglove", "tokio", "tungstenite"];

/// The command's logger: env_logger on the console (RUST_LOG, default info), and every line at
/// Info and above on the live view's /rosout, as a node's would be.
struct Logger {
    console: env_logger::Logger,
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        self.console.enabled(metadata) || metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record) {
        if self.console.matches(record) {
            self.console.log(record);
        }
        let Some(live) = LIVE_LOG.get() else { return };
        if record.level() <= log::Level::Info && !OWN_TARGETS.iter().any(|own| record.target().starts_with(own)) {
            live.publish(record);
        }
    }

    fn flush(&self) {
        self.console.flush();
    }
}

/// Installs the command's logger.
pub(crate) fn init_logging() {
    let console = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).build();
    let level = console.filter().max(log::LevelFilter::Info);
    if log::set_boxed_logger(Box::new(Logger { console })).is_ok() {
        log::set_max_level(level);
    }
}
