//! One filler per key at a time: while a reader fills the cache with a
//! chunk, a second reader of the same chunk waits for it and then finds the
//! pages in the cache instead of reading the device again (two tasks called
//! back for the same pinned chunk read it at the same moment).
//!
//! Small and synchronous on purpose: the store's reads block (their async
//! callers use `block_in_place`), so the async single-flight crates do not
//! fit, and foyer's in-flight table is tied to its own cache.
//!
//! Invariant: a key is in `flights` exactly while some [`FlightGuard`] for
//! it exists or is being waited for (`users > 0`); so the map never grows
//! past the number of concurrent readers.

use crate::lock::relock;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

struct Flight {
    /// The rank of the guard held for this key, if one is.
    held: Mutex<Option<u8>>,
    released: Condvar,
}

struct Entry {
    flight: Arc<Flight>,
    /// Guards held or awaited for this key. Counted under the map's lock,
    /// so the last one out removes the entry exactly once.
    users: usize,
}

pub struct SingleFlight<K> {
    flights: Mutex<HashMap<K, Entry>>,
}

/// Held while its key is being filled; the next waiter proceeds when it is
/// dropped.
pub struct FlightGuard<'a, K: Eq + Hash + Clone> {
    owner: &'a SingleFlight<K>,
    key: K,
    flight: Arc<Flight>,
}

impl<K: Eq + Hash + Clone> Default for SingleFlight<K> {
    fn default() -> Self {
        SingleFlight { flights: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash + Clone> SingleFlight<K> {
    /// Holds a guard of `rank` for `key`, first waiting for any other one;
    /// with `skip_lower`, returns `None` at once instead of waiting behind a
    /// guard of lower rank (a reader that must not wait for a slower class's
    /// fill reads for itself).
    pub fn enter_ranked(&self, key: K, rank: u8, skip_lower: bool) -> Option<FlightGuard<'_, K>> {
        let flight = {
            let mut flights = relock(&self.flights);
            let entry = flights.entry(key.clone()).or_insert_with(|| Entry {
                flight: Arc::new(Flight { held: Mutex::new(None), released: Condvar::new() }),
                users: 0,
            });
            entry.users += 1;
            entry.flight.clone()
        };
        let mut held = relock(&flight.held);
        while let Some(holder) = *held {
            if skip_lower && holder < rank {
                drop(held);
                self.leave(&key);
                return None;
            }
            held = flight.released.wait(held).unwrap_or_else(PoisonError::into_inner);
        }
        *held = Some(rank);
        drop(held);
        Some(FlightGuard { owner: self, key, flight })
    }

    /// One user of `key` is gone; the last one removes its entry.
    fn leave(&self, key: &K) {
        let mut flights = relock(&self.flights);
        if let Some(entry) = flights.get_mut(key) {
            entry.users -= 1;
            if entry.users == 0 {
                flights.remove(key);
            }
        }
    }
}

#[cfg(test)]
impl<K: Eq + Hash + Clone> SingleFlight<K> {
    /// Waits until no other guard for `key` is held, then holds one.
    pub fn enter(&self, key: K) -> FlightGuard<'_, K> {
        self.enter_ranked(key, 0, false).expect("never skips")
    }

    /// Keys with a guard held or awaited.
    pub fn len(&self) -> usize {
        relock(&self.flights).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<K: Eq + Hash + Clone> Drop for FlightGuard<'_, K> {
    fn drop(&mut self) {
        *relock(&self.flight.held) = None;
        // Every waiter looks again: one of them may skip rather than hold.
        self.flight.released.notify_all();
        self.owner.leave(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn one_holder_per_key_and_the_map_empties() {
        let flights = Arc::new(SingleFlight::<u64>::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most_inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (flights, inside, most_inside) = (flights.clone(), inside.clone(), most_inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let _guard = flights.enter(7);
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most_inside.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most_inside.load(Ordering::SeqCst), 1, "never two holders of one key");
        assert!(flights.is_empty(), "the last holder forgets the key");
    }

    #[test]
    fn different_keys_do_not_wait_for_each_other() {
        let flights = Arc::new(SingleFlight::<u64>::default());
        let _held = flights.enter(1);
        let other = {
            let flights = flights.clone();
            std::thread::spawn(move || {
                let _g = flights.enter(2);
            })
        };
        // Joins at once although key 1 stays held.
        other.join().unwrap();
        assert_eq!(flights.len(), 1);
    }

    #[test]
    fn a_higher_rank_skips_a_lower_holder_and_waits_for_its_own() {
        let flights = Arc::new(SingleFlight::<u64>::default());
        let low = flights.enter_ranked(4, 0, false).unwrap();
        assert!(flights.enter_ranked(4, 1, true).is_none(), "does not wait behind a lower rank");
        assert_eq!(flights.len(), 1, "the skipper left no user behind");
        drop(low);
        assert!(flights.is_empty());
        // Behind an equal (or higher) rank it waits, as without skipping.
        let high = flights.enter_ranked(4, 1, false).unwrap();
        let waiter = {
            let flights = flights.clone();
            std::thread::spawn(move || flights.enter_ranked(4, 1, true).is_some())
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "waits behind an equal rank");
        drop(high);
        assert!(waiter.join().unwrap(), "then holds the key");
        assert!(flights.is_empty());
    }

    #[test]
    fn a_waiter_proceeds_when_the_holder_leaves() {
        let flights = Arc::new(SingleFlight::<u64>::default());
        let held = flights.enter(3);
        let waiter = {
            let flights = flights.clone();
            std::thread::spawn(move || {
                let _g = flights.enter(3);
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "waits while the key is held");
        assert_eq!(flights.len(), 1);
        drop(held);
        waiter.join().unwrap();
        assert!(flights.is_empty());
    }
}
