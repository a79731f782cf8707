//! A bag read back: what `ros2 bag info` prints, from metadata.yaml and the MCAP file itself,
//! so a recording can be checked without ROS, an interrupted one included.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use mcap::read::{MessageStream, Options, Summary};

use super::metadata::MetadataFile;

/// Why a bag could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BagReadError {
    #[error("cannot read {}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} is not rosbag2 metadata", path.display())]
    Metadata { path: PathBuf, source: serde_norway::Error },
    #[error("metadata.yaml names the file `{file}`, which is not inside the bag")]
    OutsideBag { file: String },
    #[error("{} is not an MCAP file", path.display())]
    Mcap { path: PathBuf, source: mcap::McapError },
    #[error("{} holds a malformed MCAP record that the mcap reader gave up on", path.display())]
    McapReaderFailed { path: PathBuf },
}

/// One topic of a bag.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicInfo {
    pub name: String,
    pub type_name: String,
    pub serialization_format: String,
    /// Messages in the file.
    pub count: u64,
}

/// What a bag holds.
#[derive(Debug, Clone, PartialEq)]
pub struct BagInfo {
    pub files: Vec<String>,
    pub size_bytes: u64,
    pub storage_id: String,
    pub ros_distro: String,
    /// First and last message time [ns], when there are messages.
    pub span_ns: Option<(u64, u64)>,
    pub topics: Vec<TopicInfo>,
    /// Where metadata.yaml and the file disagree, or the file ends early.
    pub warnings: Vec<String>,
}

/// Counts per topic and the time span, from the MCAP summary or, without one (a recording
/// that was killed), from the messages themselves up to where the file ends.
#[derive(Debug, Default)]
struct FileCounts {
    topics: BTreeMap<String, TopicInfo>,
    span_ns: Option<(u64, u64)>,
    truncated: Option<String>,
}

impl FileCounts {
    /// Counts `count` more messages on `channel`'s topic (allocating only for a new topic).
    fn add(&mut self, channel: &mcap::Channel, count: u64) {
        if let Some(topic) = self.topics.get_mut(&channel.topic) {
            topic.count += count;
            return;
        }
        let type_name = channel.schema.as_ref().map_or_else(String::new, |schema| schema.name.clone());
        let topic = TopicInfo {
            name: channel.topic.clone(),
            type_name,
            serialization_format: channel.message_encoding.clone(),
            count,
        };
        self.topics.insert(channel.topic.clone(), topic);
    }
}

fn widen(span: Option<(u64, u64)>, first: u64, last: u64) -> Option<(u64, u64)> {
    Some(span.map_or((first, last), |(a, b)| (a.min(first), b.max(last))))
}

fn count_file(bytes: &[u8], counts: &mut FileCounts) -> Result<(), mcap::McapError> {
    if let Some(summary) = Summary::read(bytes).ok().flatten() {
        if let Some(stats) = &summary.stats {
            for channel in summary.channels.values() {
                counts.add(channel, stats.channel_message_counts.get(&channel.id).copied().unwrap_or(0));
            }
            if stats.message_count > 0 {
                counts.span_ns = widen(counts.span_ns, stats.message_start_time, stats.message_end_time);
            }
            return Ok(());
        }
    }
    for message in MessageStream::new_with_options(bytes, Options::IgnoreEndMagic.into())? {
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                counts.truncated = Some(error.to_string());
                break;
            }
        };
        counts.add(&message.channel, 1);
        counts.span_ns = widen(counts.span_ns, message.log_time, message.log_time);
    }
    Ok(())
}

impl BagInfo {
    /// Reads the bag directory `dir`.
    pub fn read(dir: &Path) -> Result<BagInfo, BagReadError> {
        let metadata_path = dir.join("metadata.yaml");
        let text = std::fs::read_to_string(&metadata_path)
            .map_err(|source| BagReadError::Io { path: metadata_path.clone(), source })?;
        BagInfo::from_metadata(&text, &metadata_path, |file| {
            let path = dir.join(file);
            std::fs::read(&path).map_err(|source| BagReadError::Io { path, source })
        })
    }

