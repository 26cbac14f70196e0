//! The 13 kinds this server admits, their webhook paths, and how each is registered.
//!
//! Paths follow controller-runtime's convention (`/mutate-<group with dashes>-<version>-<kind>`),
//! so the manifests read like every other Cluster API provider's.

use capmaas_api::{GROUP, VERSION};

/// Defaulting or validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// A mutating webhook: fills in defaults.
    Mutate,
    /// A validating webhook: accepts or rejects, with warnings.
    Validate,
}

impl Mode {
    /// `mutate` or `validate`, as in the path and the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutate => "mutate",
            Self::Validate => "validate",
        }
    }
}

/// What the API server does when this server cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Reject the request: the rule matters more than availability.
    Fail,
    /// Let the request through unchecked: the CRD's own rules still apply.
    Ignore,
}

impl FailurePolicy {
    /// The manifest value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// One of our kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Kind {
    MaasCluster,
    MaasClusterTemplate,
    MaasMachine,
    MaasMachineTemplate,
    MaasInventory,
    MaasHost,
    MaasDNSRecord,
    MaasDataTemplate,
    MaasDataClaim,
    MaasData,
    MaasIPPool,
    MaasRemediation,
    MaasRemediationTemplate,
}

impl Kind {
    /// Every kind, in the order of the API reference.
    pub const ALL: [Kind; 13] = [
        Kind::MaasCluster,
        Kind::MaasClusterTemplate,
        Kind::MaasMachine,
        Kind::MaasMachineTemplate,
        Kind::MaasInventory,
        Kind::MaasHost,
        Kind::MaasDNSRecord,
        Kind::MaasDataTemplate,
        Kind::MaasDataClaim,
        Kind::MaasData,
        Kind::MaasIPPool,
        Kind::MaasRemediation,
        Kind::MaasRemediationTemplate,
    ];

    /// The kind's name, e.g. `MaasIPPool`.
    pub fn name(self) -> &'static str {
        match self {
            Self::MaasCluster => "MaasCluster",
            Self::MaasClusterTemplate => "MaasClusterTemplate",
            Self::MaasMachine => "MaasMachine",
            Self::MaasMachineTemplate => "MaasMachineTemplate",
            Self::MaasInventory => "MaasInventory",
            Self::MaasHost => "MaasHost",
            Self::MaasDNSRecord => "MaasDNSRecord",
            Self::MaasDataTemplate => "MaasDataTemplate",
            Self::MaasDataClaim => "MaasDataClaim",
            Self::MaasData => "MaasData",
            Self::MaasIPPool => "MaasIPPool",
            Self::MaasRemediation => "MaasRemediation",
            Self::MaasRemediationTemplate => "MaasRemediationTemplate",
        }
    }

    /// The resource (plural) name, as in the CRD.
    pub fn plural(self) -> &'static str {
        match self {
            Self::MaasCluster => "maasclusters",
            Self::MaasClusterTemplate => "maasclustertemplates",
            Self::MaasMachine => "maasmachines",
            Self::MaasMachineTemplate => "maasmachinetemplates",
            Self::MaasInventory => "maasinventories",
            Self::MaasHost => "maashosts",
            Self::MaasDNSRecord => "maasdnsrecords",
            Self::MaasDataTemplate => "maasdatatemplates",
            Self::MaasDataClaim => "maasdataclaims",
            Self::MaasData => "maasdata",
            Self::MaasIPPool => "maasippools",
            Self::MaasRemediation => "maasremediations",
            Self::MaasRemediationTemplate => "maasremediationtemplates",
        }
    }

    /// The HTTP path of the kind's webhook, e.g.
    /// `/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasippool`.
    pub fn path(self, mode: Mode) -> String {
        format!(
            "/{}-{}-{VERSION}-{}",
            mode.as_str(),
            GROUP.replace('.', "-"),
            self.name().to_ascii_lowercase()
        )
    }

    /// The kind and mode a request path names.
    pub fn from_path(path: &str) -> Option<(Mode, Kind)> {
        Self::ALL.into_iter().find_map(|kind| {
            [Mode::Mutate, Mode::Validate]
                .into_iter()
                .find(|mode| kind.path(*mode) == path)
                .map(|mode| (mode, kind))
        })
    }

    /// The webhook's name in the configuration, e.g. `validation.maasippool.infrastructure.cluster.x-k8s.io`.
    pub fn webhook_name(self, mode: Mode) -> String {
        let prefix = match mode {
            Mode::Mutate => "default",
            Mode::Validate => "validation",
        };
        format!("{prefix}.{}.{GROUP}", self.name().to_ascii_lowercase())
    }

    /// Whether the kind is a template a ClusterClass references, whose `spec.template`
    /// immutability is judged here rather than by CEL (see `validate::template_frozen`).
    pub fn is_clusterclass_template(self) -> bool {
        matches!(self, Self::MaasClusterTemplate | Self::MaasMachineTemplate)
    }

    /// Whether the kind has defaults beyond its schema's, so its mutating webhook is
    /// registered. (Every kind's mutate path is served; the others answer "no change".)
    pub fn has_defaults(self) -> bool {
        matches!(
            self,
            Self::MaasCluster
                | Self::MaasClusterTemplate
                | Self::MaasIPPool
                | Self::MaasDataTemplate
        )
    }

    /// Operations sent to the validating webhook. Deletion is validated only where deleting
    /// can lose something (a consumed host) or deserves a warning (a pool with addresses in use).
    pub fn validated_operations(self) -> &'static [&'static str] {
        match self {
            Self::MaasHost | Self::MaasIPPool => &["CREATE", "UPDATE", "DELETE"],
            _ => &["CREATE", "UPDATE"],
        }
    }

    /// What the API server does when this server is unreachable (see `docs/webhook-server.md`).
    ///
    /// `Fail` where the rule protects something CEL cannot (a host claimed twice, a machine
    /// imported twice, an address handed out twice, a machine's host changed under it) and the
    /// writer retries anyway: people, GitOps tools and our controllers all do. `Ignore` for the
    /// kinds only our controllers write, whose rules restate what those controllers already
    /// guarantee: an outage of this server must not stop provisioning for them.
    pub fn failure_policy(self, mode: Mode) -> FailurePolicy {
        match (mode, self) {
            (
                Mode::Validate,
                Self::MaasDNSRecord | Self::MaasDataClaim | Self::MaasData | Self::MaasRemediation,
            ) => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_and_follow_controller_runtime() {
        assert_eq!(
            Kind::MaasIPPool.path(Mode::Validate),
            "/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasippool"
        );
        for kind in Kind::ALL {
            for mode in [Mode::Mutate, Mode::Validate] {
                assert_eq!(Kind::from_path(&kind.path(mode)), Some((mode, kind)));
            }
        }
        assert_eq!(Kind::from_path("/validate-x"), None);
    }
}
