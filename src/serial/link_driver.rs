//! The I/O shell shared by the serial drivers: a thread that owns the port, runs a sans-IO link
//! state machine on it, reopens the port with backoff when it vanishes, and passes commands in
//! and events out through channels. However the driver ends (dropped, stopped, or the process's
//! exit through [`crate::hil::exit`]), its last bytes are the link's safe stop.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::hil::exit;
use crate::hil::fault_injection::FaultInjection;
use crate::hil::realtime;

/// A link state machine in quinn-proto's shape (time is an argument; no I/O inside).
pub trait SerialLink: Send + 'static {
    type Command: Send + 'static;
    type Event: Send + 'static;
    /// A user command, at `now`.
    fn handle_command(&mut self, now: Instant, command: Self::Command);
    fn handle_port_opened(&mut self, now: Instant);
    fn handle_port_lost(&mut self, now: Instant);
    /// The driver is stopping: queue what leaves the device stopped or holding (a hold, a Stop),
    /// in place of what waits to be sent. It is the last thing written.
    fn handle_shutdown(&mut self, now: Instant);
    fn handle_bytes(&mut self, now: Instant, bytes: &[u8]);
    /// Acts on passed deadlines; spurious calls do nothing.
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    /// Appends the next bytes to send to `buf`; false when there are none.
    fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> bool;
    fn poll_event(&mut self) -> Option<Self::Event>;
}

/// What a driver reports: the link's events and the port's fate.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverEvent<E> {
    Link(E),
    PortOpened {
        path: String,
    },
    /// The port could not be opened, or vanished; the driver retries after `retry_in`.
    PortUnavailable {
        path: String,
        reason: String,
        retry_in: Duration,
    },
}

impl<E> DriverEvent<E> {
    /// Why the port cannot be opened, if this event says so.
    pub fn port_unavailable(&self) -> Option<String> {
        match self {
            DriverEvent::PortUnavailable { path, reason, .. } => Some(format!("cannot open {path}: {reason}")),
            _ => None,
        }
    }
}

/// How the driver opens and reopens its port.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSettings {
    pub path: String,
    pub baud: u32,
    /// First wait before reopening; it doubles up to `max_backoff`.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

enum Request<C> {
    Command(C),
    Stop,
}

/// The way requests reach a driver's thread: a channel, and a pipe whose every write wakes the
/// thread from its wait on the port, so that a command goes out as it is sent rather than when
/// the wait ends (the first setpoint of a goal, a stop).
struct Requests<C> {
    sender: Sender<Request<C>>,
    wake: Arc<OwnedFd>,
}

impl<C> Clone for Requests<C> {
    fn clone(&self) -> Self {
        Requests { sender: self.sender.clone(), wake: self.wake.clone() }
    }
}

impl<C> Requests<C> {
    /// Queues `request` and wakes the thread. After the driver stopped, requests go nowhere
    /// (and nothing is written to the pipe, whose reader has gone with the thread).
    fn send(&self, request: Request<C>) {
        if self.sender.send(request).is_ok() {
            // A full pipe (EAGAIN) holds a wake already.
            let _ = nix::unistd::write(&*self.wake, &[1]);
        }
    }
}

/// The driver thread's end of [`Requests`].
struct Inbox<C> {
    receiver: Receiver<Request<C>>,
    woken: OwnedFd,
}

fn requests<C>() -> std::io::Result<(Requests<C>, Inbox<C>)> {
    let (woken, wake) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)?;
    let (sender, receiver) = channel();
    Ok((Requests { sender, wake: Arc::new(wake) }, Inbox { receiver, woken }))
}

impl<C> Inbox<C> {
    /// Waits up to `timeout` (at least a millisecond, poll's unit) for bytes on `port` or for a
    /// request: whether the port has something to read (bytes, or a hang-up the read reports).
    fn wait(&self, port: BorrowedFd, timeout: Duration) -> std::io::Result<bool> {
        let mut waited = [PollFd::new(self.woken.as_fd(), PollFlags::POLLIN), PollFd::new(port, PollFlags::POLLIN)];
        self.poll(&mut waited, timeout)?;
        Ok(waited[1].any().unwrap_or(false))
    }

    /// Waits up to `timeout` (at least a millisecond) for a request alone, leaving what the port
    /// holds where it is.
    fn wait_for_request(&self, timeout: Duration) -> std::io::Result<()> {
        self.poll(&mut [PollFd::new(self.woken.as_fd(), PollFlags::POLLIN)], timeout)
    }

