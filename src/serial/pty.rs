//! Pseudo-terminals: the emulators hold the master side, drivers open the slave path like any
//! serial port.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::pty::openpty;
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};

/// A pseudo-terminal pair in raw mode. The slave side stays open here too, so the master keeps
/// working while a driver closes and reopens the port.
#[derive(Debug)]
pub struct Pty {
    master: File,
    _slave: OwnedFd,
    path: PathBuf,
}

impl Pty {
    /// Opens a raw pseudo-terminal; reads on the master side do not block.
    pub fn open() -> io::Result<Pty> {
        let pair = openpty(None, None)?;
        let path = nix::unistd::ttyname(pair.slave.as_fd())?;
        let mut settings = tcgetattr(pair.slave.as_fd())?;
        cfmakeraw(&mut settings);
        tcsetattr(pair.slave.as_fd(), SetArg::TCSANOW, &settings)?;
        let flags = OFlag::from_bits_truncate(fcntl(pair.master.as_fd(), FcntlArg::F_GETFL)?);
        fcntl(pair.master.as_fd(), FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        Ok(Pty { master: File::from(pair.master), _slave: pair.slave, path })
    }

    /// The slave device path a driver opens, such as /dev/pts/7.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The master side: what the emulated device reads and writes.
    pub fn master(&mut self) -> &mut File {
        &mut self.master
    }

    /// Waits until the master side has bytes to read or `timeout` passes (at least 1 ms).
    pub fn wait_readable(&self, timeout: Duration) {
        let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
        let millis = PollTimeout::try_from(timeout.as_millis().max(1)).unwrap_or(PollTimeout::MAX);
        // An interrupted or failed poll only means the caller looks again sooner.
        let _ = poll(&mut fds, millis);
    }
}
