//! Machine operations: list/get, allocate, deploy, release, power, annotations, hostname.

use std::collections::BTreeMap;

use crate::calls::collection;
use crate::error::{ErrorContext, MaasError};
use crate::form::Params;
use crate::machine_requests::{
    AllocateRequest, DeployRequest, MachineFilter, ReleaseRequest, StopMode,
    validate_annotation_key,
};
use crate::model::{Machine, MachineList, PowerState, PowerStateReport};
use crate::transport::{Call, MaasClient, segment};

fn machine_path(system_id: &str) -> Result<Vec<String>, MaasError> {
    Ok(vec![
        "machines".to_owned(),
        segment("system_id", system_id)?,
    ])
}

fn list_call(filter: &MachineFilter) -> Result<Call, MaasError> {
    Ok(Call::get("machines.list", collection("machines")).params(filter.to_params()?))
}

fn comment_params(comment: Option<&str>) -> Params {
    let mut params = Params::new();
    params.push_opt("comment", comment);
    params
}

impl MaasClient {
    /// `GET /machines/` with server-side filters. Strict: one machine that does not decode
    /// fails the whole call with [`MaasError::Decode`] (right for a lookup of one known
    /// machine); see [`Self::list_machines_lenient`] for listings that must go on.
    pub async fn list_machines(&self, filter: &MachineFilter) -> Result<Vec<Machine>, MaasError> {
        self.json(list_call(filter)?).await
    }

    /// `GET /machines/` with server-side filters, decoded machine by machine: an element that
    /// does not decode is skipped and reported in [`MachineList::skipped`] (its `system_id`
    /// when readable, and the cut decode error) while the others are returned. The call still
    /// fails when the answer is not a JSON array at all.
    pub async fn list_machines_lenient(
        &self,
        filter: &MachineFilter,
    ) -> Result<MachineList, MaasError> {
        let list: MachineList = self.json(list_call(filter)?).await?;
        for skipped in &list.skipped {
            tracing::debug!(operation = "machines.list", %skipped, "skipped a machine that does not decode");
        }
        Ok(list)
    }

    /// `GET /machines/?op=list_allocated`: the machines allocated to the user of this API key,
    /// decoded machine by machine as [`Self::list_machines_lenient`] does.
    pub async fn list_allocated_lenient(&self) -> Result<MachineList, MaasError> {
        let call =
            Call::get("machines.list_allocated", collection("machines")).op("list_allocated");
        self.json(call).await
    }

    /// `GET /machines/{system_id}/`.
    pub async fn get_machine(&self, system_id: &str) -> Result<Machine, MaasError> {
        self.get_json("machines.get", machine_path(system_id)?)
            .await
    }

    /// `DELETE /machines/{system_id}/` (admin): MAAS forgets the machine; a machine composed on
    /// a VM host is deleted with its VM, whose resources go back to the VM host. Retried: a
    /// [`MaasError::NotFound`] (unknown id, or an earlier attempt deleted it) means it is gone,
    /// which callers treat as done; a key without admin rights gets [`MaasError::Forbidden`].
    pub async fn delete_machine(&self, system_id: &str) -> Result<(), MaasError> {
        self.delete_item("machines.delete", machine_path(system_id)?)
            .await
    }

    /// `POST /machines/?op=allocate`. Never retried; a 409 is [`MaasError::NoMatchingMachine`].
    pub async fn allocate(&self, request: &AllocateRequest) -> Result<Machine, MaasError> {
        let call = Call::post("machines.allocate", collection("machines"))
            .op("allocate")
            .params(request.to_params())
            .context(ErrorContext::Allocate);
        let machine: Machine = self.json(call).await?;
        // The machine MAAS chose: known only now, recorded on the caller's call span.
        tracing::Span::current().record("maas.system_id", machine.system_id.as_str());
        Ok(machine)
    }

    /// `POST /machines/{id}/?op=deploy`. Not idempotent, never retried.
    pub async fn deploy(
        &self,
        system_id: &str,
        request: &DeployRequest,
    ) -> Result<Machine, MaasError> {
        let call = Call::post("machines.deploy", machine_path(system_id)?)
            .op("deploy")
            .params(request.to_params());
        self.json(call).await
    }

    /// `POST /machines/{id}/?op=release`. Retried: releasing a Ready/Releasing machine is a
    /// no-op in MAAS.
    pub async fn release(
        &self,
        system_id: &str,
        request: &ReleaseRequest,
    ) -> Result<Machine, MaasError> {
        let call = Call::post("machines.release", machine_path(system_id)?)
            .op("release")
            .params(request.to_params())
            .idempotent();
        self.json(call).await
    }

