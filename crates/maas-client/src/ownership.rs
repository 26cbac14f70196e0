//! What survives `clusterctl move`: how an object is going ([`Deletion`]), and proofs of
//! ownership that travel with it.
//!
//! Status does not survive a move (clusterctl creates the objects anew), so what only status
//! recorded — "this MAAS DNS resource is the one this record created" — would be lost, and the
//! record in the target cluster would take its own resource for someone else's. The gateway
//! therefore also writes the resource id into an annotation, signed with an HMAC under the MAAS
//! API key's secret: the gateway of the target cluster, holding the same key, can check it; a
//! user who can edit the object cannot forge it, so the annotation never lets a record take over
//! a resource made by hand or by another installation.

use capmaas_api::MaasDNSRecord;
use capmaas_api::keys::{ANNOTATION_DNS_RESOURCE, deleted_for_move};
use kube::ResourceExt;
use maas_api_client::ApiKey;

/// Whether an object is going, and how: a deletion cleans up in MAAS, a `clusterctl move`
/// leaves MAAS to the object's copy in the target cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Not being deleted.
    No,
    /// Being deleted.
    Deleting,
    /// Being deleted by `clusterctl move` (annotation `clusterctl.cluster.x-k8s.io/delete-for-move`).
    Moving,
}

impl Deletion {
    /// From the object's metadata.
    pub fn of(meta: &kube::api::ObjectMeta) -> Self {
        match (meta.deletion_timestamp.is_some(), deleted_for_move(meta)) {
            (false, _) => Self::No,
            (true, false) => Self::Deleting,
            (true, true) => Self::Moving,
        }
    }
}

/// Signs and checks ownership proofs with the MAAS API key of this installation.
#[derive(Debug, Clone)]
pub struct Proofs {
    key: ApiKey,
    installation: String,
}

impl Proofs {
    /// Proofs under `key` for `installation` (the gateway's `agent_name`).
    pub fn new(key: ApiKey, installation: &str) -> Self {
        Self {
            key,
            installation: installation.to_owned(),
        }
    }

    fn dns_message(&self, record: &MaasDNSRecord, id: i64) -> String {
        format!(
            "capmaas dnsresource v1\n{}\n{}/{}\n{}\n{id}",
            self.installation,
            record.namespace().unwrap_or_default(),
            record.name_any(),
            record.spec.fqdn()
        )
    }

    /// The annotation value proving that `record` owns MAAS DNS resource `id`: `<id>.<proof>`.
    pub fn dns_annotation(&self, record: &MaasDNSRecord, id: i64) -> String {
        format!(
            "{id}.{}",
            self.key.sign(self.dns_message(record, id).as_bytes())
        )
    }

    /// The DNS resource id the record's annotation proves it owns: `None` without the
    /// annotation, or when the proof does not hold for this record (its namespace, name or FQDN
    /// changed, another installation or MAAS key made it, or someone wrote it by hand).
    pub fn proven_dns_resource(&self, record: &MaasDNSRecord) -> Option<i64> {
        let value = record.annotations().get(ANNOTATION_DNS_RESOURCE)?;
        let (id, proof) = value.split_once('.')?;
        let id: i64 = id.parse().ok()?;
        self.key
            .verify(self.dns_message(record, id).as_bytes(), proof)
            .then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ns: &str, name: &str, fqdn_name: &str) -> MaasDNSRecord {
        let mut r: MaasDNSRecord = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "MaasDNSRecord",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"name": fqdn_name, "domain": "maas"}
        }))
        .unwrap();
        r.metadata.annotations = None;
        r
    }

    fn annotated(mut r: MaasDNSRecord, value: &str) -> MaasDNSRecord {
        r.annotations_mut()
            .insert(ANNOTATION_DNS_RESOURCE.to_owned(), value.to_owned());
        r
    }

    #[test]
    fn a_proof_holds_for_its_record_key_and_installation_only() {
        let key = ApiKey::parse("ck:tk:secret").unwrap();
        let proofs = Proofs::new(key.clone(), "capmaas-capmaas-system");
        let prod = record("team-a", "prod", "prod");
        assert_eq!(proofs.proven_dns_resource(&prod), None);
        let value = proofs.dns_annotation(&prod, 42);
        assert!(value.starts_with("42."), "{value}");
        // The same record in another management cluster (same namespace, name, key): adopted.
        assert_eq!(
            proofs.proven_dns_resource(&annotated(prod.clone(), &value)),
            Some(42)
        );
        // Copied to another record, another id written by hand, or nonsense: not a proof.
        assert_eq!(
            proofs.proven_dns_resource(&annotated(record("team-b", "prod", "prod"), &value)),
            None
        );
        assert_eq!(
            proofs.proven_dns_resource(&annotated(record("team-a", "prod", "www"), &value)),
            None
        );
        let forged = value.replacen("42.", "7.", 1);
        assert_eq!(
            proofs.proven_dns_resource(&annotated(prod.clone(), &forged)),
            None
        );
        assert_eq!(
            proofs.proven_dns_resource(&annotated(prod.clone(), "42")),
            None
        );
        // Another installation or another MAAS key cannot vouch for it.
        let other_installation = Proofs::new(key, "capmaas-other");
        let other_key = Proofs::new(
            ApiKey::parse("ck:tk:other").unwrap(),
            "capmaas-capmaas-system",
        );
        for proofs in [other_installation, other_key] {
            assert_eq!(
                proofs.proven_dns_resource(&annotated(prod.clone(), &value)),
                None
            );
        }
    }
}
