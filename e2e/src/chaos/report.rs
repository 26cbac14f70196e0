//! What a chaos run found: the harm counts (each from evidence outside our controllers), what
//! was injected, and how long each phase took.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use super::evidence::Erase;

/// One phase of the run.
#[derive(Debug, Clone)]
pub struct Phase {
    /// `provision`, `scale`, `delete`, `settle`.
    pub name: &'static str,
    /// How long it took (or ran until its timeout).
    pub elapsed: Duration,
    /// Whether it reached its goal before its timeout.
    pub completed: bool,
    /// What was seen when it ended (Machines, servers by state).
    pub note: String,
}

/// Faults the simulator injected, and kills the run did.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    /// 5xx answers of the per-operation error rate and of the outage.
    pub errors: u64,
    /// Calls held and dropped without effect.
    pub timeouts: u64,
    /// Calls that took effect and then answered an error.
    pub lost_answers: u64,
    /// The outage: its length, when it began (since the cluster was declared) and how many
    /// servers were in use then.
    pub outage: Option<(Duration, Duration, usize)>,
    /// SIGKILL + restart per controller.
    pub kills: BTreeMap<&'static str, u64>,
    /// Controllers that exited by themselves (name and exit status); they were restarted.
    pub unexpected_exits: Vec<String>,
}

/// The outcome of [`super::run`].
#[derive(Debug, Clone)]
pub struct ChaosReport {
    /// Machines asked for (control plane + workers).
    pub machines: usize,
    /// Machines after the scale-down.
    pub scale_to: usize,
    /// Simulated MAAS servers.
    pub servers: usize,
    /// Machines Running with a nodeRef when provisioning ended.
    pub provisioned: usize,
    /// Servers not back to Ready and unowned after everything was deleted and settled.
    pub leaked: Vec<String>,
    /// Hosts two live MaasMachines pointed at at the same moment → those MaasMachines.
    pub claimed_twice: BTreeMap<String, BTreeSet<String>>,
    /// Addresses held by two deployed servers at the same moment (`None`: not observable).
    pub addresses_given_twice: Option<BTreeMap<String, BTreeSet<String>>>,
    /// The erase every release had to carry.
    pub requested_erase: Erase,
    /// Releases MAAS accepted with a weaker erase.
    pub weak_erase_releases: Vec<String>,
    /// Releases MAAS accepted in all.
    pub releases: usize,
    /// MAAS API calls from declaring the cluster to the end (failed ones included).
    pub maas_calls: u64,
    /// What was injected.
    pub injected: Injected,
    /// Provision, scale, delete, settle.
    pub phases: Vec<Phase>,
    /// From declaring the cluster to the end of the settle phase.
    pub elapsed: Duration,
    /// Watch events and simulator samples the monitor took, and its watch errors.
    pub monitor: (u64, u64, u64),
    /// Where the process logs were copied.
    pub log_dir: Option<PathBuf>,
}

impl ChaosReport {
    /// Sum of the harm counts: leaked servers, hosts claimed twice, addresses given twice and
    /// releases without the requested erase. Must be 0.
    pub fn harm(&self) -> u64 {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        count(self.leaked.len())
            + count(self.claimed_twice.len())
            + count(self.addresses_given_twice.as_ref().map_or(0, BTreeMap::len))
            + count(self.weak_erase_releases.len())
    }

