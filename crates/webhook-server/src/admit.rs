//! One AdmissionReview in, one out: decode, default or validate, answer in the API server's
//! own terms (a 422 `Invalid` status naming each field, warnings, a JSON patch).

use capmaas_api::GROUP;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, Operation as KubeOperation,
};
use kube::core::{DynamicObject, Status, response::StatusCause, response::StatusDetails};
use serde::de::DeserializeOwned;

use crate::defaults;
use crate::error::{Error, Result};
use crate::field::Verdict;
use crate::kinds::{Kind, Mode};
use crate::validate::{self, Lookups, Operation, Request};

/// How a review ended, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed without change.
    Allowed,
    /// Allowed with warnings.
    Warned,
    /// Allowed with defaults filled in.
    Defaulted,
    /// Rejected.
    Denied,
}

impl Outcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Warned => "warned",
            Self::Defaulted => "defaulted",
            Self::Denied => "denied",
        }
    }
}

/// The answer to one review.
#[derive(Debug)]
pub struct Answer {
    /// The AdmissionReview to send back.
    pub review: AdmissionReview<DynamicObject>,
    /// How it ended.
    pub outcome: Outcome,
    /// The request's operation (`CREATE`, ...), for metrics.
    pub operation: &'static str,
    /// `<namespace>/<name>` of the object, for logs.
    pub object: String,
}

/// Answers the AdmissionReview in `body` for `kind`'s webhook in `mode`.
pub fn review(body: &[u8], mode: Mode, kind: Kind, lookups: &dyn Lookups) -> Result<Answer> {
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_slice(body).map_err(Error::BadReview)?;
    let request: AdmissionRequest<DynamicObject> =
        review.try_into().map_err(|_| Error::NoRequest)?;
    let operation = match request.operation {
        KubeOperation::Create => "CREATE",
        KubeOperation::Update => "UPDATE",
        KubeOperation::Delete => "DELETE",
        KubeOperation::Connect => "CONNECT",
    };
    let object = format!(
        "{}/{}",
        request.namespace.as_deref().unwrap_or_default(),
        request.name
    );
    let (review, outcome) = answer(&request, mode, kind, lookups)?;
    Ok(Answer {
        review,
        outcome,
        operation,
        object,
    })
}

fn answer(
    request: &AdmissionRequest<DynamicObject>,
    mode: Mode,
    kind: Kind,
    lookups: &dyn Lookups,
) -> Result<(AdmissionReview<DynamicObject>, Outcome)> {
    let response = AdmissionResponse::from(request);
    if request.kind.group != GROUP || request.kind.kind != kind.name() {
        let message = format!(
            "the {} webhook for {} received a {}.{}: the webhook configuration is wrong",
            mode.as_str(),
            kind.name(),
            request.kind.kind,
            request.kind.group
        );
        return Ok((response.deny(message).into_review(), Outcome::Denied));
    }
    let (response, outcome) = match mode {
        Mode::Mutate => mutate(request, kind, response)?,
        Mode::Validate => validate(request, kind, lookups, response),
    };
    Ok((response.into_review(), outcome))
}

fn mutate(
    request: &AdmissionRequest<DynamicObject>,
    kind: Kind,
    response: AdmissionResponse,
) -> Result<(AdmissionResponse, Outcome)> {
    let Some(object) = &request.object else {
        return Ok((response, Outcome::Allowed));
    };
    let original = serde_json::to_value(object).map_err(Error::Encode)?;
    let mut defaulted = original.clone();
    defaults::apply(kind, &mut defaulted);
    let patch = json_patch::diff(&original, &defaulted);
    if patch.0.is_empty() {
        return Ok((response, Outcome::Allowed));
    }
    let response = response.with_patch(patch).map_err(Error::Patch)?;
    Ok((response, Outcome::Defaulted))
}

fn validate(
    request: &AdmissionRequest<DynamicObject>,
    kind: Kind,
    lookups: &dyn Lookups,
    response: AdmissionResponse,
) -> (AdmissionResponse, Outcome) {
    let operation = match request.operation {
        KubeOperation::Create => Operation::Create,
        KubeOperation::Update => Operation::Update,
        KubeOperation::Delete => Operation::Delete,
        KubeOperation::Connect => return (response, Outcome::Allowed),
    };
    if operation == Operation::Update && !spec_changed(request) {
        // Metadata-only updates (finalizers, labels, annotations) are never refused: an object
        // that predates a rule, or was written while this server was down, must still be
        // deletable and labelable.
        return (response, Outcome::Allowed);
    }
    let mut verdict = match dispatch(request, operation, kind, lookups) {
        Ok(verdict) => verdict,
        Err(e) => {
            let message = format!("{} cannot be read: {e}", kind.name());
            return (response.deny(message), Outcome::Denied);
        }
    };
    if let (Operation::Update, true, Some(new), Some(old)) = (
        operation,
        kind.is_clusterclass_template(),
        &request.object,
        &request.old_object,
    ) {
        verdict.merge(validate::template_frozen(
            request.dry_run,
            new.metadata.annotations.as_ref(),
            &old.data["spec"],
            &new.data["spec"],
        ));
    }
    respond(request, kind, verdict, response)
}

