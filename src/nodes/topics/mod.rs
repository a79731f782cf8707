//! Each node's topics, written once: their names, QoS and how each message is built from the
//! library's types. A node's publisher advertises them on its [`crate::outputs::Outputs`] and
//! publishes through them.
//!
//! [`arm`] is the arm's topics (sil_node, hil_node, legacy_bridge), [`serial_device`] what
//! every serial device node adds to its own (each device's are beside its node:
//! `nodes::<device>::topics`), [`diagnostics`] every node's status on /diagnostics.

pub mod arm;
pub mod diagnostics;
pub mod serial_device;
