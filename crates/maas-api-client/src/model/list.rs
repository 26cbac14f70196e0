//! Lenient decoding of a machine listing: a machine that does not decode is skipped and
//! reported, the others are returned.

use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Machine;
use crate::text::clip;

/// Longest decode error text kept for a skipped machine, in bytes (a type error quotes the
/// offending value, which may be large).
pub const MAX_SKIP_ERROR: usize = 256;

/// Longest `system_id` reported for a skipped machine, in bytes; a longer string is no MAAS id
/// (they are 6 characters) and is not reported.
pub const MAX_SKIPPED_SYSTEM_ID: usize = 64;

/// The answer of `GET /machines/`, decoded machine by machine
/// ([`crate::MaasClient::list_machines_lenient`]).
///
/// The answer must still be a JSON array (anything else is a [`crate::MaasError::Decode`]);
/// an element of it that is not a valid machine lands in `skipped` instead of failing the
/// whole listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineList {
    /// The machines that decoded, in MAAS's order.
    pub machines: Vec<Machine>,
    /// The elements that did not decode, in MAAS's order.
    pub skipped: Vec<SkippedMachine>,
}

impl MachineList {
    /// Whether every element decoded.
    pub fn is_complete(&self) -> bool {
        self.skipped.is_empty()
    }
}

/// One element of a machine listing that did not decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedMachine {
    /// Position in MAAS's answer (0-based).
    pub index: usize,
    /// The element's `system_id`, when it is an object with a string `system_id` of at most
    /// [`MAX_SKIPPED_SYSTEM_ID`] bytes.
    pub system_id: Option<String>,
    /// The decode error, cut to [`MAX_SKIP_ERROR`] bytes.
    pub error: String,
}

impl fmt::Display for SkippedMachine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.system_id {
            Some(id) => write!(f, "machine {id} (element {}): {}", self.index, self.error),
            None => write!(
                f,
                "element {} (no readable system_id): {}",
                self.index, self.error
            ),
        }
    }
}

impl SkippedMachine {
    /// Describes an element that did not decode into a [`Machine`].
    pub fn new(index: usize, element: &Value, error: &serde_json::Error) -> Self {
        Self {
            index,
            system_id: system_id_of(element),
            error: clip(&error.to_string(), MAX_SKIP_ERROR),
        }
    }
}

fn system_id_of(element: &Value) -> Option<String> {
    element
        .get("system_id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= MAX_SKIPPED_SYSTEM_ID)
        .map(ToOwned::to_owned)
}

impl<'de> Deserialize<'de> for MachineList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ListVisitor)
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = MachineList;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of MAAS machines")
    }

    // One element at a time: only the element being decoded exists as a JSON tree.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MachineList, A::Error> {
        let mut list = MachineList::default();
        let mut index = 0usize;
        while let Some(element) = seq.next_element::<Value>()? {
            match Machine::deserialize(&element) {
                Ok(machine) => list.machines.push(machine),
                Err(error) => list
                    .skipped
                    .push(SkippedMachine::new(index, &element, &error)),
            }
            index += 1;
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::decode;
    use serde_json::json;

    fn good(id: &str) -> Value {
        json!({"system_id": id, "status": 4, "hostname": format!("h-{id}")})
    }

    #[test]
    fn a_malformed_machine_is_skipped_and_the_others_returned() {
        let mut elements: Vec<Value> = (0..100).map(|i| good(&format!("m{i:03}"))).collect();
        elements[42] = json!({"system_id": "m042", "status": 4, "cpu_count": "eight"});
        let body = serde_json::to_vec(&elements).unwrap();
        let list: MachineList = decode("machines.list", &body).unwrap();
        assert_eq!(list.machines.len(), 99);
        assert!(!list.is_complete());
        assert!(list.machines.iter().all(|m| m.system_id != "m042"));
        assert_eq!(list.machines[42].system_id, "m043", "order is kept");
        let [skipped] = list.skipped.as_slice() else {
            panic!("{:?}", list.skipped)
        };
        assert_eq!(skipped.index, 42);
        assert_eq!(skipped.system_id.as_deref(), Some("m042"));
        assert!(skipped.error.contains("expected u32"), "{}", skipped.error);
        assert!(
            skipped
                .to_string()
                .starts_with("machine m042 (element 42): ")
        );
    }

    #[test]
    fn elements_without_a_readable_id_are_reported_by_position() {
        let huge = "x".repeat(10_000);
        let body = json!([
            7,
            null,
            {"status": 4},
            {"system_id": 12, "status": 4},
            {"system_id": huge.clone(), "status": 4},
            {"system_id": "ok", "status": 4, "hostname": huge.clone(), "memory": huge.clone()},
            good("fine"),
        ]);
        let list: MachineList = decode("t", body.to_string().as_bytes()).unwrap();
        assert_eq!(list.machines.len(), 2, "the huge hostname is valid");
        assert_eq!(list.skipped.len(), 5);
        assert_eq!(
            list.skipped.iter().map(|s| s.index).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 5]
        );
        assert!(list.skipped[..4].iter().all(|s| s.system_id.is_none()));
        assert_eq!(list.skipped[4].system_id.as_deref(), Some("ok"));
        for skipped in &list.skipped {
            assert!(
                skipped.error.len() <= MAX_SKIP_ERROR + 3,
                "{}",
                skipped.error
            );
            assert!(!skipped.to_string().contains(&huge[..MAX_SKIP_ERROR]));
        }
        // The 10 000-byte id is not a MAAS id: not reported, and the element still decodes.
        assert!(list.machines.iter().any(|m| m.system_id == huge));
    }

    #[test]
    fn a_list_that_is_not_an_array_is_a_decode_error() {
        for body in [&b"{}"[..], b"\"x\"", b"[1, 2", b"", b"null"] {
            let err = decode::<MachineList>("machines.list", body).unwrap_err();
            assert_eq!(err.category(), "decode");
        }
        let empty: MachineList = decode("t", b"[]").unwrap();
        assert!(empty.is_complete() && empty.machines.is_empty());
    }

    #[test]
    fn clip_cuts_on_char_boundaries() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc...");
        assert_eq!(clip("ééé", 3), "é...");
    }
}