    /// A bag from its metadata.yaml (`text`, read from `metadata_path`) and its files, which
    /// `read_file` reads by the names the metadata gives. A name that is not a plain relative
    /// path inside the bag (absolute, or with `..`) is refused before anything is read.
    pub fn from_metadata(
        text: &str,
        metadata_path: &Path,
        mut read_file: impl FnMut(&str) -> Result<Vec<u8>, BagReadError>,
    ) -> Result<BagInfo, BagReadError> {
        let metadata = serde_norway::from_str::<MetadataFile>(text)
            .map_err(|source| BagReadError::Metadata { path: metadata_path.to_owned(), source })?
            .rosbag2_bagfile_information;

        let mut counts = FileCounts::default();
        let mut size_bytes = 0;
        for file in &metadata.relative_file_paths {
            let inside = Path::new(file).components().all(|part| matches!(part, Component::Normal(_)));
            if !inside {
                return Err(BagReadError::OutsideBag { file: file.clone() });
            }
            let bytes = read_file(file)?;
            size_bytes += bytes.len() as u64;
            // The mcap crate (0.26) can panic on a crafted record (found by fuzzing, issue 25):
            // that is this file's error, not the command's end.
            let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| count_file(&bytes, &mut counts)))
                .map_err(|_| BagReadError::McapReaderFailed { path: PathBuf::from(file) })?;
            counted.map_err(|source| BagReadError::Mcap { path: PathBuf::from(file), source })?;
        }

        let mut warnings = Vec::new();
        if let Some(reason) = &counts.truncated {
            warnings.push(format!("the file ends mid-record ({reason}); counted the messages before"));
        }
        // Topics as metadata.yaml lists them (those without messages too), counted in the file.
        let mut topics = Vec::new();
        for listed in &metadata.topics_with_message_count {
            let name = &listed.topic_metadata.name;
            let in_file = counts.topics.remove(name);
            let count = in_file.as_ref().map_or(0, |topic| topic.count);
            if count != listed.message_count {
                warnings.push(format!(
                    "{name}: metadata.yaml says {} messages, the file holds {count}",
                    listed.message_count
                ));
            }
            topics.push(TopicInfo {
                name: name.clone(),
                type_name: listed.topic_metadata.type_name.clone(),
                serialization_format: listed.topic_metadata.serialization_format.clone(),
                count,
            });
        }
        for (name, topic) in counts.topics {
            warnings.push(format!("{name} is in the file but not in metadata.yaml"));
            topics.push(topic);
        }
        Ok(BagInfo {
            files: metadata.relative_file_paths,
            size_bytes,
            storage_id: metadata.storage_identifier,
            ros_distro: metadata.ros_distro,
            span_ns: counts.span_ns,
            topics,
            warnings,
        })
    }

    pub fn messages(&self) -> u64 {
        self.topics.iter().map(|topic| topic.count).sum()
    }

    /// The report in `ros2 bag info`'s layout (times in UTC).
    pub fn text(&self) -> String {
        let (start, end) = self.span_ns.unwrap_or((0, 0));
        let mut text = String::new();
        let _ = writeln!(text, "Files:             {}", self.files.join(", "));
        let _ = writeln!(text, "Bag size:          {}", human_size(self.size_bytes));
        let _ = writeln!(text, "Storage id:        {}", self.storage_id);
        let _ = writeln!(text, "ROS Distro:        {}", self.ros_distro);
        let _ = writeln!(
            text,
            "Duration:          {}.{:09}s",
            (end - start) / 1_000_000_000,
            (end - start) % 1_000_000_000
        );
        let _ = writeln!(text, "Start:             {}", date(start));
        let _ = writeln!(text, "End:               {}", date(end));
        let _ = writeln!(text, "Messages:          {}", self.messages());
        for (index, topic) in self.topics.iter().enumerate() {
            let label = if index == 0 { "Topic information: " } else { "                   " };
            let _ = writeln!(
                text,
                "{label}Topic: {} | Type: {} | Count: {} | Serialization Format: {}",
                topic.name, topic.type_name, topic.count, topic.serialization_format
            );
        }
        for warning in &self.warnings {
            let _ = writeln!(text, "Warning:           {warning}");
        }
        text.trim_end().to_owned()
    }
}

fn human_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < units.len() {
        size /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{size:.1} {}", units[unit]),
    }
}

/// `Nov 23 2026 11:05:51.487350772 (1795431951.487350772)`, as ros2 bag info prints a time.
fn date(nanos: u64) -> String {
    let (seconds, fraction) = (nanos / 1_000_000_000, nanos % 1_000_000_000);
    let calendar = chrono::DateTime::from_timestamp(seconds as i64, fraction as u32)
        .map_or_else(String::new, |time| time.format("%b %d %Y %H:%M:%S%.9f").to_string());
    format!("{calendar} ({seconds}.{fraction:09})")
}
