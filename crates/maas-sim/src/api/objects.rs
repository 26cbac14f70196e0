//! Zones, resource pools, tags, domains, DNS resources, boot resources, users, version.

use http::StatusCode;
use serde_json::{Value, json};

use super::dns::find_domain;
use super::{Call, Reply};
use crate::error::ApiError;
use crate::model::{Domain, Pool, Zone};
use crate::render;
use crate::routes::Kind;
use crate::world::World;

pub(super) fn version() -> Value {
    json!({"capabilities": ["networks-management", "static-ipaddresses", "ipv6-deployment-ubuntu",
        "devices-management", "storage-deployment-ubuntu", "network-deployment-ubuntu",
        "bridging-interface-ubuntu", "bridging-automatic-ubuntu", "authenticate-api"],
        "version": "3.7.3-maas-sim", "subversion": ""})
}

fn deleted() -> Reply {
    Reply::Empty(StatusCode::NO_CONTENT)
}

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match kind {
        Kind::Zones | Kind::Zone => named_objects::<Zone>(kind == Kind::Zones, action, call),
        Kind::Pools | Kind::Pool => named_objects::<Pool>(kind == Kind::Pools, action, call),
        Kind::Tags | Kind::Tag => super::tags::dispatch(kind, action, call),
        Kind::Domains | Kind::Domain => domains(kind, action, call),
        Kind::DnsResources | Kind::DnsResource => super::dns::dispatch(kind, action, call),
        Kind::BootResources => boot_resources(action, call),
        Kind::BootResource => {
            let id = call.arg(0);
            let b = call
                .world
                .boot_resources
                .iter()
                .find(|b| b.id.to_string() == id);
            b.map(|b| Reply::ok(render::boot_resource(b, true)))
                .ok_or_else(|| ApiError::no_match("BootResource"))
        }
        Kind::Users => match action {
            "whoami" => Ok(Reply::ok(
                json!({"username": call.caller.username, "email": format!("{}@example.com", call.caller.username),
                "is_local": true, "is_superuser": call.caller.is_admin,
                "resource_uri": format!("{}users/{}/", render::API, call.caller.username)}),
            )),
            _ => Ok(Reply::ok(
                json!([{"username": call.caller.username, "email": format!("{}@example.com", call.caller.username),
                "is_local": true, "is_superuser": call.caller.is_admin,
                "resource_uri": format!("{}users/{}/", render::API, call.caller.username)}]),
            )),
        },
        _ => Err(ApiError::internal(format!("unhandled action {action}"))),
    }
}

/// An `{id, name, description}` record; zones and resource pools are both.
trait Record {
    fn new(id: u64, name: String, description: String) -> Self;
    fn name(&self) -> &str;
    /// Name and description, to update them.
    fn text_mut(&mut self) -> (&mut String, &mut String);
}

