//! Shared set-up of the networking tests: two machines with two NICs each and a subnet on a
//! tagged VLAN.

use maas_sim::{NicSpec, SubnetSpec};
use reqwest::Method;
use serde_json::Value;

use super::{TestSim, start_instant};

/// Two machines with two NICs each on `10.20.0.0/16`; a subnet `10.40.0.0/24` on VLAN 100 of
/// fabric-0 with a dynamic range `.200-.250`; the machines' ids.
pub async fn setup() -> (TestSim, Vec<String>) {
    let t = start_instant(2).await;
    let state = t.sim.state();
    state
        .add_subnet(&SubnetSpec {
            cidr: "10.40.0.0/24".into(),
            gateway_ip: Some("10.40.0.1".into()),
            vid: 100,
            dynamic_ranges: vec!["10.40.0.200-10.40.0.250".into()],
            ..SubnetSpec::default()
        })
        .unwrap();
    let ids: Vec<String> = state.machines().into_iter().map(|m| m.system_id).collect();
    for (n, id) in ids.iter().enumerate() {
        let nics: Vec<NicSpec> = (0..2)
            .map(|k| NicSpec {
                mac_address: format!("52:54:00:77:0{n}:0{k}"),
                subnet: None,
            })
            .collect();
        state.set_nics(id, &nics).unwrap();
    }
    (t, ids)
}

pub async fn ifaces(t: &TestSim, id: &str) -> Vec<Value> {
    let v = t
        .json(Method::GET, &format!("nodes/{id}/interfaces/"), &[])
        .await;
    v.as_array().unwrap().clone()
}

pub fn by_name<'a>(ifaces: &'a [Value], name: &str) -> &'a Value {
    ifaces.iter().find(|i| i["name"] == name).unwrap()
}
