//! A cluster switched from CAPMAAS keeps its endpoint name: the DNS resource CAPMAAS created in
//! MAAS (`<cluster>-<6 hex>.<domain>`) is taken over by a MaasDNSRecord with
//! `spec.adoptExisting`, its addresses follow the record, and deleting the record deletes it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::MaasDNSRecord;
use capmaas_testenv::objects;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use maas_api_client::DnsResourceSpec;
use support::*;

const WAIT: Duration = Duration::from_secs(20);
const FQDN: &str = "prod-1a2b3c.maas";

fn ips(addrs: &[&str]) -> BTreeSet<IpAddr> {
    addrs.iter().map(|a| a.parse().unwrap()).collect()
}

#[tokio::test]
async fn capmaas_dns_resource_is_adopted_updated_and_deleted() {
    let (env, client, ns) = api_server("adopt").await;
    let sim = instant_sim(1).await;
    let maas = maas_of(&sim);
    let lookup = || live_dns_resources(&maas, FQDN);
    // As CAPMAAS does: the resource with a 10 s TTL, then the control-plane addresses of the
    // servers it ran on.
    let capmaas = maas
        .create_dns_resource(&DnsResourceSpec {
            fqdn: FQDN.into(),
            ip_addresses: vec!["192.0.2.10".parse().unwrap()],
            address_ttl: Some(10),
        })
        .await
        .unwrap();

    let gateway = start_in_process(&env, &sim, &ns, &["--dns-domains=maas"]).await;
    let records: Api<MaasDNSRecord> = Api::namespaced(client.clone(), &ns);
    let record: MaasDNSRecord = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasDNSRecord",
        "metadata": { "name": "prod-1a2b3c" },
        "spec": {
            "name": "prod-1a2b3c",
            "domain": "maas",
            "addresses": ["10.0.0.1", "10.0.0.2"],
            "adoptExisting": true,
        },
    }))
    .unwrap();
    records
        .create(&PostParams::default(), &record)
        .await
        .unwrap();

    eventually("the record to own CAPMAAS's resource", WAIT, || async {
        let r = records.get("prod-1a2b3c").await.unwrap();
        let status = r.status?;
        (status.dns_resource_id == Some(capmaas.id) && status.ready == Some(true)).then_some(())
    })
    .await;
    let now = lookup().await;
    assert_eq!(now.len(), 1, "adopted, not created anew: {now:?}");
    assert_eq!(now[0].id, capmaas.id);
    assert_eq!(
        now[0].ips().into_iter().collect::<BTreeSet<_>>(),
        ips(&["10.0.0.1", "10.0.0.2"]),
        "the addresses follow the record"
    );
    let adopted = eventually("a DNSResourceAdopted Event", WAIT, || async {
        let events = objects::events(&client, &ns, "DNSResourceAdopted", |e| {
            e.type_.as_deref() == Some("Normal")
        });
        events.await.unwrap().into_iter().next()
    })
    .await;
    let note = adopted.note.unwrap_or_default();
    assert!(
        note.contains(&format!("resource {} ({FQDN})", capmaas.id)) && note.contains("CAPMAAS"),
        "{note}"
    );

    // Adopted means the record's: it goes with the record.
    records
        .delete("prod-1a2b3c", &DeleteParams::default())
        .await
        .unwrap();
    eventually("CAPMAAS's resource deleted from MAAS", WAIT, || async {
        lookup().await.is_empty().then_some(())
    })
    .await;
    eventually("the record gone", WAIT, || async {
        records
            .get_opt("prod-1a2b3c")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    gateway.stop().await;
}
