//! The gateway's only path to MAAS: the typed client behind a process-wide rate limit, with
//! request metrics per operation.
//!
//! The concurrency limit lives in the client ([`maas_api_client::Config::max_concurrent_requests`],
//! shared by all clones); the rate limit (a GCRA token bucket from `governor`) is taken here
//! before every call. Retries of idempotent calls inside the client are not re-limited: they are
//! already spaced by the client's backoff.
//!
//! Calls for one machine wait for the rate limit in the order they asked (a fair queue:
//! `governor` alone wakes every waiter at once and lets any of them win, so under a long queue
//! one host's allocate could wait far longer than the others'). A listing that serves many
//! machines at once (the batched observation, the inventory sync, the sweeper) does not queue
//! behind them: it waits only for the next token, so a change in MAAS reaches the hosts within
//! the observation interval however many allocations are queued.
//!
//! Every mutating call (each non-GET: allocate, deploy, release, power, annotations, hostname,
//! links, interfaces, IP ranges, DNS writes) checks the leadership fence ([`capmaas_runtime::Fence`]) after the rate
//! limit and right before it is sent, and is abandoned (with its retries) if the fence lapses
//! while it runs: [`MaasError::Fenced`], so no write goes out once another replica may lead.

/// Declares public methods of [`Maas`] that each forward one client call through one of its
/// call wrappers (`read`, `write` and their `_value` forms): the wrapper, with its leading
/// arguments, then the client call, written against `client`. One declaration per call keeps
/// the rate limit, span and fence from being wired by hand, and differently, in each method.
macro_rules! forward {
    ($(
        $(#[$attr:meta])*
        fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty {
            $wrapper:ident($($how:expr),+) |$client:ident| $call:expr
        }
    )*) => {$(
        $(#[$attr])*
        pub async fn $name(&self, $($arg: $ty),*) -> Result<$out, MaasError> {
            let $client = &self.client;
            self.$wrapper($($how,)+ $call).await
        }
    )*};
}

mod metrics;
mod network;
mod queue;
mod span;
mod vm_hosts;

use std::collections::BTreeMap;
use std::future::Future;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use capmaas_runtime::Fence;

pub use self::metrics::MaasMetrics;
use self::queue::{Lane, RateQueue};
use self::span::in_call_span;

use maas_api_client::{
    AllocateRequest, CurrentUser, DeployRequest, DnsResource, DnsResourceFilter, DnsResourceSpec,
    Interface, LinkSubnetRequest, MaasClient, MaasError, Machine, MachineFilter, MachineList,
    ReleaseRequest, StopMode, Subnet,
};

/// A MAAS answer and the instant its request went out (after the rate limit): the machine
/// cache orders views by it, so it must not include the time spent waiting for a turn.
#[derive(Debug, Clone)]
pub struct Timed<T> {
    /// The answer.
    pub value: T,
    /// When the request was sent.
    pub sent: Instant,
}

impl<T> Timed<Option<T>> {
    /// The answer, if there is one, still timed.
    pub fn transpose(self) -> Option<Timed<T>> {
        let sent = self.sent;
        self.value.map(|value| Timed { value, sent })
    }
}

/// Rate-limited, fenced MAAS access; cheap to clone.
#[derive(Clone)]
pub struct Maas {
    client: MaasClient,
    rate: RateQueue,
    fence: Fence,
    metrics: Option<MaasMetrics>,
}

impl std::fmt::Debug for Maas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Maas").finish_non_exhaustive()
    }
}

impl Maas {
    /// Wraps `client` with a limit of `per_second` requests (bursts of the same size); unfenced
    /// until [`with_fence`](Self::with_fence).
    pub fn new(client: MaasClient, per_second: NonZeroU32) -> Self {
        Self {
            client,
            rate: RateQueue::new(per_second),
            fence: Fence::unfenced(),
            metrics: None,
        }
    }

    /// Records rate-limit waits in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: MaasMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Refuses every mutating call while `fence` is not valid (the runtime's
    /// [`capmaas_runtime::Runtime::fence`]).
    #[must_use]
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    /// How long a call for one machine asked now would wait for its turn: the calls queued
    /// ahead of it at the rate limit (listings, which go ahead, not counted).
    pub fn backlog(&self) -> Duration {
        self.rate.backlog()
    }

