//! A rosbag2 directory's metadata.yaml, which `ros2 bag info` and `ros2 bag play` read before
//! they open the storage file: read into [`MetadataFile`] (any version), written by
//! [`metadata_yaml`] in the form the distro that is to read it takes ([`BagDistro`]).

use serde::Deserialize;

use crate::outputs::{Durability, Qos};

/// The single key of metadata.yaml.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MetadataFile {
    pub rosbag2_bagfile_information: Metadata,
}

/// What rosbag2 knows of a bag without opening it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Nanoseconds {
    pub nanoseconds: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct SinceEpoch {
    pub nanoseconds_since_epoch: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TopicWithCount {
    pub topic_metadata: TopicMetadata,
    pub message_count: u64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FileInformation {
    pub path: String,
    pub starting_time: SinceEpoch,
    pub duration: Nanoseconds,
    pub message_count: u64,
}

/// The ROS 2 distro a bag is written for. Jazzy writes metadata version 9: each topic's QoS
/// profiles as a YAML list with named policies, and its type description hash. Humble reads
/// version 5 and fails on a list ("bad conversion"): there the profiles are one YAML string, the
/// policies rmw's numbers, and there are no type hashes. Jazzy reads both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BagDistro {
    Humble,
    #[default]
    Jazzy,
}

impl BagDistro {
    /// `humble` or `jazzy`.
    pub fn from_name(name: &str) -> Result<BagDistro, String> {
        match name {
            "humble" => Ok(BagDistro::Humble),
            "jazzy" => Ok(BagDistro::Jazzy),
            other => Err(format!("bags are written for humble or jazzy, not {other:?}")),
        }
    }

    /// The distro of a sourced ROS 2 (`ros_distro`, as ROS_DISTRO says): Humble's own form for
    /// Humble, else Jazzy's, which later distros read.
    pub fn for_sourced(ros_distro: Option<&str>) -> BagDistro {
        match ros_distro {
            Some("humble") => BagDistro::Humble,
            _ => BagDistro::Jazzy,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BagDistro::Humble => "humble",
            BagDistro::Jazzy => "jazzy",
        }
    }
}

/// rmw's "infinite" duration (`RMW_DURATION_INFINITE`), as rosbag2 writes it: seconds and
/// nanoseconds of the largest i64 nanosecond count.
const INFINITE_SEC: u64 = 9_223_372_036;
const INFINITE_NSEC: u64 = 854_775_807;

/// A topic's QoS as rosbag2 stores it, in metadata.yaml and in the MCAP channel: a YAML block
/// sequence of one profile, every line indented by `indent` spaces, with the policies named
/// (Jazzy) or numbered as rmw numbers them (Humble: keep_last, reliable, transient_local and
/// automatic are 1, volatile 2). `ros2 bag play` offers each topic as it was recorded, so a
/// latched path stays latched on replay.
pub fn profiles_yaml(qos: &Qos, indent: usize, distro: BagDistro) -> String {
    let durability = match (qos.durability, distro) {
        (Durability::Volatile, BagDistro::Jazzy) => "volatile",
        (Durability::TransientLocal, BagDistro::Jazzy) => "transient_local",
        (Durability::Volatile, BagDistro::Humble) => "2",
        (Durability::TransientLocal, BagDistro::Humble) => "1",
    };
    let [history, reliability, liveliness] = match distro {
        BagDistro::Jazzy => ["keep_last", "reliable", "automatic"],
        BagDistro::Humble => ["1", "1", "1"],
    };
    let infinite = format!("\n    sec: {INFINITE_SEC}\n    nsec: {INFINITE_NSEC}");
    let text = format!(
        "- history: {history}\n  depth: {}\n  reliability: {reliability}\n  durability: {durability}\n  \
         deadline:{infinite}\n  lifespan:{infinite}\n  liveliness: {liveliness}\n  \
         liveliness_lease_duration:{infinite}\n  avoid_ros_namespace_conventions: false\n",
        qos.depth
    );
    let margin = " ".repeat(indent);
    text.lines().map(|line| format!("{margin}{line}\n")).collect()
}

/// One topic of a bag being written, with the messages written to it so far.
#[derive(Debug, Clone)]
pub struct TopicCount {
    pub name: String,
    pub type_name: &'static str,
    pub type_hash: &'static str,
    pub qos: Qos,
    pub count: u64,
}

/// `text` as a YAML scalar: plain where YAML reads it back as this string, else single-quoted.
fn scalar(text: &str) -> std::borrow::Cow<'_, str> {
    let plain = text.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        && text.chars().all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
        && !["y", "n", "yes", "no", "on", "off", "true", "false", "null"].contains(&text.to_ascii_lowercase().as_str());
    match plain {
        true => text.into(),
        false => format!("'{}'", text.replace('\'', "''")).into(),
    }
}

