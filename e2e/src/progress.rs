//! A terminal view of a cluster coming up: Machines with their phase, host, provider id and
//! any remediation in progress, MAAS servers by state (and how many are powered off), a
//! progress bar and the elapsed time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use kube::api::{DynamicObject, ListParams};
use maas_sim::SimHandle;

use crate::error::{Error, Result};
use crate::harness::dynamic_api;

/// One observation of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// (name, phase, host, provider id, remediation) per Machine.
    pub machines: Vec<[String; 5]>,
    /// MAAS status name → number of servers.
    pub servers: BTreeMap<String, usize>,
    /// Servers powered off.
    pub powered_off: usize,
    /// Machines Running with a nodeRef.
    pub running: usize,
}

/// Reads Machines and MaasMachines of `namespace` and the simulator's servers.
pub async fn snapshot(client: &kube::Client, namespace: &str, sim: &SimHandle) -> Result<Snapshot> {
    let machines = list(client, namespace, "cluster.x-k8s.io", "v1beta2", "Machine").await?;
    let maas_machines = list(
        client,
        namespace,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasMachine",
    )
    .await?;
    let host_of: BTreeMap<String, String> = maas_machines
        .iter()
        .filter_map(|m| {
            let host = m.data["status"]["hostRef"]["name"].as_str()?;
            Some((m.metadata.name.clone()?, host.to_owned()))
        })
        .collect();
    let remediations: BTreeMap<String, String> = list(
        client,
        namespace,
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "MaasRemediation",
    )
    .await?
    .iter()
    .filter_map(|r| {
        let status = &r.data["status"];
        let summary = format!(
            "remediation: {} (attempt {} of {})",
            status["phase"].as_str().unwrap_or("new"),
            status["retryCount"].as_i64().unwrap_or(0),
            r.data["spec"]["strategy"]["retryLimit"]
                .as_i64()
                .unwrap_or(1)
        );
        Some((r.metadata.name.clone()?, summary))
    })
    .collect();
    let mut snap = Snapshot::default();
    for machine in &machines {
        let name = machine.metadata.name.clone().unwrap_or_default();
        let phase = machine.data["status"]["phase"]
            .as_str()
            .unwrap_or("Pending")
            .to_owned();
        let infra = machine.data["spec"]["infrastructureRef"]["name"]
            .as_str()
            .unwrap_or_default();
        let host = host_of.get(infra).cloned().unwrap_or_else(|| "-".into());
        let provider = machine.data["spec"]["providerID"]
            .as_str()
            .unwrap_or("-")
            .to_owned();
        if phase == "Running" && machine.data["status"]["nodeRef"]["name"].is_string() {
            snap.running += 1;
        }
        let remediation = remediations.get(&name).cloned().unwrap_or_default();
        snap.machines
            .push([name, phase, host, provider, remediation]);
    }
    snap.machines.sort();
    for server in sim.machines() {
        if server.power_state == maas_sim::PowerState::Off
            && server.status == maas_sim::NodeStatus::Deployed
        {
            snap.powered_off += 1;
        }
        *snap.servers.entry(server.status_name).or_default() += 1;
    }
    Ok(snap)
}

async fn list(
    client: &kube::Client,
    ns: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Vec<DynamicObject>> {
    let api = dynamic_api(client, ns, group, version, kind).await?;
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube(format!("listing {kind}")))?
        .items)
}

/// The screen for `snap` after `elapsed`, for `expected` machines.
pub fn render(snap: &Snapshot, expected: usize, elapsed: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<30} {:<13} {:<22} {:<24} REMEDIATION",
        "MACHINE", "PHASE", "MAAS HOST", "PROVIDER ID"
    );
    for [name, phase, host, provider, remediation] in &snap.machines {
        let _ = writeln!(
            out,
            "{name:<30} {phase:<13} {host:<22} {provider:<24} {remediation}"
        );
    }
    let servers: Vec<String> = snap
        .servers
        .iter()
        .map(|(state, n)| format!("{state}: {n}"))
        .collect();
    let _ = writeln!(out, "\nMAAS servers  {}", servers.join("  "));
    if snap.powered_off > 0 {
        let _ = writeln!(
            out,
            "              {} deployed server(s) powered off",
            snap.powered_off
        );
    }
    let width = 40;
    let filled = (snap.running * width)
        .checked_div(expected)
        .unwrap_or(width);
    let _ = writeln!(
        out,
        "\n[{}{}] {}/{} machines running   {:>5.1}s",
        "#".repeat(filled.min(width)),
        ".".repeat(width - filled.min(width)),
        snap.running,
        expected,
        elapsed.as_secs_f64()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_shows_rows_servers_and_a_proportional_bar() {
        let snap = Snapshot {
            machines: vec![[
                "m-0".into(),
                "Running".into(),
                "host-a".into(),
                "maas:///z1/abc123".into(),
                "remediation: Waiting (attempt 1 of 2)".into(),
            ]],
            servers: BTreeMap::from([("Deployed".into(), 1), ("Ready".into(), 19)]),
            powered_off: 1,
            running: 1,
        };
        let screen = render(&snap, 2, Duration::from_secs(3));
        assert!(screen.contains("m-0") && screen.contains("maas:///z1/abc123"));
        assert!(screen.contains("Deployed: 1  Ready: 19"));
        assert!(screen.contains("remediation: Waiting (attempt 1 of 2)"));
        assert!(screen.contains("1 deployed server(s) powered off"));
        assert!(screen.contains(&format!("[{}{}] 1/2", "#".repeat(20), ".".repeat(20))));
    }
}
