//! Batched observation of the machines MAAS is changing (deploying, releasing, erasing,
//! powering): every `--maas-observe-interval` one `GET /machines/?id=…` for all of them, not one
//! read per machine. A machine whose view changed wakes its host; a machine the list did not
//! show (gone, hidden, or not decodable) is flagged so that its host reads it directly, where a
//! 404 is the only proof that it is gone.
//!
//! The cost is one list per interval per [`IDS_PER_LIST`] machines in flight, whatever their
//! number: 200 servers deploying for 10 minutes cost at most 300 lists, not 60,000 reads. A
//! machine long in flight is listed less often ([`crate::in_flight::stretch`]: at least once per
//! eighth of its time in flight, at most every eighth interval), so those 10 minutes cost about
//! 60 lists, each of only the machines due.
//!
//! Hosts register themselves in [`crate::in_flight::InFlight`] when a step waits for MAAS and
//! leave when nothing is in flight any more; hosts that are deleted meanwhile are dropped before
//! each pass.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use capmaas_api::MaasHost;
use kube::runtime::reflector::ObjectRef;
use maas_api_client::MachineFilter;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::in_flight::not_shown;
use crate::maas::Timed;

/// System ids per list call: `id=xxxxxx&` is ~10 bytes, so 400 keep the request line near
/// 4 KiB, under the 8 KiB that Apache and nginx accept in front of MAAS.
pub const IDS_PER_LIST: usize = 400;

/// Observes the machines in flight every `--maas-observe-interval` until `cancel`.
pub async fn run(gw: Arc<Gateway>, cancel: CancellationToken) {
    let interval = gw.settings.observe_interval;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for tick in 0_u64.. {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = ticker.tick() => {}
        }
        gw.in_flight.retain(|host| gw.hosts.get(host).is_some());
        let watched = gw.in_flight.due(tick, interval, std::time::Instant::now());
        for batch in watched.chunks(IDS_PER_LIST) {
            if let Err(e) = observe(&gw, batch).await {
                // The hosts keep waiting; the next pass tries again.
                warn!(error = %e, machines = batch.len(), "observing machines in flight failed");
                break;
            }
        }
    }
}

/// One list call for `batch`: changed machines wake their host, machines not shown are
/// flagged for a direct read.
async fn observe(gw: &Gateway, batch: &[(String, ObjectRef<MaasHost>)]) -> Result<()> {
    let filter = batch
        .iter()
        .fold(MachineFilter::new(), |f, (id, _)| f.system_id(id.clone()));
    let Timed {
        value: listing,
        sent,
    } = gw
        .maas
        .list_machines_lenient(&filter)
        .await
        .map_err(Error::maas("observe machines"))?;
    let hosts: HashMap<&str, &ObjectRef<MaasHost>> =
        batch.iter().map(|(id, h)| (id.as_str(), h)).collect();
    let shown: HashSet<&str> = listing
        .machines
        .iter()
        .map(|m| m.system_id.as_str())
        .collect();
    let missing = not_shown(batch.iter().map(|(id, _)| id.as_str()), &shown);
    let mut woken = 0usize;
    for id in &missing {
        gw.in_flight.mark_unseen(id);
        if let Some(host) = hosts.get(id) {
            wake(gw, host);
            woken += 1;
        }
    }
    let changed: Vec<String> = listing
        .machines
        .into_iter()
        .filter_map(|m| {
            let id = m.system_id.clone();
            gw.cache.observe(m, sent).then_some(id)
        })
        .collect();
    for id in &changed {
        if let Some(host) = hosts.get(id.as_str()) {
            wake(gw, host);
            woken += 1;
        }
    }
    debug!(
        machines = batch.len(),
        changed = changed.len(),
        not_shown = missing.len(),
        woken,
        "observed machines in flight"
    );
    Ok(())
}

fn wake(gw: &Gateway, host: &ObjectRef<MaasHost>) {
    gw.refresh_host(host.namespace.as_deref().unwrap_or_default(), &host.name);
}
