//! Property tests of the node's block cache (`dingo_node::cache`): random
//! reads, disk-read inserts, pins, unpins, deletions and time, checked after
//! every step against what a cache may and must do.

use bytes::Bytes;
use dingo_node::cache::BlockCache;
use dingo_types::{BlockId, ChunkRef, DeclarationId, IoTag, TaskKind};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Chunks the steps pick from, and pages per chunk.
const CHUNKS: u64 = 6;
const PAGES: u64 = 3;

type PageKey = (ChunkRef, u64);

#[derive(Clone, Debug)]
enum Step {
    /// Time passes (ms).
    Wait(u64),
    /// A read looks a page up; on a miss it reads the disk and inserts it.
    Read {
        chunk: u64,
        page: u64,
        tag: u8,
    },
    /// A pin of `chunk` until `until_in` ms from now (≤ 0: already over).
    Pin {
        chunk: u64,
        until_in: i64,
    },
    Unpin(u64),
    /// The chunk is deleted.
    Remove(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0u64..1500).prop_map(Step::Wait),
        8 => (0..CHUNKS, 0..PAGES, 0u8..3).prop_map(|(chunk, page, tag)| Step::Read { chunk, page, tag }),
        3 => (0..CHUNKS, -200i64..3000).prop_map(|(chunk, until_in)| Step::Pin { chunk, until_in }),
        1 => (0..CHUNKS).prop_map(Step::Unpin),
        1 => (0..CHUNKS).prop_map(Step::Remove),
    ]
}

fn chunk(c: u64) -> ChunkRef {
    ChunkRef { block: BlockId(c), copy: 0 }
}

/// Chunks are written once: a page's bytes are a function of its key (and
/// of how often its chunk was written again after a deletion), of a size
/// that differs by page so that byte counts mean something.
fn content(key: PageKey, generation: u32) -> Bytes {
    let len = 100 + 37 * key.1 as usize + 11 * key.0.block.0 as usize;
    Bytes::from(vec![(key.0.block.0 * 16 + key.1) as u8 ^ generation as u8; len])
}

fn tag(t: u8) -> IoTag {
    match t {
        0 => IoTag::Foreground,
        1 => IoTag::Maintenance { task: TaskKind::Scrubbing, declaration: DeclarationId(1) },
        _ => IoTag::Maintenance { task: TaskKind::Reconstruction, declaration: DeclarationId(2) },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// After every step: each region within its size; a lookup returns the
    /// page's own bytes or nothing, never a deleted chunk's; scrubbing is
    /// served only by pinned pages of a live pin; a page read from disk
    /// while its chunk is pinned is served until the pin ends, unless the
    /// pinned region overflowed; every lookup is a hit or a miss.
    #[test]
    fn the_cache_serves_only_what_it_may_and_stays_within_its_sizes(
        general_bytes in prop_oneof![Just(0u64), 200u64..3000, Just(1 << 20)],
        pinned_bytes in prop_oneof![Just(0u64), 200u64..3000, Just(1 << 20)],
        steps in prop::collection::vec(step(), 1..200),
    ) {
        let cache = BlockCache::new(general_bytes, pinned_bytes);
        let mut now_ms = 1_000u64;
        // What the model knows: each chunk's live pin, its generation
        // (bumped on deletion: a chunk written again is new data), the
        // pages read from disk while their chunk was pinned (by the pin's
        // end), and the lookups made.
        let mut pins: BTreeMap<u64, u64> = BTreeMap::new();
        let mut generation: BTreeMap<u64, u32> = BTreeMap::new();
        let mut pinned_reads: BTreeMap<PageKey, u64> = BTreeMap::new();
        let mut lookups = 0u64;
        for step in steps {
            pins.retain(|_, until| *until > now_ms);
            pinned_reads.retain(|k, until| *until > now_ms && pins.get(&k.0.block.0) == Some(until));
            match step {
                Step::Wait(ms) => now_ms += ms,
                Step::Read { chunk: c, page, tag: t } => {
                    let key = (chunk(c), page);
                    let g = generation.get(&c).copied().unwrap_or(0);
                    let got = cache.get(key, tag(t), now_ms);
                    lookups += 1;
                    if let Some(bytes) = &got {
                        prop_assert_eq!(bytes, &content(key, g), "page {:?} served other bytes", key);
                        if t == 1 {
                            prop_assert!(pins.contains_key(&c), "scrubbing served {:?} from an unpinned page", key);
                        }
                    }
                    // Any overflow so far may have pushed this page out.
                    if pinned_reads.contains_key(&key) && cache.stats().overflow_evictions == 0 {
                        prop_assert!(got.is_some(), "pinned page {:?} missed within its pin", key);
                    }
                    if got.is_none() {
                        cache.insert(key, content(key, g), tag(t), now_ms);
                        if let Some(&until) = pins.get(&c) {
                            pinned_reads.insert(key, until);
                        }
                    }
                }
                Step::Pin { chunk: c, until_in } => {
                    let until = now_ms.saturating_add_signed(until_in);
                    cache.pin(chunk(c), until, now_ms);
                    if until > now_ms {
                        pins.insert(c, until);
                        // Pages already pinned keep being served under the new pin.
                        for (_, u) in pinned_reads.iter_mut().filter(|(k, _)| k.0.block.0 == c) {
                            *u = until;
                        }
                    }
                }
                Step::Unpin(c) => {
                    cache.unpin(chunk(c));
                    pins.remove(&c);
                }
                Step::Remove(c) => {
                    cache.remove_chunk(chunk(c));
                    pins.remove(&c);
                    *generation.entry(c).or_default() += 1;
                }
            }
            let s = cache.stats();
            prop_assert!(s.general_bytes <= general_bytes, "general region {} > {}", s.general_bytes, general_bytes);
            prop_assert!(s.pinned_bytes <= pinned_bytes, "pinned region {} > {}", s.pinned_bytes, pinned_bytes);
            prop_assert_eq!(s.hits + s.misses, lookups);
            prop_assert!(s.pinned_hits <= s.hits);
        }
    }
}

/// A page two readers missed at once, read from disk by both: by the
/// second insert the first copy may already be in the protected segment.
/// The page must be held once, not once in each segment.
#[test]
fn a_page_inserted_twice_is_held_once() {
    let cache = BlockCache::new(1 << 20, 0);
    let key = (chunk(1), 0);
    let page = content(key, 0);
    cache.insert(key, page.clone(), IoTag::Foreground, 0);
    // A hit promotes it to the protected segment.
    assert!(cache.get(key, IoTag::Foreground, 0).is_some());
    // The other reader's copy arrives.
    cache.insert(key, page.clone(), IoTag::Foreground, 0);
    assert_eq!(cache.stats().general_bytes, page.len() as u64);
}
