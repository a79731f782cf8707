//! TCP servers and clients: thin async shells around the sans-IO codecs of [`crate::protocol`].

pub mod legacy;
pub mod vr;
pub mod vr_session;