    /// Polls `waited`, whose first is the wake pipe, for up to `timeout`; empties the pipe if
    /// it was woken. An interrupted poll is a wait that ended early.
    fn poll(&self, waited: &mut [PollFd], timeout: Duration) -> std::io::Result<()> {
        let millis = u16::try_from(timeout.as_millis().max(1)).unwrap_or(u16::MAX);
        match poll(waited, PollTimeout::from(millis)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(error) => return Err(error.into()),
        }
        if waited[0].any().unwrap_or(false) {
            self.forget_wakes();
        }
        Ok(())
    }

    /// Empties the pipe: the requests it woke the thread for are taken from the channel.
    fn forget_wakes(&self) {
        let mut wakes = [0u8; 4096];
        while matches!(nix::unistd::read(&self.woken, &mut wakes), Ok(read) if read > 0) {}
    }
}

/// When the bytes handled so far are through, at a pace of bytes a second. Written, at the port's
/// baud rate, 8N1: what the link queues meanwhile waits in the link (where the STM32 link's
/// newer setpoint replaces an older one, and the rdscom link's Stop goes first), not in the
/// kernel's buffer behind stale ones (a stream of commands faster than the wire, which every
/// command waking the thread would otherwise write one by one). Read, at [`READ_PACE`].
struct Wire {
    byte_time: Duration,
    free_at: Instant,
}

impl Wire {
    /// At `baud`, 8N1: ten bits a byte.
    fn new(baud: u32, now: Instant) -> Wire {
        Wire::at(f64::from(baud) / 10.0, now)
    }

    /// At `bytes_per_s`.
    fn at(bytes_per_s: f64, now: Instant) -> Wire {
        Wire { byte_time: Duration::from_secs_f64(1.0 / bytes_per_s), free_at: now }
    }

    fn free(&self, now: Instant) -> bool {
        now >= self.free_at
    }

    /// `bytes` written at `now`: they leave after those before them.
    fn sent(&mut self, now: Instant, bytes: usize) {
        self.free_at = self.free_at.max(now) + self.byte_time * bytes as u32;
    }

    /// How long until the wire is free [from `now`].
    fn busy_for(&self, now: Instant) -> Duration {
        self.free_at.saturating_duration_since(now)
    }
}

/// Sends commands to a running driver; cheap to clone, usable from any thread.
pub struct Commander<C> {
    requests: Requests<C>,
}

impl<C> Clone for Commander<C> {
    fn clone(&self) -> Self {
        Commander { requests: self.requests.clone() }
    }
}

impl<C> Commander<C> {
    /// Queues a command; the driver's thread takes it at once. After the driver stopped,
    /// commands go nowhere.
    pub fn send(&self, command: C) {
        self.requests.send(Request::Command(command));
    }
}

/// A running driver.
pub struct LinkDriver<L: SerialLink> {
    requests: Requests<L::Command>,
    events: Receiver<DriverEvent<L::Event>>,
    thread: Option<JoinHandle<()>>,
    /// The process's exit stops the driver as dropping it does, while it runs.
    _exit_stop: exit::DeviceStop,
}

/// The baud rates a driver takes: a slower one (a mistake, say 0) would hold every command for
/// seconds behind the bytes before it, as the writes go at the wire's pace.
pub const BAUD_RATES: std::ops::RangeInclusive<u32> = 300..=4_000_000;

/// The shortest wait before reopening a vanished port: with none, the driver's thread (at a
/// real-time priority) would retry the open without pause.
pub const MIN_BACKOFF: Duration = Duration::from_millis(10);

/// How long the process's exit waits for a driver's thread to write its safe stop.
const EXIT_WAIT: Duration = Duration::from_millis(50);

