//! Kangaroo's partitioned, set-bucketed, chained log index (L922-966).
//!
//! The index is split into tables; each table is a separately-chained hash
//! table whose bucket is the object's *set* (or, for a plain log, a hash
//! bucket), so all log objects of one set hang off one chain. Entries are
//! packed into 48 bits (Table 4.2): flash page offset 19 | tag 9 | next 16 |
//! RRIP 3 | valid 1. `next` is an index inside the entry's table, which is
//! what makes 16 bits enough; free entries are threaded through `next`, so
//! the free list costs no extra DRAM.
//!
//! Invariants: every chain is acyclic and holds only valid entries; a
//! table never holds more than [`MAX_TABLE_ENTRIES`] entries.

/// Width of the packed fields, in bits.
pub const OFFSET_BITS: u32 = 19;
pub const TAG_BITS: u32 = 9;
pub const NEXT_BITS: u32 = 16;
pub const RRIP_BITS: u32 = 3;
pub const VALID_BITS: u32 = 1;
/// One entry, in bits: 48.
pub const ENTRY_BITS: u32 = OFFSET_BITS + TAG_BITS + NEXT_BITS + RRIP_BITS + VALID_BITS;
/// Bits per bucket head.
pub const HEAD_BITS: u32 = NEXT_BITS;

const NIL: u16 = u16::MAX;
/// Entries a table can address with a 16-bit `next` (one value is NIL).
pub const MAX_TABLE_ENTRIES: usize = NIL as usize;
/// Largest page offset an entry can hold.
pub const MAX_OFFSET: u32 = (1 << OFFSET_BITS) - 1;

/// A 48-bit index entry stored in 6 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedEntry([u16; 3]);

const _: () = assert!(std::mem::size_of::<PackedEntry>() * 8 == ENTRY_BITS as usize);

impl PackedEntry {
    fn pack(offset: u32, tag: u16, next: u16, rrip: u8, valid: bool) -> PackedEntry {
        debug_assert!(offset <= MAX_OFFSET && u32::from(tag) < (1 << TAG_BITS) && rrip < 8);
        let v = u64::from(offset)
            | u64::from(tag) << OFFSET_BITS
            | u64::from(next) << (OFFSET_BITS + TAG_BITS)
            | u64::from(rrip) << (OFFSET_BITS + TAG_BITS + NEXT_BITS)
            | u64::from(valid) << (ENTRY_BITS - 1);
        PackedEntry([v as u16, (v >> 16) as u16, (v >> 32) as u16])
    }

    fn bits(self) -> u64 {
        u64::from(self.0[0]) | u64::from(self.0[1]) << 16 | u64::from(self.0[2]) << 32
    }

    pub fn offset(self) -> u32 {
        (self.bits() & u64::from(MAX_OFFSET)) as u32
    }

    pub fn tag(self) -> u16 {
        ((self.bits() >> OFFSET_BITS) & ((1 << TAG_BITS) - 1)) as u16
    }

    fn next(self) -> u16 {
        (self.bits() >> (OFFSET_BITS + TAG_BITS)) as u16
    }

    pub fn rrip(self) -> u8 {
        ((self.bits() >> (OFFSET_BITS + TAG_BITS + NEXT_BITS)) & 0b111) as u8
    }

    fn valid(self) -> bool {
        self.bits() >> (ENTRY_BITS - 1) & 1 == 1
    }

    fn with_next(self, next: u16) -> PackedEntry {
        PackedEntry::pack(self.offset(), self.tag(), next, self.rrip(), self.valid())
    }
}

/// The tag of a key: [`TAG_BITS`] of its probe hash.
pub fn tag_of(probe_hash: u64) -> u16 {
    (probe_hash >> (64 - TAG_BITS)) as u16
}

/// Where an entry lives: its table and its slot in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef {
    table: u32,
    slot: u16,
}

struct Table {
    heads: Vec<u16>,
    entries: Vec<PackedEntry>,
    free_head: u16,
}

/// The chained index over `buckets` buckets.
pub struct ChainedIndex {
    tables: Vec<Table>,
    live_entries: u64,
}

/// The table a bucket lives in was full.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("index table {table} is full ({MAX_TABLE_ENTRIES} entries)")]
pub struct TableFull {
    pub table: u32,
}

impl ChainedIndex {
    /// `buckets` buckets spread round-robin over `tables` tables.
    pub fn new(buckets: u32, tables: u32) -> ChainedIndex {
        assert!(tables > 0 && buckets >= tables, "need at least one bucket per table");
        let tables = (0..tables)
            .map(|t| Table {
                heads: vec![NIL; ((buckets - t).div_ceil(tables)) as usize],
                entries: Vec::new(),
                free_head: NIL,
            })
            .collect();
        ChainedIndex { tables, live_entries: 0 }
    }

    fn locate(&self, bucket: u32) -> (usize, usize) {
        let n = self.tables.len() as u32;
        ((bucket % n) as usize, (bucket / n) as usize)
    }

