//! Interfaces and links, subnets, DNS resources, domains, tags, zones, pools, boot resources,
//! permissions of non-admin users, HMAC-SHA1 over the wire.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::many_single_char_names)]

mod common;

use common::{
    expect_answer, link_in_mode, plaintext_header, send_json, sent, start, start_instant,
    status_text,
};
use maas_sim::auth::{hmac_sha1_signature, signature_base_string};
use maas_sim::{ApiKey, SimConfig};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn static_links_refuse_addresses_in_use() {
    let t = start_instant(2).await;
    let ids = t.machine_ids();
    let mut iface_ids = Vec::new();
    for id in &ids {
        let ifaces = t.get_json(&format!("nodes/{id}/interfaces/")).await;
        let iface = &ifaces[0];
        let link_id = iface["links"][0]["id"].as_u64().unwrap().to_string();
        let path = format!("nodes/{id}/interfaces/{}/", iface["id"]);
        t.post_json(&format!("{path}?op=unlink_subnet"), &[("id", &link_id)])
            .await;
        iface_ids.push(path);
    }
    let v = t
        .post_json(
            &format!("{}?op=link_subnet", iface_ids[0]),
            &[
                ("subnet", "1"),
                ("mode", "STATIC"),
                ("ip_address", "10.20.0.50"),
            ],
        )
        .await;
    let link = link_in_mode(&v, "static");
    assert_eq!(link["ip_address"], "10.20.0.50");
    assert_eq!(link["subnet"]["cidr"], "10.20.0.0/16");
    let second = format!("{}?op=link_subnet", iface_ids[1]);
    for (ip, want) in [
        ("10.20.0.50", (404, "IP address is already in use.")),
        (
            "10.99.0.5",
            (
                400,
                r#"{"ip_address":["IP address is not in the given subnet '10.20.0.0/16:10.20.0.0/16(vid=0)'."]}"#,
            ),
        ),
    ] {
        let form = [("subnet", "1"), ("mode", "static"), ("ip_address", ip)];
        t.expect_post(&second, &form, want).await;
    }
    // The static address survives deployment and release; auto addresses come and go.
    t.allocate(&[("system_id", &ids[0])]).await;
    t.machine_op(&ids[0], "deploy", &[]).await;
    t.expect_post(
        &format!("{}?op=link_subnet", iface_ids[0]),
        &[("subnet", "1"), ("mode", "dhcp")],
        (
            409,
            "Cannot link subnet interface because the machine is not New, Ready, Allocated, or Broken.",
        ),
    )
    .await;
    let m = t.machine_op(&ids[0], "release", &[]).await;
    assert_eq!(m["ip_addresses"], json!(["10.20.0.50"]));
    let subnet_ips = t.get_json("subnets/1/?op=ip_addresses").await;
    assert_eq!(subnet_ips[0]["ip"], "10.20.0.50");
    let subnets = t.get_json("subnets/").await;
    assert_eq!(subnets.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn dns_resources_crud() {
    let t = start_instant(1).await;
    let r = t
        .post_json(
            "dnsresources/?op=",
            &[
                ("fqdn", "c1.maas"),
                ("address_ttl", "10"),
                ("ip_addresses", ""),
            ],
        )
        .await;
    let id = r["id"].as_u64().unwrap();
    assert_eq!(
        (r["fqdn"].as_str(), r["address_ttl"].as_u64()),
        (Some("c1.maas"), Some(10))
    );
    let list = t
        .json(Method::GET, "dnsresources/", &[("fqdn", "c1.maas")])
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let r = t
        .json(
            Method::PUT,
            &format!("dnsresources/{id}/"),
            &[("ip_addresses", "10.20.0.11  10.20.0.12")],
        )
        .await;
    let ips: Vec<&str> = r["ip_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["ip"].as_str().unwrap())
        .collect();
    assert_eq!(ips, vec!["10.20.0.11", "10.20.0.12"]);
    let (s, _) = status_text(
        t.call(
            Method::PUT,
            &format!("dnsresources/{id}/"),
            &[("ip_addresses", "10.0.0.1,10.0.0.2")],
        )
        .await,
    )
    .await;
    assert_eq!(s, 400);
    let r = t
        .post_json("dnsresources/", &[("name", "api"), ("domain", "maas")])
        .await;
    assert_eq!(r["fqdn"], "api.maas");
    t.expect_post(
        "dnsresources/",
        &[("fqdn", "x.nowhere")],
        (404, "No Domain matches the given query."),
    )
    .await;
    assert_eq!(
        t.call(Method::DELETE, &format!("dnsresources/{id}/"), &[])
            .await
            .status(),
        204
    );
    t.expect(
        Method::GET,
        &format!("dnsresources/{id}/"),
        &[],
        (404, "No DNSResource matches the given query."),
    )
    .await;
    let d = t.get_json("domains/").await;
    assert_eq!(
        (d[0]["name"].as_str(), d[0]["is_default"].as_bool()),
        (Some("maas"), Some(true))
    );
    let d = t.get_json("domains/name:maas/").await;
    assert_eq!(d["id"], 0);
}

#[tokio::test]
async fn tags_zones_pools_and_boot_resources() {
    let t = start_instant(3).await;
    let ids = t.machine_ids();
    let tag = t
        .post_json("tags/", &[("name", "gpu"), ("comment", "has a GPU")])
        .await;
    assert_eq!(tag["resource_uri"], "/MAAS/api/2.0/tags/gpu/");
    let (s, _) = status_text(t.post("tags/", &[("name", "bad name")]).await).await;
    assert_eq!(s, 400);
    let r = t
        .post_json(
            "tags/gpu/op-update_nodes",
            &[("add", &ids[0]), ("add", &ids[1]), ("add", "unknown")],
        )
        .await;
    assert_eq!(r, json!({"added": 2, "removed": 0}));
    let r = t
        .post_json("tags/gpu/?op=update_nodes", &[("remove", &ids[1])])
        .await;
    assert_eq!(r, json!({"added": 0, "removed": 1}));
    t.expect_post(
        "tags/gpu/?op=update_nodes",
        &[("definition", "//x"), ("add", &ids[2])],
        (
            409,
            "Definition supplied '//x' doesn't match current definition ''",
        ),
    )
    .await;
    let tagged = t.get_json("tags/gpu/?op=machines").await;
    assert_eq!(tagged.as_array().unwrap().len(), 1);
    let z = t
        .post_json(
            "zones/",
            &[("name", "rack2"), ("description", "second rack")],
        )
        .await;
    assert_eq!(z["resource_uri"], "/MAAS/api/2.0/zones/rack2/");
    let p = t.post_json("resourcepools/", &[("name", "gold")]).await;
    let pid = p["id"].as_u64().unwrap();
    assert_eq!(
        p["resource_uri"],
        format!("/MAAS/api/2.0/resourcepool/{pid}/")
    );
    let m = t
        .json(
            Method::PUT,
            &format!("machines/{}/", ids[2]),
            &[("zone", "rack2"), ("pool", "gold")],
        )
        .await;
    assert_eq!(
        (m["zone"]["name"].as_str(), m["pool"]["name"].as_str()),
        (Some("rack2"), Some("gold"))
    );
    let got = t
        .post_json(
            "machines/?op=allocate",
            &[("zone", "rack2"), ("pool", "gold")],
        )
        .await;
    assert_eq!(got["system_id"], ids[2].as_str());
    let b = t
        .json(Method::GET, "boot-resources/", &[("type", "uploaded")])
        .await;
    assert_eq!(b.as_array().unwrap().len(), 1);
    t.expect(
        Method::GET,
        "boot-resources/",
        &[("type", "odd")],
        (
            400,
            "'odd' is not a valid boot resource type. Available types: ['synced', 'uploaded']",
        ),
    )
    .await;
    assert_eq!(t.call(Method::DELETE, "tags/gpu/", &[]).await.status(), 204);
}

#[tokio::test]
async fn non_admin_users_see_only_their_machines() {
    let admin = ApiKey::parse("admin", true, "adminck:admintk:adminsecret").unwrap();
    let alice = ApiKey::parse("alice", false, "aliceck:alicetk:alicesecret").unwrap();
    let bob = ApiKey::parse("bob", false, "bobck:bobtk:bobsecret").unwrap();
    let t = start(SimConfig {
        machines: 3,
        api_keys: vec![admin, alice.clone(), bob.clone()],
        ..SimConfig::instant()
    })
    .await;
    let as_user = |key: &ApiKey, method: Method, path: &str| {
        t.client
            .request(method, t.api(path))
            .header("Authorization", plaintext_header(&key.credential()))
    };
    let m = send_json(as_user(&alice, Method::POST, "machines/?op=allocate")).await;
    let id = m["system_id"].as_str().unwrap().to_owned();
    assert_eq!(m["owner"], "alice");
    let list = send_json(as_user(&bob, Method::GET, "machines/")).await;
    assert_eq!(list.as_array().unwrap().len(), 2);
    let resp = sent(as_user(&bob, Method::GET, &format!("machines/{id}/"))).await;
    assert_eq!(status_text(resp).await, (403, String::new()));
    let resp = sent(as_user(
        &bob,
        Method::POST,
        &format!("machines/{id}/?op=mark_broken"),
    ))
    .await;
    assert_eq!(resp.status(), 403);
    let resp = sent(as_user(&alice, Method::POST, "tags/").form(&[("name", "x")])).await;
    expect_answer(resp, (403, "This method is reserved for admin users.")).await;
    let who = send_json(as_user(&alice, Method::GET, "users/?op=whoami")).await;
    assert_eq!(who["is_superuser"], false);
    let list: Value = t.get_json("machines/").await;
    assert_eq!(list.as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn hmac_sha1_signed_requests_are_verified() {
    let t = start_instant(2).await;
    let parts: Vec<String> = t.key.split(':').map(ToOwned::to_owned).collect();
    // A current timestamp: the simulator, like MAAS, refuses one more than 300 s off.
    let timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let sign = |method: &str, url: &str, params: &[(&str, &str)], nonce: &str, secret: &str| {
        let mut all: Vec<(String, String)> = vec![
            ("oauth_consumer_key".into(), parts[0].clone()),
            ("oauth_token".into(), parts[1].clone()),
            ("oauth_signature_method".into(), "HMAC-SHA1".into()),
            ("oauth_timestamp".into(), timestamp.clone()),
            ("oauth_nonce".into(), nonce.into()),
            ("oauth_version".into(), "1.0".into()),
        ];
        all.extend(
            params
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let sig = hmac_sha1_signature(&signature_base_string(method, url, &all), secret);
        let sig = percent_encoding::utf8_percent_encode(&sig, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
        // Random order, no realm, as maas-client-go sends it.
        format!(
            "OAuth oauth_nonce=\"{nonce}\", oauth_signature=\"{sig}\", oauth_token=\"{}\", oauth_consumer_key=\"{}\", \
oauth_signature_method=\"HMAC-SHA1\", oauth_version=\"1.0\", oauth_timestamp=\"{timestamp}\"",
            parts[1], parts[0]
        )
    };
    let url = t.api("machines/");
    let header = sign(
        "POST",
        &url,
        &[("op", "allocate"), ("cpu_count", "1")],
        "h1",
        &parts[2],
    );
    let resp = sent(
        t.client
            .post(&url)
            .query(&[("op", "allocate")])
            .form(&[("cpu_count", "1")])
            .header("Authorization", header),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let header = sign("GET", &url, &[], "h2", "wrong-secret");
    let resp = sent(t.client.get(&url).header("Authorization", header)).await;
    expect_answer(resp, (401, "Authorization Error: 'Invalid signature.'")).await;
}