    /// Waits for the rate limiter (a [`Lane::InTurn`] call in its turn); the wait goes to the
    /// current (call) span and the metrics.
    async fn permit(&self, operation: &'static str, lane: Lane) -> Instant {
        let waited = self.rate.wait(lane).await;
        tracing::Span::current().record(
            "capmaas.rate_limit.wait_ms",
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        );
        if let Some(metrics) = &self.metrics {
            metrics.observe_rate_limit_wait(operation, waited);
        }
        Instant::now()
    }

    /// A reading call: rate limit, then the call, inside its span.
    async fn read<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        lane: Lane,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<Timed<T>, MaasError> {
        in_call_span(operation, system_id, async {
            let sent = self.permit(operation, lane).await;
            call.await.map(|value| Timed { value, sent })
        })
        .await
    }

    /// A mutating call: rate limit, then the fence check right before sending; abandoned (with
    /// the client's retries) if the fence lapses while it runs. Inside its span.
    async fn write<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<Timed<T>, MaasError> {
        self.write_in(operation, system_id, Lane::InTurn, call)
            .await
    }

    /// [`Self::write`] of a call for people ([`Lane::Background`]).
    async fn write_background<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<Timed<T>, MaasError> {
        self.write_in(operation, system_id, Lane::Background, call)
            .await
    }

    async fn write_in<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        lane: Lane,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<Timed<T>, MaasError> {
        in_call_span(operation, system_id, async {
            let sent = self.permit(operation, lane).await;
            self.fence.check().map_err(|_| MaasError::Fenced)?;
            tokio::select! {
                biased;
                result = call => result.map(|value| Timed { value, sent }),
                () = self.fence.lapsed() => Err(MaasError::Fenced),
            }
        })
        .await
    }

    /// [`Self::read`] without the send instant.
    async fn read_value<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        lane: Lane,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<T, MaasError> {
        let answer = self.read(operation, system_id, lane, call).await?;
        Ok(answer.value)
    }

    /// [`Self::write`] without the send instant.
    async fn write_value<T>(
        &self,
        operation: &'static str,
        system_id: Option<&str>,
        call: impl Future<Output = Result<T, MaasError>>,
    ) -> Result<T, MaasError> {
        let answer = self.write(operation, system_id, call).await?;
        Ok(answer.value)
    }