    /// Phases that did not reach their goal in time.
    pub fn incomplete_phases(&self) -> Vec<&'static str> {
        self.phases
            .iter()
            .filter(|p| !p.completed)
            .map(|p| p.name)
            .collect()
    }

    /// MAAS calls per machine asked for.
    pub fn calls_per_machine(&self) -> f64 {
        let machines = u32::try_from(self.machines.max(1)).unwrap_or(u32::MAX);
        f64::from(u32::try_from(self.maas_calls).unwrap_or(u32::MAX)) / f64::from(machines)
    }

    /// The printed table, then the details of every harm found.
    pub fn table(&self) -> String {
        let mut out = String::from("| measure | value |\n|---|---|\n");
        let mut row = |measure: &str, value: String| {
            let _ = writeln!(out, "| {measure} | {value} |");
        };
        row(
            "machines provisioned",
            format!("{} of {}", self.provisioned, self.machines),
        );
        row("MAAS machines leaked", self.leaked.len().to_string());
        row("hosts claimed twice", self.claimed_twice.len().to_string());
        row(
            "addresses given twice",
            self.addresses_given_twice.as_ref().map_or_else(
                || "n/a (no IPAM yet)".to_owned(),
                |shared| {
                    format!(
                        "{} (any address on two deploying or deployed servers at once: the workers' static pool addresses and what MAAS assigned)",
                        shared.len()
                    )
                },
            ),
        );
        row(
            &format!(
                "servers released without the requested erase ({})",
                self.requested_erase.policy()
            ),
            format!(
                "{} of {} releases",
                self.weak_erase_releases.len(),
                self.releases
            ),
        );
        row(
            "MAAS calls per machine",
            format!(
                "{:.1} ({} calls)",
                self.calls_per_machine(),
                self.maas_calls
            ),
        );
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|p| {
                format!(
                    "{} {:.0} s{}",
                    p.name,
                    p.elapsed.as_secs_f64(),
                    if p.completed { "" } else { " TIMED OUT" }
                )
            })
            .collect();
        row(
            "time",
            format!(
                "{:.0} s ({})",
                self.elapsed.as_secs_f64(),
                phases.join(", ")
            ),
        );
        let kills: u64 = self.injected.kills.values().sum();
        let by_name: Vec<String> = self
            .injected
            .kills
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        row(
            "controllers SIGKILLed and restarted",
            format!("{kills} ({})", by_name.join(", ")),
        );
        row(
            "controllers that exited by themselves",
            self.injected.unexpected_exits.len().to_string(),
        );
        row(
            "faults injected",
            format!(
                "{} 5xx, {} timeouts, {} commit-then-fail, outage {}",
                self.injected.errors,
                self.injected.timeouts,
                self.injected.lost_answers,
                self.injected.outage.map_or_else(
                    || "none".to_owned(),
                    |(length, began, in_use)| format!(
                        "{} s from {} s ({in_use} servers in use)",
                        length.as_secs(),
                        began.as_secs()
                    )
                )
            ),
        );
        row(
            "servers / machines / after scale-down",
            format!("{} / {} / {}", self.servers, self.machines, self.scale_to),
        );
        let (events, samples, errors) = self.monitor;
        row(
            "evidence gathered",
            format!(
                "{events} MaasMachine watch events, {samples} simulator samples, {errors} watch errors"
            ),
        );
        self.details(&mut out);
        out
    }

    fn details(&self, out: &mut String) {
        let mut section = |title: &str, lines: Vec<String>| {
            if !lines.is_empty() {
                let _ = writeln!(out, "\n{title}:");
                for line in lines {
                    let _ = writeln!(out, "  {line}");
                }
            }
        };
        let pairs = |map: &BTreeMap<String, BTreeSet<String>>| -> Vec<String> {
            map.iter()
                .map(|(key, names)| {
                    format!(
                        "{key}: {}",
                        names.iter().cloned().collect::<Vec<_>>().join(", ")
                    )
                })
                .collect()
        };
        section("MAAS machines leaked", self.leaked.clone());
        section("hosts claimed twice", pairs(&self.claimed_twice));
        if let Some(shared) = &self.addresses_given_twice {
            section("addresses given twice", pairs(shared));
        }
        section(
            "releases without the requested erase",
            self.weak_erase_releases.clone(),
        );
        section(
            "controllers that exited by themselves",
            self.injected.unexpected_exits.clone(),
        );
        section(
            "phases that timed out",
            self.phases
                .iter()
                .filter(|p| !p.completed)
                .map(|p| format!("{}: {}", p.name, p.note))
                .collect(),
        );
        if let Some(dir) = &self.log_dir {
            let _ = writeln!(out, "\nprocess logs: {}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ChaosReport {
        ChaosReport {
            machines: 10,
            scale_to: 6,
            servers: 12,
            provisioned: 10,
            leaked: Vec::new(),
            claimed_twice: BTreeMap::new(),
            addresses_given_twice: Some(BTreeMap::new()),
            requested_erase: Erase::Quick,
            weak_erase_releases: Vec::new(),
            releases: 10,
            maas_calls: 250,
            injected: Injected {
                errors: 20,
                timeouts: 4,
                lost_answers: 5,
                outage: Some((Duration::from_secs(10), Duration::from_secs(20), 3)),
                kills: BTreeMap::from([("maas-client", 3), ("machine-controller", 2)]),
                unexpected_exits: Vec::new(),
            },
            phases: vec![Phase {
                name: "provision",
                elapsed: Duration::from_secs(60),
                completed: true,
                note: String::new(),
            }],
            elapsed: Duration::from_secs(100),
            monitor: (1, 2, 0),
            log_dir: None,
        }
    }

    #[test]
    fn harm_sums_every_count_and_the_table_shows_them() {
        let mut r = report();
        assert_eq!(r.harm(), 0);
        let table = r.table();
        assert!(
            table.contains("| machines provisioned | 10 of 10 |"),
            "{table}"
        );
        assert!(table.contains("| MAAS calls per machine | 25.0 (250 calls) |"));
        assert!(table.contains(
            "| controllers SIGKILLed and restarted | 5 (maas-client 3, machine-controller 2) |"
        ));
        assert!(table.contains(
            "20 5xx, 4 timeouts, 5 commit-then-fail, outage 10 s from 20 s (3 servers in use)"
        ));
        assert!(table.contains("| evidence gathered | 1 MaasMachine watch events, 2 simulator samples, 0 watch errors |"));
        r.leaked.push("abc Deployed owner=admin".into());
        r.claimed_twice
            .insert("def".into(), BTreeSet::from(["a".into(), "b".into()]));
        r.weak_erase_releases.push("ghi release #1".into());
        r.addresses_given_twice = None;
        assert_eq!(r.harm(), 3);
        let table = r.table();
        assert!(table.contains("n/a (no IPAM yet)"));
        assert!(
            table.contains("hosts claimed twice:\n  def: a, b"),
            "{table}"
        );
        assert!(table.contains("1 of 10 releases"));
    }
}
