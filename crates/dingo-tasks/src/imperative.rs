//! The imperative baseline: a task reads its own data, in its own order, at
//! its own steady pace, like today's systems (a scrubber walking a disk
//! linearly at a fixed rate, a balancer moving blocks one by one).

use crate::report::{CancelFlag, JobReport, Scheduling};
use crate::work::{Job, NoNotice, ScheduledCopies, execute_with_retries};
use dingo_client::{Client, IoTag};
use dingo_types::DeclarationId;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::time::Duration;

/// Longest a paced wait goes without looking at the cancel flag.
const CANCEL_CHECK_MS: u64 = 200;

/// Share of the time to its deadline that imperative work is paced over,
/// leaving slack for the tail (the paper's baseline).
pub const PACE_FRACTION: f64 = 0.85;

/// When work due at `deadline_ms` and started at `now_ms` is paced to end.
pub fn finish_by(now_ms: u64, deadline_ms: u64) -> u64 {
    now_ms + (deadline_ms.saturating_sub(now_ms) as f64 * PACE_FRACTION) as u64
}

/// Items of one job under way at once, at most: an item starts at its
/// paced time even if earlier ones are still running (a slow disk, a
/// retry, a busy machine), as a rate-limited task issues its reads, so a
/// job that falls behind its pace catches up instead of missing its
/// deadline.
pub const MAX_IN_FLIGHT: usize = 4;

/// Runs `job` item by item in its own order, pacing reads evenly so that the
/// work would finish at `finish_by_ms` (unix ms): each item starts once its
/// share of the window has passed, with at most [`MAX_IN_FLIGHT`] under way.
/// Items found deleted don't count towards `sets_needed` (or the items
/// covering `bytes_needed`: [`Job::needed`]), and no more
/// items are started than could still be needed. Stops early when
/// `cancel` is set.
pub async fn run(client: &Client, job: &Job, finish_by_ms: u64, cancel: &CancelFlag) -> JobReport {
    let started = dingo_daemon::now_ms();
    let mut report = JobReport::new(job, Scheduling::Imperative, started);
    let tag = IoTag::Maintenance { task: job.task, declaration: DeclarationId(0) };
    let needed = job.needed();
    // Bytes the paced part of the work reads: the first `needed` items.
    let total: u64 = job.items.iter().take(needed as usize).map(|i| i.bytes).sum::<u64>().max(1);
    let window = finish_by_ms.saturating_sub(started) as f64;
    let mut paced_bytes = 0u64;
    let no_copies = ScheduledCopies::new();
    let mut in_flight = FuturesUnordered::new();
    for item in &job.items {
        // Wait while the items under way could be all that is needed.
        while report.items_done + in_flight.len() as u64 >= needed {
            match in_flight.next().await {
                Some(result) => report.record(result),
                None => break,
            }
        }
        if report.items_done >= needed {
            break;
        }
        let due = started + (window * paced_bytes as f64 / total as f64) as u64;
        while !cancel.is_cancelled() && (dingo_daemon::now_ms() < due || in_flight.len() >= MAX_IN_FLIGHT) {
            let wait = match due.saturating_sub(dingo_daemon::now_ms()) {
                0 => CANCEL_CHECK_MS,
                early => early.min(CANCEL_CHECK_MS),
            };
            tokio::select! {
                Some(result) = in_flight.next() => report.record(result),
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
        if cancel.is_cancelled() {
            // Items under way finish (an action stopped halfway would
            // leave its work half done until a later run).
            while let Some(result) = in_flight.next().await {
                report.record(result);
            }
            report.cancelled = true;
            return report;
        }
        paced_bytes += item.bytes;
        in_flight.push(execute_with_retries(client, &item.action, &no_copies, tag, &NoNotice));
    }
    while let Some(result) = in_flight.next().await {
        report.record(result);
    }
    if !job.is_flexible() || report.items_done >= needed {
        report.finished_ms = Some(dingo_daemon::now_ms());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_paced_over_most_of_the_window() {
        assert_eq!(finish_by(1_000, 11_000), 9_500);
        assert_eq!(finish_by(5_000, 4_000), 5_000, "a passed deadline means now");
    }
}