macro_rules! impl_record {
    ($($ty:ty),*) => {$(
        impl Record for $ty {
            fn new(id: u64, name: String, description: String) -> Self {
                Self { id, name, description }
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn text_mut(&mut self) -> (&mut String, &mut String) {
                (&mut self.name, &mut self.description)
            }
        }
    )*};
}
impl_record!(Zone, Pool);

/// A collection of named objects that machines belong to by name (zones, resource pools).
///
/// Both answer alike (create with a unique name, sorted list, read/update/delete one); only the
/// texts, the lookup key and what may be deleted differ.
trait NamedObject: Record + Sized {
    /// Model name in "No <model> matches the given query."
    const MODEL: &'static str;
    /// Error text when creating an object whose name is taken.
    const DUPLICATE_NAME: &'static str;

    fn render(&self) -> Value;
    /// Whether the path argument `key` designates this object.
    fn matches(&self, key: &str) -> bool;
    /// The collection, and for every machine the field naming the object it belongs to.
    fn split(world: &mut World) -> (&mut Vec<Self>, Vec<&mut String>);
    /// Refuses deleting an object MAAS keeps; `members` as from [`NamedObject::split`].
    fn check_delete(&self, members: &[&mut String]) -> Result<(), ApiError>;
}

impl NamedObject for Zone {
    const MODEL: &'static str = "Zone";
    const DUPLICATE_NAME: &'static str = "Zone with this Name already exists.";

    fn render(&self) -> Value {
        render::zone(self)
    }
    fn matches(&self, key: &str) -> bool {
        self.name == key
    }
    fn split(world: &mut World) -> (&mut Vec<Self>, Vec<&mut String>) {
        let members = world.machines.iter_mut().map(|m| &mut m.zone).collect();
        (&mut world.zones, members)
    }
    fn check_delete(&self, _members: &[&mut String]) -> Result<(), ApiError> {
        if self.name == DEFAULT {
            return Err(ApiError::bad_request(
                "This zone is the default zone, it cannot be deleted.",
            ));
        }
        Ok(())
    }
}

impl NamedObject for Pool {
    const MODEL: &'static str = "ResourcePool";
    const DUPLICATE_NAME: &'static str = "Resource pool with this Name already exists.";

    fn render(&self) -> Value {
        render::pool(self)
    }
    fn matches(&self, key: &str) -> bool {
        self.id.to_string() == key || self.name == key
    }
    fn split(world: &mut World) -> (&mut Vec<Self>, Vec<&mut String>) {
        let members = world.machines.iter_mut().map(|m| &mut m.pool).collect();
        (&mut world.pools, members)
    }
    fn check_delete(&self, members: &[&mut String]) -> Result<(), ApiError> {
        if self.id == 0 {
            return Err(ApiError::bad_request(
                "This is the default pool, it cannot be deleted.",
            ));
        }
        if members.iter().any(|m| **m == self.name) {
            return Err(ApiError::bad_request(
                "Pool has machines in it, it cannot be deleted.",
            ));
        }
        Ok(())
    }
}

/// Name of the zone and pool machines fall back to.
const DEFAULT: &str = "default";

/// Handler of a [`NamedObject`] collection (`collection`) or of one of its objects.
fn named_objects<T: NamedObject>(
    collection: bool,
    action: &str,
    call: &mut Call<'_>,
) -> Result<Reply, ApiError> {
    if collection {
        if action == "create" {
            call.require_admin()?;
            let name = call.params.required("name")?.to_owned();
            if T::split(call.world).0.iter().any(|o| o.name() == name) {
                return Err(ApiError::field("name", T::DUPLICATE_NAME));
            }
            let description = call.params.get("description").unwrap_or_default();
            let object = T::new(call.world.new_id(), name, description.to_owned());
            let value = object.render();
            T::split(call.world).0.push(object);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        let (objects, _) = T::split(call.world);
        let mut objects: Vec<&T> = objects.iter().collect();
        objects.sort_by(|a, b| a.name().cmp(b.name()));
        return Ok(Reply::ok(Value::Array(
            objects.into_iter().map(T::render).collect(),
        )));
    }
    let (args, params) = (call.args, call.params);
    let key = args.first().map_or("", String::as_str);
    let (objects, _) = T::split(call.world);
    let index = objects
        .iter()
        .position(|o| o.matches(key))
        .ok_or_else(|| ApiError::no_match(T::MODEL))?;
    if action != "update" && action != "delete" {
        return Ok(Reply::ok(objects[index].render()));
    }
    call.require_admin()?;
    let (objects, mut members) = T::split(call.world);
    if action == "delete" {
        objects[index].check_delete(&members)?;
        let removed = objects.remove(index);
        // The zone's machines move to the default zone (a pool with machines is kept).
        for member in &mut members {
            if **member == removed.name() {
                DEFAULT.clone_into(member);
            }
        }
        call.world.dirty = true;
        return Ok(deleted());
    }
    let (name, description) = objects[index].text_mut();
    if let Some(new_name) = params.get_nonempty("name") {
        for member in &mut members {
            if **member == *name {
                new_name.clone_into(member);
            }
        }
        new_name.clone_into(name);
    }
    if let Some(d) = params.get("description") {
        d.clone_into(description);
    }
    let value = objects[index].render();
    call.world.dirty = true;
    Ok(Reply::ok(value))
}

fn domains(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::Domains {
        if action == "create" {
            call.require_admin()?;
            let name = call.params.required("name")?.to_owned();
            if call.world.domains.iter().any(|d| d.name == name) {
                return Err(ApiError::field(
                    "name",
                    "Domain with this Name already exists.",
                ));
            }
            let ttl = call
                .params
                .get_nonempty("ttl")
                .map(str::parse::<u32>)
                .transpose()
                .map_err(|_| ApiError::field("ttl", "Enter a whole number."))?;
            let authoritative = call
                .params
                .get("authoritative")
                .is_none_or(|v| crate::params::parse_bool(v).unwrap_or(true));
            let domain = Domain {
                id: call.world.new_id(),
                name,
                ttl,
                authoritative,
            };
            let value = render::domain(call.world, &domain);
            call.world.domains.push(domain);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        let world = &*call.world;
        return Ok(Reply::ok(Value::Array(
            world
                .domains
                .iter()
                .map(|d| render::domain(world, d))
                .collect(),
        )));
    }
    let index = find_domain(call, call.arg(0)).ok_or_else(|| ApiError::no_match("Domain"))?;
    match action {
        "update" => {
            call.require_admin()?;
            if let Some(n) = call.params.get_nonempty("name") {
                n.clone_into(&mut call.world.domains[index].name);
            }
            if let Some(t) = call.params.get_nonempty("ttl") {
                call.world.domains[index].ttl = Some(
                    t.parse()
                        .map_err(|_| ApiError::field("ttl", "Enter a whole number."))?,
                );
            }
            call.world.dirty = true;
        }
        "delete" => {
            call.require_admin()?;
            let id = call.world.domains[index].id;
            if id == call.world.default_domain_id() {
                return Err(ApiError::bad_request(
                    "This domain is the default domain, it cannot be deleted.",
                ));
            }
            if call.world.dns_resources.iter().any(|r| r.domain_id == id)
                || call.world.machines.iter().any(|m| m.domain_id == id)
            {
                return Err(ApiError::bad_request(
                    "Cannot delete a domain that has records.",
                ));
            }
            call.world.domains.remove(index);
            call.world.dirty = true;
            return Ok(deleted());
        }
        _ => {}
    }
    let world = &*call.world;
    Ok(Reply::ok(render::domain(world, &world.domains[index])))
}

fn boot_resources(action: &str, call: &Call<'_>) -> Result<Reply, ApiError> {
    if action == "is_importing" {
        return Ok(Reply::ok(Value::Bool(false)));
    }
    let wanted = call.params.get_nonempty("type").unwrap_or("all");
    let filter: Option<&str> = match wanted {
        "all" => None,
        "synced" => Some("Synced"),
        "uploaded" => Some("Uploaded"),
        other => {
            return Err(ApiError::bad_request(format!(
                "'{other}' is not a valid boot resource type. Available types: ['synced', 'uploaded']"
            )));
        }
    };
    let mut items: Vec<_> = call
        .world
        .boot_resources
        .iter()
        .filter(|b| filter.is_none_or(|t| b.rtype == t))
        .collect();
    items.sort_by(|a, b| {
        (&a.rtype, &a.name, &a.architecture).cmp(&(&b.rtype, &b.name, &b.architecture))
    });
    Ok(Reply::ok(Value::Array(
        items
            .into_iter()
            .map(|b| render::boot_resource(b, false))
            .collect(),
    )))
}

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
