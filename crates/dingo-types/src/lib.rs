//! The shared vocabulary of DINGO.
//!
//! Everything here is plain data with no IO: identifiers, the disk-head time
//! model, block-set members, declarations and the [`Topology`] trait through
//! which the planner reads cluster state. The real store and the simulator
//! both implement [`Topology`], so the same planner code drives both.

mod bytes;
mod declaration;
mod disk;
mod duration;
mod ids;
mod limit;
mod member;
mod task;
mod time;
mod topology;

pub use bytes::{ByteSize, ByteSizeError, format_bytes, parse_bytes};
pub use declaration::{BlockRange, BlockSet, Declaration, ReadSets};
pub use disk::DiskModel;
pub use duration::{format_duration, parse_duration};
pub use ids::{BlockId, ChunkRef, DeclarationId, DiskId, GroupId, MAX_BLOCK_ID, MAX_COPIES, NodeId};
pub use limit::{ByteLimit, UNLIMITED};
pub use member::{Member, MemberBitmap};
pub use task::TaskKind;
pub use time::Timestamp;
pub use topology::{BlockInfo, BlockProblem, BlockState, Topology};
