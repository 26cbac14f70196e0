//! DNS names have one owner: two MaasDNSRecords for `prod.maas` in two namespaces (two Clusters
//! named `prod`) never flip the MAAS record between them, deleting the younger one deletes
//! nothing, a DNS resource made by hand in MAAS is never taken over or deleted, and a domain
//! outside `--dns-domains` is refused without a MAAS call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::IpAddr;
use std::time::Duration;

use capmaas_api::MaasDNSRecord;
use capmaas_testenv::objects;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use maas_api_client::{DnsResource, DnsResourceFilter, DnsResourceSpec};
use support::*;

const WAIT: Duration = Duration::from_secs(20);

fn record(name: &str, host: &str, addresses: &[&str]) -> MaasDNSRecord {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": "MaasDNSRecord",
        "metadata": { "name": name },
        "spec": { "name": host, "domain": "maas", "addresses": addresses },
    }))
    .unwrap()
}

fn ips(addrs: &[&str]) -> Vec<IpAddr> {
    addrs.iter().map(|a| a.parse().unwrap()).collect()
}

/// The `DNSRecordSynced` reason of `name`, once it is `wanted`.
async fn synced_reason(api: &Api<MaasDNSRecord>, name: &str, wanted: &str) -> String {
    eventually(
        &format!("{name} DNSRecordSynced {wanted}"),
        WAIT,
        || async {
            let r = api.get(name).await.unwrap();
            r.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "DNSRecordSynced" && c.reason == wanted)
                .map(|c| c.message)
        },
    )
    .await
}

async fn warning(client: &kube::Client, ns: &str, reason: &str) -> Event {
    eventually(&format!("a {reason} Warning Event"), WAIT, || async {
        let warnings = objects::events(client, ns, reason, |e| {
            e.type_.as_deref() == Some("Warning")
        });
        warnings.await.unwrap().into_iter().next()
    })
    .await
}

#[tokio::test]
async fn one_owner_per_dns_name() {
    let (env, client, team_a) = api_server("team-a").await;
    let team_b = env.create_namespace("team-b").await.unwrap();
    let sim = instant_sim(1).await;
    let maas = maas_of(&sim);
    let lookup = |fqdn: &'static str| live_dns_resources(&maas, fqdn);
    // Every namespace: the gateway must see both records to know which one is older.
    let gateway = start_in_process(&env, &sim, "", &["--dns-domains=maas,example.com"]).await;
    let (a, b): (Api<MaasDNSRecord>, Api<MaasDNSRecord>) = (
        Api::namespaced(client.clone(), &team_a),
        Api::namespaced(client.clone(), &team_b),
    );
    a.create(
        &PostParams::default(),
        &record("prod", "prod", &["10.0.0.1"]),
    )
    .await
    .unwrap();
    eventually("team-a's prod.maas in MAAS", WAIT, || async {
        (lookup("prod.maas").await.first().map(DnsResource::ips) == Some(ips(&["10.0.0.1"])))
            .then_some(())
    })
    .await;
    b.create(
        &PostParams::default(),
        &record("prod", "prod", &["10.9.9.9"]),
    )
    .await
    .unwrap();
    let message = synced_reason(&b, "prod", "DNSNameConflict").await;
    assert!(message.contains(&format!("{team_a}/prod")), "{message}");
    warning(&client, &team_b, "DNSNameConflict").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = lookup("prod.maas").await;
    assert_eq!(now.len(), 1);
    assert_eq!(
        now[0].ips(),
        ips(&["10.0.0.1"]),
        "never flipped to team-b's address"
    );

    // Deleting the younger record deletes nothing in MAAS.
    b.delete("prod", &DeleteParams::default()).await.unwrap();
    eventually("team-b's record gone", WAIT, || async {
        b.get_opt("prod").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(
        lookup("prod.maas").await.len(),
        1,
        "team-a's record survives"
    );

    // A name made by hand in MAAS is neither taken over nor deleted.
    maas.create_dns_resource(&DnsResourceSpec {
        fqdn: "hand.maas".into(),
        ip_addresses: ips(&["192.0.2.10"]),
        address_ttl: None,
    })
    .await
    .unwrap();
    a.create(
        &PostParams::default(),
        &record("hand", "hand", &["10.0.0.2"]),
    )
    .await
    .unwrap();
    let message = synced_reason(&a, "hand", "DNSNameTaken").await;
    assert!(message.contains("did not create"), "{message}");
    warning(&client, &team_a, "DNSNameTaken").await;
    a.delete("hand", &DeleteParams::default()).await.unwrap();
    eventually("the hand record's object gone", WAIT, || async {
        a.get_opt("hand").await.unwrap().is_none().then_some(())
    })
    .await;
    let hand = lookup("hand.maas").await;
    assert_eq!(hand.len(), 1, "still there");
    assert_eq!(hand[0].ips(), ips(&["192.0.2.10"]), "untouched");

    // A domain the installation does not publish in: refused, nothing written to MAAS, and its
    // deletion touches nothing either.
    let mut squat = record("squat", "www", &["10.0.0.3"]);
    squat.spec.domain = "corp".into();
    a.create(&PostParams::default(), &squat).await.unwrap();
    let message = synced_reason(&a, "squat", "DNSDomainNotAllowed").await;
    assert!(
        message.contains("\"corp\"") && message.contains("example.com, maas"),
        "{message}"
    );
    warning(&client, &team_a, "DNSDomainNotAllowed").await;
    let named_www = maas
        .list_dns_resources(&DnsResourceFilter {
            name: Some("www".into()),
            ..DnsResourceFilter::default()
        })
        .await
        .unwrap();
    assert!(named_www.is_empty(), "nothing published: {named_www:?}");
    a.delete("squat", &DeleteParams::default()).await.unwrap();
    eventually("the refused record's object gone", WAIT, || async {
        a.get_opt("squat").await.unwrap().is_none().then_some(())
    })
    .await;

    // The owner's deletion removes its MAAS record.
    a.delete("prod", &DeleteParams::default()).await.unwrap();
    eventually("prod.maas deleted from MAAS", WAIT, || async {
        lookup("prod.maas").await.is_empty().then_some(())
    })
    .await;
    gateway.stop().await;
}