fn spec_changed(request: &AdmissionRequest<DynamicObject>) -> bool {
    let spec = |o: Option<&DynamicObject>| o.and_then(|o| o.data.get("spec")).cloned();
    let deleting = request
        .old_object
        .as_ref()
        .is_some_and(|o| o.metadata.deletion_timestamp.is_some());
    !deleting && spec(request.object.as_ref()) != spec(request.old_object.as_ref())
}

fn dispatch(
    request: &AdmissionRequest<DynamicObject>,
    operation: Operation,
    kind: Kind,
    lookups: &dyn Lookups,
) -> std::result::Result<Verdict, serde_json::Error> {
    let run = Run { request, operation };
    match kind {
        Kind::MaasCluster => run.with(|r| validate::maas_cluster(r, lookups)),
        Kind::MaasClusterTemplate => run.with(|r| validate::maas_cluster_template(r, lookups)),
        Kind::MaasMachine => run.with(validate::maas_machine),
        Kind::MaasMachineTemplate => run.with(validate::maas_machine_template),
        Kind::MaasInventory => run.with(|r| validate::maas_inventory(r, lookups)),
        Kind::MaasHost => run.with(|r| validate::maas_host(r, lookups)),
        Kind::MaasDNSRecord => run.with(|r| validate::maas_dns_record(r, lookups)),
        Kind::MaasDataTemplate => run.with(|r| validate::maas_data_template(r, lookups)),
        Kind::MaasDataClaim => run.with(validate::maas_data_claim),
        Kind::MaasData => run.with(validate::maas_data),
        Kind::MaasIPPool => run.with(|r| validate::maas_ip_pool(r, lookups)),
        Kind::MaasRemediation => run.with(validate::maas_remediation),
        Kind::MaasRemediationTemplate => run.with(validate::maas_remediation_template),
    }
}

/// Decodes the request's objects as `K` and runs one kind's validation on them.
struct Run<'a> {
    request: &'a AdmissionRequest<DynamicObject>,
    operation: Operation,
}

impl Run<'_> {
    fn with<K: DeserializeOwned>(
        &self,
        validate: impl FnOnce(&Request<'_, K>) -> Verdict,
    ) -> std::result::Result<Verdict, serde_json::Error> {
        let object = self.request.object.as_ref().map(decode::<K>).transpose()?;
        let old = self
            .request
            .old_object
            .as_ref()
            .map(decode::<K>)
            .transpose()?;
        let namespace = self.request.namespace.as_deref().unwrap_or_default();
        Ok(validate(&Request {
            operation: self.operation,
            namespace,
            name: &self.request.name,
            object: object.as_ref(),
            old: old.as_ref(),
        }))
    }
}

fn decode<K: DeserializeOwned>(
    object: &DynamicObject,
) -> std::result::Result<K, serde_json::Error> {
    serde_json::from_value(serde_json::to_value(object)?)
}

fn respond(
    request: &AdmissionRequest<DynamicObject>,
    kind: Kind,
    verdict: Verdict,
    mut response: AdmissionResponse,
) -> (AdmissionResponse, Outcome) {
    let warned = !verdict.warnings.is_empty();
    if warned {
        response.warnings = Some(verdict.warnings);
    }
    if verdict.errors.is_empty() {
        let outcome = if warned {
            Outcome::Warned
        } else {
            Outcome::Allowed
        };
        return (response, outcome);
    }
    let errors: Vec<String> = verdict.errors.iter().map(ToString::to_string).collect();
    let listed = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let qualified = format!("{}.{GROUP}", kind.name());
    let message = format!("{qualified} {:?} is invalid: {listed}", request.name);
    let causes = verdict
        .errors
        .iter()
        .map(|e| StatusCause {
            reason: e.reason().to_owned(),
            message: e.to_string(),
            field: e.path.as_str().to_owned(),
        })
        .collect();
    let details = StatusDetails {
        name: request.name.clone(),
        group: GROUP.to_owned(),
        kind: kind.plural().to_owned(),
        uid: String::new(),
        causes,
        retry_after_seconds: 0,
    };
    let mut denied = response.deny(&message);
    denied.result = Status::failure(&message, "Invalid")
        .with_code(422)
        .with_details(details);
    (denied, Outcome::Denied)
}
