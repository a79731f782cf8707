//! Deltarobot VR leader figures: messages per second to 16 followers, and the latency the
//! bridge adds between a new arm state and its arrival at a follower (which includes waiting
//! for the follower's next tick). Followers are plain sockets on loopback.
//!
//! Run with `cargo bench --bench vr`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arm_hil::bridge::vr::{VrConfig, VrFeed, VrLeader, VrState};
use arm_hil::model::math::Vec3;
use arm_hil::protocol::deltavr::{encode, VrDecoder, VrMessage, MAGIC};
use tokio::sync::watch;

const FOLLOWERS: usize = 16;
const SECONDS: u64 = 5;

/// When each sequence number first reached a follower.
type Arrivals = Arc<Mutex<Vec<(f32, Instant)>>>;

fn follower(address: SocketAddr, stop: Arc<AtomicBool>, arrivals: Option<Arrivals>) -> u64 {
    let mut stream = TcpStream::connect(address).expect("connect");
    let mut hello = Vec::new();
    encode(&VrMessage::Magic(MAGIC), &mut hello);
    encode(&VrMessage::Version(1), &mut hello);
    stream.write_all(&hello).expect("hello");
    stream.set_read_timeout(Some(Duration::from_millis(20))).expect("timeout");
    let (mut decoder, mut buf, mut messages, mut last_seen) = (VrDecoder::new(1 << 20), [0u8; 65536], 0u64, f32::NAN);
    while !stop.load(Ordering::Relaxed) {
        let Ok(read) = stream.read(&mut buf) else { continue };
        if read == 0 {
            break;
        }
        decoder.push(&buf[..read]);
        let now = Instant::now();
        while let Some(Ok(message)) = decoder.poll() {
            messages += 1;
            match message {
                VrMessage::Ping(value) => {
                    let mut pong = Vec::new();
                    encode(&VrMessage::Pong(value), &mut pong);
                    let _ = stream.write_all(&pong);
                }
                VrMessage::ActuatorPosition([sequence, _, _]) if sequence != last_seen => {
                    last_seen = sequence;
                    if let Some(arrivals) = &arrivals {
                        arrivals.lock().expect("lock").push((sequence, now));
                    }
                }
                _ => {}
            }
        }
    }
    messages
}

fn main() {
    let config = VrConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), rate_hz: 1000.0, ..VrConfig::default() };
    let feed = VrFeed::new();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let (address_tx, address_rx) = std::sync::mpsc::channel();
    let serving = feed.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let leader = VrLeader::bind(config).await.expect("bind");
            address_tx.send(leader.local_addr().expect("address")).expect("send");
            leader.serve(serving, shutdown_rx).await
        })
    });
    let address = address_rx.recv().expect("address");
    let stop = Arc::new(AtomicBool::new(false));
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let followers: Vec<_> = (0..FOLLOWERS)
        .map(|k| {
            let (stop, arrivals) = (stop.clone(), (k == 0).then(|| arrivals.clone()));
            std::thread::spawn(move || follower(address, stop, arrivals))
        })
        .collect();
    // New arm states at 500 Hz; the sequence number rides in x.
    let mut sent = Vec::new();
    let started = Instant::now();
    let mut sequence = 0.0f32;
    while started.elapsed() < Duration::from_secs(SECONDS) {
        sequence += 1.0;
        sent.push((sequence, Instant::now()));
        feed.state.send_replace(VrState { position: Vec3::new(f64::from(sequence), 0.0, 0.0), ..VrState::default() });
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    let total: u64 = followers.into_iter().map(|f| f.join().expect("follower")).sum();
    shutdown.send_replace(true);
    let elapsed = started.elapsed().as_secs_f64();
    let arrivals = arrivals.lock().expect("lock");
    let mut latencies: Vec<f64> = arrivals
        .iter()
        .filter_map(|(sequence, at)| {
            sent.iter().find(|(s, _)| s == sequence).map(|(_, sent_at)| (*at - *sent_at).as_secs_f64() * 1e6)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    let quantile = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
    println!("leader at 1000 Hz per follower, {FOLLOWERS} followers on loopback, {SECONDS} s:");
    println!(
        "  {:.0} messages/s in all ({:.0} per follower)",
        total as f64 / elapsed,
        total as f64 / elapsed / FOLLOWERS as f64
    );
    println!(
        "  new state to follower: p50 {:.0} us, p99 {:.0} us, max {:.0} us ({} states seen of {})",
        quantile(0.5),
        quantile(0.99),
        quantile(1.0),
        latencies.len(),
        sent.len()
    );
}
