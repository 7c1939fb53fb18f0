//! The node's block cache: verified chunk segments kept in memory.
//!
//! Two regions:
//! - **general**: segmented LRU (SLRU). New pages enter *probation*; a hit
//!   there promotes to *protected*. Eviction takes from probation first, so a
//!   one-pass scan can only flush probation, never the re-used working set.
//!   Only foreground reads fill it: unpinned maintenance reads do not.
//! - **pinned**: pages of chunks under a `pin(chunk, until)` directive, filled
//!   when such a chunk is read from disk by anyone. A pinned page stays until
//!   its pin expires or is lifted; only if the region overflows is its least
//!   recently used page evicted (counted in `overflow_evictions`); if it
//!   is then read from disk again while its pin lasts, that re-read is
//!   counted too (`pinned_rereads`): the disk work the overflow cost.
//!
//! Pages are [`SEGMENT`](crate::chunk::SEGMENT)-sized and keyed by chunk and
//! segment index. Counters are per page looked up.
//!
//! With a flash tier (`flash::NodeFlash`), pages leaving the general region and
//! pinned pages pushed out while their pin lasts go to flash, and a DRAM
//! miss looks there next. Flash IO runs after the cache lock is released.

use crate::flash::{FlashStats, NodeFlash, PageKey};
use bytes::Bytes;
use dingo_flash::tier::Admission;
use dingo_proto::IoTag;
use dingo_types::{ChunkRef, TaskKind};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

/// Share of the general region reserved for protected (re-used) pages.
const PROTECTED_SHARE: f64 = 0.8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Hits served from the pinned region (also counted in `hits`).
    pub pinned_hits: u64,
    /// Pinned pages evicted before their deadline because the region overflowed.
    pub overflow_evictions: u64,
    pub general_bytes: u64,
    pub pinned_bytes: u64,
    /// Hits served from the flash tier (also counted in `hits`).
    pub flash_hits: u64,
    /// Pinned pages read from disk again, while their pin lasted, after
    /// an overflow had pushed them out of DRAM (and the flash tier, if
    /// any, did not have them): re-reads the pin overflow caused.
    pub pinned_rereads: u64,
    /// Bytes of those re-reads.
    pub pinned_reread_bytes: u64,
}

/// Byte-bounded LRU list. Invariant: `order` and `map` hold the same keys and
/// `bytes` is the sum of the values' lengths.
///
/// Hand-written rather than `lru`/`hashlink`: pins and deletes act on every
/// page of one chunk, so pages are kept in key order (`(chunk, segment)`)
/// and a chunk's pages are one range of `map`, found in O(log n + pages)
/// instead of a scan of the whole region under the cache lock.
#[derive(Default)]
struct Lru {
    map: BTreeMap<PageKey, (Bytes, u64)>,
    order: BTreeMap<u64, PageKey>,
    bytes: u64,
    tick: u64,
}

impl Lru {
    fn insert(&mut self, key: PageKey, data: Bytes) {
        self.remove(&key);
        self.tick += 1;
        self.bytes += data.len() as u64;
        self.order.insert(self.tick, key);
        self.map.insert(key, (data, self.tick));
    }

    fn remove(&mut self, key: &PageKey) -> Option<Bytes> {
        let (data, tick) = self.map.remove(key)?;
        self.order.remove(&tick);
        self.bytes -= data.len() as u64;
        Some(data)
    }

    /// Marks as most recently used.
    fn touch(&mut self, key: &PageKey) -> Option<Bytes> {
        let data = self.remove(key)?;
        self.insert(*key, data.clone());
        Some(data)
    }

    fn pop_lru(&mut self) -> Option<(PageKey, Bytes)> {
        let (_, key) = self.order.pop_first()?;
        let (data, _) = self.map.remove(&key).expect("order and map agree");
        self.bytes -= data.len() as u64;
        Some((key, data))
    }

    /// The keys of `chunk`'s pages: one range of the ordered map.
    fn chunk_pages(&self, chunk: ChunkRef) -> Vec<PageKey> {
        self.map.range((chunk, 0)..=(chunk, u64::MAX)).map(|(k, _)| *k).collect()
    }

    /// Removes and returns `chunk`'s pages.
    fn take_chunk(&mut self, chunk: ChunkRef) -> Vec<(PageKey, Bytes)> {
        self.chunk_pages(chunk).into_iter().filter_map(|k| Some((k, self.remove(&k)?))).collect()
    }
}

