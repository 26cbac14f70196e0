//! Repository checks that read the source tree rather than run it, home of the module layout
//! rules of `docs/architecture.md` ([`layout`]). `cargo xtask layout` applies them to every
//! workspace member ([`workspace`]); each crate's own `tests/layout.rs` adds the rules of its
//! shape (which module sits on top, which below).

pub mod layout;
mod tokens;
pub mod workspace;
