//! A rosbag2 directory being written: one MCAP file (ros2 profile, ros2msg schemas, CDR
//! messages, uncompressed chunks as `ros2 bag record` writes by default) and metadata.yaml.
//!
//! Memory stays flat: messages go out a chunk at a time. metadata.yaml is written when the bag
//! opens, at each [`BagWriter::checkpoint`] and when it is finished, with the counts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::metadata::{metadata_yaml, profiles_yaml, BagDistro, TopicCount};
use crate::outputs::{Recording, Sink, SinkError, TopicId, TopicSpec};

/// Chunk size rosbag2's MCAP storage uses by default [bytes].
const CHUNK_SIZE: u64 = 768 * 1024;

/// Why a bag could not be written.
#[derive(Debug, thiserror::Error)]
pub enum BagError {
    #[error("{} already exists (a bag is never overwritten)", path.display())]
    Exists { path: PathBuf },
    #[error("cannot write {}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("cannot write the MCAP file {}", path.display())]
    Mcap { path: PathBuf, source: mcap::McapError },
}

impl From<BagError> for SinkError {
    fn from(error: BagError) -> SinkError {
        SinkError::Failed(Box::new(error))
    }
}

/// What a finished bag holds.
#[derive(Debug, Clone, PartialEq)]
pub struct BagStats {
    pub dir: PathBuf,
    pub messages: u64,
    /// First and last message time [ns], when there were messages.
    pub span_ns: Option<(u64, u64)>,
}

/// An open bag. Finish it with [`BagWriter::finish`]; dropping it finishes it too, logging
/// what went wrong.
pub struct BagWriter {
    dir: PathBuf,
    file_name: String,
    mcap: Option<mcap::Writer<BufWriter<File>>>,
    schemas: BTreeMap<&'static str, u16>,
    /// Each topic (indexed by its [`TopicId`]) with its MCAP channel.
    topics: Vec<(TopicCount, u16)>,
    distro: BagDistro,
    span_ns: Option<(u64, u64)>,
}

impl std::fmt::Debug for BagWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BagWriter").field("dir", &self.dir).field("topics", &self.topics).finish_non_exhaustive()
    }
}

