//! Static addresses MAAS refuses (held by another machine or interface, DHCP twice),
//! reserved ranges, and IP range CRUD with MAAS's overlap checks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::many_single_char_names)]

mod common;

use common::net::{ifaces, setup};
use common::{link_in_mode, status_text};
use reqwest::Method;
use serde_json::Value;

/// The form of a static link to `ip` on subnet 1 (the default `10.20.0.0/16`).
fn static_on_subnet_1(ip: &str) -> [(&'static str, &str); 3] {
    [("mode", "static"), ("subnet", "1"), ("ip_address", ip)]
}

#[tokio::test]
async fn static_addresses_held_elsewhere_are_refused() {
    let (t, ids) = setup().await;
    let link =
        |id: &str, iface: &Value| format!("nodes/{id}/interfaces/{}/?op=link_subnet", iface["id"]);
    let a = ifaces(&t, &ids[0]).await;
    let b = ifaces(&t, &ids[1]).await;
    t.post_json(&link(&ids[0], &a[1]), &static_on_subnet_1("10.20.7.7"))
        .await;
    // Another machine, and another interface of the same machine: 404, MAAS's
    // StaticIPAddressUnavailable.
    for (id, iface) in [(&ids[1], &b[0]), (&ids[0], &a[0])] {
        t.expect_post(
            &link(id, iface),
            &static_on_subnet_1("10.20.7.7"),
            (404, "IP address is already in use."),
        )
        .await;
    }
    // A reserved range does not stop an explicit static address (MAAS checks dynamic ranges
    // only), but MAAS's own choice avoids it.
    t.sim
        .state()
        .add_ip_range(
            true,
            "10.20.0.11".parse().unwrap(),
            "10.20.0.20".parse().unwrap(),
            "by hand",
        )
        .unwrap();
    let v = t
        .post_json(&link(&ids[1], &b[0]), &static_on_subnet_1("10.20.0.15"))
        .await;
    assert!(
        v["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["ip_address"] == "10.20.0.15")
    );
    let v = t
        .post_json(
            &link(&ids[1], &b[1]),
            &[("mode", "static"), ("subnet", "1")],
        )
        .await;
    let auto = link_in_mode(&v, "static");
    assert_eq!(
        auto["ip_address"], "10.20.0.21",
        "first free address after the reserved range"
    );
    // DHCP twice on one interface is refused.
    let dhcp = link(&ids[1], &b[1]);
    t.post_json(&dhcp, &[("mode", "dhcp")]).await;
    t.expect_post(
        &dhcp,
        &[("mode", "dhcp")],
        (400, r#"{"mode":["Interface is already set to DHCP."]}"#),
    )
    .await;
}

#[tokio::test]
async fn ip_ranges_crud_and_overlaps() {
    let (t, _) = setup().await;
    let r = t
        .post_json(
            "ipranges/",
            &[
                ("type", "reserved"),
                ("start_ip", "10.20.5.1"),
                ("end_ip", "10.20.5.9"),
                ("comment", "mine"),
            ],
        )
        .await;
    assert_eq!(
        (
            r["type"].as_str(),
            r["subnet"]["cidr"].as_str(),
            r["comment"].as_str()
        ),
        (Some("reserved"), Some("10.20.0.0/16"), Some("mine"))
    );
    let id = r["id"].as_u64().unwrap();
    let conflict = r#"{"start_ip":["Requested reserved range conflicts with an existing range."],"end_ip":["Requested reserved range conflicts with an existing range."]}"#;
    for (start, end) in [
        ("10.20.5.9", "10.20.5.20"),
        ("10.20.4.0", "10.20.6.0"),
        ("10.40.0.240", "10.40.0.245"),
    ] {
        let (s, body) = status_text(
            t.post(
                "ipranges/",
                &[("type", "reserved"), ("start_ip", start), ("end_ip", end)],
            )
            .await,
        )
        .await;
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (s, body),
            (400, serde_json::from_str::<Value>(conflict).unwrap()),
            "{start}-{end}"
        );
    }
    let refusals: [(&[(&str, &str)], &str); 3] = [
        (
            &[
                ("type", "reserved"),
                ("start_ip", "10.40.0.5"),
                ("end_ip", "10.40.0.2"),
            ],
            r#"{"end_ip":["End IP address must not be less than Start IP address."]}"#,
        ),
        (
            &[
                ("type", "reserved"),
                ("start_ip", "10.40.0.5"),
                ("end_ip", "10.40.1.2"),
                ("subnet", "3"),
            ],
            r#"{"end_ip":["End IP address must be within subnet: 10.40.0.0/24."]}"#,
        ),
        (
            &[("start_ip", "10.40.0.5"), ("end_ip", "10.40.0.6")],
            r#"{"type":["This field is required."]}"#,
        ),
    ];
    for (form, want) in refusals {
        t.expect_post("ipranges/", form, (400, want)).await;
    }
    // Update moves it (itself excluded from the overlap check), delete removes it.
    let r = t
        .json(
            Method::PUT,
            &format!("ipranges/{id}/"),
            &[("start_ip", "10.20.5.5"), ("end_ip", "10.20.5.30")],
        )
        .await;
    assert_eq!(
        (r["start_ip"].as_str(), r["comment"].as_str()),
        (Some("10.20.5.5"), Some("mine"))
    );
    let all = t.get_json("ipranges/").await;
    assert_eq!(
        all.as_array().unwrap().len(),
        2,
        "ours and the dynamic range"
    );
    let (s, _) = status_text(
        t.call(Method::DELETE, &format!("ipranges/{id}/"), &[])
            .await,
    )
    .await;
    assert_eq!(s, 204);
    t.expect(
        Method::GET,
        &format!("ipranges/{id}/"),
        &[],
        (404, "No IPRange matches the given query."),
    )
    .await;
    assert_eq!(t.sim.state().ip_ranges().len(), 1);
}
