//! DINGO's flash cache tier, as a pure simulation core (see README.md).

mod bloom;
pub mod bench;
pub mod device;
mod hash;
pub mod index;
mod log;
pub mod model;
pub mod object;
pub mod trace;
mod set;
pub mod engine;
