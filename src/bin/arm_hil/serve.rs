//! `arm_hil serve`: the port-5555 server for the lab's GUI clients.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use arm_hil::bridge::legacy::{LegacyServer, LegacyServerConfig};
use arm_hil::sim::SilConfig;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Listening address [default: 127.0.0.1:5555, or the file's server.bind]
    #[arg(long, value_name = "ADDR")]
    bind: Option<SocketAddr>,
    /// YAML configuration: the sections of `arm_hil sil --config` plus `server`
    #[arg(long, value_name = "FILE.yaml")]
    config: Option<PathBuf>,
}

/// The serve configuration file: the SIL sections at the top level, plus `server`.
#[derive(Debug, Default, Deserialize)]
struct ServeConfig {
    #[serde(default)]
    server: LegacyServerConfig,
    #[serde(flatten)]
    sil: SilConfig,
    /// Top-level keys neither section took: refused, as everywhere else.
    #[serde(flatten)]
    unknown: BTreeMap<String, serde_norway::Value>,
}

fn load(path: Option<&Path>) -> anyhow::Result<ServeConfig> {
    let Some(path) = path else { return Ok(ServeConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let config: ServeConfig =
        serde_norway::from_str(&text).with_context(|| format!("configuration {}", path.display()))?;
    if let Some(key) = config.unknown.keys().next() {
        anyhow::bail!("configuration {}: unknown section `{key}`", path.display());
    }
    config.sil.validate().with_context(|| format!("configuration {}", path.display()))?;
    Ok(config)
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let ServeConfig { mut server, sil, .. } = load(args.config.as_deref())?;
    if let Some(bind) = args.bind {
        server.bind = bind;
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let server = LegacyServer::bind(server, sil).await.context("cannot start the server")?;
        let address = server.local_addr()?;
        // Scripts read the bound address (port 0 picks a free one) from this first line.
        println!("listening on {address}");
        log::info!("port-5555 server listening on {address}");
        tokio::select! {
            served = server.serve() => served.context("the server stopped"),
            _ = tokio::signal::ctrl_c() => {
                log::info!("interrupted, shutting down");
                Ok(())
            }
        }
    })
}
