//! The Deltarobot VR bridge: a leader (TCP server) that streams the arm to Unity VR followers,
//! and a follower (TCP client) that listens to a Deltarobot leader.
//!
//! The leader reads the arm's newest state from watch channels, so a slow or stuck follower
//! never holds up the producer or the other followers: each connection runs on its own task,
//! sends the newest state at its rate, and is dropped when a write stalls.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use super::vr_session::{Role, SessionEvent, VrSession};
use crate::model::math::Vec3;
use crate::protocol::deltavr::VrMessage;

/// An axis of the VR frame as a signed ROS axis: "x", "-x", "y", "-y", "z" or "-z".
fn axis(name: &str) -> Option<Vec3> {
    let (sign, letter) = match name.strip_prefix('-') {
        Some(letter) => (-1.0, letter),
        None => (1.0, name),
    };
    let unit = match letter {
        "x" => Vec3::x(),
        "y" => Vec3::y(),
        "z" => Vec3::z(),
        _ => return None,
    };
    Some(unit * sign)
}

/// From ROS (metres, z up, right-handed) to the VR frame: v_vr = offset + scale * (axes applied
/// to v). Identity by default; Unity (y up, left-handed) is `axes: ["-y", "z", "x"]`, for
/// example, quoted in parameter files because rcl reads a bare `y` as a boolean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VrTransform {
    pub scale: f64,
    /// Added after scaling [VR units].
    pub offset: [f64; 3],
    /// VR axis i is this signed ROS axis.
    pub axes: [String; 3],
}

impl Default for VrTransform {
    fn default() -> Self {
        VrTransform { scale: 1.0, offset: [0.0; 3], axes: ["x".into(), "y".into(), "z".into()] }
    }
}

impl VrTransform {
    pub fn validate(&self) -> Result<(), String> {
        let rows: Option<Vec<Vec3>> = self.axes.iter().map(|name| axis(name)).collect();
        let rows = rows.ok_or(format!("vr transform axes must be x, -x, y, -y, z or -z, got {:?}", self.axes))?;
        let matrix =
            crate::model::math::Mat3::from_rows(&[rows[0].transpose(), rows[1].transpose(), rows[2].transpose()]);
        if matrix.determinant().abs() < 0.5 {
            return Err(format!("vr transform axes {:?} repeat an axis", self.axes));
        }
        if !(self.scale.is_finite() && self.scale != 0.0 && self.offset.iter().all(|v| v.is_finite())) {
            return Err("vr transform scale must be finite and non-zero, offset finite".into());
        }
        Ok(())
    }

    fn map(&self, v: &Vec3) -> Vec3 {
        Vec3::from_fn(|i, _| axis(&self.axes[i]).map_or(0.0, |row| row.dot(v)))
    }

    /// A point [m] in the VR frame.
    pub fn point(&self, p: &Vec3) -> [f32; 3] {
        let mapped = self.map(p) * self.scale + Vec3::from(self.offset);
        mapped.map(|c| c as f32).into()
    }

    /// A direction in the VR frame (not scaled or offset).
    pub fn direction(&self, d: &Vec3) -> [f32; 3] {
        self.map(d).map(|c| c as f32).into()
    }
}

/// Leader and follower settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VrConfig {
    /// Leader listening address. docs/vr.md: the protocol names no port; the default is 127.0.0.1:7777.
    pub bind: SocketAddr,
    /// Position and direction messages per second to each follower [Hz]. Default 60.
    pub rate_hz: f64,
    /// Ping period [s]. Default 1.
    pub ping_period_s: f64,
    /// Longest wait for a pong [s]. Default 3.
    pub pong_timeout_s: f64,
    /// Longest wait for the peer's magic and version [s]. Default 5.
    pub handshake_timeout_s: f64,
    /// Longest a write may make no progress before the follower is dropped [s]. Default 2.
    pub write_stall_timeout_s: f64,
    /// Largest variable-length message accepted [bytes]. Default 4 MiB.
    pub max_variable_len: u32,
    pub transform: VrTransform,
}

impl Default for VrConfig {
    fn default() -> Self {
        VrConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 7777)),
            rate_hz: 60.0,
            ping_period_s: 1.0,
            pong_timeout_s: 3.0,
            handshake_timeout_s: 5.0,
            write_stall_timeout_s: 2.0,
            max_variable_len: 4 << 20,
            transform: VrTransform::default(),
        }
    }
}

impl VrConfig {
    pub fn validate(&self) -> Result<(), String> {
        let times = [
            ("rate_hz", self.rate_hz),
            ("ping_period_s", self.ping_period_s),
            ("pong_timeout_s", self.pong_timeout_s),
            ("handshake_timeout_s", self.handshake_timeout_s),
            ("write_stall_timeout_s", self.write_stall_timeout_s),
        ];
        if let Some((name, value)) = times.iter().find(|(_, value)| !(value.is_finite() && *value > 0.0)) {
            return Err(format!("vr.{name} must be finite and > 0, got {value}"));
        }
        self.transform.validate()
    }

