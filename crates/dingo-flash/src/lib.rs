//! DINGO's flash cache tier, as a pure simulation core (see README.md).

pub mod bench;
mod bloom;
pub mod device;
pub mod engine;
mod hash;
pub mod index;
mod log;
pub mod model;
pub mod object;
mod set;
pub mod trace;
