//! Evidence of harm gathered independently of our controllers' own status: a watch on every
//! MaasMachine (which MAAS host each one points at, moment by moment), samples of the
//! simulator's machines (addresses of deployed servers), and at the end the simulator's state
//! and release history.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use maas_sim::{MachineView, NodeStatus, ReleaseRecord, SimHandle};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The erase a release must at least carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Erase {
    /// Quick erase (`erase` + `quick_erase`).
    Quick,
    /// Secure erase (`erase` + `secure_erase`), or a full erase.
    Secure,
    /// Full erase (`erase` alone), or a secure erase (which falls back to a full one).
    Full,
}

impl Erase {
    /// The `releasePolicy.erase` value of the API.
    pub fn policy(self) -> &'static str {
        match self {
            Self::Quick => "Quick",
            Self::Secure => "Secure",
            Self::Full => "Full",
        }
    }

    fn rank(self) -> u8 {
        match self {
            Self::Quick => 1,
            Self::Secure | Self::Full => 2,
        }
    }
}

/// Rank of the erase a release carried: 0 none, 1 quick, 2 secure or full (MAAS gives
/// `secure_erase` precedence over `quick_erase`).
fn release_rank(release: &ReleaseRecord) -> u8 {
    if !release.erases() {
        0
    } else if release.quick_erase && !release.secure_erase {
        1
    } else {
        2
    }
}

/// Releases MAAS accepted whose erase is weaker than `requested`, one line each.
pub(crate) fn weak_erase_releases(machines: &[MachineView], requested: Erase) -> Vec<String> {
    let mut out = Vec::new();
    for machine in machines {
        for (index, release) in machine.releases.iter().enumerate() {
            if release_rank(release) < requested.rank() {
                out.push(format!(
                    "{} release #{} erase={} quick_erase={} secure_erase={} ({:?}, comment {:?})",
                    machine.system_id,
                    index + 1,
                    release.erase,
                    release.quick_erase,
                    release.secure_erase,
                    release.result,
                    release.comment
                ));
            }
        }
    }
    out
}

/// Simulated servers that are not back to Ready and unowned, one line each.
pub(crate) fn leaked_machines(machines: &[MachineView]) -> Vec<String> {
    machines
        .iter()
        .filter(|m| m.status != NodeStatus::Ready || m.owner.is_some())
        .map(|m| {
            format!(
                "{} {} owner={} agent_name={:?}",
                m.system_id,
                m.status_name,
                m.owner.as_deref().unwrap_or("-"),
                m.agent_name
            )
        })
        .collect()
}

/// Addresses held at once by more than one deploying or deployed server: address → servers.
pub(crate) fn shared_addresses(machines: &[MachineView]) -> BTreeMap<String, BTreeSet<String>> {
    let mut holders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for machine in machines
        .iter()
        .filter(|m| matches!(m.status, NodeStatus::Deploying | NodeStatus::Deployed))
    {
        for ip in &machine.ip_addresses {
            holders
                .entry(ip.clone())
                .or_default()
                .insert(machine.system_id.clone());
        }
    }
    holders.retain(|_, ids| ids.len() > 1);
    holders
}

