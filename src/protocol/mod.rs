//! Sans-IO codecs for the wire protocols: bytes in, typed messages out, and back.
//!
//! Architecture invariant: no sockets, serial ports or clocks in here; decoders take any split
//! of the input, never panic, and check lengths before allocating.

pub mod legacy;
pub mod rdscom;
pub mod deltavr;
pub mod rig;
pub mod stm32;
