//! Interfaces, subnets and address links.

use std::net::IpAddr;

use crate::calls::{collection, numbered_item};
use crate::error::{ErrorContext, MaasError};
use crate::form::Params;
use crate::model::{Interface, LinkMode, Subnet};
use crate::transport::{Call, MaasClient, segment};

/// Parameters of `POST /nodes/{id}/interfaces/{iface}/?op=link_subnet`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSubnetRequest {
    /// Address mode.
    pub mode: LinkMode,
    /// Subnet id or MAAS subnet specifier (`cidr:10.0.0.0/24`, `name:...`); empty = none
    /// (allowed for `dhcp` and `link_up`).
    pub subnet: String,
    /// Address for `static` mode; MAAS picks one when absent.
    pub ip_address: Option<IpAddr>,
    /// Make this link's gateway the machine's default.
    pub default_gateway: bool,
}

impl LinkSubnetRequest {
    /// A static link with a fixed address on a subnet id.
    pub fn static_ip(subnet_id: i64, ip_address: IpAddr) -> Self {
        Self {
            mode: LinkMode::Static,
            subnet: subnet_id.to_string(),
            ip_address: Some(ip_address),
            default_gateway: false,
        }
    }

    /// A DHCP link, on a subnet id when given.
    pub fn dhcp(subnet_id: Option<i64>) -> Self {
        Self {
            mode: LinkMode::Dhcp,
            subnet: subnet_id.map(|id| id.to_string()).unwrap_or_default(),
            ip_address: None,
            default_gateway: false,
        }
    }

    /// The form parameters.
    pub fn to_params(&self) -> Params {
        let mut params = Params::new();
        params.push("mode", self.mode.as_str());
        if !self.subnet.is_empty() {
            params.push("subnet", self.subnet.clone());
        }
        params
            .push_opt("ip_address", self.ip_address)
            .push_flag("default_gateway", self.default_gateway);
        params
    }
}

pub(crate) fn interfaces_path(system_id: &str) -> Result<Vec<String>, MaasError> {
    Ok(vec![
        "nodes".to_owned(),
        segment("system_id", system_id)?,
        "interfaces".to_owned(),
    ])
}

pub(crate) fn interface_path(system_id: &str, interface_id: i64) -> Result<Vec<String>, MaasError> {
    let mut path = interfaces_path(system_id)?;
    path.push(interface_id.to_string());
    Ok(path)
}

impl MaasClient {
    /// `GET /nodes/{system_id}/interfaces/`.
    pub async fn list_interfaces(&self, system_id: &str) -> Result<Vec<Interface>, MaasError> {
        self.get_json("interfaces.list", interfaces_path(system_id)?)
            .await
    }

    /// `GET /nodes/{system_id}/interfaces/{id}/`.
    pub async fn get_interface(
        &self,
        system_id: &str,
        interface_id: i64,
    ) -> Result<Interface, MaasError> {
        self.get_json("interfaces.get", interface_path(system_id, interface_id)?)
            .await
    }

    /// `POST .../interfaces/{id}/?op=link_subnet`. Not retried (a repeat would clash).
    /// MAAS restricts interface edits on deployed machines: link while Ready/Allocated.
    /// A static address MAAS already holds (or refuses as out of range) is
    /// [`MaasError::AddressUnavailable`]; one outside the subnet or in a dynamic range is a
    /// [`MaasError::BadRequest`] on `ip_address`.
    pub async fn link_subnet(
        &self,
        system_id: &str,
        interface_id: i64,
        request: &LinkSubnetRequest,
    ) -> Result<Interface, MaasError> {
        let call = Call::post(
            "interfaces.link_subnet",
            interface_path(system_id, interface_id)?,
        )
        .op("link_subnet")
        .params(request.to_params())
        .context(ErrorContext::LinkSubnet);
        self.json(call).await
    }

    /// `POST .../interfaces/{id}/?op=unlink_subnet` with the link id.
    pub async fn unlink_subnet(
        &self,
        system_id: &str,
        interface_id: i64,
        link_id: i64,
    ) -> Result<Interface, MaasError> {
        let mut params = Params::new();
        params.push("id", link_id.to_string());
        let call = Call::post(
            "interfaces.unlink_subnet",
            interface_path(system_id, interface_id)?,
        )
        .op("unlink_subnet")
        .params(params);
        self.json(call).await
    }

    /// `GET /subnets/`.
    pub async fn list_subnets(&self) -> Result<Vec<Subnet>, MaasError> {
        self.get_json("subnets.list", collection("subnets")).await
    }

    /// `GET /subnets/{id}/`.
    pub async fn get_subnet(&self, subnet_id: i64) -> Result<Subnet, MaasError> {
        self.get_json("subnets.get", numbered_item("subnets", subnet_id))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_link_params() {
        let request = LinkSubnetRequest::static_ip(3, "10.0.0.5".parse().unwrap());
        assert_eq!(
            request.to_params().encode(),
            "mode=static&subnet=3&ip_address=10.0.0.5"
        );
        let dhcp = LinkSubnetRequest {
            mode: LinkMode::Dhcp,
            subnet: "cidr:10.0.0.0/24".into(),
            ip_address: None,
            default_gateway: true,
        };
        assert_eq!(
            dhcp.to_params().encode(),
            "mode=dhcp&subnet=cidr%3A10.0.0.0%2F24&default_gateway=true"
        );
        assert_eq!(
            LinkSubnetRequest::dhcp(None).to_params().encode(),
            "mode=dhcp"
        );
        assert_eq!(
            LinkSubnetRequest::dhcp(Some(4)).to_params().encode(),
            "mode=dhcp&subnet=4"
        );
    }
}
