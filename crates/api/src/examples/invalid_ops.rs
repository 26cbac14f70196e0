//! Invalid cases for the host, inventory, DNS and remediation kinds.

use serde_json::json;

use super::valid::{
    maas_dns_record, maas_host, maas_inventory, maas_remediation, maas_remediation_template,
};
use super::{
    InvalidExample, REQUIRED, UNSUPPORTED, merged, rejected_create as create,
    rejected_update as update,
};

pub(super) fn host_and_inventory() -> Vec<InvalidExample> {
    let h = maas_host();
    let inv = maas_inventory();
    let reservation = |r: serde_json::Value| json!({"spec": {"reservation": r}});
    let owner = json!({"kind": "KubeadmControlPlane", "name": "prod", "uid": "0b6f3f5e-2a57-4b0e-8a3c-6a1d2f9e4c21"});
    vec![
        create(
            "host-systemid-missing",
            &h,
            &json!({"spec": {"systemID": null}}),
            "spec.systemID",
            REQUIRED,
        ),
        create(
            "host-systemid-empty",
            &h,
            &json!({"spec": {"systemID": ""}}),
            "spec.systemID",
            "should be at least 1 chars long",
        ),
        create(
            "host-consumer-uid-missing",
            &h,
            &json!({"spec": {"consumerRef": {"uid": null}}}),
            "spec.consumerRef.uid",
            REQUIRED,
        ),
        create(
            "host-provisioning-image-missing",
            &h,
            &json!({"spec": {"provisioning": {"image": null}}}),
            "spec.provisioning.image",
            REQUIRED,
        ),
        create(
            "host-provisioning-bad-erase",
            &h,
            &json!({"spec": {"provisioning": {"releasePolicy": {"erase": "Zero"}}}}),
            "spec.provisioning.releasePolicy.erase",
            UNSUPPORTED,
        ),
        create(
            "host-reservation-expiry-missing",
            &h,
            &reservation(json!({"owner": owner})),
            "spec.reservation.expiresAt",
            REQUIRED,
        ),
        create(
            "host-reservation-expiry-not-a-time",
            &h,
            &reservation(json!({"owner": owner, "expiresAt": "tomorrow"})),
            "spec.reservation.expiresAt",
            "date-time",
        ),
        update(
            "host-systemid-changed",
            &h,
            &json!({"spec": {"systemID": "9abcdef"}}),
            "spec.systemID",
            "spec.systemID is immutable",
        ),
        create(
            "inventory-pool-missing",
            &inv,
            &json!({"spec": {"resourcePool": null}}),
            "spec.resourcePool",
            REQUIRED,
        ),
        create(
            "inventory-sync-too-often",
            &inv,
            &json!({"spec": {"syncIntervalSeconds": 5}}),
            "spec.syncIntervalSeconds",
            "should be greater than or equal to 10",
        ),
        create(
            "inventory-zone-empty",
            &inv,
            &json!({"spec": {"zones": [""]}}),
            "spec.zones[0]",
            "should be at least 1 chars long",
        ),
    ]
}

pub(super) fn dns_and_remediation() -> Vec<InvalidExample> {
    let d = maas_dns_record();
    // CAPMAAS's generated name, taken over by the record.
    let adopting = merged(
        &d,
        &json!({"spec": {"name": "prod-1a2b3c", "adoptExisting": true}}),
    );
    let r = maas_remediation();
    let rt = maas_remediation_template();
    vec![
        create(
            "dns-domain-missing",
            &d,
            &json!({"spec": {"domain": null}}),
            "spec.domain",
            REQUIRED,
        ),
        create(
            "dns-name-not-a-label",
            &d,
            &json!({"spec": {"name": "Prod_API"}}),
            "spec.name",
            "should match",
        ),
        create(
            "dns-address-not-an-ip",
            &d,
            &json!({"spec": {"addresses": ["10.20.0.11", "prod.maas"]}}),
            "spec.addresses",
            "spec.addresses must contain only IP addresses",
        ),
        create(
            "dns-ttl-zero",
            &d,
            &json!({"spec": {"ttl": 0}}),
            "spec.ttl",
            "should be greater than or equal to 1",
        ),
        update(
            "dns-name-changed",
            &d,
            &json!({"spec": {"name": "prod2"}}),
            "spec.name",
            "spec.name is immutable",
        ),
        update(
            "dns-domain-changed",
            &d,
            &json!({"spec": {"domain": "lab"}}),
            "spec.domain",
            "spec.domain is immutable",
        ),
        update(
            "dns-adopt-existing-dropped",
            &adopting,
            &json!({"spec": {"adoptExisting": null}}),
            "spec.adoptExisting",
            "spec.adoptExisting is immutable",
        ),
        create(
            "dns-adopt-existing-not-capmaas",
            &d,
            &json!({"spec": {"adoptExisting": true}}),
            "spec.adoptExisting",
            "spec.adoptExisting is only for a name CAPMAAS generated: <cluster>-<6 hex digits>",
        ),
        create(
            "remediation-bad-strategy",
            &r,
            &json!({"spec": {"strategy": {"type": "Reprovision"}}}),
            "spec.strategy.type",
            UNSUPPORTED,
        ),
        create(
            "remediation-retrylimit-zero",
            &r,
            &json!({"spec": {"strategy": {"retryLimit": 0}}}),
            "spec.strategy.retryLimit",
            "should be greater than or equal to 1",
        ),
        create(
            "remediation-timeout-too-short",
            &r,
            &json!({"spec": {"strategy": {"timeoutSeconds": 30}}}),
            "spec.strategy.timeoutSeconds",
            "should be greater than or equal to 100",
        ),
        create(
            "remediationtemplate-retrylimit-zero",
            &rt,
            &json!({"spec": {"template": {"spec": {"strategy": {"retryLimit": 0}}}}}),
            "spec.template.spec.strategy.retryLimit",
            "should be greater than or equal to 1",
        ),
        update(
            "remediationtemplate-changed",
            &rt,
            &json!({"spec": {"template": {"spec": {"strategy": {"retryLimit": 5}}}}}),
            "spec.template",
            "spec.template is immutable",
        ),
    ]
}