impl<L: SerialLink> LinkDriver<L> {
    /// Starts the driver thread. It keeps trying to open the port; events tell how it goes.
    /// A baud rate outside [`BAUD_RATES`] is refused: the writes are paced by it; so is a
    /// backoff under [`MIN_BACKOFF`].
    pub fn start(name: &str, port: PortSettings, link: L) -> std::io::Result<LinkDriver<L>> {
        if !BAUD_RATES.contains(&port.baud) {
            let message = format!("baud rate {} outside {} - {}", port.baud, BAUD_RATES.start(), BAUD_RATES.end());
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, message));
        }
        if port.backoff < MIN_BACKOFF || port.max_backoff < port.backoff {
            let message = format!(
                "reopening backoff {:?} up to {:?}: at least {MIN_BACKOFF:?}, growing",
                port.backoff, port.max_backoff
            );
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, message));
        }
        let (requests, inbox) = requests()?;
        let (events_tx, events) = channel();
        let finished = Arc::new(AtomicBool::new(false));
        let device = format!("{name} on {}", port.path);
        let thread = std::thread::Builder::new().name(name.into()).spawn({
            let finished = finished.clone();
            move || {
                // Set as the thread ends, a panic included (its safe stop is written by then).
                let _finished = exit::SetOnDrop(finished);
                // A busy machine must not hold the device's commands, nor its safe stop.
                realtime::prepare_device_thread(realtime::DEVICE_IO_PRIORITY);
                run(port, link, &inbox, &events_tx);
            }
        })?;
        let exit_requests = Mutex::new(requests.clone());
        let driver_thread = thread.thread().id();
        let exit_stop = exit::on_exit(device, move || {
            // A panic on the driver's own thread: it writes the safe stop itself as it unwinds.
            if std::thread::current().id() == driver_thread {
                return;
            }
            if let Ok(requests) = exit_requests.lock() {
                requests.send(Request::Stop);
            }
            if !exit::wait_for(EXIT_WAIT, || finished.load(Ordering::Relaxed)) {
                log::error!("a serial driver did not write its safe stop within {EXIT_WAIT:?}");
            }
        });
        Ok(LinkDriver { requests, events, thread: Some(thread), _exit_stop: exit_stop })
    }

    pub fn commander(&self) -> Commander<L::Command> {
        Commander { requests: self.requests.clone() }
    }

    /// The driver's events, in order.
    pub fn events(&self) -> &Receiver<DriverEvent<L::Event>> {
        &self.events
    }

    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.requests.send(Request::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<L: SerialLink> Drop for LinkDriver<L> {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Longest a wait on the port lasts (a request ends it sooner), and the port's timeout for a
/// read or a write.
const READ_SLICE: Duration = Duration::from_millis(5);

/// The most bytes a second a driver reads [bytes/s]: over twice what the busiest link here
/// carries (the testbench's four joints streamed at 1 kHz, about 110 kB/s over native USB,
/// which ignores the baud rate), a few percent of a core to decode. A device that sends faster
/// is read no faster, the kernel and the device holding the rest, so that the driver's thread,
/// at a real-time priority, cannot be made to take its core.
const READ_PACE: f64 = 256_000.0;

/// How far the bytes read may run ahead of [`READ_PACE`] before the reads wait: a burst the
/// kernel held while the thread was away (25 kB at that pace) is taken at once.
const READ_AHEAD: Duration = Duration::from_millis(100);

enum Drained {
    Continue,
    Stop,
}

fn run<L: SerialLink>(
    port: PortSettings,
    mut link: L,
    requests: &Inbox<L::Command>,
    events: &Sender<DriverEvent<L::Event>>,
) {
    let mut backoff = port.backoff;
    let mut buf = [0u8; 512];
    let mut out = Vec::with_capacity(256);
    loop {
        let mut serial = match super::open_tty(&port.path, port.baud, READ_SLICE) {
            Ok(serial) => serial,
            Err(error) => {
                let _ = events.send(DriverEvent::PortUnavailable {
                    path: port.path.clone(),
                    reason: error.to_string(),
                    retry_in: backoff,
                });
                if wait_or_stop(requests, backoff) {
                    return;
                }
                backoff = (backoff * 2).min(port.max_backoff);
                continue;
            }
        };
        backoff = port.backoff;
        let _ = events.send(DriverEvent::PortOpened { path: port.path.clone() });
        link.handle_port_opened(Instant::now());
        let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
            serve_port(&mut link, &mut serial, port.baud, (requests, events), (&mut buf, &mut out))
        }));
        let lost = match served {
            Ok(Served::Stopped) => return shut_down(&mut link, &mut serial, &mut out),
            Ok(Served::Lost(error)) => error,
            Err(panic) => {
                // A panic on this thread (a decoder's, say) still leaves the device stopped.
                shut_down(&mut link, &mut serial, &mut out);
                std::panic::resume_unwind(panic);
            }
        };
        drop(serial);
        link.handle_port_lost(Instant::now());
        forward_events(&mut link, events);
        let _ = events.send(DriverEvent::PortUnavailable {
            path: port.path.clone(),
            reason: lost.to_string(),
            retry_in: backoff,
        });
        if wait_or_stop(requests, backoff) {
            return;
        }
    }
}

