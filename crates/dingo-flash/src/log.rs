//! A segmented, circular flash log with Kangaroo's chained index: KLog's
//! partition, FWLog, and the log-structured baseline.
//!
//! The log is pure bookkeeping: it says which segment slot was sealed and
//! the caller writes it to its device (an LBA range on an FTL, or a zone).
//! Objects are packed into pages and never straddle one; the open slot is
//! the DRAM segment buffer and is searchable like the rest.
//!
//! Invariants: each live index entry names the page that holds its object;
//! inside one page the pair (bucket, tag) is unique, so an entry resolves to
//! exactly one object; `live[slot]` counts the live entries pointing into a
//! slot, and a slot is freed only when that count is zero.

use std::collections::VecDeque;

use crate::device::PAGE_BYTES;
use crate::index::{ChainedIndex, EntryRef, MAX_OFFSET, PackedEntry, TableFull};
use crate::object::Object;

/// One object as stored on a log page.
#[derive(Clone, Copy, Debug)]
pub struct PageObject {
    pub object: Object,
    pub bucket: u32,
    pub tag: u16,
}

/// A live log object with its index entry.
#[derive(Clone, Copy, Debug)]
pub struct LiveObject {
    pub entry: EntryRef,
    pub object: Object,
    pub rrip: u8,
}

/// Why an append did not happen.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AppendError {
    /// The open segment has no room: seal it (after freeing a slot) and retry.
    #[error("the open segment is full")]
    SegmentFull,
    #[error(transparent)]
    TableFull(#[from] TableFull),
}

pub struct SegmentLog {
    seg_pages: u32,
    /// Page contents, slot-major: page `slot * seg_pages + i`.
    pages: Vec<Vec<PageObject>>,
    live: Vec<u32>,
    free: Vec<u32>,
    sealed: VecDeque<u32>,
    open: u32,
    open_page: u32,
    open_page_bytes: u32,
    index: ChainedIndex,
    live_bytes: u64,
}

impl SegmentLog {
    /// A log of `slots` segments of `seg_pages` pages, indexed over
    /// `buckets` buckets in `tables` tables.
    pub fn new(slots: u32, seg_pages: u32, buckets: u32, tables: u32) -> SegmentLog {
        assert!(slots >= 2, "a log needs an open and a sealed segment");
        assert!(seg_pages > 0);
        let total_pages = u64::from(slots) * u64::from(seg_pages);
        assert!(total_pages - 1 <= u64::from(MAX_OFFSET), "log too large for the entry's offset field");
        SegmentLog {
            seg_pages,
            pages: vec![Vec::new(); total_pages as usize],
            live: vec![0; slots as usize],
            free: (1..slots).rev().collect(),
            sealed: VecDeque::new(),
            open: 0,
            open_page: 0,
            open_page_bytes: 0,
            index: ChainedIndex::new(buckets, tables),
            live_bytes: 0,
        }
    }

    /// The live copy of `key`, if any.
    pub fn lookup(&self, key: u64, bucket: u32, tag: u16) -> Option<LiveObject> {
        let mut found = None;
        self.index
            .find(bucket, |e| {
                if e.tag() != tag {
                    return false;
                }
                // A tag match costs a page read; the page tells whether it is our key.
                match self.pages[e.offset() as usize].iter().find(|p| p.object.key == key) {
                    Some(p) => {
                        found = Some(p.object);
                        true
                    }
                    None => false,
                }
            })
            .map(|(entry, e)| LiveObject { entry, object: found.expect("set with the match"), rrip: e.rrip() })
    }

    /// Appends `object`, replacing any older copy of its key.
    pub fn append(&mut self, object: Object, bucket: u32, tag: u16, rrip: u8) -> Result<EntryRef, AppendError> {
        assert!(u64::from(object.size_bytes) <= PAGE_BYTES, "object larger than a page");
        let page_full = self.open_page_bytes + object.size_bytes > PAGE_BYTES as u32;
        let clash = self.pages[self.open_global_page() as usize].iter().any(|p| p.bucket == bucket && p.tag == tag);
        if page_full || clash {
            if self.open_page + 1 == self.seg_pages {
                return Err(AppendError::SegmentFull);
            }
            self.open_page += 1;
            self.open_page_bytes = 0;
        }
        if let Some(old) = self.lookup(object.key, bucket, tag) {
            self.remove(bucket, old.entry);
        }
        let offset = self.open_global_page();
        let entry = self.index.insert(bucket, tag, offset, rrip)?;
        self.pages[offset as usize].push(PageObject { object, bucket, tag });
        self.open_page_bytes += object.size_bytes;
        self.live[self.open as usize] += 1;
        self.live_bytes += u64::from(object.size_bytes);
        Ok(entry)
    }

    fn open_global_page(&self) -> u32 {
        self.open * self.seg_pages + self.open_page
    }

    /// The log page holding a live entry's object, or `None` while it is in
    /// the open segment (the DRAM buffer, served without a flash read).
    pub fn flash_page(&self, entry: EntryRef) -> Option<u32> {
        let page = self.index.get(entry).offset();
        (page / self.seg_pages != self.open).then_some(page)
    }

    /// What a slot's pages hold, page by page, dead copies included: the
    /// bytes a seal writes.
    pub fn slot_objects(&self, slot: u32) -> Vec<Vec<Object>> {
        let base = (slot * self.seg_pages) as usize;
        self.pages[base..base + self.seg_pages as usize]
            .iter()
            .map(|page| page.iter().map(|p| p.object).collect())
            .collect()
    }

