//! The node's flash tier (`[node.flash]`): pages leaving the DRAM cache
//! (evicted from the general region, or pushed out of a full pinned region
//! while their pin lasts) are written to a flash file laid out in zones by
//! [`dingo_flash::tier::FlashTier`], and read back from it on a DRAM miss.
//!
//! The file is a cache: it is emptied when the node starts. Each page's
//! length and crc32c are kept beside it in memory, so a torn or stale slot
//! (a reader racing the writer, a zone reset under a reader, bit rot) is a
//! miss, never wrong data.
//!
//! One writer thread per tier does the admitting and writing, so the read
//! that pushed a page out of DRAM does not wait for its flash write; a
//! page offered while the writer is far behind is dropped, and counted.
//! The writer runs at a lower CPU priority than the node's other threads
//! (see [`WRITER_NICE_INCREMENT`]).

use crate::direct::{AlignedBuf, DirectFile, align_up};
use crate::error::StoreError;
use crate::lock::relock;
use bytes::Bytes;
use dingo_flash::tier::{Admission, Admitted, FlashTier, Location, TierConfig, TierStats, ZonedMedia};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// A page of a chunk, the unit the DRAM cache and the flash tier hold:
/// segment `.1` of chunk `.0`.
pub type PageKey = (dingo_types::ChunkRef, u64);

/// How a node's flash tier is laid out.
#[derive(Clone, Debug)]
pub struct FlashSettings {
    /// The file holding the tier's pages (on the flash device).
    pub path: PathBuf,
    pub zones: u32,
    /// Bytes per zone; a multiple of the cache page (64 KiB).
    pub zone_bytes: u64,
    /// Zones open at once (at least 2; FairyWREN's devices allow 4).
    pub max_active_zones: u32,
    /// Pins ending within this many ms share zones.
    pub pin_bucket_ms: u64,
    /// Device-writes-per-day budget, bytes.
    pub write_budget_bytes_per_day: u64,
}

/// What the tier keeps beside each page.
#[derive(Clone, Copy, Debug)]
struct PageInfo {
    len: u32,
    crc: u32,
    /// Written as pinned overflow: read from the device for the pin's
    /// dispatch group, so it may serve scrubbing as the DRAM pinned region
    /// does.
    pinned: bool,
}

/// Counters of the tier as the node sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlashStats {
    pub tier: TierStats,
    /// Bytes the host asked the device to write, and bytes the device
    /// wrote to its media (their ratio is its write amplification).
    pub host_write_bytes: u64,
    pub device_write_bytes: u64,
    /// Pages whose slot failed its checksum on read (treated as misses).
    pub checksum_misses: u64,
    pub write_errors: u64,
    /// Bytes of pages not offered to the tier because the writer thread
    /// was too far behind.
    pub dropped_queue_full_bytes: u64,
    /// The configured device-writes-per-day budget, bytes.
    pub write_budget_bytes_per_day: u64,
    /// The configured limit on open zones.
    pub max_active_zones: u32,
}

impl FlashStats {
    /// The counters as the `NodeStats` reply carries them.
    pub fn wire(&self) -> dingo_proto::v1::FlashTierStats {
        let t = &self.tier;
        dingo_proto::v1::FlashTierStats {
            evicted_written_bytes: t.evicted_written_bytes,
            pinned_written_bytes: t.pinned_written_bytes,
            host_written_bytes: self.host_write_bytes,
            device_written_bytes: self.device_write_bytes,
            refused_over_budget_bytes: t.refused_over_budget_bytes,
            refused_no_space_bytes: t.refused_no_space_bytes,
            hits: t.hits,
            misses: t.misses,
            zone_resets: t.log_zone_resets + t.pinned_zone_resets,
            pinned_zones_reclaimed_early: t.pinned_zones_reclaimed_early,
            max_open_zones: t.max_open_zones,
            max_active_zones: self.max_active_zones,
            write_budget_bytes_per_day: self.write_budget_bytes_per_day,
            checksum_misses: self.checksum_misses,
            dropped_queue_full_bytes: self.dropped_queue_full_bytes,
        }
    }
}

/// Pages waiting for the writer thread at most; beyond, offers are
/// dropped (counted): 16 MiB of 64 KiB pages.
const QUEUE_PAGES: usize = 256;

/// How much lower the writer thread's CPU priority is than the node's
/// (nice steps). Flash writes are background work with a queue in front:
/// on a busy machine the threads serving reads should run first, or the
/// writer's copying and checksumming lengthens their tail. Block-layer IO
/// priority is not used: it acts only under the BFQ scheduler.
pub const WRITER_NICE_INCREMENT: i32 = 10;

