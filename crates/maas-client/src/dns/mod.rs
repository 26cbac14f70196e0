//! The MaasDNSRecord reconciler: creates the MAAS DNS resource, updates it only when the
//! address set changes, and deletes it (finalizer) when the object goes.
//!
//! Ownership: an FQDN is served for one MaasDNSRecord in the whole cluster, the oldest of those
//! naming it ([`fqdn_holder`]); the others report `DNSNameConflict` and never touch MAAS. A
//! MAAS resource is this record's only when its id is recorded in status, or while
//! `status.creating` says a create was sent whose answer may have been lost, or when the record
//! asks to adopt it (`spec.adoptExisting`, CAPMAAS's `<cluster>-<6 hex>` name of a cluster
//! switched in place) and it is the only resource of that name; any other resource of that name
//! (made by hand, or by another installation) is reported as `DNSNameTaken` and never updated or
//! deleted.
//!
//! The finalizer is the kit's ([`capmaas_runtime::controller::finalizer`]): added in the same
//! reconcile that then creates the resource, removed once the MAAS resource is deleted.
//!
//! `decide` holds the pure part (who holds an FQDN, the plan against MAAS, the finalizer step); `act` reconciles.

mod act;
pub mod decide;

pub use act::reconcile;
pub use decide::*;
