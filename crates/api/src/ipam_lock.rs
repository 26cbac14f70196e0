//! `MaasIPAddressLock`: the installation-wide lock of one IP address.
//!
//! An `IPAddress` is namespaced and named after its pool's prefix, so the API server refuses a
//! second holder of an address only within one pool. MAAS has one address space (its subnets
//! are unique), and every address a pool hands out ends up on a MAAS interface, so two pools
//! (in one namespace or two) must never hand out one address. A cluster-scoped object named
//! after the address itself makes the API server refuse the second holder whatever the pool and
//! namespace: data-controller creates it before the `IPAddress` and deletes it after. Its
//! finalizer keeps a lock deleted by hand holding until then.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use std::net::IpAddr;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::kind::provider_kind;

use crate::keys::FINALIZER_MAAS_IP_ADDRESS_LOCK;

provider_kind! {
    /// Who holds an address: one `IPAddressClaim` of a MaasIPPool.
    #[derive(Eq, KubeSchema)]
    #[kube(
        kind = "MaasIPAddressLock",
        doc = "MaasIPAddressLock holds one IP address for one IPAddressClaim of a MaasIPPool, whatever its namespace: named after the address, it makes the API server refuse a second holder. Written by data-controller only; it goes when the claim's IPAddress is released (deleted before, it stays terminating, still holding).",
        shortname = "maasiplock",
        printcolumn(
            name = "Address",
            type_ = "string",
            json_path = ".spec.address",
            description = "The address held"
        ),
        printcolumn(
            name = "Namespace",
            type_ = "string",
            json_path = ".spec.claim.namespace",
            description = "Namespace of the claim and its pool"
        ),
        printcolumn(
            name = "Claim",
            type_ = "string",
            json_path = ".spec.claim.name",
            description = "The IPAddressClaim holding the address"
        ),
        printcolumn(
            name = "Pool",
            type_ = "string",
            json_path = ".spec.pool",
            description = "The MaasIPPool the address came from"
        )
    )]
    pub struct MaasIPAddressLockSpec {
        /// The address, in its canonical form; the object's name is [`lock_name`] of it.
        #[schemars(length(max = 45))]
        #[x_kube(validation = Rule::new("isIP(self)").message("spec.address must be an IP address"))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.address is immutable: a lock is released by deleting it").reason(Reason::FieldValueForbidden))]
        pub address: String,
        /// The claim holding the address.
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.claim is immutable: a lock is released by deleting it").reason(Reason::FieldValueForbidden))]
        pub claim: LockHolder,
        /// The MaasIPPool (in the claim's namespace) the address was allocated from.
        #[schemars(length(max = 253))]
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.pool is immutable").reason(Reason::FieldValueForbidden))]
        pub pool: String,
    }
}

/// One incarnation of an `IPAddressClaim`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockHolder {
    /// Namespace of the claim.
    #[schemars(length(max = 63))]
    pub namespace: String,
    /// Name of the claim.
    #[schemars(length(max = 253))]
    pub name: String,
    /// UID of the claim: a new claim of the same name is another holder.
    #[schemars(length(max = 128))]
    pub uid: String,
}

/// The name of the lock of `address`: IPv4 in dotted decimal (`10.0.0.5`), IPv6 as its eight
/// groups of four hex digits joined by `-` (`fd00-0010-0000-0000-0000-0000-0000-0001`), since
/// object names allow no `:`. The two forms never meet, and each address has exactly one.
pub fn lock_name(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:04x}"))
            .collect::<Vec<_>>()
            .join("-"),
    }
}

impl MaasIPAddressLock {
    /// The lock of `address` for `holder`, allocated from `pool`.
    /// It carries [`FINALIZER_MAAS_IP_ADDRESS_LOCK`]: deleted by hand, it still holds.
    pub fn for_address(address: IpAddr, holder: LockHolder, pool: &str) -> Self {
        let mut lock = Self::new(
            &lock_name(address),
            MaasIPAddressLockSpec {
                address: address.to_string(),
                claim: holder,
                pool: pool.to_owned(),
            },
        );
        lock.metadata.finalizers = Some(vec![FINALIZER_MAAS_IP_ADDRESS_LOCK.to_owned()]);
        lock
    }

    /// Whether `uid` (a claim's) holds this lock.
    pub fn held_by(&self, uid: &str) -> bool {
        self.spec.claim.uid == uid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_has_one_name_that_is_a_valid_object_name() {
        let v4: IpAddr = "10.0.0.5".parse().unwrap();
        assert_eq!(lock_name(v4), "10.0.0.5");
        let short: IpAddr = "fd00:10::1".parse().unwrap();
        let long: IpAddr = "fd00:0010:0:0:0:0:0:0001".parse().unwrap();
        assert_eq!(lock_name(short), "fd00-0010-0000-0000-0000-0000-0000-0001");
        assert_eq!(lock_name(short), lock_name(long));
        let mapped: IpAddr = "::ffff:10.0.0.5".parse().unwrap();
        assert_ne!(lock_name(mapped), lock_name(v4));
        for name in [lock_name(v4), lock_name(short), lock_name(mapped)] {
            assert!(name.len() <= 253);
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase() || c == '-' || c == '.')
            );
        }
    }
}