/// The MAAS hosts a MaasMachine points at: `spec.systemID` and the system id of
/// `spec.providerID` (`maas:///<zone>/<system id>`), which machine-controller writes once the
/// host is deployed for it. `status.hostRef` is not a claim: it is the intent machine-controller
/// records *before* it claims a host (under the machine's resourceVersion), and two machines may
/// hold the same intent while one of them loses the claim and withdraws it.
pub(crate) fn pointed_hosts(object: &DynamicObject) -> BTreeSet<String> {
    let data = &object.data;
    let mut hosts = BTreeSet::new();
    if let Some(id) = data["spec"]["systemID"].as_str() {
        hosts.insert(id.to_owned());
    }
    if let Some(id) = data["spec"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
    {
        hosts.insert(id.to_owned());
    }
    hosts.retain(|h| !h.is_empty());
    hosts
}

/// Which host each live MaasMachine points at, kept up to date from watch events; records
/// every host that two live (not deleting) MaasMachines point at at the same moment.
#[derive(Debug, Default)]
pub struct Claims {
    /// uid → (name, hosts) of live MaasMachines.
    live: BTreeMap<String, (String, BTreeSet<String>)>,
    /// uids seen since the last watch restart.
    relisted: Option<BTreeSet<String>>,
    /// host → MaasMachines seen pointing at it at once.
    doubles: BTreeMap<String, BTreeSet<String>>,
}

impl Claims {
    /// Applies one watch event.
    pub fn apply(&mut self, event: Event<DynamicObject>) {
        match event {
            Event::Apply(object) => self.seen(&object),
            Event::InitApply(object) => {
                if let (Some(uids), Some(uid)) =
                    (self.relisted.as_mut(), object.metadata.uid.as_ref())
                {
                    uids.insert(uid.clone());
                }
                self.seen(&object);
            }
            Event::Delete(object) => {
                if let Some(uid) = &object.metadata.uid {
                    self.live.remove(uid);
                }
            }
            Event::Init => self.relisted = Some(BTreeSet::new()),
            Event::InitDone => {
                if let Some(uids) = self.relisted.take() {
                    self.live.retain(|uid, _| uids.contains(uid));
                }
            }
        }
    }

    fn seen(&mut self, object: &DynamicObject) {
        let Some(uid) = object.metadata.uid.clone() else {
            return;
        };
        if object.metadata.deletion_timestamp.is_some() {
            self.live.remove(&uid);
            return;
        }
        let name = object.metadata.name.clone().unwrap_or_default();
        let hosts = pointed_hosts(object);
        for host in &hosts {
            let others: Vec<&String> = self
                .live
                .iter()
                .filter(|(other, (_, theirs))| **other != uid && theirs.contains(host))
                .map(|(_, (other_name, _))| other_name)
                .collect();
            if !others.is_empty() {
                let entry = self.doubles.entry(host.clone()).or_default();
                entry.insert(name.clone());
                entry.extend(others.into_iter().cloned());
            }
        }
        self.live.insert(uid, (name, hosts));
    }

    /// Hosts pointed at by two live MaasMachines at once, with their names.
    pub fn doubles(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.doubles
    }
}

/// What the monitor saw.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Host → MaasMachines that pointed at it at the same moment.
    pub claimed_twice: BTreeMap<String, BTreeSet<String>>,
    /// Address → deployed servers that held it at the same moment.
    pub shared_addresses: BTreeMap<String, BTreeSet<String>>,
    /// Samples of the simulator taken.
    pub samples: u64,
    /// Watch events applied.
    pub events: u64,
    /// Watch errors (the watch is restarted with a backoff).
    pub watch_errors: u64,
}

/// The running monitor.
#[derive(Debug)]
pub struct Monitor {
    stop: CancellationToken,
    task: JoinHandle<Evidence>,
}

