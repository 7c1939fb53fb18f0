//! Reed-Solomon striping of one write unit.
//!
//! A stripe of `len` bytes is cut into `k` data shards of `shard_len` bytes
//! (`ceil(len / k)` rounded up to even, as the codec needs); data member `i`
//! stores only its real bytes `[i·shard_len, min((i+1)·shard_len, len))`, so
//! trailing members may be short or empty, and are zero-padded back to
//! `shard_len` for coding. Parity members store `shard_len` bytes each.

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
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

/// Shards are coded in independent slices of this many bytes (a multiple of
/// 64, the codec's unit), so the codec's working set stays in cache however
/// large the shards are. Decoding slices by [`DECODE_SLICE`].
const SLICE: usize = 32 * 1024;

/// Shards are decoded in slices of this many bytes. Each decode call has a
/// fixed cost (the codec evaluates its error locator over the whole field
/// every time), so decoding needs far larger slices than encoding: one
/// 4 MB member of a 3+2 stripe took 32-48 ms to decode in 32 KiB slices,
/// 13-18 ms in 128 KiB, 9-16 ms in 1 MiB and 21-33 ms in one 4 MiB slice
/// (release build, 2 loaded cores; encoding the whole stripe: 2-3.5 ms).
/// Each 64-byte unit codes on its own, so the slices need not match the
/// encoder's (the tests decode shards longer than one slice).
const DECODE_SLICE: usize = 1 << 20;

/// Bytes `off..off + n` of a member stored as `data`, zero-padded past its end.
fn slice_of<'a>(data: &'a [u8], off: usize, n: usize, pad: &'a mut Vec<u8>) -> &'a [u8] {
    if data.len() >= off + n {
        return &data[off..off + n];
    }
    pad.clear();
    pad.extend_from_slice(data.get(off..).unwrap_or(&[]));
    pad.resize(n, 0);
    pad
}

fn err(e: reed_solomon_simd::Error) -> EcError {
    EcError(e.to_string())
}

/// Parity shards of a stripe.
pub fn encode(stripe: &[u8], k: usize, m: usize) -> Result<Vec<Vec<u8>>, EcError> {
    let s = shard_len(stripe.len(), k);
    let members: Vec<&[u8]> = (0..k).map(|i| &stripe[member_range(stripe.len(), k, i)]).collect();
    // Filled slice by slice, never zeroed first: zeroing would be a needless
    // pass over every parity byte.
    let mut parity: Vec<Vec<u8>> = (0..m).map(|_| Vec::with_capacity(s)).collect();
    let mut enc = ReedSolomonEncoder::new(k, m, SLICE.min(s)).map_err(err)?;
    let mut pad = Vec::new();
    for off in (0..s).step_by(SLICE) {
        let n = SLICE.min(s - off);
        enc.reset(k, m, n).map_err(err)?;
        for d in &members {
            enc.add_original_shard(slice_of(d, off, n, &mut pad)).map_err(err)?;
        }
        let result = enc.encode().map_err(err)?;
        for (p, r) in parity.iter_mut().zip(result.recovery_iter()) {
            p.extend_from_slice(r);
        }
    }
    Ok(parity)
}