struct Inner {
    general_cap: u64,
    pinned_cap: u64,
    probation: Lru,
    protected: Lru,
    pinned: Lru,
    /// Live pins: chunk → deadline (Unix ms), and the same ordered by deadline.
    pins: HashMap<ChunkRef, u64>,
    deadlines: BTreeSet<(u64, ChunkRef)>,
    /// Pages pushed out of the pinned region by overflow whose pin still
    /// lasts: a disk read of one of them is a re-read the overflow caused.
    overflowed: BTreeSet<PageKey>,
    stats: CacheStats,
    /// Pages leaving DRAM, to be offered to the flash tier once the lock
    /// is released; only collected when there is a tier.
    leaving: Option<Vec<(PageKey, Bytes, Admission)>>,
}

impl Inner {
    /// Drops pins whose deadline has passed, with their pages.
    fn expire(&mut self, now_ms: u64) {
        while let Some(&(until, chunk)) = self.deadlines.first() {
            if until > now_ms {
                break;
            }
            self.deadlines.pop_first();
            self.pins.remove(&chunk);
            self.pinned.take_chunk(chunk);
            self.forget_overflowed(chunk);
        }
    }

    fn unpin(&mut self, chunk: ChunkRef) {
        if let Some(until) = self.pins.remove(&chunk) {
            self.deadlines.remove(&(until, chunk));
        }
        self.pinned.take_chunk(chunk);
        self.forget_overflowed(chunk);
    }

    /// `chunk`'s pin is over: a later disk read of it is no re-read.
    fn forget_overflowed(&mut self, chunk: ChunkRef) {
        let gone: Vec<PageKey> = self.overflowed.range((chunk, 0)..=(chunk, u64::MAX)).copied().collect();
        for k in gone {
            self.overflowed.remove(&k);
        }
    }

    /// Only foreground reads fill the general region.
    fn general_takes(&self, tag: IoTag) -> bool {
        tag == IoTag::Foreground && self.general_cap > 0
    }

    fn general_bytes(&self) -> u64 {
        self.probation.bytes + self.protected.bytes
    }

    /// Evicts least recently used pinned pages while the region is over
    /// its size: each an overflow, remembered while its pin lasts (a disk
    /// read of it then is a re-read the overflow caused) and offered to the
    /// flash tier, if any.
    fn shrink_pinned(&mut self) {
        while self.pinned.bytes > self.pinned_cap {
            let Some((k, v)) = self.pinned.pop_lru() else { break };
            self.stats.overflow_evictions += 1;
            self.overflowed.insert(k);
            let until_ms = self.pins.get(&k.0).copied();
            if let (Some(leaving), Some(until_ms)) = (&mut self.leaving, until_ms) {
                leaving.push((k, v, Admission::PinnedOverflow { until_ms }));
            }
        }
    }

    fn shrink_general(&mut self) {
        let protected_cap = (self.general_cap as f64 * PROTECTED_SHARE) as u64;
        while self.protected.bytes > protected_cap {
            // Demote rather than drop: a page leaving protected gets one more
            // chance in probation.
            let Some((k, v)) = self.protected.pop_lru() else { break };
            self.probation.insert(k, v);
        }
        while self.general_bytes() > self.general_cap {
            let Some((k, v)) = self.probation.pop_lru().or_else(|| self.protected.pop_lru()) else { break };
            if let Some(leaving) = &mut self.leaving {
                leaving.push((k, v, Admission::Evicted));
            }
        }
    }
}

/// Whether reads of class `tag` must verify the device itself (scrubbing):
/// no cached copy of its data or of a chunk's header stands in for it.
pub fn verifies_device(tag: IoTag) -> bool {
    matches!(tag, IoTag::Maintenance { task: TaskKind::Scrubbing, .. })
}

pub struct BlockCache {
    inner: Mutex<Inner>,
    flash: Option<NodeFlash>,
}

impl BlockCache {
    pub fn new(general_bytes: u64, pinned_bytes: u64) -> Self {
        Self::with_flash(general_bytes, pinned_bytes, None)
    }

