//! Helpers shared by the simulator tests.

#![allow(dead_code, unreachable_pub)]

use std::sync::Mutex;
use std::time::Duration;

use maas_api_client::{
    AllocateRequest, ApiKey, Config, ConfigBuilder, Interface, Link, LinkMode, LinkSubnetRequest,
    MaasClient, MaasError, MachineFilter, MachineStatus, RequestEvent, RequestObserver,
    RetryPolicy,
};
use maas_sim::{FaultConfig, OpFault, RunningSim, SimConfig, Simulator};

pub fn fast_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_retry_after: Duration::from_millis(50),
    }
}

pub fn builder(sim: &RunningSim) -> ConfigBuilder {
    Config::builder(&sim.url(), ApiKey::parse(&sim.api_key()).unwrap())
        .retry_policy(fast_retries(4))
        .request_timeout(Duration::from_secs(10))
}

pub fn client(sim: &RunningSim) -> MaasClient {
    MaasClient::new(builder(sim).build().unwrap()).unwrap()
}

pub fn build(builder: ConfigBuilder) -> MaasClient {
    MaasClient::new(builder.build().unwrap()).unwrap()
}

/// The system id of the first machine the client lists.
pub async fn first_id(client: &MaasClient) -> String {
    let machines = client.list_machines(&MachineFilter::new()).await.unwrap();
    machines[0].system_id.clone()
}

pub async fn start(config: SimConfig) -> RunningSim {
    Simulator::start(config).await.unwrap()
}

pub fn instant(machines: usize) -> SimConfig {
    SimConfig {
        machines,
        ..SimConfig::instant()
    }
}

pub fn fault(op: &str, status: u16, retry_after: Option<u64>) -> FaultConfig {
    FaultConfig {
        ops: vec![OpFault {
            op: op.to_owned(),
            error_rate: 1.0,
            status,
            latency_ms: 0,
            retry_after,
            body: None,
        }],
        ..FaultConfig::default()
    }
}

/// A fault that answers every `op` call after `latency_ms` without failing it.
pub fn latency(op: &str, latency_ms: u64) -> FaultConfig {
    let mut slow = fault(op, 503, None);
    slow.ops[0].error_rate = 0.0;
    slow.ops[0].latency_ms = latency_ms;
    slow
}

/// Allocates machine `id` with no other constraint.
pub async fn allocate(client: &MaasClient, id: &str) -> maas_api_client::Machine {
    client
        .allocate(&AllocateRequest {
            system_id: Some(id.to_owned()),
            ..AllocateRequest::default()
        })
        .await
        .unwrap()
}

/// The machines allocated with `agent`.
pub async fn allocated_to(client: &MaasClient, agent: &str) -> Vec<maas_api_client::Machine> {
    client
        .list_machines(&MachineFilter::new().agent_name(agent))
        .await
        .unwrap()
}

pub async fn wait_for_status(
    client: &MaasClient,
    id: &str,
    wanted: MachineStatus,
) -> maas_api_client::Machine {
    for _ in 0..200 {
        let machine = client.get_machine(id).await.unwrap();
        if machine.status == wanted {
            return machine;
        }
        assert!(
            !machine.status.is_failure(),
            "machine {id} failed: {:?}",
            machine.status
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("machine {id} never reached {wanted}");
}

/// The static link among an interface's links.
pub fn static_link(iface: &Interface) -> &Link {
    iface
        .links
        .iter()
        .find(|l| l.mode == LinkMode::Static)
        .unwrap()
}

/// Links interface `iface` of machine `id` to `subnet` with the static address `ip`.
pub async fn link_static(
    client: &MaasClient,
    id: &str,
    iface: i64,
    subnet: i64,
    ip: &str,
) -> Result<Interface, MaasError> {
    let request = LinkSubnetRequest::static_ip(subnet, ip.parse().unwrap());
    client.link_subnet(id, iface, &request).await
}

#[derive(Debug, Default)]
pub struct Recorder {
    pub events: Mutex<Vec<RequestEvent>>,
}

impl RequestObserver for Recorder {
    fn observe(&self, event: &RequestEvent) {
        self.events.lock().unwrap().push(*event);
    }
}
