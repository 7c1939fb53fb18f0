//! Where an engine's flash pages go when they carry payloads.
//!
//! The engines decide what each flash write holds and count it on their
//! device model; a [`PageStore`] is handed those writes' contents (the
//! objects of each page) and asked to read a page back on a flash hit. The
//! simulator's store, [`NoPages`], keeps nothing and trusts the engine's
//! in-memory mirror, so the pure core stays pure and its results do not
//! change; `crate::real` stores the pages in a file and verifies them.
//!
//! Payloads are a function of the key ([`fill_payload`]), so whoever reads
//! an object back can check every byte of it without having kept a copy.

use crate::hash::mix64;
use crate::object::Object;

/// The contents of flash writes, and their reads on a hit.
pub trait PageStore {
    /// Whether this store keeps pages; engines build page contents only if so.
    fn stores_pages(&self) -> bool;
    /// Consecutive pages from `first_page`, one slice of objects per page
    /// (KLog segments, KSet sets).
    fn write_pages(&mut self, first_page: u64, pages: &[Vec<Object>]);
    /// One image spanning `pages` pages from `first_page`, for objects that
    /// straddle pages (LOC segments).
    fn write_extent(&mut self, first_page: u64, pages: u64, objects: &[Object]);
    /// Reads back what a write at `first_page` over `pages` pages stored and
    /// checks that it holds `key` with `size_bytes` bytes of the right
    /// payload. False means the engine must report a miss, never data.
    fn read_verified(&mut self, first_page: u64, pages: u64, key: u64, size_bytes: u32) -> bool;
}

/// The simulator's store: nothing kept, every hit taken on trust.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPages;

impl PageStore for NoPages {
    fn stores_pages(&self) -> bool {
        false
    }

    fn write_pages(&mut self, _first_page: u64, _pages: &[Vec<Object>]) {}

    fn write_extent(&mut self, _first_page: u64, _pages: u64, _objects: &[Object]) {}

    fn read_verified(&mut self, _first_page: u64, _pages: u64, _key: u64, _size_bytes: u32) -> bool {
        true
    }
}

/// The `index`-th 8-byte word of `key`'s payload.
fn payload_word(key: u64, index: u64) -> [u8; 8] {
    mix64(mix64(key).wrapping_add(index)).to_le_bytes()
}

/// Fills `out` with the payload of `key` (as many bytes as `out` holds).
pub fn fill_payload(key: u64, out: &mut [u8]) {
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&payload_word(key, i as u64)[..chunk.len()]);
    }
}

/// Whether `bytes` are exactly the payload of `key` of that length.
pub fn payload_matches(key: u64, bytes: &[u8]) -> bool {
    bytes.chunks(8).enumerate().all(|(i, chunk)| chunk == &payload_word(key, i as u64)[..chunk.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_differ_by_key_and_verify_only_their_own() {
        let mut a = vec![0u8; 301];
        let mut b = vec![0u8; 301];
        fill_payload(7, &mut a);
        fill_payload(8, &mut b);
        assert_ne!(a, b);
        assert!(payload_matches(7, &a) && !payload_matches(7, &b));
        a[300] ^= 1;
        assert!(!payload_matches(7, &a), "the last, partial word is checked too");
    }
}
