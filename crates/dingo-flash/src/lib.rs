//! DINGO's flash cache tier, as a pure simulation core (see README.md).

pub mod device;
mod hash;
