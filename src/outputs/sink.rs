//! A node's outputs on one sink: topic names resolved as rcl resolves them, the QoS each is
//! offered with, and the [`Outputs`] a node's publisher advertises on and publishes through.
//! The message is encoded to CDR once; the sink takes the bytes.

use std::marker::PhantomData;

use crate::msg::cdr::{encode_into, CdrError};
use crate::msg::{EncodesAs, MsgDef, RosMessage};

/// Whether late subscribers get the last messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    TransientLocal,
}

/// The QoS a topic is offered with: reliable, keep last `depth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    pub depth: u32,
    pub durability: Durability,
}

impl Qos {
    /// Streams: keep last 10, volatile (the nodes' state topics, as ros2_control's /joint_states).
    pub const STREAM: Qos = Qos { depth: 10, durability: Durability::Volatile };
    /// Device events (each one matters, none is replaced by the next): keep last 100, volatile.
    pub const EVENTS: Qos = Qos { depth: 100, durability: Durability::Volatile };
    /// Data published once for late joiners: keep last 1, transient local.
    pub const LATCHED: Qos = Qos { depth: 1, durability: Durability::TransientLocal };
    /// tf2's QoS for /tf: keep last 100, volatile.
    pub const TF: Qos = Qos { depth: 100, durability: Durability::Volatile };
    /// /clock: only the latest matters.
    pub const CLOCK: Qos = Qos { depth: 1, durability: Durability::Volatile };
}

/// A node's name and namespace, which its topic names are resolved in (as rcl does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeName {
    /// `""` (the root) or `/ns`, with no trailing slash.
    pub namespace: String,
    pub name: String,
}

impl NodeName {
    /// The node `name` in the root namespace.
    pub fn new(name: &str) -> NodeName {
        NodeName { namespace: String::new(), name: name.to_owned() }
    }

    /// The fully qualified name of `topic` as this node writes it: `/abs` stays, `~/private`
    /// goes under the node, `relative` under its namespace.
    pub fn resolve(&self, topic: &str) -> String {
        match topic.strip_prefix("~/") {
            _ if topic.starts_with('/') => topic.to_owned(),
            Some(private) => format!("{}/{}/{private}", self.namespace, self.name),
            None => format!("{}/{topic}", self.namespace),
        }
    }
}

/// A topic as a sink is told of it.
#[derive(Debug, Clone, Copy)]
pub struct TopicSpec<'a> {
    /// The name as the node writes it (`~/imu`, `/joint_states`): what ROS resolves itself.
    pub name: &'a str,
    /// The fully qualified name (`/stm32_driver/imu`): what a bag or a live view shows.
    pub resolved: &'a str,
    pub message: &'static MsgDef,
    /// RIHS01 type description hash.
    pub type_hash: &'static str,
    pub qos: Qos,
}

/// A sink's handle of a topic it was told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopicId(pub usize);

/// Where a node's messages go: ROS, a bag, a live view.
pub trait Sink {
    /// Takes a new topic; what is published on it later comes with the returned id.
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError>;

    /// One message on `topic`, as CDR (with its encapsulation header), at `time_ns` on the
    /// run's time axis (simulated or wall-clock nanoseconds; message stamps follow the same
    /// axis).
    fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError>;
}

/// Why a message did not reach its sink.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("cannot encode a {type_name}")]
    Encode { type_name: &'static str, source: CdrError },
    #[error("{topic} cannot be published as {type_name}: {reason}")]
    Advertise { topic: String, type_name: &'static str, reason: String },
    #[error("no topic {0:?} was advertised here")]
    UnknownTopic(TopicId),
    /// The sink itself failed (a bag's file, a ROS publisher).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// A topic of message type `M` on one sink.
#[derive(Debug)]
pub struct Topic<M> {
    id: TopicId,
    message: PhantomData<fn(&M)>,
}

impl<M> Clone for Topic<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Topic<M> {}

/// A node's outputs on one sink: its topics are advertised here, and each message is encoded
/// into a reused buffer (no allocation once it has held the largest message) and handed over.
#[derive(Debug)]
pub struct Outputs<S> {
    node: NodeName,
    sink: S,
    cdr: Vec<u8>,
}

impl<S: Sink> Outputs<S> {
    /// The outputs of `node` on `sink`.
    pub fn new(node: NodeName, sink: S) -> Outputs<S> {
        Outputs { node, sink, cdr: Vec::with_capacity(4096) }
    }

    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// Advertises `name` (as the node writes it) with message type `M`. A node advertises all
    /// its topics before it publishes anything: ROS creates the publishers after.
    pub fn topic<M: RosMessage>(&mut self, name: &str, qos: Qos) -> Result<Topic<M>, SinkError> {
        let resolved = self.node.resolve(name);
        let spec = TopicSpec { name, resolved: &resolved, message: M::DEF, type_hash: M::TYPE_HASH, qos };
        let id = self.sink.advertise(&spec)?;
        Ok(Topic { id, message: PhantomData })
    }

    /// Publishes `message` (an `M`, or a view encoded as one) on `topic` at `time_ns`.
    pub fn publish<M: RosMessage>(
        &mut self,
        topic: Topic<M>,
        time_ns: u64,
        message: &impl EncodesAs<M>,
    ) -> Result<(), SinkError> {
        encode_into(message, &mut self.cdr).map_err(|source| SinkError::Encode { type_name: M::DEF.name, source })?;
        self.sink.write(topic.id, time_ns, &self.cdr)
    }

    pub fn sink(&self) -> &S {
        &self.sink
    }

    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    pub fn into_sink(self) -> S {
        self.sink
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_as_rcl_resolves_them() {
        let root = NodeName::new("stm32_driver");
        assert_eq!(root.resolve("~/imu"), "/stm32_driver/imu");
        assert_eq!(root.resolve("/joint_states"), "/joint_states");
        assert_eq!(root.resolve("joint_states"), "/joint_states");
        let arm = NodeName { namespace: "/a1".into(), name: "sil_node".into() };
        assert_eq!(arm.resolve("~/state"), "/a1/sil_node/state");
        assert_eq!(arm.resolve("joint_states"), "/a1/joint_states");
        assert_eq!(arm.resolve("/tf"), "/tf");
    }
}
