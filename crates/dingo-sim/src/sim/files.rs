//! How the world picks files: oldest first for transcoding and the owners'
//! deletions ([`FileCursor`]), at random from the object/KV-store subset
//! for garbage collection ([`ObjectFiles`]).

use crate::model::ClusterModel;
use crate::rng::SplitMix64;
use fixedbitset::FixedBitSet;
use serde::{Deserialize, Serialize};

/// Oldest-first walk over the files of one scheme.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct FileCursor {
    next: u64,
}

impl FileCursor {
    /// Up to `n` live files of `scheme` at or after the cursor, oldest
    /// first; the cursor moves past every file it looked at.
    pub fn take(&mut self, model: &ClusterModel, scheme: usize, n: u64) -> Vec<u64> {
        let mut out = Vec::new();
        if n == 0 {
            return out;
        }
        for range in model.scheme_file_ranges(scheme) {
            for f in range.start.max(self.next)..range.end {
                self.next = f + 1;
                if model.file_live(f) {
                    out.push(f);
                    if out.len() as u64 == n {
                        return out;
                    }
                }
            }
        }
        out
    }
}

/// The files designated as part of an object/KV store: the only files
/// garbage collection rewrites (paper appendix A.2). A rewrite's new file
/// joins the subset in place of the old one, so the subset keeps its size
/// while its files churn.
///
/// Invariant: `live` is the number of members not yet deleted; `list`
/// holds every live member (and possibly dead ones, dropped when a pick
/// finds them).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ObjectFiles {
    list: Vec<u64>,
    #[serde(with = "dingo_planner::bits_serde")]
    member: FixedBitSet,
    live: u64,
    /// Members the subset should hold; new files join while it is short.
    target: u64,
}

impl ObjectFiles {
    /// Designates each live file of `model` with probability `fraction`.
    pub fn new(model: &ClusterModel, fraction: f64, rng: &mut SplitMix64) -> ObjectFiles {
        let mut files = ObjectFiles::default();
        for f in 0..model.file_count() {
            if model.file_live(f) && rng.unit() < fraction {
                files.insert(f);
            }
        }
        files.target = files.live;
        files
    }

    pub fn contains(&self, file: u64) -> bool {
        usize::try_from(file).is_ok_and(|i| self.member.contains(i))
    }

    /// Members missing from the target size (lost to owners' deletions).
    pub fn deficit(&self) -> u64 {
        self.target.saturating_sub(self.live)
    }

    /// Makes `file`, a new live file, a member.
    pub fn insert(&mut self, file: u64) {
        let i = usize::try_from(file).expect("file ids fit in memory");
        if !self.member.contains(i) {
            self.member.grow_and_insert(i);
            self.list.push(file);
            self.live += 1;
        }
    }

    /// Notes that `file`, a live file about to be deleted, goes.
    pub fn forget(&mut self, file: u64) {
        if self.contains(file) {
            self.member.set(file as usize, false);
            self.live -= 1;
        }
    }

    /// `n` distinct live members at random (fewer if the subset is
    /// smaller), sorted. Members picked by earlier events may be picked
    /// again: garbage collection claims nothing.
    pub fn pick(&mut self, model: &ClusterModel, n: u64, rng: &mut SplitMix64) -> Vec<u64> {
        let n = n.min(self.live);
        let mut picked = Vec::with_capacity(n as usize);
        let mut taken = FixedBitSet::with_capacity(self.list.len());
        while (picked.len() as u64) < n && !self.list.is_empty() {
            let i = rng.below(self.list.len() as u64) as usize;
            let f = self.list[i];
            if !self.contains(f) || !model.file_live(f) {
                // Dead: drop it from the list. `taken` indexes move with
                // the swap, so keep the moved entry's mark.
                let last = self.list.len() - 1;
                let moved_taken = taken.contains(last);
                self.list.swap_remove(i);
                taken.set(i, moved_taken);
                taken.set(last, false);
                continue;
            }
            if !taken.put(i) {
                picked.push(f);
            }
        }
        picked.sort_unstable();
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;

    fn model() -> ClusterModel {
        let spec = ModelSpec { raw_capacity: 2_000_000_000_000_000, disks_per_node: 2, ..ModelSpec::default() };
        ClusterModel::new(spec).unwrap()
    }

    #[test]
    fn the_subset_has_its_fraction_and_picks_are_distinct_live_members() {
        let mut m = model();
        let mut rng = SplitMix64::new(7);
        let mut objects = ObjectFiles::new(&m, 0.2, &mut rng);
        let share = objects.live as f64 / m.file_count() as f64;
        assert!((share - 0.2).abs() < 0.03, "{share}");
        let first = objects.pick(&m, 50, &mut rng);
        assert_eq!(first.len(), 50);
        assert!(first.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(first.iter().all(|&f| objects.contains(f)));
        // Delete half of them: later picks never return them.
        let gone: Vec<u64> = first.iter().copied().step_by(2).collect();
        for &f in &gone {
            objects.forget(f);
        }
        m.delete_files(&gone);
        assert_eq!(objects.deficit(), gone.len() as u64);
        let all = objects.pick(&m, u64::MAX, &mut rng);
        assert_eq!(all.len() as u64, objects.live);
        assert!(all.iter().all(|f| !gone.contains(f) && m.file_live(*f)));
    }

    #[test]
    fn the_cursor_walks_oldest_first_and_skips_dead_files() {
        let mut m = model();
        let mut cursor = FileCursor::default();
        let first = cursor.take(&m, 0, 3);
        let next: Vec<u64> = m.scheme_file_ranges(0).flatten().skip(3).take(2).collect();
        m.delete_files(&next[..1]);
        assert_eq!(cursor.take(&m, 0, 1), vec![next[1]]);
        assert!(first.windows(2).all(|w| w[0] < w[1]));
    }
}
