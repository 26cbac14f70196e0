use super::*;
use crate::config::SimConfig;
use crate::inventory::build_world;
use crate::params::parse_urlencoded;
use crate::selection::{choose, matches, no_match_message};

fn world() -> World {
    let mut w = build_world(&SimConfig {
        machines: 6,
        zones: vec!["z1".into(), "z2".into()],
        ..SimConfig::default()
    })
    .unwrap();
    let specs = [
        (4, 8192),
        (8, 16384),
        (16, 65536),
        (4, 4096),
        (32, 131_072),
        (8, 8192),
    ];
    for (m, (cpu, mem)) in w.machines.iter_mut().zip(specs) {
        m.cpu_count = cpu;
        m.memory = mem;
        m.architecture = "amd64/generic".to_owned();
    }
    w.machines[2].tags.insert("gpu".to_owned());
    w.machines[4].tags.insert("gpu".to_owned());
    w.tags.push(crate::model::Tag {
        name: "gpu".into(),
        definition: String::new(),
        comment: String::new(),
        kernel_opts: String::new(),
    });
    w
}

fn choose_with(w: &World, query: &[u8]) -> Result<Option<usize>, ApiError> {
    let params = parse_urlencoded(query);
    let c = parse(&params, w, Mode::Allocate)?;
    Ok(choose(w, &c, |_| true))
}

#[test]
fn cheapest_fit_wins() {
    let w = world();
    // Machine 3 (4 cores, 4 GiB: cost 8) is the cheapest of all.
    assert_eq!(choose_with(&w, b"").unwrap(), Some(3));
    // At least 8 cores: machines 1 (8+16=24) and 5 (8+8=16) -> 5.
    assert_eq!(choose_with(&w, b"cpu_count=8").unwrap(), Some(5));
    // Memory is a minimum in MiB.
    assert_eq!(choose_with(&w, b"mem=60000").unwrap(), Some(2));
    assert_eq!(choose_with(&w, b"tags=gpu").unwrap(), Some(2));
    assert_eq!(choose_with(&w, b"tags=gpu&cpu_count=20").unwrap(), Some(4));
    assert_eq!(choose_with(&w, b"not_tags=gpu&cpu_count=10").unwrap(), None);
    // Several cpu_count values: the minimum counts.
    assert_eq!(
        choose_with(&w, b"cpu_count=30&cpu_count=8").unwrap(),
        Some(5)
    );
}

#[test]
fn only_ready_machines_are_candidates() {
    let mut w = world();
    w.machines[3].status = NodeStatus::Allocated;
    assert_eq!(choose_with(&w, b"").unwrap(), Some(0));
}

#[test]
fn zones_names_ids_and_arches() {
    let w = world();
    let zone = w.machines[4].zone.clone();
    let q = format!("zone={zone}&cpu_count=32");
    assert_eq!(choose_with(&w, q.as_bytes()).unwrap(), Some(4));
    let q = format!("system_id={}", w.machines[1].system_id);
    assert_eq!(choose_with(&w, q.as_bytes()).unwrap(), Some(1));
    let q = format!("name={}.maas", w.machines[1].hostname);
    assert_eq!(choose_with(&w, q.as_bytes()).unwrap(), Some(1));
    assert_eq!(choose_with(&w, b"arch=arm64").unwrap(), None);
    assert_eq!(choose_with(&w, b"arch=amd64").unwrap(), Some(3));
    assert_eq!(choose_with(&w, b"arch=amd64/generic").unwrap(), Some(3));
    assert_eq!(choose_with(&w, b"pod=x").unwrap(), None);
    assert_eq!(choose_with(&w, b"storage=100000").unwrap(), None);
    assert_eq!(choose_with(&w, b"storage=root:10").unwrap(), Some(3));
}

#[test]
fn strict_validation_errors() {
    let w = world();
    let field = |q: &[u8]| match choose_with(&w, q) {
        Err(e) => match e.body {
            crate::error::ErrorBody::Json(v) => v.to_string(),
            other => format!("{other:?}"),
        },
        Ok(v) => format!("ok {v:?}"),
    };
    assert_eq!(field(b"foo=1"), r#"{"foo":["No such constraint."]}"#);
    assert_eq!(
        field(b"not_in_zones=z1"),
        r#"{"not_in_zones":["No such constraint."]}"#
    );
    assert_eq!(
        field(b"ephemeral_deploy=true"),
        r#"{"ephemeral_deploy":["No such constraint."]}"#
    );
    assert_eq!(
        field(b"zone=nowhere"),
        r#"{"zone":["No such zone(s): nowhere."]}"#
    );
    assert_eq!(
        field(b"tags=nope"),
        r#"{"tags":["No such tag(s): 'nope'."]}"#
    );
    assert_eq!(
        field(b"pool=deep"),
        r#"{"pool":["No such pool(s): deep."]}"#
    );
    assert_eq!(
        field(b"arch=vax"),
        r#"{"arch":["Architecture not recognised."]}"#
    );
    assert_eq!(
        field(b"cpu_count=many"),
        r#"{"cpu_count":["Invalid CPU count: number required."]}"#
    );
    assert_eq!(
        field(b"mem=lots"),
        r#"{"mem":["Invalid memory: number of MiB required."]}"#
    );
    assert_eq!(
        field(b"agent_name=x&comment=y&dry_run=true&op=allocate"),
        "ok Some(3)"
    );
}

#[test]
fn list_filters() {
    let mut w = world();
    w.machines[1].agent_name = "capi".to_owned();
    w.machines[1].status = NodeStatus::Deployed;
    let params = parse_urlencoded(b"agent_name=capi&status=deployed");
    let c = parse(&params, &w, Mode::List).unwrap();
    let hits: Vec<usize> = (0..w.machines.len())
        .filter(|i| matches(&c, &w.machines[*i], &w))
        .collect();
    assert_eq!(hits, vec![1]);
    let params = parse_urlencoded(b"status=bogus");
    assert!(parse(&params, &w, Mode::List).is_err());
    let params = parse_urlencoded(b"id=nope");
    let c = parse(&params, &w, Mode::List).unwrap();
    assert!(w.machines.iter().all(|m| !matches(&c, m, &w)));
    // `name` is an allocate constraint, not a list filter.
    assert!(parse(&parse_urlencoded(b"name=x"), &w, Mode::List).is_err());
}

#[test]
fn no_match_texts_are_maas_texts() {
    let w = world();
    let check = |q: &[u8]| {
        let params = parse_urlencoded(q);
        let c = parse(&params, &w, Mode::Allocate).unwrap();
        no_match_message(&params, &c)
    };
    assert_eq!(check(b""), "No machine available.");
    assert_eq!(check(b"agent_name=a"), "No machine available.");
    assert_eq!(
        check(b"system_id=abc"),
        "No machine with system ID abc available."
    );
    assert_eq!(
        check(b"cpu_count=4&mem=4096&tags=gpu&op=allocate"),
        "No available machine matches constraints: [('cpu_count', ['4']), ('mem', ['4096']), ('tags', ['gpu'])] \
(resolved to \"cpu_count=4.0 mem=4096.0 tags=gpu\")"
    );
}
