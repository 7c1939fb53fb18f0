//! The object-store area the demo's garbage collection works on: data
//! files of records (the `dingo_tasks::objects` format), a share of whose
//! objects are deleted, named in one tombstone file.

use crate::PREFIX;
use bytes::Bytes;
use dingo_tasks::objects::{self, RECORD_HEADER, Record, RecordError};

/// The area's root in the namespace.
pub fn area() -> String {
    format!("{PREFIX}obj/")
}

/// Bytes of one object's value: a data file holds a few dozen objects.
const VALUE_BYTES: usize = 250_000;

/// The records of data file `i` (about `file_bytes` of them), each key
/// unique in the area, from `seed`.
fn records(seed: u64, i: u32, file_bytes: u64) -> Vec<Record> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (3 << 40) ^ u64::from(i));
    let key = |j: usize| Bytes::from(format!("obj-{i:05}-{j:04}"));
    let per_record = RECORD_HEADER + key(0).len() + VALUE_BYTES;
    let n = (file_bytes as usize / per_record).max(1);
    (0..n)
        .map(|j| {
            let mut value = vec![0u8; VALUE_BYTES];
            rng.fill(&mut value);
            Record { key: key(j), value: value.into() }
        })
        .collect()
}

/// The area's files for `files` data files: (path, bytes) of each data
/// file, then the tombstone file naming a `dead_fraction` of all keys,
/// chosen from `seed`.
pub fn files(seed: u64, files: u32, file_bytes: u64, dead_fraction: f64) -> Result<Vec<(String, Bytes)>, RecordError> {
    let mut rng = fastrand::Rng::with_seed(seed ^ (4 << 40));
    let mut out = Vec::with_capacity(files as usize + 1);
    let mut tombstones = Vec::new();
    for i in 0..files {
        let rs = records(seed, i, file_bytes);
        tombstones.extend(
            rs.iter().filter(|_| rng.f64() < dead_fraction).map(|r| Record { key: r.key.clone(), value: Bytes::new() }),
        );
        out.push((format!("{}{i:05}", objects::data_prefix(&area())), objects::encode_all(&rs)?));
    }
    out.push((format!("{}t-0", objects::tombstone_prefix(&area())), objects::encode_all(&tombstones)?));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_area_parses_and_about_the_dead_share_goes() {
        let fs = files(7, 4, 2_000_000, 0.3).unwrap();
        assert_eq!(fs.len(), 5);
        let mut dead = objects::Tombstones::default();
        dead.add_file(&fs[4].1).unwrap();
        let (mut live, mut gone) = (0, 0);
        for (path, data) in &fs[..4] {
            assert!(path.starts_with(&objects::data_prefix(&area())), "{path}");
            assert!(data.len() as u64 <= 2_000_000 && data.len() > 1_500_000, "{}", data.len());
            let c = objects::collect(data, &dead).unwrap();
            (live, gone) = (live + c.live_records, gone + c.dead_records);
        }
        assert_eq!(gone as usize, dead.len(), "every tombstone names a record of the area");
        let share = gone as f64 / (live + gone) as f64;
        assert!((0.1..0.5).contains(&share), "dead share {share}");
        assert_eq!(files(7, 4, 2_000_000, 0.3).unwrap(), fs, "the same seed gives the same area");
    }
}
