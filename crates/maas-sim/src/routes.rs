//! The route table: every handler, its URL template and its `(method, op)` actions.
//! It drives URL matching, operation dispatch and the `/describe/` document alike.

use http::Method;

use crate::error::ApiError;

/// One action of a handler: a CRUD method (`op: None`) or a named operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActionDef {
    /// `read`, `create`, `update`, `delete` or the op name.
    pub name: &'static str,
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The op, `None` for CRUD.
    pub op: Option<&'static str>,
}

/// What a handler serves; used by the API layer to pick the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/version/`
    Version,
    /// `/machines/`
    Machines,
    /// `/machines/{system_id}/`
    Machine,
    /// `/nodes/{system_id}/interfaces/`
    Interfaces,
    /// `/nodes/{system_id}/interfaces/{id}/`
    Interface,
    /// `/subnets/`
    Subnets,
    /// `/subnets/{id}/`
    Subnet,
    /// `/fabrics/{fabric_id}/vlans/`
    Vlans,
    /// `/ipranges/`
    IpRanges,
    /// `/ipranges/{id}/`
    IpRange,
    /// `/dnsresources/`
    DnsResources,
    /// `/dnsresources/{id}/`
    DnsResource,
    /// `/domains/`
    Domains,
    /// `/domains/{id}/`
    Domain,
    /// `/zones/`
    Zones,
    /// `/zones/{name}/`
    Zone,
    /// `/resourcepools/`
    Pools,
    /// `/resourcepool/{id}/`
    Pool,
    /// `/tags/`
    Tags,
    /// `/tags/{name}/`
    Tag,
    /// `/boot-resources/`
    BootResources,
    /// `/boot-resources/{id}/`
    BootResource,
    /// `/users/`
    Users,
    /// `/maas/`: the region's configuration (`get_config`, `set_config`).
    Settings,
    /// `/vm-hosts/` and its older alias `/pods/` (MAAS 3.x; gone in 4.0).
    VmHosts,
    /// `/vm-hosts/{id}/` and `/pods/{id}/`.
    VmHost,
}

/// A handler of the MAAS API.
#[derive(Debug, Clone, Copy)]
pub struct ResourceDef {
    /// Handler class name as `/describe/` shows it (`MachinesHandler`).
    pub handler: &'static str,
    /// Prefix of the operation keys in statistics and fault configs (`machines`, `machine`).
    pub stat: &'static str,
    /// URL template below `/MAAS/api/2.0/`, with `{param}` segments.
    pub path: &'static str,
    /// Names of the template parameters.
    pub params: &'static [&'static str],
    /// Served without authentication.
    pub anon: bool,
    /// Actions.
    pub actions: &'static [ActionDef],
    /// Which code serves it.
    pub kind: Kind,
}

const fn crud(name: &'static str, method: &'static str) -> ActionDef {
    ActionDef {
        name,
        method,
        op: None,
    }
}
const fn get(op: &'static str) -> ActionDef {
    ActionDef {
        name: op,
        method: "GET",
        op: Some(op),
    }
}
const fn post(op: &'static str) -> ActionDef {
    ActionDef {
        name: op,
        method: "POST",
        op: Some(op),
    }
}
const READ: ActionDef = crud("read", "GET");
const CREATE: ActionDef = crud("create", "POST");
const UPDATE: ActionDef = crud("update", "PUT");
const DELETE: ActionDef = crud("delete", "DELETE");