    pub fn with_flash(general_bytes: u64, pinned_bytes: u64, flash: Option<NodeFlash>) -> Self {
        BlockCache {
            inner: Mutex::new(Inner {
                general_cap: general_bytes,
                pinned_cap: pinned_bytes,
                probation: Lru::default(),
                protected: Lru::default(),
                pinned: Lru::default(),
                pins: HashMap::new(),
                deadlines: BTreeSet::new(),
                overflowed: BTreeSet::new(),
                stats: CacheStats::default(),
                leaving: flash.as_ref().map(|_| Vec::new()),
            }),
            flash,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Looks a page up for an IO of class `tag`, counting a hit or a miss.
    /// Scrubbing must verify the device, so the general region never serves
    /// it; the pinned region does, since a pinned page was read from the
    /// device (and verified) for this very dispatch group. A DRAM miss
    /// looks in the flash tier, if any, under the same rule.
    pub fn get(&self, key: PageKey, tag: IoTag, now_ms: u64) -> Option<Bytes> {
        let verifies_device = verifies_device(tag);
        let (found, leaving) = {
            let mut c = self.lock();
            c.expire(now_ms);
            let found = if let Some(v) = c.pinned.touch(&key) {
                c.stats.pinned_hits += 1;
                Some(v)
            } else if verifies_device {
                None
            } else if let Some(v) = c.protected.touch(&key) {
                Some(v)
            } else if let Some(v) = c.probation.remove(&key) {
                c.protected.insert(key, v.clone());
                c.shrink_general();
                Some(v)
            } else {
                None
            };
            if found.is_some() {
                c.stats.hits += 1;
            } else if self.flash.is_none() {
                c.stats.misses += 1;
            }
            (found, c.leaving.as_mut().map(std::mem::take))
        };
        self.to_flash(leaving, now_ms);
        if found.is_some() {
            return found;
        }
        let flash = self.flash.as_ref()?;
        let from_flash = flash.get(key, verifies_device, now_ms);
        let mut c = self.lock();
        if from_flash.is_some() {
            c.stats.hits += 1;
            c.stats.flash_hits += 1;
        } else {
            c.stats.misses += 1;
        }
        from_flash
    }

    /// Offers pages that left DRAM to the flash tier; the cache lock must
    /// not be held (the writes are direct IO).
    fn to_flash(&self, leaving: Option<Vec<(PageKey, Bytes, Admission)>>, now_ms: u64) {
        if let (Some(flash), Some(leaving)) = (&self.flash, leaving) {
            for (key, data, why) in leaving {
                flash.offer(key, &data, why, now_ms);
            }
        }
    }

    /// Whether a page of `chunk` read by an IO of class `tag` would be kept.
    pub fn wants(&self, chunk: ChunkRef, tag: IoTag, now_ms: u64) -> bool {
        let mut c = self.lock();
        c.expire(now_ms);
        c.pins.contains_key(&chunk) || c.general_takes(tag)
    }

    /// Offers a page just read from disk by an IO of class `tag`.
    pub fn insert(&self, key: PageKey, data: Bytes, tag: IoTag, now_ms: u64) {
        let leaving = {
            let mut c = self.lock();
            c.expire(now_ms);
            if c.pins.contains_key(&key.0) {
                if c.overflowed.remove(&key) {
                    c.stats.pinned_rereads += 1;
                    c.stats.pinned_reread_bytes += data.len() as u64;
                }
                // Copy out of the disk buffer so a pinned page does not keep the
                // whole multi-megabyte read buffer alive.
                c.pinned.insert(key, Bytes::copy_from_slice(&data));
                c.shrink_pinned();
            } else if c.general_takes(tag) && c.protected.touch(&key).is_none() {
                // Two readers that missed at once both insert; a copy the
                // first one's hit already promoted stays the only one.
                c.probation.insert(key, Bytes::copy_from_slice(&data));
                c.shrink_general();
            }
            c.leaving.as_mut().map(std::mem::take)
        };
        self.to_flash(leaving, now_ms);
    }

    /// Pins `chunk` until `until_ms` (Unix ms); a later pin replaces it.
    /// Pages already in the general region move to the pinned region,
    /// which stays within its size as when pages are read into it.
    pub fn pin(&self, chunk: ChunkRef, until_ms: u64, now_ms: u64) {
        let leaving = {
            let mut c = self.lock();
            c.expire(now_ms);
            if until_ms <= now_ms {
                return;
            }
            if let Some(old) = c.pins.insert(chunk, until_ms) {
                c.deadlines.remove(&(old, chunk));
            }
            c.deadlines.insert((until_ms, chunk));
            let mut adopted = c.probation.take_chunk(chunk);
            adopted.extend(c.protected.take_chunk(chunk));
            for (k, v) in adopted {
                c.pinned.insert(k, v);
            }
            c.shrink_pinned();
            c.leaving.as_mut().map(std::mem::take)
        };
        self.to_flash(leaving, now_ms);
    }

    /// Lifts `chunk`'s pin: its pinned pages leave DRAM and flash.
    pub fn unpin(&self, chunk: ChunkRef) {
        self.lock().unpin(chunk);
        if let Some(flash) = &self.flash {
            flash.remove_chunk(chunk);
        }
    }

    /// Forgets every page and pin of a deleted chunk.
    pub fn remove_chunk(&self, chunk: ChunkRef) {
        {
            let mut c = self.lock();
            c.unpin(chunk);
            c.probation.take_chunk(chunk);
            c.protected.take_chunk(chunk);
        }
        if let Some(flash) = &self.flash {
            flash.remove_chunk(chunk);
        }
    }

    pub fn stats(&self) -> CacheStats {
        let c = self.lock();
        CacheStats { general_bytes: c.general_bytes(), pinned_bytes: c.pinned.bytes, ..c.stats }
    }

    /// The flash tier's counters, if the node has one.
    pub fn flash_stats(&self) -> Option<FlashStats> {
        self.flash.as_ref().map(NodeFlash::stats)
    }
}

#[cfg(test)]
impl BlockCache {
    /// Waits for the flash tier's writer to write what it was offered.
    pub(crate) fn flush_flash(&self) {
        if let Some(flash) = &self.flash {
            flash.flush();
        }
    }

    fn get_fg(&self, key: PageKey, now_ms: u64) -> Option<Bytes> {
        self.get(key, IoTag::Foreground, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, DeclarationId};

    const SCRUB: IoTag = IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) };

    fn key(b: u64, s: u64) -> PageKey {
        (ChunkRef { block: BlockId(b), copy: 0 }, s)
    }

    fn page() -> Bytes {
        Bytes::from(vec![0u8; 100])
    }

    #[test]
    fn a_scan_does_not_flush_the_working_set() {
        let cache = BlockCache::new(1000, 0);
        // Working set: two pages, each read twice, so they are protected.
        for s in 0..2 {
            cache.insert(key(1, s), page(), IoTag::Foreground, 0);
            assert!(cache.get_fg(key(1, s), 0).is_some());
        }
        // A scan of 50 one-time pages.
        for b in 100..150 {
            assert!(cache.get_fg(key(b, 0), 0).is_none());
            cache.insert(key(b, 0), page(), IoTag::Foreground, 0);
        }
        assert!(cache.get_fg(key(1, 0), 0).is_some() && cache.get_fg(key(1, 1), 0).is_some());
        assert!(cache.stats().general_bytes <= 1000);
    }

    #[test]
    fn unpinned_maintenance_reads_do_not_fill_the_cache() {
        let cache = BlockCache::new(1000, 1000);
        cache.insert(key(1, 0), page(), SCRUB, 0);
        assert!(cache.get_fg(key(1, 0), 0).is_none());
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.general_bytes, s.pinned_bytes), (0, 1, 0, 0));
    }

    #[test]
    fn pinned_pages_stay_until_deadline_or_unpin() {
        let cache = BlockCache::new(200, 1000);
        let c1 = key(1, 0).0;
        cache.pin(c1, 5_000, 0);
        cache.insert(key(1, 0), page(), SCRUB, 10);
        // Heavy foreground traffic cannot push the pinned page out.
        for b in 100..200 {
            cache.insert(key(b, 0), page(), IoTag::Foreground, 20);
        }
        assert!(cache.get_fg(key(1, 0), 30).is_some());
        assert_eq!(cache.stats().pinned_hits, 1);
        // After the deadline it is gone.
        assert!(cache.get_fg(key(1, 0), 5_000).is_none());
        assert_eq!(cache.stats().pinned_bytes, 0);
        // Unpin drops it at once.
        cache.pin(c1, 50_000, 6_000);
        cache.insert(key(1, 0), page(), SCRUB, 6_000);
        cache.unpin(c1);
        assert!(cache.get_fg(key(1, 0), 6_001).is_none());
        assert_eq!(cache.stats().overflow_evictions, 0);
    }

    #[test]
    fn overflow_evicts_lru_pinned_pages_and_counts_it() {
        let cache = BlockCache::new(0, 250);
        for b in 1..=3 {
            cache.pin(key(b, 0).0, 10_000, 0);
        }
        for b in 1..=3 {
            cache.insert(key(b, 0), page(), SCRUB, 1);
        }
        let s = cache.stats();
        assert_eq!((s.overflow_evictions, s.pinned_bytes), (1, 200));
        assert!(cache.get_fg(key(1, 0), 2).is_none(), "the least recently used pinned page went");
        assert!(cache.get_fg(key(3, 0), 2).is_some());
    }

    #[test]
    fn disk_reads_of_overflowed_pinned_pages_count_as_rereads_while_the_pin_lasts() {
        let cache = BlockCache::new(0, 150);
        for b in 1..=2 {
            cache.pin(key(b, 0).0, 10_000, 0);
            cache.insert(key(b, 0), page(), SCRUB, 1);
        }
        assert_eq!(cache.stats().overflow_evictions, 1, "page (1, 0) was pushed out");
        // The first disk read of a page is planned work, not a re-read.
        assert_eq!(cache.stats().pinned_rereads, 0);
        // The pushed-out page is read from disk again: a re-read, once.
        assert!(cache.get_fg(key(1, 0), 2).is_none());
        cache.insert(key(1, 0), page(), SCRUB, 2);
        let s = cache.stats();
        assert_eq!((s.pinned_rereads, s.pinned_reread_bytes, s.overflow_evictions), (1, 100, 2));
        // (2, 0) went out in turn; after its pin ends, reading it is no re-read.
        cache.insert(key(2, 0), page(), IoTag::Foreground, 10_000);
        assert_eq!(cache.stats().pinned_rereads, 1);
        // Nor after an unpin.
        cache.pin(key(3, 0).0, 20_000, 10_000);
        cache.pin(key(4, 0).0, 20_000, 10_000);
        cache.insert(key(3, 0), page(), SCRUB, 10_001);
        cache.insert(key(4, 0), page(), SCRUB, 10_001);
        cache.unpin(key(3, 0).0);
        cache.pin(key(3, 0).0, 20_000, 10_002);
        cache.insert(key(3, 0), page(), SCRUB, 10_002);
        assert_eq!(cache.stats().pinned_rereads, 1);
    }

    #[test]
    fn pinning_adopts_pages_already_cached() {
        let cache = BlockCache::new(1000, 1000);
        cache.insert(key(1, 0), page(), IoTag::Foreground, 0);
        cache.pin(key(1, 0).0, 100, 0);
        assert_eq!(cache.stats().pinned_bytes, 100);
        assert!(cache.get_fg(key(1, 0), 1).is_some());
        assert_eq!(cache.stats().pinned_hits, 1);
        cache.remove_chunk(key(1, 0).0);
        assert_eq!(cache.stats().pinned_bytes + cache.stats().general_bytes, 0);
    }

    /// Found by the property test (`tests/cache_properties.rs`): adopted
    /// pages filled the pinned region past its size.
    #[test]
    fn pinning_adopts_pages_only_as_far_as_the_pinned_region_holds() {
        let cache = BlockCache::new(1000, 150);
        cache.insert(key(1, 0), page(), IoTag::Foreground, 0);
        cache.insert(key(1, 1), page(), IoTag::Foreground, 0);
        cache.pin(key(1, 0).0, 100, 0);
        let s = cache.stats();
        assert_eq!((s.pinned_bytes, s.general_bytes, s.overflow_evictions), (100, 0, 1));
    }

    #[test]
    fn pin_and_delete_touch_only_the_chunks_own_pages() {
        // Neighbours in key order: another copy of the same block, the next
        // block, and the pages on either side of the chunk's range.
        let chunk = ChunkRef { block: BlockId(5), copy: 1 };
        let neighbours = [
            (ChunkRef { block: BlockId(5), copy: 0 }, u64::MAX),
            (ChunkRef { block: BlockId(5), copy: 2 }, 0),
            (ChunkRef { block: BlockId(6), copy: 1 }, 0),
        ];
        let cache = BlockCache::new(10_000, 10_000);
        for k in neighbours.iter().copied().chain([(chunk, 0), (chunk, 7), (chunk, u64::MAX)]) {
            cache.insert(k, page(), IoTag::Foreground, 0);
        }
        cache.pin(chunk, 1_000, 0);
        let s = cache.stats();
        assert_eq!((s.pinned_bytes, s.general_bytes), (300, 300), "the chunk's three pages moved, nothing else");
        cache.remove_chunk(chunk);
        let s = cache.stats();
        assert_eq!((s.pinned_bytes, s.general_bytes), (0, 300));
        for k in neighbours {
            assert!(cache.get_fg(k, 1).is_some(), "{k:?} survived");
        }
    }

    #[test]
    fn scrubbing_is_served_only_by_pinned_pages() {
        let cache = BlockCache::new(10_000, 10_000);
        cache.insert(key(1, 0), page(), IoTag::Foreground, 0);
        assert!(cache.get(key(1, 0), SCRUB, 0).is_none(), "a general page does not prove the disk copy sound");
        assert!(cache.get_fg(key(1, 0), 0).is_some());
        cache.pin(key(2, 0).0, 1_000, 0);
        cache.insert(key(2, 0), page(), SCRUB, 0);
        assert!(cache.get(key(2, 0), SCRUB, 1).is_some());
    }
}