    /// Whether a slot is free for the next seal.
    pub fn has_free_slot(&self) -> bool {
        !self.free.is_empty()
    }

    /// Seals the open segment and opens a free slot; returns the sealed slot
    /// for the caller to write out.
    pub fn seal(&mut self) -> u32 {
        let next = self.free.pop().expect("seal needs a free slot: free the oldest first");
        let sealed = self.open;
        self.sealed.push_back(sealed);
        self.open = next;
        self.open_page = 0;
        self.open_page_bytes = 0;
        sealed
    }

    /// The oldest sealed slot.
    pub fn oldest_sealed(&self) -> Option<u32> {
        self.sealed.front().copied()
    }

    /// Sealed slots, oldest first.
    pub fn sealed_slots(&self) -> Vec<u32> {
        self.sealed.iter().copied().collect()
    }

    /// Live objects pointing into `slot`.
    pub fn live_count(&self, slot: u32) -> u32 {
        self.live[slot as usize]
    }

    /// The objects still live in `slot`, in log order.
    pub fn live_in_slot(&self, slot: u32) -> Vec<LiveObject> {
        let base = slot * self.seg_pages;
        let mut out = Vec::new();
        for page in base..base + self.seg_pages {
            for p in &self.pages[page as usize] {
                if let Some(live) = self.lookup(p.object.key, p.bucket, p.tag)
                    && self.index.get(live.entry).offset() == page
                {
                    out.push(live);
                }
            }
        }
        out
    }

    /// All live objects of a bucket (Kangaroo's ENUMERATE-SET).
    pub fn bucket_objects(&self, bucket: u32) -> Vec<LiveObject> {
        self.index
            .chain(bucket)
            .into_iter()
            .map(|(entry, e)| {
                let p = self.pages[e.offset() as usize]
                    .iter()
                    .find(|p| p.bucket == bucket && p.tag == e.tag())
                    .expect("an entry's page holds its object");
                LiveObject { entry, object: p.object, rrip: e.rrip() }
            })
            .collect()
    }

    pub fn set_rrip(&mut self, entry: EntryRef, rrip: u8) {
        self.index.set_rrip(entry, rrip);
    }

    /// Drops a live object.
    pub fn remove(&mut self, bucket: u32, entry: EntryRef) {
        let e: PackedEntry = self.index.get(entry);
        let page = e.offset();
        let slot = page / self.seg_pages;
        let object = self.pages[page as usize]
            .iter()
            .find(|p| p.bucket == bucket && p.tag == e.tag())
            .expect("an entry's page holds its object")
            .object;
        self.index.remove(bucket, entry);
        self.live[slot as usize] -= 1;
        self.live_bytes -= u64::from(object.size_bytes);
    }

    /// Returns a sealed slot with no live objects to the free pool.
    pub fn free_slot(&mut self, slot: u32) {
        assert_eq!(self.live[slot as usize], 0, "freeing a slot with live objects");
        let at = self.sealed.iter().position(|&s| s == slot).expect("only sealed slots are freed");
        self.sealed.remove(at);
        let base = (slot * self.seg_pages) as usize;
        for page in &mut self.pages[base..base + self.seg_pages as usize] {
            page.clear();
        }
        self.free.push(slot);
    }

    pub fn live_objects(&self) -> u64 {
        self.index.live_entries()
    }

    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// DRAM for the index; the segment buffer is reported separately.
    pub fn index_dram_bits(&self) -> u64 {
        self.index.dram_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn obj(key: u64, size_bytes: u32) -> Object {
        Object { key, size_bytes }
    }

    #[test]
    fn appends_fill_pages_then_ask_for_a_seal() {
        let mut log = SegmentLog::new(3, 2, 4, 1);
        for key in 0..4 {
            log.append(obj(key, 2000), (key % 4) as u32, key as u16, 6).unwrap();
        }
        assert_eq!(log.append(obj(9, 2000), 1, 9, 6), Err(AppendError::SegmentFull));
        assert_eq!(log.seal(), 0);
        log.append(obj(9, 2000), 1, 9, 6).unwrap();
        assert_eq!(log.live_count(0), 4);
        assert_eq!(log.bucket_objects(1).len(), 2);
        assert_eq!(log.lookup(9, 1, 9).unwrap().object.size_bytes, 2000);
    }

    proptest! {
        /// The newest append of a key is the one found, and live counts add up.
        #[test]
        fn newest_copy_wins(ops in prop::collection::vec((0u64..40, 1u32..1500), 1..300)) {
            let mut log = SegmentLog::new(64, 4, 8, 2);
            let mut model = std::collections::HashMap::new();
            for (key, size) in ops {
                let bucket = (key % 8) as u32;
                let tag = (key % 512) as u16;
                if log.append(obj(key, size), bucket, tag, 6) == Err(AppendError::SegmentFull) {
                    log.seal();
                    log.append(obj(key, size), bucket, tag, 6).unwrap();
                }
                model.insert(key, size);
            }
            for (&key, &size) in &model {
                let found = log.lookup(key, (key % 8) as u32, (key % 512) as u16).map(|l| l.object.size_bytes);
                prop_assert_eq!(found, Some(size));
            }
            prop_assert_eq!(log.live_objects() as usize, model.len());
            prop_assert_eq!(log.live_bytes(), model.values().map(|&s| u64::from(s)).sum::<u64>());
        }
    }
}