/// Every handler the simulator serves.
pub const RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        handler: "VersionHandler",
        stat: "version",
        path: "version/",
        params: &[],
        anon: true,
        actions: &[READ],
        kind: Kind::Version,
    },
    ResourceDef {
        handler: "MachinesHandler",
        stat: "machines",
        path: "machines/",
        params: &[],
        anon: false,
        actions: &[
            READ,
            post("allocate"),
            get("list_allocated"),
            post("release"),
        ],
        kind: Kind::Machines,
    },
    ResourceDef {
        handler: "MachineHandler",
        stat: "machine",
        path: "machines/{system_id}/",
        params: &["system_id"],
        anon: false,
        actions: &[
            READ,
            UPDATE,
            DELETE,
            post("abort"),
            post("commission"),
            post("deploy"),
            post("lock"),
            post("mark_broken"),
            post("mark_fixed"),
            post("power_off"),
            post("power_on"),
            get("query_power_state"),
            post("release"),
            post("set_owner_data"),
            post("set_workload_annotations"),
            post("unlock"),
        ],
        kind: Kind::Machine,
    },
    ResourceDef {
        handler: "InterfacesHandler",
        stat: "interfaces",
        path: "nodes/{system_id}/interfaces/",
        params: &["system_id"],
        anon: false,
        actions: &[READ, post("create_bond"), post("create_vlan")],
        kind: Kind::Interfaces,
    },
    ResourceDef {
        handler: "InterfaceHandler",
        stat: "interface",
        path: "nodes/{system_id}/interfaces/{id}/",
        params: &["system_id", "id"],
        anon: false,
        actions: &[
            READ,
            UPDATE,
            DELETE,
            post("link_subnet"),
            post("set_default_gateway"),
            post("unlink_subnet"),
        ],
        kind: Kind::Interface,
    },
    ResourceDef {
        handler: "SubnetsHandler",
        stat: "subnets",
        path: "subnets/",
        params: &[],
        anon: false,
        actions: &[READ],
        kind: Kind::Subnets,
    },
    ResourceDef {
        handler: "SubnetHandler",
        stat: "subnet",
        path: "subnets/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, get("ip_addresses")],
        kind: Kind::Subnet,
    },
    ResourceDef {
        handler: "VlansHandler",
        stat: "vlans",
        path: "fabrics/{fabric_id}/vlans/",
        params: &["fabric_id"],
        anon: false,
        actions: &[READ],
        kind: Kind::Vlans,
    },
    ResourceDef {
        handler: "IPRangesHandler",
        stat: "ipranges",
        path: "ipranges/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::IpRanges,
    },
    ResourceDef {
        handler: "IPRangeHandler",
        stat: "iprange",
        path: "ipranges/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE],
        kind: Kind::IpRange,
    },
    ResourceDef {
        handler: "DNSResourcesHandler",
        stat: "dnsresources",
        path: "dnsresources/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::DnsResources,
    },
    ResourceDef {
        handler: "DNSResourceHandler",
        stat: "dnsresource",
        path: "dnsresources/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE],
        kind: Kind::DnsResource,
    },
    ResourceDef {
        handler: "DomainsHandler",
        stat: "domains",
        path: "domains/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::Domains,
    },
    ResourceDef {
        handler: "DomainHandler",
        stat: "domain",
        path: "domains/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE],
        kind: Kind::Domain,
    },
    ResourceDef {
        handler: "ZonesHandler",
        stat: "zones",
        path: "zones/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::Zones,
    },
    ResourceDef {
        handler: "ZoneHandler",
        stat: "zone",
        path: "zones/{name}/",
        params: &["name"],
        anon: false,
        actions: &[READ, UPDATE, DELETE],
        kind: Kind::Zone,
    },
    ResourceDef {
        handler: "ResourcePoolsHandler",
        stat: "resourcepools",
        path: "resourcepools/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::Pools,
    },
    ResourceDef {
        handler: "ResourcePoolHandler",
        stat: "resourcepool",
        path: "resourcepool/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE],
        kind: Kind::Pool,
    },
    ResourceDef {
        handler: "TagsHandler",
        stat: "tags",
        path: "tags/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::Tags,
    },
    ResourceDef {
        handler: "TagHandler",
        stat: "tag",
        path: "tags/{name}/",
        params: &["name"],
        anon: false,
        actions: &[
            READ,
            UPDATE,
            DELETE,
            get("machines"),
            get("nodes"),
            post("update_nodes"),
        ],
        kind: Kind::Tag,
    },
    ResourceDef {
        handler: "BootResourcesHandler",
        stat: "boot-resources",
        path: "boot-resources/",
        params: &[],
        anon: false,
        actions: &[READ, get("is_importing")],
        kind: Kind::BootResources,
    },
    ResourceDef {
        handler: "BootResourceHandler",
        stat: "boot-resource",
        path: "boot-resources/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ],
        kind: Kind::BootResource,
    },
    ResourceDef {
        handler: "UsersHandler",
        stat: "users",
        path: "users/",
        params: &[],
        anon: false,
        actions: &[READ, get("whoami")],
        kind: Kind::Users,
    },
    ResourceDef {
        handler: "MaasHandler",
        stat: "maas",
        path: "maas/",
        params: &[],
        anon: false,
        actions: &[get("get_config"), post("set_config")],
        kind: Kind::Settings,
    },
    ResourceDef {
        handler: "VmHostsHandler",
        stat: "vm-hosts",
        path: "vm-hosts/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::VmHosts,
    },
    ResourceDef {
        handler: "VmHostHandler",
        stat: "vm-host",
        path: "vm-hosts/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE, post("compose")],
        kind: Kind::VmHost,
    },
    // MAAS 3.x still serves the pre-2.9 names; python-libmaas 0.6.8 only knows these.
    ResourceDef {
        handler: "PodsHandler",
        stat: "pods",
        path: "pods/",
        params: &[],
        anon: false,
        actions: &[READ, CREATE],
        kind: Kind::VmHosts,
    },
    ResourceDef {
        handler: "PodHandler",
        stat: "pod",
        path: "pods/{id}/",
        params: &["id"],
        anon: false,
        actions: &[READ, UPDATE, DELETE, post("compose")],
        kind: Kind::VmHost,
    },
];

impl Kind {
    /// Handlers a MAAS without VM hosts (4.0, [dev]) does not have.
    pub fn is_vm_host(self) -> bool {
        matches!(self, Self::VmHosts | Self::VmHost)
    }
}

/// A URL matched to a handler, with its template parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatch {
    /// The handler.
    pub resource: &'static ResourceDef,
    /// Template parameters in order (`system_id`, `id`...).
    pub args: Vec<String>,
    /// The op from a `/op-<name>` suffix.
    pub path_op: Option<String>,
}

