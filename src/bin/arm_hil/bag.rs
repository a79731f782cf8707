//! `arm_hil bag`: rosbag2 bags without ROS.

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;

use arm_hil::bag::info::BagInfo;

use crate::console;

#[derive(Debug, Subcommand)]
pub(crate) enum BagCommand {
    /// Print what `ros2 bag info` prints: files, size, duration, start, end, topics and counts
    /// (counted in the file itself, so an interrupted recording reads too).
    Info {
        /// The bag directory (holding metadata.yaml)
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Print the topics and counts as one JSON object
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, serde::Serialize)]
struct InfoJson {
    files: Vec<String>,
    size_bytes: u64,
    storage_id: String,
    ros_distro: String,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    messages: u64,
    topics: Vec<TopicJson>,
    warnings: Vec<String>,
}

#[derive(Debug, serde::Serialize)]
struct TopicJson {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    count: u64,
}

pub(crate) fn run(command: BagCommand) -> anyhow::Result<()> {
    match command {
        BagCommand::Info { dir, json } => {
            let info = BagInfo::read(&dir).with_context(|| format!("cannot read the bag {}", dir.display()))?;
            let output = InfoJson {
                files: info.files.clone(),
                size_bytes: info.size_bytes,
                storage_id: info.storage_id.clone(),
                ros_distro: info.ros_distro.clone(),
                start_ns: info.span_ns.map(|(start, _)| start),
                end_ns: info.span_ns.map(|(_, end)| end),
                messages: info.messages(),
                topics: info
                    .topics
                    .iter()
                    .map(|topic| TopicJson {
                        name: topic.name.clone(),
                        type_name: topic.type_name.clone(),
                        count: topic.count,
                    })
                    .collect(),
                warnings: info.warnings.clone(),
            };
            console::print_line(&output, || info.text(), json)
        }
    }
}
