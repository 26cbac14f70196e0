//! `/maas/`: the region's configuration, `op=get_config` (any user) and `op=set_config`
//! (admins), answering as MAAS does: the JSON value, and `OK` for a write.

use http::StatusCode;
use serde_json::Value;

use super::{Call, Reply};
use crate::error::ApiError;
use crate::params::parse_bool;
use crate::settings::NAMES;

pub(super) fn dispatch(action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    let name = call.params.required("name")?.to_owned();
    let unknown = || {
        ApiError::field(
            "name",
            format!(
                "{name} is not a valid config setting (valid settings are: {}).",
                NAMES.join(", ")
            ),
        )
    };
    match action {
        "get_config" => call
            .world
            .settings
            .get(&name)
            .map(|v| Reply::ok(Value::Bool(v)))
            .ok_or_else(unknown),
        "set_config" => {
            call.require_admin()?;
            let raw = call.params.get("value").unwrap_or_default();
            let value = parse_bool(raw).ok_or_else(|| {
                ApiError::field("value", format!("'{raw}' must be True or False."))
            })?;
            if !call.world.settings.set(&name, value) {
                return Err(unknown());
            }
            call.world.dirty = true;
            Ok(Reply::Text(StatusCode::OK, "OK".to_owned()))
        }
        _ => Err(ApiError::internal(format!("unhandled action {action}"))),
    }
}
