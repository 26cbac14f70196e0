//! Template errors: what went wrong and at which template field.

use std::fmt;

use capmaas_api::common::{GROUP, PoolReference};
use capmaas_api::data_checks::{TemplateIssue, TemplateProblem};
use capmaas_api::data_meta::DataObject;

/// A template that cannot be rendered for this machine.
///
/// `Display` gives `<field>: <problem>`, e.g.
/// `spec.metaData.fromLabels[2]: Machine has no label "foo"`: ready for a condition message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct RenderError {
    /// Path of the template field, e.g. `spec.networkData.networks.ipv4[0].ipAddressFromPool`.
    pub field: String,
    /// What is wrong with it (boxed: keeps `Result<_, RenderError>` small).
    pub problem: Box<RenderProblem>,
}

impl RenderError {
    /// An error at `field`.
    pub fn new(field: impl Into<String>, problem: RenderProblem) -> Self {
        Self {
            field: field.into(),
            problem: Box::new(problem),
        }
    }
}

impl From<TemplateIssue> for RenderError {
    fn from(issue: TemplateIssue) -> Self {
        Self::new(issue.field, RenderProblem::Template(issue.problem))
    }
}

/// What is wrong with a template field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RenderProblem {
    /// The Machine, MaasMachine or MaasHost the item reads is not known (yet).
    #[error("the {} is not known yet", object_kind(*.0))]
    MissingObject(DataObject),
    /// The object has no such label.
    #[error("{} has no label {label:?}", object_kind(*.object))]
    MissingLabel {
        /// Which object.
        object: DataObject,
        /// The label key.
        label: String,
    },
    /// The object has no such annotation.
    #[error("{} has no annotation {annotation:?}", object_kind(*.object))]
    MissingAnnotation {
        /// Which object.
        object: DataObject,
        /// The annotation key.
        annotation: String,
    },
    /// The host has no interface of that name.
    #[error("the host has no interface {0:?}")]
    UnknownInterface(String),
    /// A MAC address (literal or from a host interface) is not `xx:xx:xx:xx:xx:xx`.
    #[error("{0:?} is not a MAC address")]
    BadMac(String),
    /// A MAC address source sets none or more than one of `string`, `fromHostInterface` and
    /// `fromBootMAC`.
    #[error("exactly one of string, fromHostInterface or fromBootMAC must be set")]
    BadMacSource,
    /// `fromBootMAC` on a host whose status records no boot interface.
    #[error("the host has no boot interface recorded (MaasHost status.bootInterface)")]
    NoBootInterface,
    /// A route sets neither or both of `gateway` and `gatewayFromPool`.
    #[error("exactly one of gateway or gatewayFromPool must be set")]
    BadGatewaySource,
    /// No address was allocated from the pool.
    #[error("no address allocated from pool {}", PoolName(.0))]
    NoAddress(PoolReference),
    /// The pool's allocation has no gateway.
    #[error("pool {} gives no gateway", PoolName(.0))]
    NoGateway(PoolReference),
    /// The pool's allocation has no DNS servers.
    #[error("pool {} gives no DNS servers", PoolName(.0))]
    NoDnsServers(PoolReference),
    /// The pool's address is of the other IP family than the network.
    #[error("pool {} gives {address}, not an {family} address", PoolName(.pool))]
    WrongFamily {
        /// The pool.
        pool: PoolReference,
        /// The address it gave.
        address: String,
        /// `IPv4` or `IPv6`.
        family: &'static str,
    },
    /// The pool's prefix length is too long for the address family.
    #[error("pool {} gives prefix length {prefix}, more than {max}", PoolName(.pool))]
    BadPrefix {
        /// The pool.
        pool: PoolReference,
        /// The prefix length it gave.
        prefix: u8,
        /// 32 or 128.
        max: u8,
    },
    /// A bond without member links.
    #[error("a bond needs at least one member link")]
    EmptyBond,
    /// A VLAN id outside 0–4094.
    #[error("VLAN id {0} is outside 0-4094")]
    BadVlanId(i32),
    /// A negative index, a negative offset or a step below 1.
    #[error("{name} is {value}, must be {bound}")]
    OutOfRange {
        /// `index`, `offset` or `step`.
        name: &'static str,
        /// Its value.
        value: i64,
        /// `>= 0` or `>= 1`.
        bound: &'static str,
    },
    /// `offset + index * step` does not fit in 64 bits.
    #[error("offset {offset} + index {index} * step {step} overflows")]
    IndexOverflow {
        /// Offset.
        offset: i64,
        /// Index.
        index: i64,
        /// Step.
        step: i64,
    },
    /// A route destination is not a CIDR.
    #[error("{0:?} is not a CIDR")]
    BadCidr(String),
    /// A literal address is not an IP address.
    #[error("{0:?} is not an IP address")]
    BadIp(String),
    /// A structural problem, found by the checks the admission webhook applies too.
    #[error(transparent)]
    Template(TemplateProblem),
    /// The rendered document could not be serialised (a bug, not a template error).
    #[error("cannot serialise the rendered data: {0}")]
    Serialize(String),
}

/// Kind name of a related object, as used in messages.
pub(crate) fn object_kind(object: DataObject) -> &'static str {
    match object {
        DataObject::Machine => "Machine",
        DataObject::MaasMachine => "MaasMachine",
        DataObject::MaasHost => "MaasHost",
    }
}

/// A pool reference for messages: `MaasIPPool/foo`, or `Kind.group/foo` for other groups.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolName<'a>(pub(crate) &'a PoolReference);

impl fmt::Display for PoolName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool = self.0;
        if pool.api_group == GROUP || pool.api_group.is_empty() {
            write!(f, "{}/{}", pool.kind, pool.name)
        } else {
            write!(f, "{}.{}/{}", pool.kind, pool.api_group, pool.name)
        }
    }
}
