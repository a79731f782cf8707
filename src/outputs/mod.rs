//! Where the nodes' messages go, and how: a node's [`Publisher`] decides what it publishes and
//! when, and writes through [`Outputs`] into one [`Sink`]: ROS (the r2r publisher in
//! `crate::ros`), a rosbag2 bag (`crate::bag`), a live view (`crate::live`), or two of them at
//! once ([`Both`]). Recordings run on a thread of their own ([`Recorder`], [`PublisherThread`]).

mod clock;
mod fanout;
mod publisher;
mod publisher_thread;
mod recorder;
pub mod rosout;
mod sink;

pub use clock::wall_clock_ns;
pub use fanout::{Both, Recording};
pub use publisher::{pump_events, Publisher};
pub use publisher_thread::PublisherThread;
pub use recorder::{Recorder, RecordingError};
pub use sink::{Durability, NodeName, Outputs, Qos, Sink, SinkError, Topic, TopicId, TopicSpec};
