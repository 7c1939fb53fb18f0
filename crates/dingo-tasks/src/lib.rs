//! DINGO's maintenance tasks, each runnable in two modes over the same
//! storage client path:
//!
//! - **imperative** ([`imperative::run`]): the task walks its own work in
//!   its own order at a steady pace, as storage systems do today;
//! - **declarative** ([`declarative::Agent`]): the task declares all its work
//!   with a deadline to the IO Planner service and does it set by set when
//!   called back, reading the copies the planner scheduled so overlapping
//!   reads of different tasks are served once from the nodes' pinned cache.
//!
//! [`plan`] turns the cluster's state into [`work::Job`]s (scrubbing a disk,
//! rebuilding what a failure lost, rebalancing skewed disks, transcoding
//! aged files; and file by file: scrubbing files, fsck, garbage collection
//! of an object-store area, whose record format is in [`objects`], and
//! georeplication to a second cluster, whose site and durable progress
//! are in [`georep`]);
//! [`work::execute`] carries out one unit of work. Planning and
//! execution are shared by both modes, so the two do the same work.
//! [`supervisor`] runs them by itself when the cluster needs them
//! (`dingo maintain`); [`on_demand`] runs one task when asked (`dingo
//! task`), a [`TaskRequest`] naming the task and its parameters.

pub mod declarative;
pub mod georep;
pub mod imperative;
pub mod objects;
pub mod on_demand;
pub mod pick;
pub mod plan;
pub mod report;
pub mod request;
pub mod supervisor;
pub mod work;

pub use report::{CancelFlag, JobReport, Scheduling};
pub use request::TaskRequest;
pub use work::{Action, Declared, Job, Progress, WorkItem};
