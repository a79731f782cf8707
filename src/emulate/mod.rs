//! Device emulators on pseudo-terminals, for tests, demos and users without hardware.

pub mod rdscom;
pub mod rig;
pub mod stm32;
