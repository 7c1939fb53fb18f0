//! Objects as the simulator sees them: a key and a size, no payload.

use serde::Serialize;

/// Largest object the small-object engines take (L1201, L1462).
pub const MAX_SMALL_OBJECT_BYTES: u32 = 2048;

/// One cached object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Object {
    pub key: u64,
    pub size_bytes: u32,
}