/// How serving an open port ended.
enum Served {
    /// The driver was asked to stop.
    Stopped,
    /// The port failed.
    Lost(std::io::Error),
}

/// Runs `link` on the open port until the driver is asked to stop or the port fails.
fn serve_port<L: SerialLink>(
    link: &mut L,
    serial: &mut serialport::TTYPort,
    baud: u32,
    (requests, events): (&Inbox<L::Command>, &Sender<DriverEvent<L::Event>>),
    (buf, out): (&mut [u8], &mut Vec<u8>),
) -> Served {
    let injected = FaultInjection::for_this_thread();
    let mut wire = Wire::new(baud, Instant::now());
    let mut taken = Wire::at(READ_PACE, Instant::now());
    loop {
        injected.check();
        if let Drained::Stop = drain_requests(requests, link) {
            return Served::Stopped;
        }
        let now = Instant::now();
        if link.poll_timeout().is_some_and(|deadline| deadline <= now) {
            link.handle_timeout(now);
        }
        if wire.free(now) {
            out.clear();
            while link.poll_transmit(now, out) {}
            if let Err(error) = serial.write_all(out) {
                return Served::Lost(error);
            }
            wire.sent(now, out.len());
        }
        forward_events(link, events);
        let wait =
            link.poll_timeout().map_or(READ_SLICE, |deadline| deadline.saturating_duration_since(Instant::now()));
        let wait = match wire.free(now) {
            true => wait,
            false => match wire.busy_for(Instant::now()) {
                Duration::ZERO => continue,
                busy => wait.min(busy),
            },
        };
        let ahead = taken.busy_for(Instant::now());
        if ahead > READ_AHEAD {
            if let Err(error) = requests.wait_for_request(wait.min(ahead - READ_AHEAD)) {
                return Served::Lost(error);
            }
            continue;
        }
        // SAFETY: the descriptor is the port's, open for as long as `serial` is borrowed here.
        let port = unsafe { BorrowedFd::borrow_raw(serial.as_raw_fd()) };
        match requests.wait(port, wait.min(READ_SLICE)) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => return Served::Lost(error),
        }
        match serial.read(buf) {
            Ok(0) => {}
            Ok(read) => {
                taken.sent(Instant::now(), read);
                link.handle_bytes(Instant::now(), &buf[..read]);
            }
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {}
            Err(error) => return Served::Lost(error),
        }
        forward_events(link, events);
    }
}

/// The link's safe stop, written before the driver's thread ends (a panic on it too).
fn shut_down<L: SerialLink>(link: &mut L, serial: &mut dyn serialport::SerialPort, out: &mut Vec<u8>) {
    let now = Instant::now();
    link.handle_shutdown(now);
    out.clear();
    while link.poll_transmit(now, out) {}
    if let Err(error) = serial.write_all(out) {
        log::error!("the driver's safe stop could not be written: {error}");
    }
}

fn drain_requests<L: SerialLink>(requests: &Inbox<L::Command>, link: &mut L) -> Drained {
    loop {
        match requests.receiver.try_recv() {
            Ok(Request::Command(command)) => link.handle_command(Instant::now(), command),
            Ok(Request::Stop) | Err(TryRecvError::Disconnected) => return Drained::Stop,
            Err(TryRecvError::Empty) => return Drained::Continue,
        }
    }
}

/// Waits `delay` while the port is away; true when asked to stop. Commands sent meanwhile are
/// dropped: there is no device to take them.
fn wait_or_stop<C>(requests: &Inbox<C>, delay: Duration) -> bool {
    let until = Instant::now() + delay;
    loop {
        requests.forget_wakes();
        match requests.receiver.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Request::Command(_)) => continue,
            Ok(Request::Stop) | Err(RecvTimeoutError::Disconnected) => return true,
            Err(RecvTimeoutError::Timeout) => return false,
        }
    }
}

fn forward_events<L: SerialLink>(link: &mut L, events: &Sender<DriverEvent<L::Event>>) {
    while let Some(event) = link.poll_event() {
        let _ = events.send(DriverEvent::Link(event));
    }
}