impl PartialEq for ResourceDef {
    fn eq(&self, other: &Self) -> bool {
        self.handler == other.handler
    }
}
impl Eq for ResourceDef {}

/// Matches the part of the path below `/MAAS/api/2.0/`. Trailing slash mandatory, except
/// for the `/op-<name>` form which has none.
pub fn match_path(rest: &str) -> Option<RouteMatch> {
    let (rest, path_op) = match rest.rsplit_once('/') {
        Some((head, last)) if last.starts_with("op-") && last.len() > 3 => {
            (format!("{head}/"), Some(last[3..].to_owned()))
        }
        _ => (rest.to_owned(), None),
    };
    let trimmed = rest.strip_suffix('/')?;
    let segments: Vec<&str> = trimmed.split('/').collect();
    RESOURCES.iter().find_map(|resource| {
        let template: Vec<&str> = resource
            .path
            .strip_suffix('/')
            .unwrap_or(resource.path)
            .split('/')
            .collect();
        if template.len() != segments.len() {
            return None;
        }
        let mut args = Vec::new();
        for (t, s) in template.iter().zip(&segments) {
            if t.starts_with('{') {
                if s.is_empty() {
                    return None;
                }
                let decoded = percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned();
                args.push(decoded);
            } else if t != s {
                return None;
            }
        }
        Some(RouteMatch {
            resource,
            args,
            path_op: path_op.clone(),
        })
    })
}

/// Picks the action for `(method, op)` as piston's `OperationsHandlerMixin.dispatch` does.
pub fn resolve_action(
    resource: &'static ResourceDef,
    method: &Method,
    op: Option<&str>,
) -> Result<&'static ActionDef, ApiError> {
    let method = method.as_str();
    if let Some(action) = resource
        .actions
        .iter()
        .find(|a| a.method == method && a.op == op)
    {
        return Ok(action);
    }
    if let Some(op) = op {
        Err(ApiError::bad_request(format!(
            "Unrecognised signature: method={method} op={op}"
        )))
    } else {
        let allow: Vec<&str> = resource
            .actions
            .iter()
            .filter(|a| a.op.is_none())
            .map(|a| a.method)
            .collect();
        Err(ApiError::method_not_allowed(&allow.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_need_the_trailing_slash() {
        assert_eq!(
            match_path("machines/").map(|m| m.resource.kind),
            Some(Kind::Machines)
        );
        assert!(match_path("machines").is_none());
        let m = match_path("machines/abc123/").unwrap();
        assert_eq!(
            (m.resource.kind, m.args.clone()),
            (Kind::Machine, vec!["abc123".to_owned()])
        );
        let m = match_path("nodes/abc123/interfaces/7/").unwrap();
        assert_eq!(m.args, vec!["abc123".to_owned(), "7".to_owned()]);
        assert!(match_path("resourcepools/0/").is_none());
        assert_eq!(
            match_path("resourcepool/0/").map(|m| m.resource.kind),
            Some(Kind::Pool)
        );
        assert!(match_path("machines//").is_none());
    }

    #[test]
    fn op_suffix_routes() {
        let m = match_path("machines/abc123/op-power_on").unwrap();
        assert_eq!(m.path_op.as_deref(), Some("power_on"));
        assert_eq!(m.resource.kind, Kind::Machine);
        let m = match_path("tags/gpu/op-update_nodes").unwrap();
        assert_eq!(
            (m.resource.kind, m.path_op.as_deref()),
            (Kind::Tag, Some("update_nodes"))
        );
        assert!(match_path("machines/abc123/op-").is_none());
    }

    #[test]
    fn dispatch_on_method_and_op() {
        let machines = match_path("machines/").unwrap().resource;
        assert_eq!(
            resolve_action(machines, &Method::POST, Some("allocate"))
                .unwrap()
                .name,
            "allocate"
        );
        assert_eq!(
            resolve_action(machines, &Method::GET, None).unwrap().name,
            "read"
        );
        let err = resolve_action(machines, &Method::POST, Some("foo")).unwrap_err();
        assert_eq!(
            err.body,
            crate::error::ErrorBody::Text("Unrecognised signature: method=POST op=foo".to_owned())
        );
        let err = resolve_action(machines, &Method::GET, Some("allocate")).unwrap_err();
        assert_eq!(err.status.as_u16(), 400);
        let err = resolve_action(machines, &Method::PUT, None).unwrap_err();
        assert_eq!(err.status.as_u16(), 405);
        assert_eq!(err.headers, vec![("allow", "GET".to_owned())]);
    }

    #[test]
    fn table_is_consistent() {
        for r in RESOURCES {
            let placeholders = r.path.matches('{').count();
            assert_eq!(placeholders, r.params.len(), "{}", r.handler);
            for a in r.actions {
                assert!(a.op.is_some() || ["read", "create", "update", "delete"].contains(&a.name));
            }
        }
    }
}
