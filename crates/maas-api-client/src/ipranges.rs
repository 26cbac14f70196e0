//! IP ranges (`/ipranges/`): reserved ranges MAAS keeps out of its automatic assignment, and
//! the dynamic (DHCP) ranges.

use std::net::IpAddr;

use crate::calls::{collection, numbered_item};
use crate::error::MaasError;
use crate::form::Params;
use crate::model::{IpRange, IpRangeType};
use crate::transport::MaasClient;

/// Fields of a new or updated IP range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpRangeSpec {
    /// `reserved` (any user) or `dynamic` (admin only).
    pub kind: IpRangeType,
    /// First address (inclusive).
    pub start_ip: IpAddr,
    /// Last address (inclusive).
    pub end_ip: IpAddr,
    /// Subnet id; MAAS picks the best subnet for `start_ip` when absent.
    pub subnet: Option<i64>,
    /// Free-text comment (at most 255 characters in MAAS).
    pub comment: String,
}

impl IpRangeSpec {
    /// A reserved range.
    pub fn reserved(start_ip: IpAddr, end_ip: IpAddr, subnet: Option<i64>, comment: &str) -> Self {
        Self {
            kind: IpRangeType::Reserved,
            start_ip,
            end_ip,
            subnet,
            comment: comment.to_owned(),
        }
    }

    /// The form parameters of a create (every field).
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push("type", self.kind.as_str())
            .push("start_ip", self.start_ip.to_string())
            .push("end_ip", self.end_ip.to_string())
            .push_opt("subnet", self.subnet)
            .push("comment", self.comment.clone());
        params
    }

    /// The form parameters of an update: MAAS's update takes the addresses and the comment.
    pub fn to_update_params(&self) -> Params {
        let mut params = Params::new();
        params
            .push("start_ip", self.start_ip.to_string())
            .push("end_ip", self.end_ip.to_string())
            .push("comment", self.comment.clone());
        params
    }
}

fn iprange_path(id: i64) -> Vec<String> {
    numbered_item("ipranges", id)
}

impl MaasClient {
    /// `GET /ipranges/`.
    pub async fn list_ipranges(&self) -> Result<Vec<IpRange>, MaasError> {
        self.get_json("ipranges.list", collection("ipranges")).await
    }

    /// `POST /ipranges/`. Not retried (a repeat would overlap the first); after an ambiguous
    /// failure, list and look for the range. An overlap with another range is a
    /// [`MaasError::BadRequest`] on `start_ip`/`end_ip`.
    pub async fn create_iprange(&self, spec: &IpRangeSpec) -> Result<IpRange, MaasError> {
        self.create("ipranges.create", "ipranges", spec.to_params())
            .await
    }

    /// `PUT /ipranges/{id}/` (addresses and comment). Idempotent, retried.
    pub async fn update_iprange(&self, id: i64, spec: &IpRangeSpec) -> Result<IpRange, MaasError> {
        self.put_json("ipranges.update", iprange_path(id), spec.to_update_params())
            .await
    }

    /// `DELETE /ipranges/{id}/`. Retried; a [`MaasError::NotFound`] after a retry means an
    /// earlier attempt already deleted it.
    pub async fn delete_iprange(&self, id: i64) -> Result<(), MaasError> {
        self.delete_item("ipranges.delete", iprange_path(id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_params() {
        let spec = IpRangeSpec::reserved(
            "10.0.0.10".parse().unwrap(),
            "10.0.0.20".parse().unwrap(),
            Some(3),
            "capmaas MaasIPPool ns/pool",
        );
        assert_eq!(
            spec.to_params().encode(),
            "type=reserved&start_ip=10.0.0.10&end_ip=10.0.0.20&subnet=3&comment=capmaas+MaasIPPool+ns%2Fpool"
        );
        assert_eq!(
            spec.to_update_params().encode(),
            "start_ip=10.0.0.10&end_ip=10.0.0.20&comment=capmaas+MaasIPPool+ns%2Fpool"
        );
    }
}
