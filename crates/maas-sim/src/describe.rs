//! `GET /MAAS/api/2.0/describe/`, built from the route table (`api/doc.py` shape), enough for
//! python-libmaas to bind every handler and action the simulator serves.

use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use crate::render::API;
use crate::routes::{RESOURCES, ResourceDef};

fn handler(resource: &ResourceDef, origin: &str) -> Value {
    let mut actions: Vec<Value> = resource
        .actions
        .iter()
        .map(|a| {
            json!({"name": a.name, "method": a.method, "op": a.op, "restful": a.op.is_none(),
                "doc": format!("{} {}", a.method, a.op.map_or_else(|| a.name.to_owned(), |op| format!("op={op}")))})
        })
        .collect();
    actions.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let path = format!("{API}{}", resource.path);
    json!({"name": resource.handler, "doc": format!("{} (MAAS simulator)", resource.handler),
        "path": path, "params": resource.params, "uri": format!("{origin}{path}"), "actions": actions})
}

/// A stable hash of the API surface (sent as `X-MAAS-API-Hash` too).
pub(crate) fn api_hash() -> String {
    let mut hasher = Sha1::new();
    for r in RESOURCES {
        hasher.update(r.handler.as_bytes());
        hasher.update(r.path.as_bytes());
        for a in r.actions {
            hasher.update(a.name.as_bytes());
            hasher.update(a.method.as_bytes());
        }
    }
    hasher
        .finalize()
        .iter()
        .fold(String::with_capacity(40), |mut out, b| {
            use std::fmt::Write as _;
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The describe document; `origin` is `scheme://host[:port]` of the request. Without
/// `vm_hosts` (a MAAS 4.0 / [dev] region) the VM host handlers are left out.
pub(crate) fn describe(origin: &str, vm_hosts: bool) -> Value {
    let served = || {
        RESOURCES
            .iter()
            .filter(move |r| vm_hosts || !r.kind.is_vm_host())
    };
    let resources: Vec<Value> = served()
        .map(|r| {
            let h = handler(r, origin);
            if r.anon {
                json!({"name": r.handler, "anon": h, "auth": Value::Null})
            } else {
                json!({"name": r.handler, "anon": Value::Null, "auth": h})
            }
        })
        .collect();
    let handlers: Vec<Value> = served().map(|r| handler(r, origin)).collect();
    json!({"doc": "MAAS API", "hash": api_hash(), "resources": resources, "handlers": handlers})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maas_without_vm_hosts_describes_none() {
        let names = |doc: &Value| -> Vec<String> {
            doc["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let with = names(&describe("http://h:1", true));
        assert!(with.iter().any(|n| n == "VmHostHandler"));
        assert!(with.iter().any(|n| n == "PodsHandler"));
        let without = names(&describe("http://h:1", false));
        assert!(
            !without
                .iter()
                .any(|n| n.contains("VmHost") || n.contains("Pod"))
        );
        assert_eq!(with.len(), without.len() + 4);
    }

    #[test]
    fn describe_lists_machine_actions_for_libmaas() {
        let doc = describe("http://h:1", true);
        let machine = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "MachineHandler")
            .unwrap();
        let auth = &machine["auth"];
        assert_eq!(auth["path"], "/MAAS/api/2.0/machines/{system_id}/");
        assert_eq!(auth["uri"], "http://h:1/MAAS/api/2.0/machines/{system_id}/");
        assert_eq!(auth["params"], json!(["system_id"]));
        let names: Vec<&str> = auth["actions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap())
            .collect();
        for wanted in [
            "deploy",
            "release",
            "power_on",
            "power_off",
            "query_power_state",
            "set_owner_data",
            "read",
        ] {
            assert!(names.contains(&wanted), "{wanted}");
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        assert_eq!(api_hash().len(), 40);
    }
}
