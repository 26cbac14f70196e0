//! `MaasRemediation` and `MaasRemediationTemplate`: external remediation for
//! MachineHealthCheck (`remediation.templateRef`), strategy `Reboot`.

// `KubeSchema` copies each struct, `pub` included, into a function body to build
// its schema; rustc then reports the copy as an unreachable `pub` item.
#![allow(unreachable_pub)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::TemplateMetadata;
use crate::kind::{provider_kind, provider_status};

provider_kind! {
    /// How to remediate the unhealthy machine.
    #[derive(Default, Eq, JsonSchema)]
    #[kube(
        kind = "MaasRemediation",
        namespaced,
        status = "MaasRemediationStatus",
        doc = "MaasRemediation is created by a MachineHealthCheck for one unhealthy Machine (same name): the Node is fenced and the server power-cycled up to retryLimit times before the Machine is handed back for replacement.",
        shortname = "maasr",
        printcolumn(
            name = "Strategy",
            type_ = "string",
            json_path = ".spec.strategy.type",
            description = "Remediation strategy"
        ),
        printcolumn(
            name = "Phase",
            type_ = "string",
            json_path = ".status.phase",
            description = "Remediation phase"
        ),
        printcolumn(
            name = "Retries",
            type_ = "integer",
            json_path = ".status.retryCount",
            description = "Attempts made"
        ),
        printcolumn(
            name = "LastRemediated",
            type_ = "date",
            json_path = ".status.lastRemediated",
            description = "Start of the last attempt"
        )
    )]
    pub struct MaasRemediationSpec {
        /// Remediation strategy and limits.
        #[serde(default)]
        pub strategy: RemediationStrategy,
    }
}

/// Remediation strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RemediationType {
    /// Power the server off and on again.
    #[default]
    Reboot,
}

/// Strategy, attempts and timeout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemediationStrategy {
    /// Remediation strategy. `Reboot`, the default and only one, fences the Node and powers the
    /// server off and on again through its MaasHost.
    #[serde(rename = "type", default)]
    pub type_: RemediationType,
    /// Maximum number of reboots before giving up.
    #[serde(default = "default_retry_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub retry_limit: i32,
    /// Seconds one attempt may take (power off, power on, Node ready).
    #[serde(default = "default_timeout_seconds")]
    #[schemars(range(min = 100, max = 86_400))]
    pub timeout_seconds: i32,
}

fn default_retry_limit() -> i32 {
    1
}

fn default_timeout_seconds() -> i32 {
    600
}

impl Default for RemediationStrategy {
    fn default() -> Self {
        Self {
            type_: RemediationType::Reboot,
            retry_limit: default_retry_limit(),
            timeout_seconds: default_timeout_seconds(),
        }
    }
}

/// Phase of a remediation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RemediationPhase {
    /// The server is being powered off and the Node fenced.
    Running,
    /// Waiting for the server and its Node to come back.
    Waiting,
    /// Gave up: the Machine is handed to its owner for replacement.
    #[serde(rename = "Deleting machine")]
    DeletingMachine,
    /// Remediation cannot proceed (e.g. host gone); nothing more is done.
    Failed,
}

provider_status! {
    /// Observed state of a MaasRemediation, written by remediation-controller.
    pub struct MaasRemediationStatus {
        /// Current phase.
        pub phase: Option<RemediationPhase>,
        /// Reboots done so far.
        pub retry_count: Option<i32>,
        /// Start of the last attempt.
        pub last_remediated: Option<Time>,
    }
    /// Conditions written by remediation-controller: `RemediationInProgress`, `Ready` and
    /// `Paused`. `RemediationInProgress` is True while an attempt waits for the power-off or the
    /// Node; `Ready` turns True once the Node is Ready again after a reboot; `Paused` is True while
    /// the Cluster, this object or its Machine is paused.
    conditions
}

provider_kind! {
    /// Template referenced by a MachineHealthCheck's `remediation.templateRef`.
    #[derive(KubeSchema)]
    #[kube(
        kind = "MaasRemediationTemplate",
        namespaced,
        doc = "MaasRemediationTemplate is referenced by a MachineHealthCheck; CAPI copies spec.template into a MaasRemediation named after each unhealthy Machine. Immutable.",
        shortname = "maasrt",
        printcolumn(
            name = "Strategy",
            type_ = "string",
            json_path = ".spec.template.spec.strategy.type",
            description = "Remediation strategy"
        ),
        printcolumn(
            name = "RetryLimit",
            type_ = "integer",
            json_path = ".spec.template.spec.strategy.retryLimit",
            description = "Maximum reboots"
        )
    )]
    pub struct MaasRemediationTemplateSpec {
        /// The MaasRemediation to create. Immutable.
        #[x_kube(validation = Rule::new("self == oldSelf").message("spec.template is immutable").reason(Reason::FieldValueForbidden))]
        pub template: MaasRemediationTemplateResource,
    }
}

/// Metadata and spec of a templated MaasRemediation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MaasRemediationTemplateResource {
    /// Labels and annotations for the created MaasRemediation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// Spec of the created MaasRemediation.
    pub spec: MaasRemediationSpec,
}