/// Lowers the calling thread's CPU priority by [`WRITER_NICE_INCREMENT`]
/// (at most to 19). On Linux `setpriority` on a thread id applies to that
/// thread alone. Best effort: a refusal leaves the priority as it was.
fn lower_this_thread_priority() {
    // SAFETY: gettid, getpriority and setpriority take and return plain integers.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        let lowered = (current + WRITER_NICE_INCREMENT).min(19);
        if libc::setpriority(libc::PRIO_PROCESS, tid, lowered) != 0 {
            tracing::debug!("flash writer keeps nice {current}: {}", std::io::Error::last_os_error());
        }
    }
}

/// What the writer thread is asked to do, in order.
enum Job {
    Write {
        key: PageKey,
        data: Bytes,
        why: Admission,
        now_ms: u64,
    },
    /// Forget a chunk's pages again, after any of its writes queued earlier.
    Remove(dingo_types::ChunkRef),
    /// Acknowledge once every earlier job is done.
    #[cfg(test)]
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// The tier and its file, shared by readers and the writer thread.
struct Shared {
    tier: Mutex<FlashTier<PageKey, PageInfo, ZonedMedia>>,
    file: DirectFile,
    zone_bytes: u64,
    page_bytes: u64,
    checksum_misses: AtomicU64,
    write_errors: AtomicU64,
    dropped_queue_full_bytes: AtomicU64,
    /// Pages queued for the writer, served from memory until written (a
    /// reader of a page just pushed out of DRAM must not go to disk
    /// because the write is still queued); `true`: pinned overflow.
    pending: Mutex<BTreeMap<PageKey, (Bytes, bool)>>,
}

/// A node's flash tier. Writes go through one writer thread, so a read
/// that pushes pages out of DRAM does not wait for their flash writes.
pub struct NodeFlash {
    shared: Arc<Shared>,
    queue: Option<SyncSender<Job>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl NodeFlash {
    /// Creates the tier, discarding whatever the file held.
    pub fn open(settings: &FlashSettings, page_bytes: u64) -> Result<NodeFlash, StoreError> {
        let invalid = |m: String| StoreError::Invalid(format!("[node.flash]: {m}"));
        if settings.zone_bytes == 0 || !settings.zone_bytes.is_multiple_of(page_bytes) {
            return Err(invalid(format!("zone of {} bytes is not a multiple of {page_bytes}", settings.zone_bytes)));
        }
        let zone_pages = u32::try_from(settings.zone_bytes / page_bytes)
            .map_err(|_| invalid(format!("zone of {} bytes is too large", settings.zone_bytes)))?;
        let config = TierConfig {
            page_bytes,
            zone_pages,
            zones: settings.zones,
            max_active_zones: settings.max_active_zones,
            pin_bucket_ms: settings.pin_bucket_ms,
            write_budget_bytes_per_day: settings.write_budget_bytes_per_day,
            // An hour of budget in a burst.
            write_burst_bytes: settings.write_budget_bytes_per_day / 24,
        };
        let media = ZonedMedia::new(config.zones, config.device_pages_per_zone(), config.max_active_zones);
        let tier = FlashTier::new(config, media).map_err(invalid)?;
        match std::fs::remove_file(&settings.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(StoreError::io(settings.path.display())(e));
            }
            _ => {}
        }
        let file = DirectFile::create_new(&settings.path).map_err(StoreError::io(settings.path.display()))?;
        let shared = Arc::new(Shared {
            tier: Mutex::new(tier),
            file,
            zone_bytes: settings.zone_bytes,
            page_bytes,
            checksum_misses: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            dropped_queue_full_bytes: AtomicU64::new(0),
            pending: Mutex::new(BTreeMap::new()),
        });
        let (queue, jobs) = std::sync::mpsc::sync_channel(QUEUE_PAGES);
        let writer = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("flash-writer".into())
                .spawn(move || {
                    lower_this_thread_priority();
                    shared.serve(jobs)
                })
                .map_err(StoreError::io("cannot start the flash writer thread"))?
        };
        Ok(NodeFlash { shared, queue: Some(queue), writer: Some(writer) })
    }

    /// Offers a page leaving DRAM: queued for the writer thread, or
    /// dropped (counted) if the writer is that far behind.
    pub fn offer(&self, key: PageKey, data: &Bytes, why: Admission, now_ms: u64) {
        let Some(queue) = &self.queue else { return };
        let pinned = matches!(why, Admission::PinnedOverflow { .. });
        // Visible before the writer can take it, so its removal follows.
        relock(&self.shared.pending).insert(key, (data.clone(), pinned));
        let job = Job::Write { key, data: data.clone(), why, now_ms };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue.try_send(job) {
            relock(&self.shared.pending).remove(&key);
            self.shared.dropped_queue_full_bytes.fetch_add(data.len() as u64, Relaxed);
        }
    }