/// metadata.yaml of a bag of one MCAP file `file_name`, whose messages span
/// `start_ns..=end_ns`, for `distro` (version 9, or Humble's 5). Written by hand rather than
/// through a YAML serialiser: the bag writes it once a second and when it closes, and the
/// serialiser took a run's tail most of a millisecond.
pub fn metadata_yaml(
    file_name: &str,
    (start_ns, end_ns): (u64, u64),
    topics: &[&TopicCount],
    distro: BagDistro,
) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(8192);
    let total: u64 = topics.iter().map(|topic| topic.count).sum();
    let duration = end_ns - start_ns;
    let version = match distro {
        BagDistro::Humble => 5,
        BagDistro::Jazzy => 9,
    };
    let _ = write!(text, "rosbag2_bagfile_information:\n  version: {version}\n  storage_identifier: mcap\n");
    let _ = write!(text, "  duration:\n    nanoseconds: {duration}\n");
    let _ = write!(text, "  starting_time:\n    nanoseconds_since_epoch: {start_ns}\n");
    let _ = writeln!(text, "  message_count: {total}");
    text.push_str(match topics.is_empty() {
        true => "  topics_with_message_count: []\n",
        false => "  topics_with_message_count:\n",
    });
    for topic in topics {
        let _ = write!(
            text,
            "  - topic_metadata:\n      name: {}\n      type: {}\n      serialization_format: cdr\n",
            scalar(&topic.name),
            scalar(topic.type_name),
        );
        let _ = match distro {
            BagDistro::Jazzy => write!(
                text,
                "      offered_qos_profiles:\n{}      type_description_hash: {}\n",
                profiles_yaml(&topic.qos, 6, distro),
                scalar(topic.type_hash)
            ),
            // One double-quoted string: the profiles hold no quote or backslash to escape.
            BagDistro::Humble => writeln!(
                text,
                "      offered_qos_profiles: \"{}\"",
                profiles_yaml(&topic.qos, 0, distro).replace('\n', "\\n")
            ),
        };
        let _ = writeln!(text, "    message_count: {}", topic.count);
    }
    let file = scalar(file_name);
    let _ = write!(
        text,
        "  compression_format: ''\n  compression_mode: ''\n  relative_file_paths:\n  - {file}\n  files:\n  \
         - path: {file}\n    starting_time:\n      nanoseconds_since_epoch: {start_ns}\n    duration:\n      \
         nanoseconds: {duration}\n    message_count: {total}\n"
    );
    if distro == BagDistro::Jazzy {
        text.push_str("  custom_data: null\n  ros_distro: jazzy\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(qos: Qos) -> serde_norway::Value {
        let text = profiles_yaml(&qos, 0, BagDistro::Jazzy);
        let list: serde_norway::Value = serde_norway::from_str(&text).expect("the profile list is YAML");
        list[0].clone()
    }

    #[test]
    fn qos_profiles_read_back_as_rosbag2_writes_them() {
        let latched = profile(Qos::LATCHED);
        assert_eq!(latched["history"], "keep_last");
        assert_eq!(latched["depth"], 1);
        assert_eq!(latched["reliability"], "reliable");
        assert_eq!(latched["durability"], "transient_local");
        assert_eq!(latched["deadline"]["sec"], INFINITE_SEC);
        assert_eq!(latched["lifespan"]["nsec"], INFINITE_NSEC);
        assert_eq!(latched["liveliness_lease_duration"]["sec"], INFINITE_SEC);
        assert_eq!(latched["avoid_ros_namespace_conventions"], false);
        assert_eq!(profile(Qos::STREAM)["durability"], "volatile");
        assert_eq!(profile(Qos::STREAM)["depth"], 10);
    }

    #[test]
    fn metadata_reads_back_with_every_topic_and_count() {
        let topics = [
            TopicCount {
                name: "/joint_states".into(),
                type_name: "sensor_msgs/msg/JointState",
                type_hash: "RIHS01_a1",
                qos: Qos::STREAM,
                count: 7,
            },
            TopicCount {
                name: "/tf_static".into(),
                type_name: "tf2_msgs/msg/TFMessage",
                type_hash: "RIHS01_e3",
                qos: Qos::LATCHED,
                count: 1,
            },
        ];
        let text = metadata_yaml("run: #1_0.mcap", (5, 105), &topics.iter().collect::<Vec<_>>(), BagDistro::Jazzy);
        let file: MetadataFile = serde_norway::from_str(&text).expect("metadata.yaml is YAML");
        let metadata = file.rosbag2_bagfile_information;
        assert_eq!((metadata.version, metadata.storage_identifier.as_str()), (9, "mcap"));
        assert_eq!((metadata.starting_time.nanoseconds_since_epoch, metadata.duration.nanoseconds), (5, 100));
        assert_eq!(metadata.message_count, 8);
        assert_eq!(metadata.relative_file_paths, ["run: #1_0.mcap"]);
        assert_eq!(metadata.files[0].path, "run: #1_0.mcap");
        assert_eq!(metadata.files[0].message_count, 8);
        assert_eq!(metadata.ros_distro, "jazzy");
        let listed: Vec<_> = metadata
            .topics_with_message_count
            .iter()
            .map(|topic| {
                (topic.topic_metadata.name.as_str(), topic.topic_metadata.type_name.as_str(), topic.message_count)
            })
            .collect();
        assert_eq!(
            listed,
            [("/joint_states", "sensor_msgs/msg/JointState", 7), ("/tf_static", "tf2_msgs/msg/TFMessage", 1)]
        );
        assert_eq!(
            metadata.topics_with_message_count[1].topic_metadata.offered_qos_profiles[0]["durability"],
            "transient_local"
        );
        assert_eq!(metadata.topics_with_message_count[0].topic_metadata.type_description_hash, "RIHS01_a1");
    }

    #[test]
    fn metadata_of_a_bag_without_topics_reads_back() {
        for distro in [BagDistro::Humble, BagDistro::Jazzy] {
            let text = metadata_yaml("b_0.mcap", (0, 0), &[], distro);
            let file: MetadataFile = serde_norway::from_str(&text).expect("YAML");
            assert!(file.rosbag2_bagfile_information.topics_with_message_count.is_empty());
        }
    }

    #[test]
    fn humble_metadata_is_version_5_with_the_profiles_as_one_string_of_numbered_policies() {
        let latched = TopicCount {
            name: "/tf_static".into(),
            type_name: "tf2_msgs/msg/TFMessage",
            type_hash: "RIHS01_e3",
            qos: Qos::LATCHED,
            count: 1,
        };
        let text = metadata_yaml("b_0.mcap", (5, 105), &[&latched], BagDistro::Humble);
        let file: MetadataFile = serde_norway::from_str(&text).expect("YAML");
        let metadata = file.rosbag2_bagfile_information;
        assert_eq!(metadata.version, 5);
        assert_eq!(metadata.ros_distro, "", "version 5 has no ros_distro");
        assert_eq!(metadata.files[0].message_count, 1);
        let topic = &metadata.topics_with_message_count[0].topic_metadata;
        assert_eq!(topic.type_description_hash, "", "Humble has no type hashes");
        let profiles = topic.offered_qos_profiles.as_str().expect("one string, as Humble reads it");
        let list: serde_norway::Value = serde_norway::from_str(profiles).expect("the string is a YAML list");
        assert_eq!((list[0]["history"].as_u64(), list[0]["depth"].as_u64()), (Some(1), Some(1)));
        assert_eq!((list[0]["reliability"].as_u64(), list[0]["durability"].as_u64()), (Some(1), Some(1)));
        assert_eq!(list[0]["liveliness"].as_u64(), Some(1));
        assert_eq!(list[0]["deadline"]["sec"], INFINITE_SEC);
        let volatile: serde_norway::Value =
            serde_norway::from_str(&profiles_yaml(&Qos::STREAM, 0, BagDistro::Humble)).expect("YAML");
        assert_eq!(volatile[0]["durability"].as_u64(), Some(2));
    }

    #[test]
    fn the_distro_comes_from_its_name_or_the_sourced_ros() {
        assert_eq!(BagDistro::from_name("humble"), Ok(BagDistro::Humble));
        assert!(BagDistro::from_name("iron").unwrap_err().contains("humble or jazzy"));
        assert_eq!(BagDistro::for_sourced(Some("humble")), BagDistro::Humble);
        assert_eq!(BagDistro::for_sourced(Some("kilted")), BagDistro::Jazzy);
        assert_eq!(BagDistro::for_sourced(None), BagDistro::Jazzy);
    }

    #[test]
    fn scalars_that_yaml_would_read_otherwise_are_quoted() {
        assert_eq!(scalar("/sil_node/ideal"), "/sil_node/ideal");
        assert_eq!(scalar("run1_0.mcap"), "run1_0.mcap");
        assert_eq!(scalar("2026_0.mcap"), "'2026_0.mcap'");
        assert_eq!(scalar("yes"), "'yes'");
        assert_eq!(scalar("it's: here"), "'it''s: here'");
        assert_eq!(scalar(""), "''");
    }
}
