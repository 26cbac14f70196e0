//! Simulator configuration: inventory size, timings, users and their API keys, faults, TLS.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::faults::FaultConfig;
use crate::latency::LatencyProfile;

/// How long the time-driven transitions take. Zero means "finished on the next read".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timings {
    /// Deploying (9) → Deployed (6).
    pub deploy: Duration,
    /// Spread of the deployment time, percent (at most 100): each machine's deployment takes
    /// `deploy` × a factor in [1 − spread, 1 + spread] fixed by the seed and its system id
    /// ([`Timings::deploy_for`]). Real servers do not all finish at the same moment; 0 (the
    /// default) keeps every deployment exactly `deploy`.
    #[serde(default)]
    pub deploy_spread_percent: u32,
    /// Releasing (12) → Ready (4) when the machine was powered on.
    pub release: Duration,
    /// Disk erasing (14) → Ready (4). A quick erase takes a tenth of it.
    pub erase: Duration,
    /// Commissioning (1) → Ready (4).
    pub commission: Duration,
    /// A power_on / power_off request until `power_state` follows.
    pub power: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            deploy: Duration::from_secs(10),
            deploy_spread_percent: 0,
            release: Duration::from_secs(2),
            erase: Duration::from_secs(5),
            commission: Duration::from_secs(5),
            power: Duration::from_secs(1),
        }
    }
}

impl Timings {
    /// Every transition completes on the next read.
    pub const fn zero() -> Self {
        Self {
            deploy: Duration::ZERO,
            deploy_spread_percent: 0,
            release: Duration::ZERO,
            erase: Duration::ZERO,
            commission: Duration::ZERO,
            power: Duration::ZERO,
        }
    }

    /// How long the deployment of `system_id` takes: `deploy` scaled by a factor in
    /// [1 − spread, 1 + spread] that depends only on `seed` and the system id, so a run is
    /// reproducible and a machine takes the same time on every deployment.
    pub fn deploy_for(&self, seed: u64, system_id: &str) -> Duration {
        if self.deploy_spread_percent == 0 {
            return self.deploy;
        }
        let spread = f64::from(self.deploy_spread_percent.min(100)) / 100.0;
        let factor = 1.0 - spread + 2.0 * spread * unit_interval(seed, system_id);
        self.deploy.mul_f64(factor.max(0.0))
    }
}

/// A number in [0, 1] from `seed` and `key`: FNV-1a, then the splitmix64 finaliser so that
/// system ids differing in one character land far apart. Hand-written because std's hasher
/// may change between Rust releases and the spread must stay the same.
fn unit_interval(seed: u64, key: &str) -> f64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in seed.to_le_bytes().iter().chain(key.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^= hash >> 31;
    // The top 32 bits are exact in an f64.
    f64::from(u32::try_from(hash >> 32).unwrap_or(u32::MAX)) / f64::from(u32::MAX)
}

/// One MAAS user and one of its API keys (`consumer_key:token_key:token_secret`).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The MAAS username; becomes the `owner` of machines it allocates.
    pub username: String,
    /// OAuth consumer key (18 chars in real MAAS).
    pub consumer_key: String,
    /// OAuth token key (18 chars in real MAAS).
    pub token_key: String,
    /// OAuth token secret (32 chars in real MAAS). Never printed by `Debug`.
    pub token_secret: String,
    /// Superuser: sees every machine and may call admin-only operations.
    pub is_admin: bool,
    /// An inactive user is refused with 403.
    pub active: bool,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("username", &self.username)
            .field("consumer_key", &self.consumer_key)
            .field("token_key", &self.token_key)
            .field("token_secret", &"<redacted>")
            .field("is_admin", &self.is_admin)
            .field("active", &self.active)
            .finish()
    }
}

const KEY_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

fn random_token(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(KEY_ALPHABET[rng.random_range(0..KEY_ALPHABET.len())]))
        .collect()
}

impl ApiKey {
    /// A fresh random key for `username`, shaped like the keys MAAS creates.
    pub fn generate(username: &str, is_admin: bool) -> Self {
        Self {
            username: username.to_owned(),
            consumer_key: random_token(18),
            token_key: random_token(18),
            token_secret: random_token(32),
            is_admin,
            active: true,
        }
    }

    /// Parses `consumer_key:token_key:token_secret` for `username`.
    pub fn parse(username: &str, is_admin: bool, key: &str) -> Result<Self, SimError> {
        let parts: Vec<&str> = key.trim().split(':').collect();
        match parts.as_slice() {
            [consumer, token, secret]
                if !consumer.is_empty() && !token.is_empty() && !secret.is_empty() =>
            {
                Ok(Self {
                    username: username.to_owned(),
                    consumer_key: (*consumer).to_owned(),
                    token_key: (*token).to_owned(),
                    token_secret: (*secret).to_owned(),
                    is_admin,
                    active: true,
                })
            }
            _ => Err(SimError::Config(
                "an API key must have the shape consumer_key:token_key:token_secret".to_owned(),
            )),
        }
    }

