//! Address holds: the addresses of a machine's data kept for its host across re-provisioning
//! (node reuse), and handed to the next machine on that host.
//!
//! When a MaasDataClaim is released and its host is reserved for node reuse (or the next
//! machine of the same Cluster has claimed it already), its IPAddressClaims are not deleted:
//! they lose the data claim as owner and gain the hold annotations of [`decide`]. The
//! `IPAddressClaim`, and so its `IPAddress`, lives on; no pool sees a release, so no other claim
//! can take the address. The next data claim on that host takes each hold over (owner, label)
//! with a resourceVersion-guarded write (`claim::handover`). The hold reconciler ([`act`])
//! releases a hold that lapsed or whose host went elsewhere, with a delete guarded by the same
//! resourceVersion, so a hold is either taken over or released, never both.
//!
//! [`decide`] is pure; [`watch`] maps hosts and data claims to the holds of their host.

pub mod act;
pub mod decide;
pub mod watch;
