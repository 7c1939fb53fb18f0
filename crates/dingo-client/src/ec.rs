//! Reed-Solomon striping of one write unit.
//!
//! A stripe of `len` bytes is cut into `k` data shards of `shard_len` bytes
//! (`ceil(len / k)` rounded up to even, as the codec needs); data member `i`
//! stores only its real bytes `[i·shard_len, min((i+1)·shard_len, len))`, so
//! trailing members may be short or empty, and are zero-padded back to
//! `shard_len` for coding. Parity members store `shard_len` bytes each.

use thiserror::Error;

#[derive(Debug, Error)]
#[error("erasure coding failed: {0}")]
pub struct EcError(String);

/// Shard length for a stripe of `len` bytes over `k` data members.
pub fn shard_len(len: usize, k: usize) -> usize {
    let s = len.div_ceil(k).max(2);
    s + s % 2
}

/// The byte range of data member `i` within the stripe.
pub fn member_range(len: usize, k: usize, i: usize) -> std::ops::Range<usize> {
    let s = shard_len(len, k);
    (i * s).min(len)..((i + 1) * s).min(len)
}

fn padded(data: &[u8], len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(data);
    v.resize(len, 0);
    v
}

/// Parity shards of a stripe.
pub fn encode(stripe: &[u8], k: usize, m: usize) -> Result<Vec<Vec<u8>>, EcError> {
    let s = shard_len(stripe.len(), k);
    let shards: Vec<Vec<u8>> = (0..k).map(|i| padded(&stripe[member_range(stripe.len(), k, i)], s)).collect();
    reed_solomon_simd::encode(k, m, &shards).map_err(|e| EcError(e.to_string()))
}

/// Rebuilds data member `want` from any `k` members. `members[j]` is member
/// `j` (data `0..k`, parity `k..k+m`) as stored, or `None` if unavailable.
/// Returns the member's stored bytes (`member_len` of them).
pub fn reconstruct(
    members: &[Option<&[u8]>],
    k: usize,
    m: usize,
    shard: usize,
    want: usize,
    member_len: usize,
) -> Result<Vec<u8>, EcError> {
    if let Some(Some(have)) = members.get(want) {
        return Ok(have.to_vec());
    }
    let original = (0..k).filter_map(|i| members[i].map(|d| (i, padded(d, shard))));
    let recovery = (0..m).filter_map(|j| members[k + j].map(|d| (j, d.to_vec())));
    let mut restored = reed_solomon_simd::decode(k, m, original, recovery).map_err(|e| EcError(e.to_string()))?;
    let mut out = restored.remove(&want).ok_or_else(|| EcError(format!("member {want} was not restored")))?;
    out.truncate(member_len);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_k_members_rebuild_any_data_member() {
        let (k, m) = (4, 2);
        for len in [1, 7, 1000, 4096 + 3] {
            let stripe: Vec<u8> = (0..len).map(|i| (i * 31 % 256) as u8).collect();
            let parity = encode(&stripe, k, m).unwrap();
            let s = shard_len(len, k);
            let mut members: Vec<&[u8]> = (0..k).map(|i| &stripe[member_range(len, k, i)]).collect();
            members.extend(parity.iter().map(|p| p.as_slice()));
            for lost in [[0, 1], [1, 4], [3, 5], [2, 3]] {
                let avail: Vec<Option<&[u8]>> =
                    members.iter().enumerate().map(|(j, d)| (!lost.contains(&j)).then_some(*d)).collect();
                for want in lost.iter().copied().filter(|&w| w < k) {
                    let r = member_range(len, k, want);
                    let got = reconstruct(&avail, k, m, s, want, r.len()).unwrap();
                    assert_eq!(got, &stripe[r], "len {len} lost {lost:?}");
                }
            }
        }
    }

    #[test]
    fn too_few_members_is_an_error() {
        let stripe = vec![9u8; 100];
        let parity = encode(&stripe, 3, 1).unwrap();
        let avail = [Some(&stripe[0..34]), None, None, Some(parity[0].as_slice())];
        assert!(reconstruct(&avail, 3, 1, shard_len(100, 3), 1, 34).is_err());
    }
}
