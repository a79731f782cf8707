//! A rosbag2 directory's metadata.yaml, version 9 (ROS 2 Jazzy), which `ros2 bag info` and
//! `ros2 bag play` read before they open the storage file.

use serde::{Deserialize, Serialize};

/// The single key of metadata.yaml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetadataFile {
    pub rosbag2_bagfile_information: Metadata,
}

/// What rosbag2 knows of a bag without opening it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub version: u32,
    pub storage_identifier: String,
    pub duration: Nanoseconds,
    pub starting_time: SinceEpoch,
    pub message_count: u64,
    pub topics_with_message_count: Vec<TopicWithCount>,
    #[serde(default)]
    pub compression_format: String,
    #[serde(default)]
    pub compression_mode: String,
    pub relative_file_paths: Vec<String>,
    #[serde(default)]
    pub files: Vec<FileInformation>,
    #[serde(default)]
    pub custom_data: Option<serde_norway::Value>,
    #[serde(default)]
    pub ros_distro: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Nanoseconds {
    pub nanoseconds: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SinceEpoch {
    pub nanoseconds_since_epoch: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicWithCount {
    pub topic_metadata: TopicMetadata,
    pub message_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicMetadata {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub serialization_format: String,
    /// A list of QoS profiles (version 9); older versions hold the list as one YAML string.
    #[serde(default)]
    pub offered_qos_profiles: serde_norway::Value,
    #[serde(default)]
    pub type_description_hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInformation {
    pub path: String,
    pub starting_time: SinceEpoch,
    pub duration: Nanoseconds,
    pub message_count: u64,
}

/// How long a message stays deliverable: rosbag2 writes "infinite" as the largest duration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct RmwDuration {
    sec: u64,
    nsec: u64,
}

const INFINITE: RmwDuration = RmwDuration { sec: 9_223_372_036, nsec: 854_775_807 };

/// Whether late subscribers get the last messages (`ros2 bag play` offers each topic as it
/// was recorded, so a latched path stays latched on replay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    TransientLocal,
}

/// The QoS a topic was offered with: reliable, keep last `depth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    pub depth: u32,
    pub durability: Durability,
}

impl Qos {
    /// Streams: keep last 10, volatile (the nodes' state topics).
    pub const STREAM: Qos = Qos { depth: 10, durability: Durability::Volatile };
    /// Data published once for late joiners: keep last 1, transient local.
    pub const LATCHED: Qos = Qos { depth: 1, durability: Durability::TransientLocal };

    /// The profile list as rosbag2 stores it, in metadata.yaml and in the MCAP channel.
    pub fn profiles(&self) -> serde_norway::Value {
        #[derive(Serialize)]
        struct Profile {
            history: &'static str,
            depth: u32,
            reliability: &'static str,
            durability: &'static str,
            deadline: RmwDuration,
            lifespan: RmwDuration,
            liveliness: &'static str,
            liveliness_lease_duration: RmwDuration,
            avoid_ros_namespace_conventions: bool,
        }
        let profile = Profile {
            history: "keep_last",
            depth: self.depth,
            reliability: "reliable",
            durability: match self.durability {
                Durability::Volatile => "volatile",
                Durability::TransientLocal => "transient_local",
            },
            deadline: INFINITE,
            lifespan: INFINITE,
            liveliness: "automatic",
            liveliness_lease_duration: INFINITE,
            avoid_ros_namespace_conventions: false,
        };
        serde_norway::to_value([profile]).unwrap_or(serde_norway::Value::Null)
    }
}
