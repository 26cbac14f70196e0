//! Loopback ports for the servers a test starts.
//!
//! A port is chosen, released, and only then bound by the child process that serves on it. A
//! port the kernel picks for `bind(0)` comes from its ephemeral range, the same range every
//! outgoing connection takes its local port from; with a dozen controllers and API clients
//! connecting at once, one of them sometimes took the port in that gap and the server died with
//! "address already in use". Ports are therefore picked below the ephemeral range, where no
//! outgoing connection lands, and never handed out twice by one test process.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;
use std::sync::Mutex;

use crate::error::{Error, Result};

/// Lowest port handed out: above the well-known and most registered service ports.
const LOWEST: u16 = 10_000;
/// Linux's default ephemeral range starts here; used when the real one cannot be read.
const DEFAULT_EPHEMERAL_START: u16 = 32_768;
/// Random candidates tried before giving up.
const ATTEMPTS: usize = 200;

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A TCP port on the loopback interface that is free now, outside the kernel's ephemeral range
/// (see the module documentation), and not handed out before by this process.
pub fn free_port() -> Result<u16> {
    let range = candidate_range(ephemeral_start());
    if range.is_empty() {
        return kernel_chosen_port();
    }
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    for _ in 0..ATTEMPTS {
        let port = fastrand::u16(range.clone());
        if handed_out.contains(&port) || TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
            continue;
        }
        handed_out.insert(port);
        return Ok(port);
    }
    Err(Error::io(format!(
        "finding a free loopback port in {}..{}",
        range.start, range.end
    ))(std::io::Error::from(std::io::ErrorKind::AddrInUse)))
}

/// Ports below the ephemeral range, or none when that range starts too low to leave room.
fn candidate_range(ephemeral_start: u16) -> Range<u16> {
    if ephemeral_start > LOWEST + 1_000 {
        LOWEST..ephemeral_start
    } else {
        0..0
    }
}

/// The first port of the kernel's ephemeral range (`net.ipv4.ip_local_port_range`).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_START)
}

/// The kernel's own choice, for systems whose ephemeral range leaves no room below it.
fn kernel_chosen_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(Error::io("binding a free loopback port"))?;
    Ok(listener
        .local_addr()
        .map_err(Error::io("reading the free port"))?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_come_from_below_the_ephemeral_range_and_are_never_repeated() {
        let start = ephemeral_start();
        let ports: Vec<u16> = (0..500).map(|_| free_port().unwrap()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        if !candidate_range(start).is_empty() {
            assert!(
                ports.iter().all(|p| (LOWEST..start).contains(p)),
                "{ports:?}"
            );
        }
    }

    #[test]
    fn a_low_ephemeral_range_falls_back_to_the_kernel() {
        assert!(candidate_range(1_024).is_empty());
        assert_eq!(candidate_range(32_768), LOWEST..32_768);
    }
}