    /// Adds an entry at the head of `bucket`'s chain.
    pub fn insert(&mut self, bucket: u32, tag: u16, offset: u32, rrip: u8) -> Result<EntryRef, TableFull> {
        assert!(offset <= MAX_OFFSET, "offset {offset} does not fit {OFFSET_BITS} bits");
        let (t, b) = self.locate(bucket);
        let table = &mut self.tables[t];
        let slot = if table.free_head != NIL {
            let slot = table.free_head;
            table.free_head = table.entries[slot as usize].next();
            slot
        } else if table.entries.len() < MAX_TABLE_ENTRIES {
            table.entries.push(PackedEntry::pack(0, 0, NIL, 0, false));
            (table.entries.len() - 1) as u16
        } else {
            return Err(TableFull { table: t as u32 });
        };
        table.entries[slot as usize] = PackedEntry::pack(offset, tag, table.heads[b], rrip, true);
        table.heads[b] = slot;
        self.live_entries += 1;
        Ok(EntryRef { table: t as u32, slot })
    }

    /// The valid entries in `bucket`'s chain, newest first.
    pub fn chain(&self, bucket: u32) -> Vec<(EntryRef, PackedEntry)> {
        let (t, b) = self.locate(bucket);
        let table = &self.tables[t];
        let mut out = Vec::new();
        let mut slot = table.heads[b];
        while slot != NIL {
            let e = table.entries[slot as usize];
            debug_assert!(e.valid());
            out.push((EntryRef { table: t as u32, slot }, e));
            slot = e.next();
        }
        out
    }

    /// The first valid entry in `bucket`'s chain (newest first) that `pred` accepts.
    pub fn find(&self, bucket: u32, mut pred: impl FnMut(PackedEntry) -> bool) -> Option<(EntryRef, PackedEntry)> {
        let (t, b) = self.locate(bucket);
        let table = &self.tables[t];
        let mut slot = table.heads[b];
        while slot != NIL {
            let e = table.entries[slot as usize];
            if pred(e) {
                return Some((EntryRef { table: t as u32, slot }, e));
            }
            slot = e.next();
        }
        None
    }

    pub fn get(&self, r: EntryRef) -> PackedEntry {
        self.tables[r.table as usize].entries[r.slot as usize]
    }

    /// Overwrites an entry's eviction bits.
    pub fn set_rrip(&mut self, r: EntryRef, rrip: u8) {
        let e = self.get(r);
        self.tables[r.table as usize].entries[r.slot as usize] =
            PackedEntry::pack(e.offset(), e.tag(), e.next(), rrip, true);
    }

    /// Unlinks an entry from `bucket`'s chain and frees it.
    pub fn remove(&mut self, bucket: u32, r: EntryRef) {
        let (t, b) = self.locate(bucket);
        assert_eq!(t as u32, r.table, "entry is not in this bucket's table");
        let table = &mut self.tables[t];
        let target = table.entries[r.slot as usize];
        assert!(target.valid(), "removing a free entry");
        if table.heads[b] == r.slot {
            table.heads[b] = target.next();
        } else {
            let mut slot = table.heads[b];
            loop {
                assert!(slot != NIL, "entry not found in its bucket's chain");
                let e = table.entries[slot as usize];
                if e.next() == r.slot {
                    table.entries[slot as usize] = e.with_next(target.next());
                    break;
                }
                slot = e.next();
            }
        }
        table.entries[r.slot as usize] = PackedEntry::pack(0, 0, table.free_head, 0, false);
        table.free_head = r.slot;
        self.live_entries -= 1;
    }

    pub fn live_entries(&self) -> u64 {
        self.live_entries
    }

    /// DRAM held by the index: every allocated entry slot (live or free) at
    /// its packed width plus every bucket head.
    pub fn dram_bits(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| t.entries.len() as u64 * u64::from(ENTRY_BITS) + t.heads.len() as u64 * u64::from(HEAD_BITS))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn entry_is_48_bits_and_round_trips() {
        assert_eq!(ENTRY_BITS, 48);
        assert_eq!(std::mem::size_of::<PackedEntry>(), 6);
        let e = PackedEntry::pack(MAX_OFFSET, 0x1AB, 0xBEEF, 6, true);
        assert_eq!((e.offset(), e.tag(), e.next(), e.rrip(), e.valid()), (MAX_OFFSET, 0x1AB, 0xBEEF, 6, true));
    }

    proptest! {
        /// The index agrees with a model map after any mix of inserts and removes.
        #[test]
        fn chains_match_a_model(ops in prop::collection::vec((any::<bool>(), 0u32..20, 0u32..1000), 1..400)) {
            let mut index = ChainedIndex::new(20, 3);
            let mut model: Vec<Vec<(EntryRef, u32)>> = vec![Vec::new(); 20];
            for (insert, bucket, offset) in ops {
                if insert || model[bucket as usize].is_empty() {
                    let r = index.insert(bucket, (offset % 512) as u16, offset, 6).unwrap();
                    model[bucket as usize].push((r, offset));
                } else {
                    let chain = &mut model[bucket as usize];
                    let (r, _) = chain.remove(offset as usize % chain.len());
                    index.remove(bucket, r);
                }
            }
            for bucket in 0..20u32 {
                let mut got: Vec<u32> = index.chain(bucket).iter().map(|(_, e)| e.offset()).collect();
                let mut want: Vec<u32> = model[bucket as usize].iter().map(|&(_, o)| o).collect();
                got.sort_unstable();
                want.sort_unstable();
                prop_assert_eq!(got, want);
            }
            prop_assert_eq!(index.live_entries() as usize, model.iter().map(Vec::len).sum::<usize>());
        }
    }
}
