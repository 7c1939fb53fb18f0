//! The shared vocabulary of DINGO.
//!
//! Everything here is plain data with no IO: identifiers, the disk-head time
//! model, how a file is protected ([`Redundancy`]), who an IO is for ([`IoTag`]), block-set members, declarations and the [`Topology`] trait through
//! which the planner reads cluster state. The real store and the simulator
//! both implement [`Topology`], so the same planner code drives both.

mod bytes;
mod declaration;
mod disk;
mod duration;
mod ids;
mod io_tag;
mod limit;
mod member;
mod redundancy;
mod task;
mod time;
mod topology;

pub use bytes::{ByteSize, ByteSizeError, format_bytes, parse_bytes};
pub use declaration::{BlockRange, BlockSet, Declaration, ReadSets};
pub use disk::DiskModel;
pub use duration::{format_duration, parse_duration};
pub use ids::{BlockId, ChunkRef, DeclarationId, DiskId, GroupId, MAX_BLOCK_ID, MAX_COPIES, NodeId};
pub use io_tag::IoTag;
pub use limit::{ByteLimit, UNLIMITED};
pub use member::{Member, MemberBitmap};
pub use redundancy::Redundancy;
pub use task::TaskKind;
pub use time::Timestamp;
pub use topology::{BlockInfo, BlockProblem, BlockState, Topology};
