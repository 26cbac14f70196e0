//! MAAS API handlers. Each runs under the world lock with already-authenticated caller and
//! already-parsed parameters, and returns a JSON/text reply or a MAAS error.

mod dns;
mod interfaces;
mod ipranges;
mod links;
mod machine;
mod machine_ops;
mod machine_state;
mod machines;
mod machines_update;
mod network;
mod objects;
mod settings;
mod tags;
mod vm_hosts;

use http::StatusCode;
use serde_json::Value;

use crate::error::ApiError;
use crate::model::Machine;
use crate::params::Params;
use crate::routes::Kind;
use crate::world::World;

/// The authenticated user.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub(crate) username: String,
    pub(crate) is_admin: bool,
}

/// A successful answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Json(StatusCode, Value),
    Text(StatusCode, String),
    Empty(StatusCode),
}

impl Reply {
    pub(crate) fn ok(value: Value) -> Self {
        Self::Json(StatusCode::OK, value)
    }
}

/// One API call.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) caller: &'a Caller,
    pub(crate) params: &'a Params,
    pub(crate) args: &'a [String],
    pub(crate) world: &'a mut World,
}

impl Call<'_> {
    pub(crate) fn arg(&self, index: usize) -> &str {
        self.args.get(index).map_or("", String::as_str)
    }

    pub(crate) fn require_admin(&self) -> Result<(), ApiError> {
        if self.caller.is_admin {
            Ok(())
        } else {
            Err(ApiError::admin_only())
        }
    }
}

/// Non-admins see machines that are unowned or their own.
pub(crate) fn visible(m: &Machine, caller: &Caller) -> bool {
    caller.is_admin || m.owner.as_deref().is_none_or(|o| o == caller.username)
}

/// Runs the action `action` of a handler of kind `kind`.
pub(crate) fn dispatch(kind: Kind, action: &str, call: &mut Call<'_>) -> Result<Reply, ApiError> {
    match kind {
        Kind::Version => Ok(Reply::ok(objects::version())),
        Kind::Machines => machines::collection(action, call),
        Kind::Machine => machine::dispatch(action, call),
        Kind::Interfaces | Kind::Interface | Kind::Subnets | Kind::Subnet | Kind::Vlans => {
            network::dispatch(kind, action, call)
        }
        Kind::IpRanges | Kind::IpRange => ipranges::dispatch(kind, action, call),
        Kind::Settings => settings::dispatch(action, call),
        Kind::VmHosts | Kind::VmHost => vm_hosts::dispatch(kind, action, call),
        _ => objects::dispatch(kind, action, call),
    }
}