    /// The page, if the tier has it intact. `for_scrubbing`: only pages
    /// written as pinned overflow qualify (see [`PageInfo::pinned`]).
    pub fn get(&self, key: PageKey, for_scrubbing: bool, now_ms: u64) -> Option<Bytes> {
        self.shared.get(key, for_scrubbing, now_ms)
    }

    /// Forgets a chunk's pages (deleted, or unpinned): at once, and again
    /// after any of its writes already queued.
    pub fn remove_chunk(&self, chunk: dingo_types::ChunkRef) {
        self.shared.remove_chunk(chunk);
        if let Some(queue) = &self.queue {
            let _ = queue.send(Job::Remove(chunk));
        }
    }

    /// Waits until every page offered so far is written (or refused).
    #[cfg(test)]
    pub fn flush(&self) {
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if let Some(queue) = &self.queue
            && queue.send(Job::Flush(done)).is_ok()
        {
            let _ = wait.recv();
        }
    }

    pub fn stats(&self) -> FlashStats {
        let sh = &self.shared;
        let tier = relock(&sh.tier);
        let config = tier.config();
        FlashStats {
            tier: tier.stats(),
            host_write_bytes: tier.device_counters().host_write_bytes,
            device_write_bytes: tier.device_counters().nand_write_bytes,
            checksum_misses: sh.checksum_misses.load(Relaxed),
            write_errors: sh.write_errors.load(Relaxed),
            dropped_queue_full_bytes: sh.dropped_queue_full_bytes.load(Relaxed),
            write_budget_bytes_per_day: config.write_budget_bytes_per_day,
            max_active_zones: config.max_active_zones,
        }
    }
}

impl Drop for NodeFlash {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has drained it.
        self.queue = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Shared {
    /// The writer thread: carries out jobs until the queue closes.
    fn serve(&self, jobs: Receiver<Job>) {
        for job in jobs {
            match job {
                Job::Write { key, data, why, now_ms } => {
                    self.write(key, &data, why, now_ms);
                    let mut pending = relock(&self.pending);
                    // Only this offer's entry: the page may have been offered again since.
                    if pending.get(&key).is_some_and(|(queued, _)| queued.as_ptr() == data.as_ptr()) {
                        pending.remove(&key);
                    }
                }
                Job::Remove(chunk) => self.remove_chunk(chunk),
                #[cfg(test)]
                Job::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    }

    fn offset(&self, at: Location) -> u64 {
        u64::from(at.zone) * self.zone_bytes + at.offset_bytes
    }

    fn write(&self, key: PageKey, data: &Bytes, why: Admission, now_ms: u64) {
        let Ok(len) = u32::try_from(data.len()) else { return };
        if u64::from(len) > self.page_bytes {
            return;
        }
        let info = PageInfo { len, crc: crc32c::crc32c(data), pinned: matches!(why, Admission::PinnedOverflow { .. }) };
        let at = match relock(&self.tier).admit(key, info, why, now_ms) {
            Admitted::Written(at) => at,
            Admitted::AlreadyCached(_) | Admitted::OverBudget | Admitted::NoSpace => return,
        };
        let mut buf = AlignedBuf::zeroed(align_up(data.len() as u64) as usize);
        buf[..data.len()].copy_from_slice(data);
        if let Err(e) = self.file.write_all_at(&buf, self.offset(at)) {
            tracing::warn!("flash tier write failed: {e}");
            relock(&self.tier).remove_range(key..=key);
            self.write_errors.fetch_add(1, Relaxed);
        }
    }

    fn get(&self, key: PageKey, for_scrubbing: bool, now_ms: u64) -> Option<Bytes> {
        if let Some((data, pinned)) = relock(&self.pending).get(&key)
            && (*pinned || !for_scrubbing)
        {
            return Some(data.clone());
        }
        let (at, info) = relock(&self.tier).lookup(&key, now_ms)?;
        if for_scrubbing && !info.pinned {
            return None;
        }
        let mut buf = AlignedBuf::zeroed(align_up(u64::from(info.len)) as usize);
        if self.file.read_exact_at(&mut buf, self.offset(at)).is_err() {
            return None;
        }
        let data = &buf[..info.len as usize];
        if crc32c::crc32c(data) != info.crc {
            self.checksum_misses.fetch_add(1, Relaxed);
            return None;
        }
        Some(Bytes::copy_from_slice(data))
    }

    fn remove_chunk(&self, chunk: dingo_types::ChunkRef) {
        let range = (chunk, 0)..=(chunk, u64::MAX);
        relock(&self.pending).retain(|k, _| !range.contains(k));
        relock(&self.tier).remove_range(range);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dingo_types::{BlockId, ChunkRef};

    const PAGE: u64 = 64 * 1024;

    fn settings(dir: &std::path::Path) -> FlashSettings {
        FlashSettings {
            path: dir.join("flash.img"),
            zones: 64,
            zone_bytes: 16 * PAGE,
            max_active_zones: 4,
            pin_bucket_ms: 1_000,
            write_budget_bytes_per_day: 1 << 40,
        }
    }

    /// Nice value of a thread of this process, from /proc.
    fn nice_of(tid: &str) -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        // Fields after the parenthesised name; nice is field 19 of the whole line.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    }

    /// The writer thread runs `WRITER_NICE_INCREMENT` nice steps below the
    /// thread that opened the tier, so read-serving threads run first.
    #[test]
    fn the_writer_thread_runs_at_a_lower_cpu_priority() {
        let dir = tempfile::tempdir().unwrap();
        let flash = NodeFlash::open(&settings(dir.path()), PAGE).unwrap();
        flash.flush();
        // SAFETY: gettid takes nothing and returns the caller's thread id.
        let tid = unsafe { libc::gettid() };
        let own = nice_of(&tid.to_string());
        let writers: Vec<i32> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|t| t.unwrap().file_name().into_string().unwrap())
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).is_ok_and(|c| c.trim() == "flash-writer")
            })
            .map(|tid| nice_of(&tid))
            .collect();
        // Other tests' writers may be just starting: ours, flushed, is lowered.
        let want = (own + WRITER_NICE_INCREMENT).min(19);
        assert!(writers.contains(&want), "writer nice values {writers:?}, want {want}");
    }

