//! A bag read back: what `ros2 bag info` prints, from metadata.yaml and the MCAP file itself,
//! so a recording can be checked without ROS, an interrupted one included.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use mcap::records::op;
use mcap::sans_io::{LinearReadEvent, LinearReader, LinearReaderOptions};

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
    NotMcap { path: PathBuf },
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

/// Counts per topic and the time span, from the messages of every file, up to where a file
/// ends or stops making sense (a recording that was killed, a damaged file).
#[derive(Debug, Default)]
struct FileCounts {
    topics: BTreeMap<String, TopicInfo>,
    span_ns: Option<(u64, u64)>,
    stopped: Option<String>,
}

impl FileCounts {
    /// Counts one message logged at `log_time_ns` on `channel` (allocating only for a new topic).
    fn add(&mut self, channel: &TopicInfo, log_time_ns: u64) {
        match self.topics.get_mut(&channel.name) {
            Some(topic) => topic.count += 1,
            None => {
                self.topics.insert(channel.name.clone(), TopicInfo { count: 1, ..channel.clone() });
            }
        }
        self.span_ns = Some(
            self.span_ns
                .map_or((log_time_ns, log_time_ns), |(first, last)| (first.min(log_time_ns), last.max(log_time_ns))),
        );
    }
}

/// Why a record of an MCAP file could not be counted.
#[derive(Debug, thiserror::Error)]
enum RecordError {
    #[error("a {0} record whose fields run past its end or are not UTF-8")]
    Malformed(&'static str),
    #[error("a message on channel {0}, which no Channel record introduced")]
    UnknownChannel(u16),
}

/// The fields of one MCAP record, front to back: little-endian integers, strings as a u32 byte
/// length and UTF-8. A length is checked against what is left before anything is taken.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }

    fn string(&mut self) -> Option<&'a str> {
        let len = usize::try_from(u32::from_le_bytes(self.take()?)).ok()?;
        let (text, rest) = self.0.split_at_checked(len)?;
        self.0 = rest;
        std::str::from_utf8(text).ok()
    }
}

/// One MCAP file's schemas and channels (their ids are the file's own), as its records
/// introduce them.
#[derive(Default)]
struct FileChannels {
    /// Schema id → type name.
    schemas: HashMap<u16, String>,
    /// Channel id → its topic, type and encoding (count 0).
    channels: HashMap<u16, TopicInfo>,
}

/// A Schema record's id and name (id u16, name, encoding, data).
fn schema_name(body: &[u8]) -> Option<(u16, &str)> {
    let mut fields = Fields(body);
    Some((fields.u16()?, fields.string()?))
}

/// A Channel record's id, schema id, topic and message encoding (then metadata).
fn channel_head(body: &[u8]) -> Option<(u16, u16, &str, &str)> {
    let mut fields = Fields(body);
    Some((fields.u16()?, fields.u16()?, fields.string()?, fields.string()?))
}

/// A Message record's channel id and log time [ns] (channel id u16, sequence u32, log time u64,
/// publish time u64, data).
fn message_head(body: &[u8]) -> Option<(u16, u64)> {
    let mut fields = Fields(body);
    let channel_id = fields.u16()?;
    fields.take::<4>()?;
    Some((channel_id, fields.u64()?))
}

impl FileChannels {
    /// Takes one record: a Schema or Channel is remembered, a Message counted, the rest skipped.
    fn record(&mut self, opcode: u8, body: &[u8], counts: &mut FileCounts) -> Result<(), RecordError> {
        match opcode {
            op::SCHEMA => {
                let (id, name) = schema_name(body).ok_or(RecordError::Malformed("Schema"))?;
                self.schemas.entry(id).or_insert_with(|| name.to_owned());
            }
            op::CHANNEL => {
                let (id, schema_id, topic, encoding) = channel_head(body).ok_or(RecordError::Malformed("Channel"))?;
                if !self.channels.contains_key(&id) {
                    let channel = TopicInfo {
                        name: topic.to_owned(),
                        type_name: self.schemas.get(&schema_id).cloned().unwrap_or_default(),
                        serialization_format: encoding.to_owned(),
                        count: 0,
                    };
                    self.channels.insert(id, channel);
                }
            }
            op::MESSAGE => {
                let (channel_id, log_time_ns) = message_head(body).ok_or(RecordError::Malformed("Message"))?;
                let channel = self.channels.get(&channel_id).ok_or(RecordError::UnknownChannel(channel_id))?;
                counts.add(channel, log_time_ns);
            }
            _ => {}
        }
        Ok(())
    }
}

/// Counts the messages of one MCAP file, record by record. The mcap crate's sans-IO reader
/// frames the records, unpacks chunks and holds every record length to the file's size; the
/// few fields counted are read here, each length checked before it is used, so a crafted
/// length never turns into an allocation. Where the file ends early or a record does not
/// parse, counting stops there with a warning.
fn count_file(bytes: &[u8], counts: &mut FileCounts) {
    let options = LinearReaderOptions::default().with_skip_end_magic(true).with_record_length_limit(bytes.len());
    let mut reader = LinearReader::new_with_options(options);
    let mut channels = FileChannels::default();
    let mut unread = bytes;
    while let Some(event) = reader.next_event() {
        let stopped = match event {
            Ok(LinearReadEvent::ReadRequest(wanted)) => {
                let (given, rest) = unread.split_at(wanted.min(unread.len()));
                reader.insert(given.len()).copy_from_slice(given);
                reader.notify_read(given.len());
                unread = rest;
                continue;
            }
            Ok(LinearReadEvent::Record { opcode, data }) => match channels.record(opcode, data, counts) {
                Ok(()) => continue,
                Err(error) => error.to_string(),
            },
            Err(error) => error.to_string(),
        };
        counts.stopped = Some(stopped);
        return;
    }
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
            if !bytes.starts_with(mcap::MAGIC) {
                return Err(BagReadError::NotMcap { path: PathBuf::from(file) });
            }
            // The mcap crate (0.26) has panicked on a crafted record (found by fuzzing, issue 25):
            // should its reader panic again, that is this file's error, not the command's end.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| count_file(&bytes, &mut counts)))
                .map_err(|_| BagReadError::McapReaderFailed { path: PathBuf::from(file) })?;
        }

        let mut warnings = Vec::new();
        if let Some(reason) = &counts.stopped {
            warnings.push(format!(
                "counting stopped where the file ends or breaks ({reason}); the messages before are counted"
            ));
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
