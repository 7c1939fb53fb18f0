//! Poison-tolerant locking for the node's small shared tables.
//!
//! A poisoned lock only means another thread panicked while holding it.
//! Every table locked this way is updated by single assignments or
//! self-contained calls that leave it consistent at each step, so the
//! guard is recovered rather than the panic spread to every reader.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