    /// The key as MAAS shows it to users: `consumer_key:token_key:token_secret`.
    pub fn credential(&self) -> String {
        format!(
            "{}:{}:{}",
            self.consumer_key, self.token_key, self.token_secret
        )
    }
}

/// PEM files for serving HTTPS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Everything the simulator needs to start.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Listen address; `None` binds `127.0.0.1:0` (a free port).
    pub listen: Option<SocketAddr>,
    /// Number of generated machines (ignored when `inventory_file` lists machines).
    pub machines: usize,
    /// Availability zones; `default` always exists in addition.
    pub zones: Vec<String>,
    /// Resource pools; `default` always exists in addition.
    pub pools: Vec<String>,
    /// Seed of the deterministic hardware spread.
    pub seed: u64,
    /// Durations of the time-driven transitions.
    pub timings: Timings,
    /// Users and keys; the first one is the default returned by `RunningSim::api_key`.
    pub api_keys: Vec<ApiKey>,
    /// Refuse replayed nonces and timestamps outside `auth_window`, as real MAAS does (on by
    /// default; off only for a client that needs leniency).
    pub strict_auth: bool,
    /// Allowed clock difference for `oauth_timestamp` when `strict_auth` is on.
    pub auth_window: Duration,
    /// YAML inventory (zones, pools, tags, machines) instead of generated machines.
    pub inventory_file: Option<PathBuf>,
    /// JSON state file: loaded at start when present, rewritten after every change.
    pub state_file: Option<PathBuf>,
    /// Faults active from the start.
    pub faults: FaultConfig,
    /// Serve HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// Name of the default DNS domain.
    pub domain: String,
    /// How long the region takes to serve calls ([`LatencyProfile::none`] by default).
    pub latency: LatencyProfile,
    /// A MAAS 3.x with VM hosts (default). `false` simulates MAAS 4.0 / [dev], which removed
    /// them: `/vm-hosts/` and `/pods/` are unknown endpoints, deploy refuses `install_kvm` and
    /// `register_vmhost`, allocate refuses `pod` constraints, machines have no `pod` field.
    pub vm_hosts: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            listen: None,
            machines: 10,
            zones: vec!["default".to_owned()],
            pools: vec!["default".to_owned()],
            seed: 1,
            timings: Timings::default(),
            api_keys: vec![ApiKey::generate("admin", true)],
            strict_auth: true,
            auth_window: Duration::from_secs(300),
            inventory_file: None,
            state_file: None,
            faults: FaultConfig::default(),
            tls: None,
            domain: "maas".to_owned(),
            latency: LatencyProfile::none(),
            vm_hosts: true,
        }
    }
}

impl SimConfig {
    /// Defaults with `n` generated machines.
    pub fn with_machines(n: usize) -> Self {
        Self {
            machines: n,
            ..Self::default()
        }
    }

    /// Defaults with every transition completing at once (for fast tests).
    pub fn instant() -> Self {
        Self {
            timings: Timings::zero(),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instant timings but for deployments, which take `deploy` spread by `spread_percent`.
    fn deploying_in(deploy: Duration, spread_percent: u32) -> Timings {
        Timings {
            deploy,
            deploy_spread_percent: spread_percent,
            ..Timings::zero()
        }
    }

    #[test]
    fn without_spread_every_deployment_takes_the_configured_time() {
        let timings = deploying_in(Duration::from_secs(30), 0);
        assert_eq!(timings.deploy_for(1, "abc123"), Duration::from_secs(30));
    }

    #[test]
    fn the_spread_is_deterministic_bounded_and_covers_the_range() {
        let timings = deploying_in(Duration::from_secs(100), 30);
        let times: Vec<Duration> = (0..500)
            .map(|i| timings.deploy_for(7, &format!("m{i:05}")))
            .collect();
        assert!(
            times
                .iter()
                .all(|t| (70.0..=130.0).contains(&t.as_secs_f64()))
        );
        let min = times.iter().min().unwrap().as_secs_f64();
        let max = times.iter().max().unwrap().as_secs_f64();
        assert!(min < 75.0 && max > 125.0, "{min} .. {max}");
        assert_eq!(timings.deploy_for(7, "m00003"), times[3]);
        assert_ne!(
            timings.deploy_for(8, "m00003"),
            times[3],
            "the seed matters"
        );
    }

    #[test]
    fn a_full_spread_runs_from_zero_to_twice_the_time() {
        let timings = deploying_in(Duration::from_secs(1), 250);
        assert!(
            (0..200)
                .map(|i| timings.deploy_for(1, &i.to_string()))
                .all(|t| t <= Duration::from_secs(2))
        );
    }
}