    /// `POST /machines/{id}/?op=power_on`. Never retried. Call it only when the power state is
    /// `off`: MAAS's IPMI driver power-cycles a running machine.
    pub async fn power_on(
        &self,
        system_id: &str,
        comment: Option<&str>,
    ) -> Result<Machine, MaasError> {
        self.commented_op("machines.power_on", "power_on", system_id, comment)
            .await
    }

    /// `POST /machines/{id}/?op=power_off`; `None` when the power type cannot power off.
    pub async fn power_off(
        &self,
        system_id: &str,
        stop_mode: StopMode,
        comment: Option<&str>,
    ) -> Result<Option<Machine>, MaasError> {
        let mut params = comment_params(comment);
        if stop_mode == StopMode::Soft {
            params.push("stop_mode", "soft");
        }
        let call = Call::post("machines.power_off", machine_path(system_id)?)
            .op("power_off")
            .params(params)
            .idempotent();
        self.json(call).await
    }

    /// `GET /machines/{id}/?op=query_power_state` (asks the BMC; slow, prefer the cached
    /// `power_state` field).
    pub async fn query_power_state(&self, system_id: &str) -> Result<PowerState, MaasError> {
        let call = Call::get("machines.query_power_state", machine_path(system_id)?)
            .op("query_power_state");
        let report: PowerStateReport = self.json(call).await?;
        Ok(report.state)
    }

    /// `POST /machines/{id}/?op=abort` (a deploy goes back to Allocated).
    pub async fn abort(
        &self,
        system_id: &str,
        comment: Option<&str>,
    ) -> Result<Machine, MaasError> {
        self.commented_op("machines.abort", "abort", system_id, comment)
            .await
    }

    /// `POST /machines/{id}/?op=mark_broken` (owner only).
    pub async fn mark_broken(
        &self,
        system_id: &str,
        comment: Option<&str>,
    ) -> Result<Machine, MaasError> {
        self.commented_op("machines.mark_broken", "mark_broken", system_id, comment)
            .await
    }

    /// `POST /machines/{id}/?op=mark_fixed` (admin only).
    pub async fn mark_fixed(
        &self,
        system_id: &str,
        comment: Option<&str>,
    ) -> Result<Machine, MaasError> {
        self.commented_op("machines.mark_fixed", "mark_fixed", system_id, comment)
            .await
    }

    /// `POST /machines/{id}/?op=set_workload_annotations`: sets the given keys, leaves others.
    /// Keys are checked locally first (MAAS crashes with 500 on `/`). Idempotent, retried.
    pub async fn set_workload_annotations(
        &self,
        system_id: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Machine, MaasError> {
        let mut params = Params::new();
        for (key, value) in annotations {
            validate_annotation_key(key)?;
            if value.is_empty() {
                return Err(MaasError::InvalidArgument(format!(
                    "empty value for annotation {key:?} would delete it; use remove_workload_annotations"
                )));
            }
            params.push(key, value.clone());
        }
        self.annotations_call(system_id, params).await
    }

    /// Removes annotation keys (MAAS deletes a key sent with an empty value).
    pub async fn remove_workload_annotations(
        &self,
        system_id: &str,
        keys: &[&str],
    ) -> Result<Machine, MaasError> {
        let mut params = Params::new();
        for key in keys {
            validate_annotation_key(key)?;
            params.push(key, "");
        }
        self.annotations_call(system_id, params).await
    }

    /// `POST /machines/{id}/?op=<op>` whose only parameter is the event-log comment; never
    /// retried, as none of these ops is safe to repeat blindly.
    async fn commented_op(
        &self,
        name: &'static str,
        op: &'static str,
        system_id: &str,
        comment: Option<&str>,
    ) -> Result<Machine, MaasError> {
        let call = Call::post(name, machine_path(system_id)?)
            .op(op)
            .params(comment_params(comment));
        self.json(call).await
    }

    async fn annotations_call(
        &self,
        system_id: &str,
        params: Params,
    ) -> Result<Machine, MaasError> {
        if params.is_empty() {
            return self.get_machine(system_id).await;
        }
        let call = Call::post(
            "machines.set_workload_annotations",
            machine_path(system_id)?,
        )
        .op("set_workload_annotations")
        .params(params)
        .idempotent();
        self.json(call).await
    }

    /// `PUT /machines/{id}/` with `hostname` (admin only). Idempotent, retried.
    pub async fn update_hostname(
        &self,
        system_id: &str,
        hostname: &str,
    ) -> Result<Machine, MaasError> {
        let mut params = Params::new();
        params.push("hostname", hostname);
        self.put_json("machines.update", machine_path(system_id)?, params)
            .await
    }
}