    #[test]
    fn offers_beyond_a_stalled_writer_are_dropped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let flash = NodeFlash::open(&settings(dir.path()), PAGE).unwrap();
        let page = Bytes::from(vec![5u8; 1000]);
        let key = |s: u64| (ChunkRef { block: BlockId(1), copy: 0 }, s);
        let offered = QUEUE_PAGES as u64 + 20;
        {
            // The writer stalls on the tier's lock: at most the queue and
            // the one job in its hands wait, the rest are dropped.
            let _stall = relock(&flash.shared.tier);
            for s in 0..offered {
                flash.offer(key(s), &page, Admission::Evicted, 0);
            }
        }
        flash.flush();
        let stats = flash.stats();
        let dropped = stats.dropped_queue_full_bytes / 1000;
        let written = stats.tier.evicted_written_bytes / PAGE;
        assert!(dropped >= 19, "{dropped} pages dropped");
        assert_eq!(written + dropped, offered, "every offer written or counted");
        assert_eq!(&flash.get(key(0), false, 1).unwrap()[..], &page[..]);
    }

    #[test]
    fn a_queued_page_is_served_before_it_is_written_and_only_pinned_ones_to_scrubbing() {
        let dir = tempfile::tempdir().unwrap();
        let flash = NodeFlash::open(&settings(dir.path()), PAGE).unwrap();
        let key = |s: u64| (ChunkRef { block: BlockId(2), copy: 0 }, s);
        let (evicted, pinned) = (Bytes::from(vec![1u8; 500]), Bytes::from(vec![2u8; 600]));
        {
            // The writer stalls on the tier's lock, so both pages stay queued.
            let _stall = relock(&flash.shared.tier);
            flash.offer(key(0), &evicted, Admission::Evicted, 0);
            flash.offer(key(1), &pinned, Admission::PinnedOverflow { until_ms: 5_000 }, 0);
            assert_eq!(flash.get(key(0), false, 1).unwrap(), evicted);
            assert_eq!(flash.get(key(1), true, 1).unwrap(), pinned);
            assert_eq!(relock(&flash.shared.pending).len(), 2);
        }
        flash.flush();
        assert!(relock(&flash.shared.pending).is_empty(), "written pages leave the queue's map");
        assert!(flash.get(key(0), true, 2).is_none(), "an evicted page proves nothing to scrubbing");
        assert_eq!(flash.get(key(1), true, 2).unwrap(), pinned);
        flash.remove_chunk(key(0).0);
        assert!(flash.get(key(1), false, 2).is_none());
    }
}