    forward! {
        /// `GET /machines/` with filters.
        fn list_machines(filter: &MachineFilter) -> Timed<Vec<Machine>> {
            read("list_machines", None, Lane::InTurn) |client| client.list_machines(filter)
        }

        /// `GET /machines/` with filters, decoded machine by machine: one that does not decode is
        /// skipped and reported in [`MachineList::skipped`] instead of failing the listing.
        fn list_machines_lenient(filter: &MachineFilter) -> Timed<MachineList> {
            read("list_machines_lenient", None, Lane::Listing)
                |client| client.list_machines_lenient(filter)
        }

        /// `GET /machines/?op=list_allocated`, decoded machine by machine.
        fn list_allocated_lenient() -> Timed<MachineList> {
            read("list_allocated_lenient", None, Lane::Listing)
                |client| client.list_allocated_lenient()
        }

        /// `GET /users/?op=whoami`: the MAAS user of the key, who owns our allocations.
        fn whoami() -> CurrentUser {
            read_value("whoami", None, Lane::InTurn) |client| client.whoami()
        }

        /// `GET /machines/{id}/`.
        fn get_machine(system_id: &str) -> Timed<Machine> {
            read("get_machine", Some(system_id), Lane::InTurn)
                |client| client.get_machine(system_id)
        }

        /// `POST /machines/?op=allocate` (never retried by the client).
        fn allocate(request: &AllocateRequest) -> Timed<Machine> {
            write("allocate", None) |client| client.allocate(request)
        }

        /// `POST /machines/{id}/?op=deploy` (never retried by the client).
        fn deploy(system_id: &str, request: &DeployRequest) -> Timed<Machine> {
            write("deploy", Some(system_id)) |client| client.deploy(system_id, request)
        }

        /// `POST /machines/{id}/?op=release`.
        fn release(system_id: &str, request: &ReleaseRequest) -> Timed<Machine> {
            write("release", Some(system_id)) |client| client.release(system_id, request)
        }

        /// `POST /machines/{id}/?op=power_on`: only for a machine whose power state is `off`.
        fn power_on(system_id: &str, comment: &str) -> Timed<Machine> {
            write("power_on", Some(system_id))
                |client| client.power_on(system_id, Some(comment))
        }

        /// `POST /machines/{id}/?op=power_off` (hard).
        fn power_off(system_id: &str, comment: &str) -> Timed<Option<Machine>> {
            write("power_off", Some(system_id))
                |client| client.power_off(system_id, StopMode::Hard, Some(comment))
        }

        /// Sets workload annotations: for people, so in the background lane.
        fn set_workload_annotations(
            system_id: &str,
            annotations: &BTreeMap<String, String>
        ) -> Timed<Machine> {
            write_background("set_workload_annotations", Some(system_id))
                |client| client.set_workload_annotations(system_id, annotations)
        }

        /// Renames the machine.
        fn update_hostname(system_id: &str, hostname: &str) -> Timed<Machine> {
            write("update_hostname", Some(system_id))
                |client| client.update_hostname(system_id, hostname)
        }

        /// `GET /subnets/`.
        fn list_subnets() -> Vec<Subnet> {
            read_value("list_subnets", None, Lane::InTurn) |client| client.list_subnets()
        }

        /// Links an interface to a subnet (never retried by the client).
        fn link_subnet(
            system_id: &str,
            interface_id: i64,
            request: &LinkSubnetRequest
        ) -> Interface {
            write_value("link_subnet", Some(system_id))
                |client| client.link_subnet(system_id, interface_id, request)
        }

        /// Removes a link from an interface.
        fn unlink_subnet(system_id: &str, interface_id: i64, link_id: i64) -> Interface {
            write_value("unlink_subnet", Some(system_id))
                |client| client.unlink_subnet(system_id, interface_id, link_id)
        }

        /// `GET /dnsresources/` by FQDN.
        fn find_dns_resources(fqdn: &str) -> Vec<DnsResource> {
            read_value("list_dns_resources", None, Lane::InTurn)
                |client| client.list_dns_resources(&DnsResourceFilter::fqdn(fqdn))
        }

        /// `POST /dnsresources/` (never retried by the client).
        fn create_dns_resource(spec: &DnsResourceSpec) -> DnsResource {
            write_value("create_dns_resource", None) |client| client.create_dns_resource(spec)
        }

        /// `PUT /dnsresources/{id}/`.
        fn update_dns_resource(id: i64, spec: &DnsResourceSpec) -> DnsResource {
            write_value("update_dns_resource", None)
                |client| client.update_dns_resource(id, spec)
        }

        /// `DELETE /dnsresources/{id}/`.
        fn delete_dns_resource(id: i64) -> () {
            write_value("delete_dns_resource", None) |client| client.delete_dns_resource(id)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use governor::{Quota, RateLimiter};
    use maas_api_client::{RequestEvent, RequestObserver};

    use super::*;

    #[test]
    fn observer_counts_by_operation_and_outcome() {
        let metrics = MaasMetrics::unregistered();
        for outcome in ["ok", "ok", "unavailable"] {
            metrics.observe(&RequestEvent {
                operation: "machines.list",
                outcome,
                status: Some(200),
                latency: Duration::from_millis(3),
                attempt: 1,
            });
        }
        assert_eq!(metrics.count("machines.list", "ok"), 2);
        assert_eq!(metrics.count("machines.list", "unavailable"), 1);
        assert_eq!(metrics.count("machines.get", "ok"), 0);
    }

    #[allow(clippy::needless_pass_by_value)]
    fn refused<T>(result: Result<T, MaasError>) -> bool {
        matches!(result, Err(MaasError::Fenced))
    }

    fn unreachable_maas() -> Maas {
        let config = maas_api_client::Config::builder(
            "http://127.0.0.1:1/MAAS/",
            maas_api_client::ApiKey::parse("a:b:c").unwrap(),
        )
        .retry_policy(maas_api_client::RetryPolicy {
            max_attempts: 1,
            ..maas_api_client::RetryPolicy::default()
        })
        .build()
        .unwrap();
        Maas::new(MaasClient::new(config).unwrap(), NonZeroU32::MIN)
    }

    #[tokio::test]
    async fn writes_are_refused_before_sending_when_fenced() {
        // A fence that was never renewed (a standby's, or one that lapsed): nothing is sent.
        let fenced = unreachable_maas().with_fence(Fence::new(Duration::from_secs(25)));
        assert!(refused(fenced.allocate(&AllocateRequest::default()).await));
        assert!(refused(
            fenced.deploy("abc", &DeployRequest::default()).await
        ));
        assert!(refused(
            fenced.release("abc", &ReleaseRequest::default()).await
        ));
        assert!(refused(fenced.power_on("abc", "c").await));
        assert!(refused(fenced.power_off("abc", "c").await));
        assert!(refused(fenced.delete_dns_resource(1).await));
        // Reads still go out (and fail on the unreachable endpoint, not on the fence).
        assert!(!refused(fenced.get_machine("abc").await));
        // Unfenced (no leader election): the write is sent.
        let unfenced = unreachable_maas();
        assert!(!refused(unfenced.delete_dns_resource(1).await));
    }

    #[tokio::test]
    async fn rate_limit_spaces_requests() {
        let limiter = RateLimiter::direct(Quota::per_second(NonZeroU32::MIN.saturating_add(9)));
        let start = Instant::now();
        for _ in 0..15 {
            limiter.until_ready().await;
        }
        // A burst of 10, then 5 more at 10/s: at least ~0.4 s.
        assert!(
            start.elapsed() >= Duration::from_millis(400),
            "{:?}",
            start.elapsed()
        );
    }

    /// The order in which calls asked 20 ms apart, in `lanes`, got their token at 5 requests/s
    /// with the burst spent first (one token every 200 ms).
    async fn token_order(lanes: [(&'static str, Lane); 5]) -> Vec<&'static str> {
        let maas = Maas::new(unreachable_maas().client, NonZeroU32::MIN.saturating_add(4));
        for _ in 0..5 {
            maas.permit("burst", Lane::InTurn).await;
        }
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for (name, lane) in lanes {
            let (maas, order) = (maas.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                maas.permit(name, lane).await;
                order.lock().unwrap().push(name);
            }));
            // Each asks after the one before is queued.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for waiter in waiters {
            waiter.await.unwrap();
        }
        order.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn calls_for_one_machine_take_turns_and_listings_go_ahead() {
        let order = token_order([
            ("first", Lane::InTurn),
            ("second", Lane::InTurn),
            ("third", Lane::InTurn),
            ("fourth", Lane::InTurn),
            ("listing", Lane::Listing),
        ])
        .await;
        let position = |name| order.iter().position(|n| *n == name).unwrap();
        assert!(
            position("first") < position("second")
                && position("second") < position("third")
                && position("third") < position("fourth"),
            "{order:?}"
        );
        // The listing asked last and takes one of the next two tokens.
        assert!(position("listing") < position("third"), "{order:?}");
    }

    #[tokio::test]
    async fn a_call_for_people_waits_until_no_call_for_a_machine_does() {
        // Asked first, while the burst is spent: it still goes after the calls queued behind.
        let order = token_order([
            ("annotations", Lane::Background),
            ("allocate", Lane::InTurn),
            ("deploy", Lane::InTurn),
            ("release", Lane::InTurn),
            ("listing", Lane::Listing),
        ])
        .await;
        assert_eq!(order.last(), Some(&"annotations"), "{order:?}");
    }

    #[tokio::test]
    async fn the_backlog_counts_the_calls_waiting_for_their_turn() {
        // 5 requests/s, burst spent: each queued call is 200 ms of backlog.
        let maas = Maas::new(unreachable_maas().client, NonZeroU32::MIN.saturating_add(4));
        for _ in 0..5 {
            maas.permit("burst", Lane::InTurn).await;
        }
        assert_eq!(maas.backlog(), Duration::ZERO);
        let mut waiters = Vec::new();
        for _ in 0..3 {
            let maas = maas.clone();
            waiters.push(tokio::spawn(async move {
                maas.permit("queued", Lane::InTurn).await;
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let queued = maas.backlog();
        assert!(
            queued > Duration::from_millis(390) && queued <= Duration::from_millis(600),
            "{queued:?}"
        );
        // A listing goes ahead and is no one's backlog.
        maas.permit("listing", Lane::Listing).await;
        // An abandoned wait leaves the queue too.
        let abandoned = {
            let maas = maas.clone();
            tokio::spawn(async move { maas.permit("abandoned", Lane::InTurn).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        abandoned.abort();
        let _ = abandoned.await;
        for waiter in waiters {
            waiter.await.unwrap();
        }
        assert_eq!(maas.backlog(), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_call_is_timed_from_when_it_leaves_the_queue() {
        // The machine cache orders views by this instant: time spent waiting for a turn is not
        // part of it, or a view read late would lose against an older one.
        let maas = Maas::new(unreachable_maas().client, NonZeroU32::MIN.saturating_add(4));
        for _ in 0..5 {
            maas.permit("burst", Lane::InTurn).await;
        }
        let asked = Instant::now();
        let sent = maas.permit("late", Lane::InTurn).await;
        assert!(
            sent.duration_since(asked) >= Duration::from_millis(150),
            "{:?}",
            sent.duration_since(asked)
        );
    }
}
