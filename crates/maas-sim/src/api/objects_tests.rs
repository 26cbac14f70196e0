use super::*;
use crate::api::Caller;
use crate::config::SimConfig;
use crate::error::ErrorBody;
use crate::inventory::build_world;
use crate::params::parse_urlencoded;

/// Runs `"<action> <zones|pools>[/<key>][?<params>] -> <status> <body>"` steps in order as an
/// admin, in a world of zones `default, z1, z2`, pools `default (id 0), p1, p2` and two
/// machines, in `default`/`default` and `z1`/`p1`. Objects are shown as `name:description`.
fn check(steps: &[&str]) -> World {
    let mut w = build_world(&SimConfig {
        machines: 2,
        zones: vec!["z1".into(), "z2".into()],
        pools: vec!["p1".into(), "p2".into()],
        ..SimConfig::default()
    })
    .unwrap();
    let admin = Caller {
        username: "admin".into(),
        is_admin: true,
    };
    for step in steps {
        let (request, expected) = step.split_once(" -> ").unwrap();
        let (action, target) = request.split_once(' ').unwrap();
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let (collection, key) = path
            .split_once('/')
            .map_or((path, None), |(c, k)| (c, Some(k)));
        let kind = match (collection, key.is_some()) {
            ("zones", false) => Kind::Zones,
            ("zones", true) => Kind::Zone,
            ("pools", false) => Kind::Pools,
            ("pools", true) => Kind::Pool,
            _ => panic!("bad step {step}"),
        };
        let args: Vec<String> = key.into_iter().map(str::to_owned).collect();
        let params = parse_urlencoded(query.as_bytes());
        let call = &mut Call {
            caller: &admin,
            params: &params,
            args: &args,
            world: &mut w,
        };
        let brief = |o: &Value| {
            let text = |k: &str| o[k].as_str().unwrap_or_default().to_owned();
            format!("{}:{}", text("name"), text("description"))
        };
        let (status, body) = match dispatch(kind, action, call) {
            Ok(Reply::Json(status, Value::Array(list))) => {
                (status, list.iter().map(brief).collect::<Vec<_>>().join(","))
            }
            Ok(Reply::Json(status, object)) => (status, brief(&object)),
            Ok(Reply::Empty(status)) => (status, String::new()),
            Err(e) => match e.body {
                ErrorBody::Text(text) => (e.status, text),
                ErrorBody::Json(json) => (e.status, json.to_string()),
                other => panic!("unexpected error body {other:?}"),
            },
            other => panic!("unexpected answer {other:?}"),
        };
        assert_eq!(
            format!("{} {body}", status.as_u16()).trim_end(),
            expected,
            "{step}"
        );
    }
    w
}

#[test]
fn create_needs_a_free_name_and_lists_are_sorted() {
    let w = check(&[
        "create zones?name=b&description=rack -> 200 b:rack",
        "create pools?name=a -> 200 a:",
        r#"create zones?name=z1 -> 400 {"name":["Zone with this Name already exists."]}"#,
        r#"create pools?name=default -> 400 {"name":["Resource pool with this Name already exists."]}"#,
        "read zones -> 200 b:rack,default:,z1:,z2:",
        "read pools -> 200 a:,default:,p1:,p2:",
    ]);
    assert!(w.dirty);
}

#[test]
fn zones_are_found_by_name_and_pools_by_id_or_name() {
    check(&[
        "read zones/z2 -> 200 z2:",
        "read zones/1 -> 404 No Zone matches the given query.",
        "read pools/0 -> 200 default:",
        "read pools/p2 -> 200 p2:",
        "update pools/gold?name=x -> 404 No ResourcePool matches the given query.",
    ]);
}

#[test]
fn renaming_carries_the_machines_along() {
    let w = check(&[
        "update zones/z1?name=z9&description=d -> 200 z9:d",
        "update pools/p1?name=&description= -> 200 p1:",
        "update pools/p1?name=p9 -> 200 p9:",
    ]);
    let homes: Vec<_> = w
        .machines
        .iter()
        .map(|m| (m.zone.as_str(), m.pool.as_str()))
        .collect();
    assert_eq!(homes, [("default", "default"), ("z9", "p9")]);
}

#[test]
fn deleting_keeps_defaults_and_rehomes_zone_machines() {
    let w = check(&[
        "delete zones/default -> 400 This zone is the default zone, it cannot be deleted.",
        "delete zones/z1 -> 204",
        "read zones -> 200 default:,z2:",
        "delete pools/0 -> 400 This is the default pool, it cannot be deleted.",
        "delete pools/p1 -> 400 Pool has machines in it, it cannot be deleted.",
        "delete pools/p2 -> 204",
        "read pools -> 200 default:,p1:",
    ]);
    assert_eq!(w.machines[1].zone, "default");
}