/// Restores the missing data members of a stripe from any `k` members.
/// `members[j]` is member `j` (data `0..k`, parity `k..k+m`) as stored, or
/// `None` if unavailable. Returns, per data member, its `shard` bytes
/// (zero-padded past its real end) if it was missing, `None` if present.
fn restore_data(members: &[Option<&[u8]>], k: usize, m: usize, shard: usize) -> Result<Vec<Option<Vec<u8>>>, EcError> {
    let slice = DECODE_SLICE;
    let available = members.iter().filter(|x| x.is_some()).count();
    if available < k {
        return Err(EcError(format!("{available} members available, {k} needed")));
    }
    let mut out: Vec<Option<Vec<u8>>> = members[..k].iter().map(|d| d.is_none().then(|| vec![0u8; shard])).collect();
    if out.iter().all(Option::is_none) {
        return Ok(out);
    }
    let mut dec = ReedSolomonDecoder::new(k, m, slice.min(shard)).map_err(err)?;
    let mut pad = Vec::new();
    for off in (0..shard).step_by(slice) {
        let n = slice.min(shard - off);
        dec.reset(k, m, n).map_err(err)?;
        for (j, d) in members.iter().enumerate() {
            let Some(d) = d else { continue };
            let piece = slice_of(d, off, n, &mut pad);
            if j < k { dec.add_original_shard(j, piece) } else { dec.add_recovery_shard(j - k, piece) }.map_err(err)?;
        }
        let result = dec.decode().map_err(err)?;
        for (i, o) in out.iter_mut().enumerate() {
            if let Some(o) = o {
                let restored =
                    result.restored_original(i).ok_or_else(|| EcError(format!("member {i} was not restored")))?;
                o[off..off + n].copy_from_slice(restored);
            }
        }
    }
    Ok(out)
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
    let mut out = restore_data(members, k, m, shard)?.swap_remove(want).expect("missing member restored");
    out.truncate(member_len);
    Ok(out)
}

/// Rebuilds any member `want` — data or parity — of a stripe from any `k`
/// members (as in [`reconstruct`]); `sizes[j]` is the stored length of
/// member `j`. A parity member is re-encoded from the restored data.
pub fn rebuild(
    members: &[Option<&[u8]>],
    k: usize,
    m: usize,
    sizes: &[usize],
    want: usize,
) -> Result<Vec<u8>, EcError> {
    if members.len() != k + m || sizes.len() != k + m || want >= k + m {
        return Err(EcError(format!("member {want} of a {k}+{m} stripe given {} members", members.len())));
    }
    let shard = sizes[k];
    if want < k {
        return reconstruct(members, k, m, shard, want, sizes[want]);
    }
    if let Some(have) = members[want] {
        return Ok(have.to_vec());
    }
    let restored = restore_data(members, k, m, shard)?;
    let mut stripe = Vec::with_capacity(sizes[..k].iter().sum());
    for (i, r) in restored.iter().enumerate() {
        let d = r.as_deref().or(members[i]).expect("present or restored");
        stripe.extend_from_slice(&d[..sizes[i]]);
    }
    Ok(encode(&stripe, k, m)?.swap_remove(want - k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_k_members_rebuild_any_data_member() {
        let (k, m) = (4, 2);
        for len in [1, 7, 1000, 4096 + 3, 4 * SLICE + 130, 4 * DECODE_SLICE + 4 * 4096 + 130] {
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

    #[test]
    fn any_member_data_or_parity_is_rebuilt_from_any_k() {
        let (k, m) = (3, 2);
        let len = 2 * SLICE + 1001;
        let stripe: Vec<u8> = (0..len).map(|i| (i * 13 % 251) as u8).collect();
        let parity = encode(&stripe, k, m).unwrap();
        let mut members: Vec<&[u8]> = (0..k).map(|i| &stripe[member_range(len, k, i)]).collect();
        members.extend(parity.iter().map(|p| p.as_slice()));
        let sizes: Vec<usize> = members.iter().map(|d| d.len()).collect();
        for want in 0..k + m {
            for other in (0..k + m).filter(|&o| o != want) {
                let avail: Vec<Option<&[u8]>> =
                    members.iter().enumerate().map(|(j, d)| (j != want && j != other).then_some(*d)).collect();
                assert_eq!(rebuild(&avail, k, m, &sizes, want).unwrap(), members[want], "want {want} lost {other}");
            }
        }
        let too_few: Vec<Option<&[u8]>> = members.iter().enumerate().map(|(j, d)| (j < 2).then_some(*d)).collect();
        assert!(rebuild(&too_few, k, m, &sizes, 4).is_err());
    }
}