    fn seconds(value: f64) -> Duration {
        Duration::from_secs_f64(value)
    }
}

/// The arm as the leader streams it, in ROS coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct VrState {
    /// Actuator (platform) position [m].
    pub position: Vec3,
    /// Direction the actuator moves (unit, or zero at rest).
    pub current_direction: Vec3,
    /// Direction it should move (unit, or zero).
    pub desired_direction: Vec3,
}

/// What feeds a leader: the newest state, and the exercise curve [m] (sent at exercise start,
/// again whenever it changes, and to late joiners).
#[derive(Clone)]
pub struct VrFeed {
    pub state: watch::Sender<VrState>,
    pub curve: watch::Sender<Arc<Vec<Vec3>>>,
}

impl VrFeed {
    pub fn new() -> VrFeed {
        VrFeed { state: watch::Sender::new(VrState::default()), curve: watch::Sender::new(Arc::new(Vec::new())) }
    }
}

impl Default for VrFeed {
    fn default() -> Self {
        VrFeed::new()
    }
}

/// Why the leader could not start.
#[derive(Debug, thiserror::Error)]
pub enum VrError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A bound leader.
pub struct VrLeader {
    listener: TcpListener,
    config: Arc<VrConfig>,
}

/// A seed for a session's pings, from the clock: ping values only need to differ.
fn seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |elapsed| elapsed.as_nanos() as u64)
}

impl VrLeader {
    pub async fn bind(config: VrConfig) -> Result<VrLeader, VrError> {
        config.validate().map_err(VrError::Config)?;
        let listener = TcpListener::bind(config.bind).await?;
        Ok(VrLeader { listener, config: Arc::new(config) })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves followers from `feed` until `shutdown` turns true; then every follower gets End of
    /// transmission with the reason "leader shutting down", and `serve` returns once they have
    /// (or their writes stalled).
    pub async fn serve(self, feed: VrFeed, shutdown: watch::Receiver<bool>) -> std::io::Result<()> {
        let mut shutdown_accept = shutdown.clone();
        let mut followers = tokio::task::JoinSet::new();
        loop {
            let (stream, peer) = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        log::warn!("accept failed: {error}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = stopped(&mut shutdown_accept) => {
                    while followers.join_next().await.is_some() {}
                    return Ok(());
                }
            };
            // Finished followers leave the set as new ones arrive.
            while followers.try_join_next().is_some() {}
            let (config, feed, shutdown) = (self.config.clone(), feed.clone(), shutdown.clone());
            followers.spawn(async move {
                match serve_follower(stream, &config, &feed, shutdown).await {
                    Ok(reason) => log::info!("VR follower {peer}: closed ({reason})"),
                    Err(error) => log::warn!("VR follower {peer}: {error}"),
                }
            });
        }
    }
}

async fn write_out(
    stream: &mut TcpStream,
    session: &mut VrSession,
    buf: &mut Vec<u8>,
    stall: Duration,
) -> std::io::Result<()> {
    buf.clear();
    while session.poll_transmit(buf) {}
    if !buf.is_empty() {
        tokio::time::timeout(stall, stream.write_all(buf))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "the follower read nothing in time"))??;
    }
    Ok(())
}

