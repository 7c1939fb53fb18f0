//! Reader for the public Twitter cache traces (`twitter/cache-trace`): CSV
//! lines `timestamp,anonymized key,key size,value size,client id,operation,TTL`.
//!
//! Reads become requests; the object's size is key plus value. Writes and
//! deletes are skipped: the engines model a look-aside cache that fills on
//! a miss. Keys are hashed to 64-bit ids.

use std::io::BufRead;

use crate::object::Object;
use crate::trace::file::{TraceError, key_id};

/// Reads up to `limit` requests (all if `None`).
pub fn read_twitter_csv(reader: impl BufRead, limit: Option<u64>) -> Result<Vec<Object>, TraceError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        if limit.is_some_and(|l| out.len() as u64 >= l) {
            break;
        }
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let number = i as u64 + 1;
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < 6 {
            let reason = format!("{} fields, want at least 6", fields.len());
            return Err(TraceError::Malformed { line: number, reason });
        }
        if !matches!(fields[5], "get" | "gets") {
            continue;
        }
        let size = |field: &str| {
            field
                .parse::<u32>()
                .map_err(|e| TraceError::Malformed { line: number, reason: format!("size {field:?}: {e}") })
        };
        // Both sizes are u32 in the trace, but their sum need not be.
        let size_bytes = size(fields[2])?.checked_add(size(fields[3])?).ok_or_else(|| TraceError::Malformed {
            line: number,
            reason: format!("object of {} + {} bytes is over 4 GiB", fields[2], fields[3]),
        })?;
        let size_bytes = size_bytes.max(1);
        out.push(Object { key: key_id(fields[1]), size_bytes });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gets_become_requests_and_the_rest_is_skipped() {
        let csv = "0,q:abc,20,300,1,get,0\n1,q:abc,20,300,1,set,0\n2,q:xyz,10,0,2,gets,0\n\n3,q:abc,20,300,1,get,0\n";
        let trace = read_twitter_csv(csv.as_bytes(), None).unwrap();
        assert_eq!(trace.len(), 3);
        assert_eq!(trace[0], trace[2]);
        assert_eq!(trace[0].size_bytes, 320);
        assert_eq!(trace[1].size_bytes, 10);
        assert_ne!(trace[0].key, trace[1].key);
        assert_eq!(read_twitter_csv(csv.as_bytes(), Some(1)).unwrap().len(), 1);
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let err = read_twitter_csv("0,k,1,2,3,get,0\n1,k,x,2,3,get,0\n".as_bytes(), None).unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
    }

    #[test]
    fn sizes_whose_sum_overflows_are_malformed_not_a_panic() {
        let err = read_twitter_csv("0,k,4294967295,1,3,get,0\n".as_bytes(), None).unwrap_err();
        assert!(err.to_string().contains("over 4 GiB"), "{err}");
    }

    proptest::proptest! {
        /// The trace is untrusted input: any text is read or refused, never
        /// a panic.
        #[test]
        fn any_text_is_read_or_refused(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    "[0-9]{1,3},[a-z:]{0,4},[0-9]{1,11},[0-9]{1,11},[0-9],(get|gets|set),[0-9]",
                    ".{0,40}",
                ],
                0..8,
            ),
        ) {
            let text = lines.join("\n");
            if let Ok(trace) = read_twitter_csv(text.as_bytes(), None) {
                proptest::prop_assert!(trace.len() <= lines.len());
                proptest::prop_assert!(trace.iter().all(|o| o.size_bytes >= 1));
            }
        }
    }
}
