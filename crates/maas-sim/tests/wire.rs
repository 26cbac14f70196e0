//! Wire behaviour: URLs, op dispatch, bodies, auth failures, error shapes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{expect_answer, json_with_status, plaintext_header, sent, start_instant, status_text};
use reqwest::Method;
use serde_json::Value;

#[tokio::test]
async fn trailing_slash_is_mandatory_and_unknown_paths_are_404_text() {
    let t = start_instant(2).await;
    let resp = sent(
        t.client
            .get(t.api("machines"))
            .header("Authorization", plaintext_header(&t.key)),
    )
    .await;
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    expect_answer(resp, (404, "Unknown API endpoint: /MAAS/api/2.0/machines.")).await;
    t.expect(
        Method::GET,
        "nothing/here/",
        &[],
        (404, "Unknown API endpoint: /MAAS/api/2.0/nothing/here/."),
    )
    .await;
    t.expect(
        Method::GET,
        "machines/nosuch/",
        &[],
        (404, "No Machine matches the given query."),
    )
    .await;
}

#[tokio::test]
async fn anonymous_version_describe_and_legacy_paths() {
    let t = start_instant(1).await;
    let resp = sent(t.client.get(t.api("version/"))).await;
    let v = json_with_status(resp, 200).await;
    assert!(
        v["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == "authenticate-api")
    );
    let resp = sent(t.client.get(t.api("describe/"))).await;
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let d: Value = resp.json().await.unwrap();
    assert!(d["resources"].as_array().unwrap().len() > 10);
    let (s, body) = status_text(
        t.client
            .get(format!("{}/MAAS/api/version/", t.root()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((s, body.as_str()), (200, "2.0"));
    let (s, _) = status_text(
        t.client
            .get(format!("{}/MAAS/api/1.0/machines/", t.root()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 410);
}

#[tokio::test]
async fn op_dispatch_three_ways_and_empty_op_is_crud() {
    let t = start_instant(3).await;
    // 1. op in the query string.
    let a = t.allocate(&[]).await;
    // 2. op in the form body.
    let resp = t.post("machines/", &[("op", "allocate")]).await;
    let b: Value = resp.json().await.unwrap();
    assert_eq!(b["status"], 10);
    // 3. /op-<name> path suffix (maas-client-go power on).
    let resp = t
        .post(
            &format!("machines/{a}/op-deploy"),
            &[("distro_series", "jammy")],
        )
        .await;
    let m = json_with_status(resp, 200).await;
    assert_eq!(
        (m["status"].as_u64(), m["status_name"].as_str()),
        (Some(9), Some("Deploying"))
    );
    // Empty op = CRUD read.
    let list: Value = t.get_json("machines/?op=").await;
    assert_eq!(list.as_array().unwrap().len(), 3);
    let calls = t.sim.state().call_counts();
    assert_eq!(calls.get("machines.allocate"), Some(&2));
    assert_eq!(calls.get("machine.deploy"), Some(&1));
    assert_eq!(calls.get("machines.read"), Some(&1));
}

#[tokio::test]
async fn unknown_signature_is_400_and_missing_crud_is_405() {
    let t = start_instant(1).await;
    t.expect_post(
        "machines/?op=foo",
        &[],
        (400, "Unrecognised signature: method=POST op=foo"),
    )
    .await;
    t.expect(
        Method::GET,
        "machines/?op=allocate",
        &[],
        (400, "Unrecognised signature: method=GET op=allocate"),
    )
    .await;
    let resp = t.call(Method::PUT, "machines/", &[]).await;
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET");
    assert_eq!(resp.text().await.unwrap(), "");
}

#[tokio::test]
async fn auth_failures_have_real_bodies() {
    let t = start_instant(1).await;
    let (s, body) = status_text(t.client.get(t.api("machines/")).send().await.unwrap()).await;
    assert_eq!((s, body.as_str()), (401, "Forbidden"));
    let parts: Vec<&str> = t.key.split(':').collect();
    let bad_consumer = format!("nope:{}:{}", parts[1], parts[2]);
    let resp = sent(
        t.client
            .get(t.api("machines/"))
            .header("Authorization", plaintext_header(&bad_consumer)),
    )
    .await;
    assert_eq!(resp.headers()["www-authenticate"], "OAuth realm=\"OAuth\"");
    expect_answer(resp, (401, "Authorization Error: Invalid API key.")).await;
    let bad_token = format!("{}:zzz:{}", parts[0], parts[2]);
    let resp = sent(
        t.client
            .get(t.api("machines/"))
            .header("Authorization", plaintext_header(&bad_token)),
    )
    .await;
    expect_answer(
        resp,
        (401, "Authorization Error: 'Invalid access token: zzz'"),
    )
    .await;
    let bad_secret = format!("{}:{}:wrong", parts[0], parts[1]);
    let resp = sent(
        t.client
            .get(t.api("machines/"))
            .header("Authorization", plaintext_header(&bad_secret)),
    )
    .await;
    assert_eq!(resp.status(), 401);
    // The docs' curl form: unquoted values and a raw `&` (with a current timestamp: a stale
    // one is refused, as by MAAS).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let raw = format!(
        "OAuth oauth_version=1.0, oauth_signature_method=PLAINTEXT, oauth_consumer_key={}, oauth_token={}, oauth_signature=&{}, oauth_nonce=abc, oauth_timestamp={now}",
        parts[0], parts[1], parts[2]
    );
    let resp = sent(
        t.client
            .get(t.api("machines/"))
            .header("Authorization", raw),
    )
    .await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn conflicts_and_validation_errors() {
    let t = start_instant(2).await;
    let (s, body) = status_text(
        t.post("machines/?op=allocate", &[("cpu_count", "999")])
            .await,
    )
    .await;
    assert_eq!(s, 409);
    assert_eq!(
        body,
        "No available machine matches constraints: [('cpu_count', ['999'])] (resolved to \"cpu_count=999.0\")"
    );
    let resp = t.post("machines/?op=allocate", &[("zone", "mars")]).await;
    assert_eq!(resp.status(), 400);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v, serde_json::json!({"zone": ["No such zone(s): mars."]}));
    let a = t.allocate(&[]).await;
    let _b = t.allocate(&[]).await;
    t.expect_post("machines/?op=allocate", &[], (409, "No machine available."))
        .await;
    let (s, body) = status_text(t.post("machines/?op=allocate", &[("system_id", &a)]).await).await;
    assert_eq!(
        (s, body),
        (409, format!("No machine with system ID {a} available."))
    );
    t.machine_post(&a, "deploy", &[]).await;
    t.expect_post(
        &format!("machines/{a}/?op=deploy"),
        &[],
        (
            409,
            "Can't deploy a machine that is in the 'Deployed' state",
        ),
    )
    .await;
    let (s, body) = status_text(t.machine_post(&a, "abort", &[]).await).await;
    assert_eq!(
        (s, body),
        (
            409,
            format!("Cannot abort in current state: node {a} is in state Deployed.")
        )
    );
    t.expect_post(
        &format!("machines/{a}/?op=mark_fixed"),
        &[],
        (409, "Can't mark a non-broken node as 'Ready'."),
    )
    .await;
    let resp = t
        .machine_post(&a, "deploy", &[("distro_series", "plan9")])
        .await;
    assert_eq!(resp.status(), 409);
    t.expect_post(
        &format!("machines/{a}/?op=set_owner_data"),
        &[("cluster.x-k8s.io/name", "c")],
        (500, "Invalid character in key name"),
    )
    .await;
}

#[tokio::test]
async fn python_style_multipart_with_base64_parts() {
    let t = start_instant(2).await;
    let boundary = "===============1234567890123456789==";
    let part = |name: &str, b64: &str| {
        format!(
            "--{boundary}\r\nContent-Type: text/plain; charset=\"utf-8\"\r\nMIME-Version: 1.0\r\n\
Content-Transfer-Encoding: base64\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{b64}\r\n"
        )
    };
    // agent_name=capi (Y2FwaQ==), comment=hello (aGVsbG8=)
    let body = format!(
        "{}{}--{boundary}--",
        part("agent_name", "Y2FwaQ=="),
        part("comment", "aGVsbG8=")
    );
    let resp = t
        .client
        .post(t.api("machines/?op=allocate"))
        .header("Authorization", plaintext_header(&t.key))
        .header(
            "Content-Type",
            format!("multipart/form-data; boundary=\"{boundary}\""),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    let m = json_with_status(resp, 200).await;
    let view = t
        .sim
        .state()
        .machine(m["system_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        (view.agent_name.as_str(), view.last_comment.as_str()),
        ("capi", "hello")
    );
    // JSON bodies are invisible to MAAS handlers: the constraint is ignored, not applied.
    let resp = sent(
        t.client
            .post(t.api("machines/?op=allocate"))
            .header("Authorization", plaintext_header(&t.key))
            .header("Content-Type", "application/json")
            .body(r#"{"cpu_count": 1000}"#),
    )
    .await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn every_object_has_a_resource_uri() {
    let t = start_instant(1).await;
    for path in [
        "machines/",
        "zones/",
        "resourcepools/",
        "tags/",
        "domains/",
        "subnets/",
        "boot-resources/",
        "dnsresources/",
    ] {
        let v = t.get_json(path).await;
        for item in v.as_array().unwrap() {
            assert!(
                item["resource_uri"]
                    .as_str()
                    .unwrap()
                    .starts_with("/MAAS/api/2.0/"),
                "{path}: {item}"
            );
        }
    }
    let who = t.get_json("users/?op=whoami").await;
    assert_eq!(
        (who["username"].as_str(), who["is_superuser"].as_bool()),
        (Some("admin"), Some(true))
    );
}
