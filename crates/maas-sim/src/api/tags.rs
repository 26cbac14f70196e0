//! `/tags/`: create, list, get, update, delete, machines, update_nodes.

use serde_json::{Value, json};

use super::{Call, Reply, visible};
use crate::error::ApiError;
use crate::model::Tag;
use crate::render;
use crate::routes::Kind;

/// Tag names MAAS accepts: `^[a-zA-Z0-9_-]+$`.
pub(crate) fn valid_tag_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

pub(super) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    if kind == Kind::Tags {
        if action == "create" {
            call.require_admin()?;
            let name = call
                .params
                .get("name")
                .unwrap_or_default()
                .trim()
                .to_owned();
            if name.is_empty() {
                return Err(ApiError::required("name"));
            }
            if !valid_tag_name(&name) {
                return Err(ApiError::field(
                    "name",
                    "Invalid character in the tag name.",
                ));
            }
            if call.world.tags.iter().any(|t| t.name == name) {
                return Err(ApiError::field(
                    "name",
                    "Tag with this Name already exists.",
                ));
            }
            let tag = new_tag(name, call);
            let value = render::tag(&tag);
            call.world.tags.push(tag);
            call.world.dirty = true;
            return Ok(Reply::ok(value));
        }
        return Ok(Reply::ok(Value::Array(
            call.world.tags.iter().map(render::tag).collect(),
        )));
    }
    let name = call.arg(0).to_owned();
    let index = call
        .world
        .tags
        .iter()
        .position(|t| t.name == name)
        .ok_or_else(|| ApiError::no_match("Tag"))?;
    match action {
        "read" => Ok(Reply::ok(render::tag(&call.world.tags[index]))),
        "machines" | "nodes" => Ok(Reply::ok(tagged_machines(call, &name))),
        "update" => {
            call.require_admin()?;
            let p = call.params;
            if let Some(new_name) = p.get_nonempty("name") {
                if !valid_tag_name(new_name) {
                    return Err(ApiError::field(
                        "name",
                        "Invalid character in the tag name.",
                    ));
                }
                for m in &mut call.world.machines {
                    if m.tags.remove(&name) {
                        m.tags.insert(new_name.to_owned());
                    }
                }
                new_name.clone_into(&mut call.world.tags[index].name);
            }
            let tag = &mut call.world.tags[index];
            for (key, field) in [
                ("comment", &mut tag.comment),
                ("definition", &mut tag.definition),
                ("kernel_opts", &mut tag.kernel_opts),
            ] {
                if let Some(v) = p.get(key) {
                    v.clone_into(field);
                }
            }
            call.world.dirty = true;
            Ok(Reply::ok(render::tag(&call.world.tags[index])))
        }
        "delete" => {
            call.require_admin()?;
            call.world.tags.remove(index);
            for m in &mut call.world.machines {
                m.tags.remove(&name);
            }
            call.world.dirty = true;
            Ok(Reply::Empty(http::StatusCode::NO_CONTENT))
        }
        "update_nodes" => {
            call.require_admin()?;
            let current = call.world.tags[index].definition.clone();
            if let Some(definition) = call.params.get("definition")
                && definition != current
            {
                return Err(ApiError::conflict(format!(
                    "Definition supplied '{definition}' doesn't match current definition '{current}'"
                )));
            }
            let (mut added, mut removed) = (0u64, 0u64);
            for id in call.params.all("add") {
                if let Some(m) = call.world.machines.iter_mut().find(|m| m.system_id == id) {
                    added += u64::from(m.tags.insert(name.clone()));
                }
            }
            for id in call.params.all("remove") {
                if let Some(m) = call.world.machines.iter_mut().find(|m| m.system_id == id) {
                    removed += u64::from(m.tags.remove(&name));
                }
            }
            call.world.dirty = true;
            Ok(Reply::ok(json!({"added": added, "removed": removed})))
        }
        _ => Err(ApiError::internal(format!("unhandled tag action {action}"))),
    }
}

fn new_tag(name: String, call: &Call<'_>) -> Tag {
    let get = |k: &str| call.params.get(k).unwrap_or_default().to_owned();
    Tag {
        name,
        definition: get("definition"),
        comment: get("comment"),
        kernel_opts: get("kernel_opts"),
    }
}

fn tagged_machines(call: &Call<'_>, tag: &str) -> Value {
    let world = &*call.world;
    Value::Array(
        world
            .machines
            .iter()
            .filter(|m| m.tags.contains(tag) && visible(m, call.caller))
            .map(|m| render::machine(world, m))
            .collect(),
    )
}