impl BagWriter {
    /// Creates the bag directory `dir` (its parent must exist) and its MCAP file
    /// `<dir name>_0.mcap`, as `ros2 bag record -o dir` does on `distro`.
    pub fn create(dir: &Path, distro: BagDistro) -> Result<BagWriter, BagError> {
        if dir.exists() {
            return Err(BagError::Exists { path: dir.to_owned() });
        }
        let io = |source| BagError::Io { path: dir.to_owned(), source };
        std::fs::create_dir(dir).map_err(io)?;
        let stem = dir.file_name().map_or_else(|| "bag".into(), |name| name.to_string_lossy().into_owned());
        let file_name = format!("{stem}_0.mcap");
        let path = dir.join(&file_name);
        let file = File::create(&path).map_err(|source| BagError::Io { path: path.clone(), source })?;
        let mcap = mcap::WriteOptions::new()
            .profile("ros2")
            .library(concat!("arm_hil ", env!("CARGO_PKG_VERSION")))
            .compression(None)
            .chunk_size(Some(CHUNK_SIZE))
            // CRCs are optional in MCAP (0 = not computed); computing them cost the run more
            // than encoding the messages.
            .calculate_chunk_crcs(false)
            .calculate_data_section_crc(false)
            // Chunks stream into the file through this buffer: at the default 8 KiB it took a
            // system call for every few messages.
            .create(BufWriter::with_capacity(1 << 20, file))
            .map_err(|source| BagError::Mcap { path, source })?;
        let bag = BagWriter {
            dir: dir.to_owned(),
            file_name,
            mcap: Some(mcap),
            schemas: BTreeMap::new(),
            topics: Vec::new(),
            span_ns: None,
            distro,
        };
        bag.write_metadata()?;
        Ok(bag)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn mcap_error(&self, source: mcap::McapError) -> BagError {
        BagError::Mcap { path: self.dir.join(&self.file_name), source }
    }

    fn mcap(&mut self) -> Result<&mut mcap::Writer<BufWriter<File>>, BagError> {
        let path = self.dir.join(&self.file_name);
        self.mcap.as_mut().ok_or(BagError::Mcap { path, source: mcap::McapError::UnexpectedEof })
    }

    fn write_metadata(&self) -> Result<(), BagError> {
        let path = self.dir.join("metadata.yaml");
        let topics: Vec<&TopicCount> = self.topics.iter().map(|(topic, _)| topic).collect();
        let text = metadata_yaml(&self.file_name, self.span_ns.unwrap_or((0, 0)), &topics, self.distro);
        // Written aside and renamed, so a reader never sees half a file.
        let partial = self.dir.join(".metadata.yaml.partial");
        std::fs::write(&partial, text).map_err(|source| BagError::Io { path: partial.clone(), source })?;
        std::fs::rename(&partial, &path).map_err(|source| BagError::Io { path, source })
    }

    /// Ends the current chunk and brings metadata.yaml up to date, so that a process killed
    /// after this leaves a bag with everything written so far (readers that scan the file,
    /// `ros2 bag reindex`, and `arm_hil bag info`, take it without the MCAP summary).
    pub fn checkpoint(&mut self) -> Result<(), BagError> {
        let flushed = self.mcap()?.flush();
        flushed.map_err(|source| self.mcap_error(source))?;
        self.write_metadata()
    }

    /// Writes the last chunk, the MCAP summary and the final metadata.yaml.
    pub fn finish(mut self) -> Result<BagStats, BagError> {
        self.close()
    }

    fn close(&mut self) -> Result<BagStats, BagError> {
        if let Some(mut mcap) = self.mcap.take() {
            mcap.finish().map_err(|source| self.mcap_error(source))?;
            let path = self.dir.join(&self.file_name);
            mcap.into_inner().flush().map_err(|source| BagError::Io { path, source })?;
            self.write_metadata()?;
        }
        Ok(BagStats {
            dir: self.dir.clone(),
            messages: self.topics.iter().map(|(topic, _)| topic.count).sum(),
            span_ns: self.span_ns,
        })
    }
}

impl Drop for BagWriter {
    fn drop(&mut self) {
        if self.mcap.is_some() {
            if let Err(error) = self.close() {
                log::error!("bag {}: {error}", self.dir.display());
            }
        }
    }
}

impl Sink for BagWriter {
    /// Adds the topic's channel (and its schema, once per type); metadata.yaml lists it from the
    /// next checkpoint.
    fn advertise(&mut self, topic: &TopicSpec<'_>) -> Result<TopicId, SinkError> {
        let def = topic.message;
        let schema = match self.schemas.get(def.name) {
            Some(&id) => id,
            None => {
                let id = self.mcap()?.add_schema(def.name, "ros2msg", def.schema().as_bytes());
                let id = id.map_err(|source| self.mcap_error(source))?;
                self.schemas.insert(def.name, id);
                id
            }
        };
        let mut metadata = BTreeMap::from([(
            "offered_qos_profiles".to_owned(),
            profiles_yaml(&topic.qos, 0, self.distro).trim_end().to_owned(),
        )]);
        if self.distro == BagDistro::Jazzy {
            metadata.insert("topic_type_hash".to_owned(), topic.type_hash.to_owned());
        }
        let channel = self.mcap()?.add_channel(schema, topic.resolved, "cdr", &metadata);
        let channel = channel.map_err(|source| self.mcap_error(source))?;
        let count = TopicCount {
            name: topic.resolved.to_owned(),
            type_name: def.name,
            type_hash: topic.type_hash,
            qos: topic.qos,
            count: 0,
        };
        self.topics.push((count, channel));
        Ok(TopicId(self.topics.len() - 1))
    }

    /// Writes the message, received at `time_ns` (the bag's time axis, which replay follows).
    fn write(&mut self, topic: TopicId, time_ns: u64, cdr: &[u8]) -> Result<(), SinkError> {
        let (entry, channel) = self.topics.get_mut(topic.0).ok_or(SinkError::UnknownTopic(topic))?;
        let header = mcap::records::MessageHeader {
            channel_id: *channel,
            sequence: entry.count as u32,
            log_time: time_ns,
            publish_time: time_ns,
        };
        entry.count += 1;
        self.span_ns = Some(match self.span_ns {
            None => (time_ns, time_ns),
            Some((first, last)) => (first.min(time_ns), last.max(time_ns)),
        });
        let Some(mcap) = self.mcap.as_mut() else {
            return Err(self.mcap_error(mcap::McapError::UnexpectedEof).into());
        };
        let written = mcap.write_to_known_channel(&header, cdr);
        Ok(written.map_err(|source| self.mcap_error(source))?)
    }
}

impl Recording for BagWriter {
    type Finished = BagStats;

    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(self.checkpoint()?)
    }

    fn finish(self) -> Result<BagStats, SinkError> {
        Ok(BagWriter::finish(self)?)
    }

    fn describe(&self) -> String {
        self.dir.display().to_string()
    }
}
