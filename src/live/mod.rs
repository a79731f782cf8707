//! A live view of a run: the node's topics served over the Foxglove WebSocket protocol
//! (`foxglove.websocket.v1`), which Foxglove and Lichtblick connect to, through the Foxglove SDK.
//! The topics, schemas (`ros2msg`) and messages (CDR) are the ones a bag of the same run holds,
//! so a viewer shows the arm from its URDF with nothing to configure.
//!
//! The run never waits for a viewer: each client has a bounded queue in the SDK, which drops the
//! oldest messages of a client that does not keep up (and logs it). Latched topics
//! (/robot_description, /tf_static, a run's reference path) are sent again to each client that
//! subscribes to them, as ROS's transient-local durability does for a late subscriber.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foxglove::websocket::{ChannelView, Client, ServerListener};
use foxglove::{ChannelId, Context, PartialMetadata, RawChannel, Schema, WebSocketServerHandle};

use crate::msg::cdr::encode_into;
use crate::msg::{Log, RosMessage};
use crate::outputs::{rosout, wall_clock_ns};
use crate::outputs::{Durability, Recording, Sink, SinkError, TopicId, TopicSpec};

/// Messages a client may have waiting before the oldest are dropped: a second of a run's
/// streams at 250 Hz, with room to spare.
const CLIENT_QUEUE: usize = 2048;

/// How long the clients get to take their close when the run ends; a client that does not read
/// is cut off then, so that it cannot hold the process.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the run's last messages (its final status) get to leave the clients' queues before
/// the server stops: the SDK has no flush, and stopping drops what is still queued.
const DRAIN_TIME: Duration = Duration::from_millis(250);

/// Why the live view could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0} is not a loopback address: a live view listens there only with --live-any-address")]
    NotLoopback(SocketAddr),
    #[error("cannot serve the live view on {address}")]
    Serve { address: SocketAddr, source: foxglove::FoxgloveError },
}

/// A latched channel and its last message (CDR, and its time [ns]), if any.
type LatchedChannel = (Arc<RawChannel>, Option<(Vec<u8>, u64)>);

/// The latched channels, for clients that subscribe late.
#[derive(Default)]
struct Latched(Mutex<HashMap<ChannelId, LatchedChannel>>);

impl ServerListener for Latched {
    fn on_subscribe(&self, client: Client, channel: ChannelView) {
        let Ok(latched) = self.0.lock() else { return };
        if let Some((raw, Some((message, time_ns)))) = latched.get(&channel.id()) {
            raw.log_with_meta_to_sink(message, PartialMetadata::with_log_time(*time_ns), client.sink_id());
        }
    }
}

/// What a finished live view served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStats {
    pub messages: u64,
}

/// A running live view: a [`Sink`] whose topics are Foxglove channels.
pub struct LiveServer {
    context: Arc<Context>,
    server: Option<WebSocketServerHandle>,
    address: SocketAddr,
    channels: Vec<(Arc<RawChannel>, bool)>,
    latched: Arc<Latched>,
    messages: u64,
}

impl std::fmt::Debug for LiveServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveServer").field("address", &self.address).finish_non_exhaustive()
    }
}

impl LiveServer {
    /// Serves on `address` (port 0: one the system picks) as `name`. An address that is not
    /// loopback is refused unless `any_address`.
    pub fn start(address: SocketAddr, any_address: bool, name: &str) -> Result<LiveServer, LiveError> {
        if !(address.ip().is_loopback() || any_address) {
            return Err(LiveError::NotLoopback(address));
        }
        let context = Context::new();
        let latched = Arc::new(Latched::default());
        let server = context
            .websocket_server()
            .name(name)
            .bind(address.ip().to_string(), address.port())
            .message_backlog_size(CLIENT_QUEUE)
            .listener(latched.clone())
            .start_blocking()
            .map_err(|source| LiveError::Serve { address, source })?;
        let address = SocketAddr::new(address.ip(), server.port());
        Ok(LiveServer { context, server: Some(server), address, channels: Vec::new(), latched, messages: 0 })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// Log lines on a live view's /rosout (rcl_interfaces/Log), as a node's would be: what the
/// command logs at Info and above. Cheap to clone, for a logger that any thread calls.
#[derive(Clone)]
pub struct LiveLog {
    channel: Arc<RawChannel>,
    name: Arc<str>,
}

impl std::fmt::Debug for LiveLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveLog").field("name", &self.name).finish_non_exhaustive()
    }
}

impl LiveLog {
    /// Publishes `record`, logged now.
    pub fn publish(&self, record: &log::Record) {
        let now_ns = wall_clock_ns();
        let line = rosout::log_line(now_ns, &self.name, record);
        let mut cdr = Vec::with_capacity(128 + line.msg.len());
        if encode_into(&line, &mut cdr).is_ok() {
            self.channel.log_with_meta(&cdr, PartialMetadata::with_log_time(now_ns));
        }
    }
}

impl LiveServer {
    /// The view's /rosout, its lines named `name` (the node's).
    pub fn log_lines(&self, name: &str) -> Result<LiveLog, SinkError> {
        let schema = Schema::new(Log::DEF.name, "ros2msg", Log::DEF.schema().into_bytes());
        let channel = self.context.channel_builder("/rosout").message_encoding("cdr").schema(schema).build_raw();
        let channel = channel.map_err(|error| SinkError::Advertise {
            topic: "/rosout".into(),
            type_name: Log::DEF.name,
            reason: error.to_string(),
        })?;
        Ok(LiveLog { channel, name: name.into() })
    }
}

impl Sink for LiveServer {
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
        let def = topic.message;
        let schema = Schema::new(def.name, "ros2msg", def.schema().into_bytes());
        let channel =
            self.context.channel_builder(topic.resolved).message_encoding("cdr").schema(schema).build_raw().map_err(
                |error| SinkError::Advertise {
                    topic: topic.resolved.to_owned(),
                    type_name: def.name,
                    reason: error.to_string(),
                },
            )?;
        let latched = topic.qos.durability == Durability::TransientLocal;
        if latched {
            if let Ok(mut map) = self.latched.0.lock() {
                map.insert(channel.id(), (channel.clone(), None));
            }
        }
        self.channels.push((channel, latched));
        Ok(TopicId(self.channels.len() - 1))
    }

    fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
        let (channel, latched) = self.channels.get(topic.0).ok_or(SinkError::UnknownTopic(topic))?;
        if *latched {
            if let Ok(mut map) = self.latched.0.lock() {
                if let Some((_, last)) = map.get_mut(&channel.id()) {
                    *last = Some((cdr.to_vec(), time_ns));
                }
            }
        }
        channel.log_with_meta(cdr, PartialMetadata::with_log_time(time_ns));
        self.messages += 1;
        Ok(())
    }
}

impl Recording for LiveServer {
    type Finished = LiveStats;

    /// Stops serving: each client's connection is closed, within [`CLOSE_TIMEOUT`].
    fn finish(mut self) -> Result<LiveStats, SinkError> {
        if let Some(server) = self.server.take() {
            if server.client_count() > 0 {
                std::thread::sleep(DRAIN_TIME);
            }
            let closing = server.stop();
            let waited = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .map(|runtime| runtime.block_on(async { tokio::time::timeout(CLOSE_TIMEOUT, closing.wait()).await }));
            if !matches!(waited, Ok(Ok(()))) {
                log::warn!("live view: a client did not take its close within {CLOSE_TIMEOUT:?}; cut off");
            }
        }
        Ok(LiveStats { messages: self.messages })
    }

    fn describe(&self) -> String {
        format!("the live view on ws://{}", self.address)
    }
}
