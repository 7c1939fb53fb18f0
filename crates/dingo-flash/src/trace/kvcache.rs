//! Reader for CacheLib's published kvcache traces (Meta's, the family of
//! the trace behind FairyWREN's Fig. 5.12): CSV with a header naming the
//! columns. Two layouts are out there and both are read by column name:
//! `key,op,size,op_count,key_size[,ttl]` (the 2022 releases) and
//! `op_time,key,key_size,op,op_count,size,cache_hits,ttl,...` (2024).
//!
//! A row is `op_count` requests of one key. Reads (`GET`, `GET_LEASE`)
//! become requests of key plus value bytes, as the Twitter reader does;
//! writes (`SET`, `SET_LEASE`) only teach the reader a key's size, since
//! the engines model a look-aside cache that fills on a miss; anything
//! else (`DELETE`, ...) is skipped. A read whose row gives no value size
//! (0) takes the key's last known size, and is skipped if none is known.

use std::collections::HashMap;
use std::io::BufRead;

use crate::object::Object;
use crate::trace::file::{TraceError, key_id};

/// Most requests one row may stand for: a corrupt count must not make the
/// reader allocate without bound.
pub const MAX_OP_COUNT: u32 = 1 << 20;

/// The columns the reader needs, by position in the header.
struct Columns {
    key: usize,
    op: usize,
    size: usize,
    op_count: usize,
    key_size: usize,
}

impl Columns {
    fn from_header(header: &str) -> Result<Columns, TraceError> {
        let names: Vec<&str> = header.split(',').map(str::trim).collect();
        let find = |name: &str| {
            names.iter().position(|n| *n == name).ok_or_else(|| TraceError::Malformed {
                line: 1,
                reason: format!(
                    "the header {header:?} has no column {name:?} (a kvcache trace starts with its header)"
                ),
            })
        };
        Ok(Columns {
            key: find("key")?,
            op: find("op")?,
            size: find("size")?,
            op_count: find("op_count")?,
            key_size: find("key_size")?,
        })
    }

    fn needed(&self) -> usize {
        [self.key, self.op, self.size, self.op_count, self.key_size].into_iter().max().unwrap_or(0) + 1
    }
}

/// Reads up to `limit` requests (all if `None`).
pub fn read_kvcache_csv(reader: impl BufRead, limit: Option<u64>) -> Result<Vec<Object>, TraceError> {
    let mut lines = reader.lines();
    let Some(header) = lines.next().transpose()? else {
        return Ok(Vec::new());
    };
    let columns = Columns::from_header(&header)?;
    let mut sizes: HashMap<u64, u32> = HashMap::new();
    let mut out = Vec::new();
    for (i, line) in lines.enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let number = i as u64 + 2;
        let malformed = |reason: String| TraceError::Malformed { line: number, reason };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() < columns.needed() {
            return Err(malformed(format!("{} fields, the header needs {}", fields.len(), columns.needed())));
        }
        let number_of = |column: usize, what: &str| {
            fields[column].parse::<u32>().map_err(|e| malformed(format!("{what} {:?}: {e}", fields[column])))
        };
        let key = key_id(fields[columns.key]);
        let (value_bytes, key_bytes) = (number_of(columns.size, "size")?, number_of(columns.key_size, "key_size")?);
        let op_count = number_of(columns.op_count, "op_count")?;
        if op_count > MAX_OP_COUNT {
            return Err(malformed(format!("op_count {op_count} is over {MAX_OP_COUNT}")));
        }
        let row_size = if value_bytes == 0 {
            None
        } else {
            let total = value_bytes
                .checked_add(key_bytes)
                .ok_or_else(|| malformed(format!("object of {key_bytes} + {value_bytes} bytes is over 4 GiB")))?;
            Some(total)
        };
        match fields[columns.op] {
            "GET" | "GET_LEASE" => {
                let Some(size_bytes) = row_size.or_else(|| sizes.get(&key).copied()) else {
                    continue;
                };
                sizes.insert(key, size_bytes);
                for _ in 0..op_count {
                    if limit.is_some_and(|l| out.len() as u64 >= l) {
                        return Ok(out);
                    }
                    out.push(Object { key, size_bytes });
                }
            }
            "SET" | "SET_LEASE" => {
                if let Some(size_bytes) = row_size {
                    sizes.insert(key, size_bytes);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_layouts_are_read_by_column_name() {
        let v2022 = "key,op,size,op_count,key_size\n\
                     a,SET,82,1,40\n\
                     a,GET,0,2,40\n\
                     b,GET,169,1,78\n\
                     c,GET,0,1,10\n\
                     b,DELETE,0,1,78\n\
                     b,GET_LEASE,100,1,78\n";
        let trace = read_kvcache_csv(v2022.as_bytes(), None).unwrap();
        let sizes: Vec<u32> = trace.iter().map(|o| o.size_bytes).collect();
        // a's GET takes its SET's size, twice; c's size is unknown: skipped.
        assert_eq!(sizes, [122, 122, 247, 178]);
        assert_eq!(trace[0].key, trace[1].key);
        assert_eq!(trace[2].key, trace[3].key);
        let v2024 = "op_time,key,key_size,op,op_count,size,cache_hits,ttl,usecase,sub_usecase\n\
                     604038471,82131353f9ddc8c6,48,GET,1,87,1,0,366387042,3003229276\n\
                     604038472,82131353f9ddc8c6,48,GET,3,0,1,0,366387042,3003229276\n";
        let trace = read_kvcache_csv(v2024.as_bytes(), None).unwrap();
        assert_eq!(trace.len(), 4);
        assert!(trace.iter().all(|o| o.size_bytes == 135 && o.key == trace[0].key));
        assert_eq!(read_kvcache_csv(v2024.as_bytes(), Some(2)).unwrap().len(), 2);
    }

    #[test]
    fn bad_input_names_its_line_or_column() {
        let no_header = read_kvcache_csv("a,GET,1,1,1\n".as_bytes(), None).unwrap_err();
        assert!(no_header.to_string().contains("no column \"key\""), "{no_header}");
        let short = read_kvcache_csv("key,op,size,op_count,key_size\na,GET,1\n".as_bytes(), None).unwrap_err();
        assert!(short.to_string().starts_with("line 2:"), "{short}");
        let count = read_kvcache_csv("key,op,size,op_count,key_size\n\na,GET,1,99999999,1\n".as_bytes(), None);
        assert!(count.unwrap_err().to_string().starts_with("line 3: op_count"));
        let big = read_kvcache_csv("key,op,size,op_count,key_size\na,GET,4294967295,1,1\n".as_bytes(), None);
        assert!(big.unwrap_err().to_string().contains("over 4 GiB"));
    }

    proptest::proptest! {
        /// The trace is untrusted input: any text is read or refused, never
        /// a panic, and no row yields more than its bounded count.
        #[test]
        fn any_text_is_read_or_refused(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-c],(GET|SET|GET_LEASE|DELETE),[0-9]{1,11},[0-9]{1,3},[0-9]{1,3}",
                    ".{0,40}",
                ],
                0..8,
            ),
        ) {
            let text = format!("key,op,size,op_count,key_size\n{}", lines.join("\n"));
            if let Ok(trace) = read_kvcache_csv(text.as_bytes(), None) {
                proptest::prop_assert!(trace.len() as u64 <= lines.len() as u64 * 999);
                proptest::prop_assert!(trace.iter().all(|o| o.size_bytes >= 1));
            }
        }
    }
}
