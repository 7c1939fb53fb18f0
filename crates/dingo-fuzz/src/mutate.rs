//! Byte-level mutations of valid inputs. Decoders refuse most random bytes
//! at their first check; inputs one or a few mutations away from a valid
//! one reach the deeper checks (a valid frame with one bad length, a
//! record with a wrong enum value), where the bugs are.

/// Integers that sit on boundaries, written over bytes as little-endian
/// values or varints.
const INTERESTING: [u64; 12] =
    [0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fff_ffff, 0xffff_ffff, 1 << 40, (1 << 40) + 1, i64::MAX as u64, u64::MAX];

/// Text tokens for the text formats (TOML, command-line values): numbers
/// at the edges of the integer and float ranges, units, separators.
const TOKENS: [&str; 20] = [
    "0",
    "-1",
    "1e300",
    "-1e300",
    "nan",
    "inf",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "4294967296",
    "0.0000001",
    "1.5",
    "EB",
    "PiB",
    "ms",
    "d",
    "unlimited",
    "+",
    "\"\"",
    " = ",
];

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// Applies one random mutation to `data`; `other` is another input to
/// splice from.
pub fn mutate_once(data: &mut Vec<u8>, other: &[u8], rng: &mut fastrand::Rng) {
    let at = |rng: &mut fastrand::Rng, len: usize| if len == 0 { 0 } else { rng.usize(..len) };
    match rng.u8(..11) {
        0 if !data.is_empty() => {
            let i = at(rng, data.len());
            data[i] ^= 1 << rng.u8(..8);
        }
        1 if !data.is_empty() => {
            let i = at(rng, data.len());
            data[i] = rng.u8(..);
        }
        2 => {
            let i = at(rng, data.len() + 1);
            let n = rng.usize(1..=16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            data.splice(i..i, bytes);
        }
        3 if !data.is_empty() => {
            let i = at(rng, data.len());
            let n = rng.usize(1..=16).min(data.len() - i);
            data.drain(i..i + n);
        }
        4 => data.truncate(at(rng, data.len() + 1)),
        5 if !other.is_empty() => {
            // Splice a piece of another input in place of a piece of this.
            let (a, b) = (at(rng, other.len()), at(rng, other.len()));
            let piece = &other[a.min(b)..a.max(b)];
            let i = at(rng, data.len() + 1);
            let end = (i + rng.usize(..=piece.len().max(1))).min(data.len());
            data.splice(i..end, piece.iter().copied());
        }
        6 if !data.is_empty() => {
            let v = INTERESTING[rng.usize(..INTERESTING.len())];
            let bytes = if rng.bool() { v.to_le_bytes()[..rng.usize(1..=8)].to_vec() } else { varint(v) };
            let i = at(rng, data.len());
            let end = (i + bytes.len()).min(data.len());
            data.splice(i..end, bytes);
        }
        7 if data.len() > 1 => {
            // Duplicate a piece: repeated fields, repeated table keys.
            let (a, b) = (at(rng, data.len()), at(rng, data.len()));
            let piece = data[a.min(b)..=a.max(b)].to_vec();
            let i = at(rng, data.len() + 1);
            data.splice(i..i, piece);
        }
        8 if !data.is_empty() => {
            let i = at(rng, data.len());
            data[i] = data[i].wrapping_add(rng.u8(1..=8)).wrapping_sub(4);
        }
        9 => {
            let token = TOKENS[rng.usize(..TOKENS.len())].as_bytes();
            let i = at(rng, data.len() + 1);
            // Replace a run of digits there, if any, so a number becomes another.
            let end = (i..data.len()).find(|&j| !data[j].is_ascii_digit() && data[j] != b'.').unwrap_or(data.len());
            data.splice(i..end, token.iter().copied());
        }
        _ => {
            let i = at(rng, data.len() + 1);
            data.insert(i, *b"\0\x01\x7f\x80\xff=\"[]{}\n.:-+"[..].get(rng.usize(..14)).unwrap_or(&0));
        }
    }
}

/// An input for one execution: a seed with one to eight mutations, or
/// (one time in eight) random bytes.
pub fn input(seeds: &[Vec<u8>], rng: &mut fastrand::Rng) -> Vec<u8> {
    if seeds.is_empty() || rng.u8(..8) == 0 {
        let n = rng.usize(..256);
        return (0..n).map(|_| rng.u8(..)).collect();
    }
    let mut data = seeds[rng.usize(..seeds.len())].clone();
    let other = &seeds[rng.usize(..seeds.len())];
    for _ in 0..rng.usize(1..=8) {
        mutate_once(&mut data, other, rng);
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_stay_near_the_seed_and_vary() {
        let seeds = vec![b"hello, world: a valid input".to_vec()];
        let mut rng = fastrand::Rng::with_seed(1);
        let inputs: Vec<Vec<u8>> = (0..1000).map(|_| input(&seeds, &mut rng)).collect();
        let distinct: std::collections::HashSet<&Vec<u8>> = inputs.iter().collect();
        assert!(distinct.len() > 900, "{} distinct of 1000", distinct.len());
        assert!(inputs.iter().any(|i| i.len() < seeds[0].len()));
        assert!(inputs.iter().any(|i| i.len() > seeds[0].len()));
        assert!(!inputs.contains(&seeds[0]) || distinct.len() > 900);
        assert_eq!(varint(300), vec![0xac, 0x02]);
    }
}