/// Serves one follower; returns why the link closed.
async fn serve_follower(
    mut stream: TcpStream,
    config: &VrConfig,
    feed: &VrFeed,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<String> {
    stream.set_nodelay(true)?;
    let role = Role::Leader {
        ping_period: VrConfig::seconds(config.ping_period_s),
        pong_timeout: VrConfig::seconds(config.pong_timeout_s),
    };
    let mut session = VrSession::new(
        role,
        Instant::now(),
        VrConfig::seconds(config.handshake_timeout_s),
        config.max_variable_len,
        seed(),
    );
    let stall = VrConfig::seconds(config.write_stall_timeout_s);
    let (mut state, mut curve) = (feed.state.subscribe(), feed.curve.subscribe());
    let mut ticks = tokio::time::interval(VrConfig::seconds(1.0 / config.rate_hz));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (mut read_buf, mut out) = (vec![0u8; 4096], Vec::with_capacity(4096));
    let mut curve_sent = false;
    loop {
        write_out(&mut stream, &mut session, &mut out, stall).await?;
        while let Some(event) = session.poll_event() {
            match event {
                SessionEvent::Closed { by_peer, reason } => {
                    let _ = stream.shutdown().await;
                    return Ok(if by_peer { format!("by the follower: {reason}") } else { reason });
                }
                SessionEvent::Refused(reason) => log::warn!("VR follower message refused: {reason}"),
                SessionEvent::Established | SessionEvent::Message(_) => {}
            }
        }
        let deadline = session.poll_timeout().map(tokio::time::Instant::from_std);
        tokio::select! {
            read = stream.read(&mut read_buf) => match read? {
                0 => return Ok("the follower disconnected".into()),
                n => session.handle_bytes(Instant::now(), &read_buf[..n]),
            },
            _ = sleep_until(deadline) => session.handle_timeout(Instant::now()),
            _ = ticks.tick() => {
                if session.is_established() {
                    if !curve_sent || curve.has_changed().unwrap_or(false) {
                        let points: Vec<[f32; 3]> = curve.borrow_and_update().iter().map(|p| config.transform.point(p)).collect();
                        session.send(&VrMessage::Curve(points));
                        curve_sent = true;
                    }
                    let now = *state.borrow_and_update();
                    session.send(&VrMessage::ActuatorPosition(config.transform.point(&now.position)));
                    session.send(&VrMessage::CurrentDirection(config.transform.direction(&now.current_direction)));
                    session.send(&VrMessage::DesiredDirection(config.transform.direction(&now.desired_direction)));
                }
            }
            _ = stopped(&mut shutdown) => session.close("leader shutting down"),
        }
    }
}

/// Resolves once `switch` turns true (or its sender is gone). The guard `wait_for` returns is
/// dropped in here, so the caller's future stays `Send`.
async fn stopped(switch: &mut watch::Receiver<bool>) {
    let _ = switch.wait_for(|stop| *stop).await;
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// What a follower reports.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowerEvent {
    Connected(SocketAddr),
    Message(VrMessage),
    Refused(String),
    /// The link closed; the follower reconnects after `retry_in`.
    Disconnected {
        reason: String,
        retry_in: Duration,
    },
}

/// Follows the leader at `leader` until `stop` turns true: connects, exchanges magic and
/// version, answers pings, reports what the leader sends, and reconnects with backoff (0.5 s
/// doubling to 5 s) when the leader goes away.
pub async fn follow(
    leader: SocketAddr,
    config: VrConfig,
    events: mpsc::Sender<FollowerEvent>,
    mut stop: watch::Receiver<bool>,
) {
    const FIRST_BACKOFF: Duration = Duration::from_millis(500);
    const MAX_BACKOFF: Duration = Duration::from_secs(5);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let reason = tokio::select! {
            result = follow_once(leader, &config, &events, &mut backoff) => result,
            _ = stopped(&mut stop) => return,
        };
        if events.send(FollowerEvent::Disconnected { reason, retry_in: backoff }).await.is_err() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped(&mut stop) => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection to the leader; returns why it ended.
async fn follow_once(
    leader: SocketAddr,
    config: &VrConfig,
    events: &mpsc::Sender<FollowerEvent>,
    backoff: &mut Duration,
) -> String {
    let mut stream =
        match tokio::time::timeout(VrConfig::seconds(config.handshake_timeout_s), TcpStream::connect(leader)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return format!("cannot connect: {error}"),
            Err(_) => return "cannot connect: timed out".into(),
        };
    let _ = stream.set_nodelay(true);
    let mut session = VrSession::new(
        Role::Follower,
        Instant::now(),
        VrConfig::seconds(config.handshake_timeout_s),
        config.max_variable_len,
        seed(),
    );
    let stall = VrConfig::seconds(config.write_stall_timeout_s);
    let (mut read_buf, mut out) = (vec![0u8; 4096], Vec::with_capacity(256));
    loop {
        if let Err(error) = write_out(&mut stream, &mut session, &mut out, stall).await {
            return error.to_string();
        }
        while let Some(event) = session.poll_event() {
            let forwarded = match event {
                SessionEvent::Established => {
                    *backoff = Duration::from_millis(500);
                    FollowerEvent::Connected(leader)
                }
                SessionEvent::Message(message) => FollowerEvent::Message(message),
                SessionEvent::Refused(reason) => FollowerEvent::Refused(reason),
                SessionEvent::Closed { by_peer, reason } => {
                    return if by_peer { format!("the leader ended: {reason}") } else { reason };
                }
            };
            if events.send(forwarded).await.is_err() {
                session.close("follower shutting down");
            }
        }
        let deadline = session.poll_timeout().map(tokio::time::Instant::from_std);
        tokio::select! {
            read = stream.read(&mut read_buf) => match read {
                Ok(0) => return "the leader disconnected".into(),
                Ok(n) => session.handle_bytes(Instant::now(), &read_buf[..n]),
                Err(error) => return error.to_string(),
            },
            _ = sleep_until(deadline) => session.handle_timeout(Instant::now()),
        }
    }
}
