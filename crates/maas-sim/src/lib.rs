//! A faithful MAAS REST API 2.0 simulator: wire format, OAuth (PLAINTEXT and HMAC-SHA1),
//! machine lifecycle with time-driven transitions, allocation rules, networking, DNS, tags,
//! zones, pools, boot resources, fault injection and a control API for tests.
//!
//! ```no_run
//! # async fn demo() -> Result<(), maas_sim::SimError> {
//! let sim = maas_sim::Simulator::start(maas_sim::SimConfig::instant()).await?;
//! println!("{} {}", sim.url(), sim.api_key());
//! assert_eq!(sim.state().machines().len(), 10);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

#![recursion_limit = "256"]

mod api;
mod app;
pub mod auth;
mod config;
mod control;
mod criteria;
mod describe;
mod error;
mod faults;
mod handle;
mod history;
mod inventory;
mod latency;
mod model;
mod netmodel;
mod netsetup;
pub mod params;
mod persist;
mod render;
mod respond;
pub mod routes;
mod selection;
mod server;
mod settings;
mod shared;
mod status;
mod vmhost_events;
mod vmhosts;
mod world;

pub use config::{ApiKey, SimConfig, Timings, TlsFiles};
pub use error::{ApiError, ErrorBody, SimError};
pub use faults::{FaultConfig, LostAnswer, LostAnswerMode, OpFault, TimeoutFault};
pub use handle::{HandleError, MachineView, SimHandle, VmHostSpec, VmHostView};
pub use history::StatusChange;
pub use inventory::{Inventory, InventoryMachine, load_inventory};
pub use latency::LatencyProfile;
pub use model::{PowerState, ReleaseRecord, ReleaseResult};
pub use netsetup::{GatewayView, InterfaceView, IpRangeView, LinkView, NicSpec, SubnetSpec};
pub use server::{RunningSim, Simulator};
pub use status::NodeStatus;
pub use vmhost_events::{VmHostEvent, VmHostEventKind};