impl Monitor {
    /// Watches `maas_machines` and samples `sim` every `every` until [`Self::finish`].
    pub fn start(maas_machines: Api<DynamicObject>, sim: SimHandle, every: Duration) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch(maas_machines, sim, every, stop.clone()));
        Self { stop, task }
    }

    /// Stops the monitor and returns what it saw.
    pub async fn finish(self) -> Evidence {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

async fn watch(
    api: Api<DynamicObject>,
    sim: SimHandle,
    every: Duration,
    stop: CancellationToken,
) -> Evidence {
    let mut claims = Claims::default();
    let mut evidence = Evidence::default();
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            event = events.next() => match event {
                Some(Ok(event)) => {
                    evidence.events += 1;
                    claims.apply(event);
                }
                Some(Err(e)) => {
                    evidence.watch_errors += 1;
                    tracing::warn!(error = %e, "chaos monitor: MaasMachine watch failed, retrying");
                }
                None => break,
            },
            _ = tick.tick() => {
                evidence.samples += 1;
                for (ip, ids) in shared_addresses(&sim.machines()) {
                    evidence.shared_addresses.entry(ip).or_default().extend(ids);
                }
            }
        }
    }
    evidence.claimed_twice = claims.doubles().clone();
    evidence
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use kube::core::GroupVersionKind;
    use maas_sim::ReleaseResult;
    use serde_json::json;

    fn maas_machine(
        uid: &str,
        name: &str,
        system_id: Option<&str>,
        deleting: bool,
    ) -> DynamicObject {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "MaasMachine",
        ));
        let mut object = DynamicObject::new(name, &resource).data(json!({
            "spec": {"systemID": system_id, "providerID": system_id.map(|id| format!("maas:///z1/{id}"))},
            "status": {"hostRef": system_id.map(|id| json!({"name": id}))}
        }));
        object.metadata.uid = Some(uid.into());
        if deleting {
            object.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        object
    }

    #[test]
    fn two_live_machines_on_one_host_are_a_double_claim() {
        let mut claims = Claims::default();
        claims.apply(Event::Apply(maas_machine("u1", "a", Some("abc"), false)));
        claims.apply(Event::Apply(maas_machine("u2", "b", None, false)));
        assert!(claims.doubles().is_empty());
        claims.apply(Event::Apply(maas_machine("u2", "b", Some("abc"), false)));
        assert_eq!(
            claims.doubles().get("abc"),
            Some(&BTreeSet::from(["a".to_owned(), "b".to_owned()]))
        );
    }

    #[test]
    fn the_same_intent_on_two_machines_is_not_a_double_claim() {
        let mut claims = Claims::default();
        claims.apply(Event::Apply(maas_machine("u1", "a", Some("abc"), false)));
        let mut intent = maas_machine("u2", "b", None, false);
        intent.data["status"]["hostRef"] = json!({"name": "abc"});
        claims.apply(Event::Apply(intent));
        assert!(claims.doubles().is_empty(), "{:?}", claims.doubles());
    }

    #[test]
    fn a_host_handed_over_after_deletion_is_not_a_double_claim() {
        let mut claims = Claims::default();
        claims.apply(Event::Apply(maas_machine("u1", "a", Some("abc"), false)));
        claims.apply(Event::Apply(maas_machine("u1", "a", Some("abc"), true)));
        claims.apply(Event::Apply(maas_machine("u2", "b", Some("abc"), false)));
        claims.apply(Event::Delete(maas_machine("u1", "a", Some("abc"), true)));
        claims.apply(Event::Apply(maas_machine("u3", "c", Some("def"), false)));
        assert!(claims.doubles().is_empty(), "{:?}", claims.doubles());
        // A relist drops objects deleted while the watch was down.
        claims.apply(Event::Init);
        claims.apply(Event::InitApply(maas_machine(
            "u3",
            "c",
            Some("def"),
            false,
        )));
        claims.apply(Event::InitDone);
        claims.apply(Event::Apply(maas_machine("u4", "d", Some("abc"), false)));
        assert!(claims.doubles().is_empty(), "{:?}", claims.doubles());
        claims.apply(Event::Apply(maas_machine("u5", "e", Some("def"), false)));
        assert_eq!(claims.doubles().len(), 1);
    }

    fn view(
        id: &str,
        status: NodeStatus,
        ips: &[&str],
        releases: Vec<ReleaseRecord>,
    ) -> MachineView {
        MachineView {
            system_id: id.into(),
            hostname: id.into(),
            status,
            status_number: status.number(),
            status_name: status.name().into(),
            status_message: None,
            error_description: String::new(),
            owner: (status != NodeStatus::Ready).then(|| "admin".to_owned()),
            agent_name: String::new(),
            owner_data: BTreeMap::new(),
            power_state: maas_sim::PowerState::Off,
            power_on_count: 0,
            zone: "z1".into(),
            pool: "default".into(),
            tags: BTreeSet::new(),
            cpu_count: 4,
            memory: 8192,
            architecture: "amd64/generic".into(),
            osystem: String::new(),
            distro_series: String::new(),
            hwe_kernel: None,
            user_data: None,
            ephemeral_deploy: false,
            locked: false,
            ip_addresses: ips.iter().map(|ip| (*ip).to_owned()).collect(),
            mac_addresses: Vec::new(),
            last_comment: String::new(),
            releases,
        }
    }

    fn release(erase: bool, quick: bool, secure: bool) -> ReleaseRecord {
        ReleaseRecord {
            erase,
            quick_erase: quick,
            secure_erase: secure,
            force: false,
            comment: String::new(),
            result: ReleaseResult::Released,
        }
    }

    #[test]
    fn releases_weaker_than_requested_are_listed() {
        let machines = vec![
            view(
                "a",
                NodeStatus::Ready,
                &[],
                vec![release(true, true, false)],
            ),
            view(
                "b",
                NodeStatus::Ready,
                &[],
                vec![release(true, false, true), release(false, false, false)],
            ),
            view(
                "c",
                NodeStatus::Ready,
                &[],
                vec![release(true, false, false)],
            ),
        ];
        let quick = weak_erase_releases(&machines, Erase::Quick);
        assert_eq!(quick.len(), 1);
        assert!(
            quick[0].starts_with("b release #2 erase=false"),
            "{quick:?}"
        );
        let secure = weak_erase_releases(&machines, Erase::Secure);
        assert_eq!(secure.len(), 2, "{secure:?}");
        assert!(secure[0].starts_with("a release #1"));
        assert_eq!(weak_erase_releases(&machines, Erase::Full).len(), 2);
    }

    #[test]
    fn leaks_and_shared_addresses_come_from_the_servers() {
        let machines = vec![
            view("a", NodeStatus::Deployed, &["10.0.0.11"], Vec::new()),
            view(
                "b",
                NodeStatus::Deploying,
                &["10.0.0.11", "10.0.0.12"],
                Vec::new(),
            ),
            view("c", NodeStatus::Ready, &["10.0.0.12"], Vec::new()),
            view("d", NodeStatus::Allocated, &[], Vec::new()),
        ];
        let shared = shared_addresses(&machines);
        assert_eq!(
            shared,
            BTreeMap::from([(
                "10.0.0.11".to_owned(),
                BTreeSet::from(["a".to_owned(), "b".to_owned()])
            )])
        );
        let leaked = leaked_machines(&machines);
        assert_eq!(leaked.len(), 3, "{leaked:?}");
        assert!(leaked.iter().all(|l| !l.starts_with('c')));
    }
}
