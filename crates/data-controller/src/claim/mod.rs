//! The MaasDataClaim reconciler: one IPAddressClaim per pool the template uses
//! ([`addresses`]), the lowest free index of the template as a MaasData named
//! `<template>-<index>` ([`index`]: the API server refuses a second create), rendering
//! ([`crate::render`]) into Secrets owned by the MaasData ([`rendered`]), status.
//!
//! [`act`] reconciles: what [`decide`] (pure) says, with the status of [`status`] (pure);
//! [`watch`] maps the changes of other objects to claims.

pub mod act;
pub mod addresses;
mod cleanup;
pub mod decide;
pub mod handover;
pub mod index;
pub mod owned;
pub mod rendered;
pub mod reservations;
pub mod state;
pub mod status;
pub mod watch;
