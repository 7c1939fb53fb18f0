//! Serde for a [`FixedBitSet`] field (`#[serde(with = "dingo_planner::bits_serde")]`)
//! as its length and its blocks. fixedbitset's own impl decodes only from
//! a borrowed byte slice, which a reader streaming a multi-GB checkpoint
//! cannot lend.

use fixedbitset::FixedBitSet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub fn serialize<S: Serializer>(bits: &FixedBitSet, serializer: S) -> Result<S::Ok, S::Error> {
    (bits.len(), bits.as_slice()).serialize(serializer)
}

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<FixedBitSet, D::Error> {
    let (len, blocks) = <(usize, Vec<usize>)>::deserialize(deserializer)?;
    if blocks.len() != len.div_ceil(usize::BITS as usize) {
        return Err(serde::de::Error::custom(format!("{} blocks for a bit set of {len} bits", blocks.len())));
    }
    Ok(FixedBitSet::with_capacity_and_blocks(len, blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Holder(#[serde(with = "super")] FixedBitSet);

    #[test]
    fn a_bit_set_round_trips_and_a_wrong_block_count_is_refused() {
        let mut bits = FixedBitSet::with_capacity(130);
        bits.insert_range(3..70);
        bits.insert(129);
        let json = serde_json::to_string(&Holder(bits.clone())).unwrap();
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap().0, bits);
        assert!(serde_json::from_str::<Holder>("[[130,[1,2]]]").is_err());
        assert!(serde_json::from_str::<Holder>("[130,[1,2]]").is_err());
    }
}
