//! The MaasIPPool reconciler: a pool with `spec.maasSubnet` has each of its
//! ranges reserved in MAAS as a `reserved` IP range, so MAAS never hands those addresses to
//! other machines. The ranges follow the pool's edits and are deleted with it (finalizer
//! [`FINALIZER_MAAS_IP_POOL_RANGES`]; data-controller holds its own pool finalizer).
//!
//! Ownership: a MAAS range is this pool's only when its comment is exactly
//! [`comment`] (`capmaas MaasIPPool <namespace>/<name>`); any other range (made by hand, by
//! another pool, dynamic ranges) is never modified or deleted. MAAS refusing a range (it
//! overlaps a dynamic or a foreign range) is reported in the `MAASRangesReserved` condition,
//! written by server-side apply with the gateway's field manager and containing only that
//! condition, so it does not fight data-controller over the address counts.
//!
//! `decide` holds the pure part (the wanted ranges, which are ours, the plan, the finalizer step); `act` reconciles.

mod act;
pub mod decide;

pub use act::reconcile;
pub use decide::*;
