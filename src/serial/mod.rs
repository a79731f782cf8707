//! Serial ports: opening them, finding the Arduino, and pseudo-terminals for the emulators.

pub mod detect;
pub mod link_driver;
pub mod pty;

use std::time::Duration;

/// Opens `path` at `baud` 8N1 without flow control; reads time out after `timeout`.
pub fn open(path: &str, baud: u32, timeout: Duration) -> serialport::Result<Box<dyn serialport::SerialPort>> {
    Ok(Box::new(open_tty(path, baud, timeout)?))
}

/// [`open`], as the terminal device it is on this system: its descriptor can be waited on
/// together with others ([`link_driver`]'s requests).
pub fn open_tty(path: &str, baud: u32, timeout: Duration) -> serialport::Result<serialport::TTYPort> {
    serialport::new(path, baud)
        .data_bits(serialport::DataBits::Eight)
        .parity(serialport::Parity::None)
        .stop_bits(serialport::StopBits::One)
        .flow_control(serialport::FlowControl::None)
        .timeout(timeout)
        .open_native()
}
