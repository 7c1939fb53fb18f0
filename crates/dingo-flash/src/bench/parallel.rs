//! The benchmark's runs are independent (each builds its own engine over a
//! shared, read-only trace), so they run on every core. Each run is seeded
//! by its configuration, so the report does not depend on the core count.
//!
//! Written on `std::thread::scope` with a shared counter rather than with
//! rayon: one parallel loop, a dozen lines.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A run of the benchmark, built to be called from any thread.
pub(crate) type Job<'a, T> = Box<dyn Fn() -> T + Sync + 'a>;

/// Calls every job, up to one per core at once; results in the jobs' order.
pub(crate) fn run_all<T: Send>(jobs: &[Job<'_, T>]) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len()).max(1);
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let result = job();
                    done.lock().unwrap_or_else(|p| p.into_inner()).push((i, result));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_the_jobs_order() {
        let jobs: Vec<Job<'_, usize>> = (0..17usize)
            .map(|i| {
                Box::new(move || {
                    std::thread::sleep(std::time::Duration::from_millis((17 - i as u64) % 5));
                    i * i
                }) as Job<'_, usize>
            })
            .collect();
        assert_eq!(run_all(&jobs), (0..17).map(|i| i * i).collect::<Vec<_>>());
        assert!(run_all::<u8>(&[]).is_empty());
    }
}
