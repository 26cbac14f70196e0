//! What answering a review costs in memory, estimated from its body before it is decoded.
//!
//! A body's size says little about its decoded size: every JSON value becomes a
//! `serde_json::Value` (32 bytes, plus its slot in a list or map), so a body of `[0,0,0,…]`
//! grows about 16 times when parsed, and answering it copies the tree again (the object as a
//! `Value`, then its defaulted or typed copy). How much [`crate::admit::review`] grew a process
//! answering one MaasHost review of a 4 MiB body (VmHWM, the body already in memory), against
//! [`decode_cost`]:
//!
//! | 4 MiB body of | nodes | validate | mutate | estimate |
//! |---|---|---|---|---|
//! | `[0,0,…]` | 2.0 M | 124 MiB | 185 MiB | 473 MiB |
//! | `[{},{},…]` | 1.3 M | 81 MiB | 121 MiB | 312 MiB |
//! | a map of 120 k short string pairs | 240 k | 36 MiB | 56 MiB | 71 MiB |
//! | one 4 MiB string | 3 | 6 MiB | 9 MiB | 15 MiB |
//!
//! MaasCluster and MaasIPPool reviews grew the same. So the estimate counts the nodes (values
//! and map keys) in a pass that allocates nothing, and charges [`COPIES`] trees of
//! [`NODE_BYTES`] per node, plus the body: above every measurement, and close to it for
//! realistic objects (the map), which are what the budget must let through.

use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Copies of the decoded tree alive at once while a review is answered (the review, the object
/// as a `Value`, its defaulted or typed copy), besides the body itself.
const COPIES: usize = 3;

/// Bytes one decoded node costs per copy: a 32-byte `Value` with its share of the list or map
/// that holds it (BTreeMap nodes, growth slack) and of its strings, rounded up from the
/// measurements above.
const NODE_BYTES: usize = 80;

/// Estimated peak memory of answering the review in `body`: the body, plus [`COPIES`] of its
/// decoded tree. An error when the body is not one JSON document (the review would fail to
/// decode anyway).
pub fn decode_cost(body: &[u8]) -> Result<usize, serde_json::Error> {
    let mut nodes = 0usize;
    // serde_json's recursion limit (128 levels) applies to this pass as to the real decode.
    let mut de = serde_json::Deserializer::from_slice(body);
    Count(&mut nodes).deserialize(&mut de)?;
    de.end()?;
    Ok(estimate(body.len(), nodes))
}

fn estimate(len: usize, nodes: usize) -> usize {
    nodes
        .saturating_mul(NODE_BYTES)
        .saturating_add(len)
        .saturating_mul(COPIES)
        .saturating_add(len)
}

/// Counts every value and map key of a document without keeping any.
struct Count<'a>(&'a mut usize);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        *self.0 += 1;
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        *self.0 += 1;
        while seq.next_element_seed(Count(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        *self.0 += 1;
        while map.next_key_seed(Count(&mut *self.0))?.is_some() {
            map.next_value_seed(Count(&mut *self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn nodes(json: &str) -> usize {
        let mut n = 0;
        let mut de = serde_json::Deserializer::from_str(json);
        Count(&mut n).deserialize(&mut de).unwrap();
        n
    }

    #[test]
    fn every_value_and_key_is_a_node() {
        assert_eq!(nodes("0"), 1);
        assert_eq!(nodes("[0,0,0]"), 4);
        assert_eq!(nodes(r#"{"a":"b","c":[true,null,1.5,-1]}"#), 9);
        assert_eq!(nodes(r#"{"a":{"b":{}}}"#), 5);
    }

    #[test]
    fn a_list_of_zeros_costs_far_more_than_its_length() {
        let zeros = format!("[{}0]", "0,".repeat(100_000));
        let cost = decode_cost(zeros.as_bytes()).unwrap();
        assert!(cost > 90 * zeros.len(), "{cost}");
        let text = format!("\"{}\"", "a".repeat(200_000));
        assert_eq!(
            decode_cost(text.as_bytes()).unwrap(),
            4 * text.len() + COPIES * NODE_BYTES
        );
    }

    #[test]
    fn malformed_or_trailing_input_is_an_error() {
        assert!(decode_cost(b"{").is_err());
        assert!(decode_cost(b"{} {}").is_err());
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(decode_cost(deep.as_bytes()).is_err());
    }
}
