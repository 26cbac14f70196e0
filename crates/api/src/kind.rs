//! What the kinds of this provider share, written once: the derives and attributes of a spec
//! struct ([`provider_kind!`]) and of a status struct ([`provider_status!`]), and those of the
//! CAPI kinds we mirror ([`mirror_kind!`]).

/// Declares a kind around its spec struct: the derives, group, version, categories and camelCase
/// field names every kind shares, and `Age` as the last printer column, where kubectl users of
/// Cluster API providers look for it. The invocation adds its own schema derive (and any other),
/// its `#[kube(...)]` (kind, scope, status, doc, short name, printer columns) and the struct.
macro_rules! provider_kind {
    ($(#[$($attr:tt)*])* pub struct $($item:tt)*) => {
        #[derive(
            ::kube::CustomResource, Clone, Debug, PartialEq, ::serde::Serialize, ::serde::Deserialize,
        )]
        #[kube(
            group = "infrastructure.cluster.x-k8s.io",
            version = "v1beta1",
            derive = "PartialEq",
            category = "cluster-api",
            category = "maas"
        )]
        #[serde(rename_all = "camelCase")]
        $(#[$($attr)*])*
        #[kube(printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"))]
        pub struct $($item)*
    };
}
pub(crate) use provider_kind;

/// Declares a kind's status struct. Every field is optional, absent until its writer observes
/// it, so each defaults to `None` and is left out while `None`. The last field is the
/// conditions: `metav1.Condition`s as CAPI reads them, a list keyed by `type` so that
/// server-side apply merges each condition on its own, and bounded for the API server's CEL
/// cost estimate. The doc comment written after the struct, before `conditions`, says which
/// conditions the kind reports.
macro_rules! provider_status {
    (
        $(#[$($attr:tt)*])*
        pub struct $name:ident {
            $(
                $(#[$($field_attr:tt)*])*
                pub $field:ident: Option<$ty:ty>,
            )*
        }
        $(#[$($conditions_attr:tt)*])*
        conditions
    ) => {
        #[derive(
            Clone, Debug, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize,
            ::schemars::JsonSchema,
        )]
        #[serde(rename_all = "camelCase")]
        $(#[$($attr)*])*
        pub struct $name {
            $(
                $(#[$($field_attr)*])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
            $(#[$($conditions_attr)*])*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
            pub conditions: Option<Vec<::k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
        }
    };
}
pub(crate) use provider_status;

/// Declares a mirror of a kind that CAPI owns and installs: a namespaced `CustomResource`
/// without a schema (CAPI's CRD is the one installed), decoded leniently and written camelCase.
/// The invocation adds its `#[kube(...)]` (group, version, kind, status) and the struct.
macro_rules! mirror_kind {
    ($(#[$($attr:tt)*])* pub struct $($item:tt)*) => {
        #[derive(
            ::kube::CustomResource, Clone, Debug, Default, PartialEq, ::serde::Serialize,
            ::serde::Deserialize,
        )]
        #[kube(namespaced, schema = "disabled")]
        #[serde(rename_all = "camelCase")]
        $(#[$($attr)*])*
        pub struct $($item)*
    };
}
pub(crate) use mirror_kind;
