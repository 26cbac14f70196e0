//! Child processes of the control plane: started with their output in a log file,
//! killed when dropped (also when a test panics).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::error::{Error, Result};

/// A running control-plane process.
#[derive(Debug)]
pub struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `binary` with `args`; stdout and stderr go to `<dir>/<name>.log`.
    pub(crate) fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[String],
        dir: &Path,
    ) -> Result<Self> {
        Self::start(name, binary, args, &[], dir)
    }

    /// Starts `binary` with `args` and extra environment variables; stdout and stderr go
    /// to `<dir>/<name>.log`. The process is killed when the `Process` is dropped.
    pub fn start(
        name: &'static str,
        binary: &Path,
        args: &[String],
        env: &[(&str, &str)],
        dir: &Path,
    ) -> Result<Self> {
        if !binary.is_file() {
            return Err(Error::MissingBinary {
                path: binary.to_path_buf(),
            });
        }
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).map_err(Error::io(format!("creating {name}.log")))?;
        let err = out
            .try_clone()
            .map_err(Error::io(format!("opening {name}.log")))?;
        let child = Command::new(binary)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io(format!("starting {}", binary.display())))?;
        Ok(Self { name, child, log })
    }

    /// The process name (binary name).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The operating-system process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Resident memory now (`VmRSS`), KiB, while the process runs (Linux `/proc`).
    pub fn resident_memory_kib(&self) -> Option<u64> {
        rss_kib(self.pid()?)
    }

    /// Peak resident memory so far (`VmHWM`), KiB, while the process runs.
    pub fn peak_resident_memory_kib(&self) -> Option<u64> {
        peak_rss_kib(self.pid()?)
    }

    /// CPU time used so far (user and system), while the process runs (Linux `/proc`).
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        cpu_time_of(self.pid()?)
    }

    /// Path of the file that receives the process output.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Fails with the log tail when the process has already exited.
    pub fn ensure_running(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::ProcessExited {
                process: self.name,
                status: status.to_string(),
                log_tail: self.log_tail(40),
            }),
            Err(e) => Err(Error::io(format!("checking {}", self.name))(e)),
        }
    }

    /// Polls `url` (plain HTTP, e.g. a `/readyz`) until it answers 2xx, failing early with the
    /// log tail when the process exits, or after `timeout`.
    pub async fn wait_ready(&mut self, url: &str, timeout: std::time::Duration) -> Result<()> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(2))
            .build()
            .map_err(|e| Error::io("building an HTTP client")(std::io::Error::other(e)))?;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.ensure_running()?;
            if let Ok(resp) = http.get(url).send().await
                && resp.status().is_success()
            {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{} to be ready; log tail:\n{}",
                        self.name,
                        self.log_tail(40)
                    ),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// The last `lines` lines of the process output.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Stops the process (SIGKILL) and waits for it.
    pub async fn kill(&mut self) {
        // An error here means the process is already gone, which is what we want.
        let _ = self.child.kill().await;
    }
}

/// The last `lines` lines of a file, or a note that it cannot be read.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// A `kB` field of `/proc/<pid>/status` (`field` without its colon, e.g. `VmHWM`), in KiB;
/// `None` when the process is gone, the file cannot be read or has no such field (not Linux).
/// `pid` may be [`std::process::id`] for the calling process itself.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// Resident memory of process `pid` now (`VmRSS`), KiB ([`proc_status_kib`]).
pub fn rss_kib(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmRSS")
}

/// Peak resident memory of process `pid` so far (`VmHWM`), KiB ([`proc_status_kib`]).
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    proc_status_kib(pid, "VmHWM")
}

/// CPU time (user and system) process `pid` has used, from `/proc/<pid>/stat`; `None` when the
/// process is gone or the file cannot be read. The counters are in USER_HZ, which Linux fixes
/// at 100 per second for user space on every architecture we run on.
pub fn cpu_time_of(pid: u32) -> Option<std::time::Duration> {
    const USER_HZ: u64 = 100;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces: count from its closing parenthesis, after
    // which field 3 (state) comes first; utime is field 14 and stime field 15.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(std::time::Duration::from_millis(
        (utime + stime).saturating_mul(1000 / USER_HZ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_of_this_process_is_read_from_proc() {
        let me = std::process::id();
        let (now, peak) = (rss_kib(me).unwrap(), peak_rss_kib(me).unwrap());
        assert!(now > 0 && peak >= now, "VmRSS {now} KiB, VmHWM {peak} KiB");
        // A prefix of another field is not that field.
        assert_eq!(proc_status_kib(me, "VmH"), None);
        assert_eq!(proc_status_kib(u32::MAX, "VmHWM"), None);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        std::fs::write(&path, "a\nb\nc\nd\n").unwrap();
        assert_eq!(tail(&path, 2), "c\nd");
        assert_eq!(tail(&path, 10), "a\nb\nc\nd");
        assert!(tail(&dir.path().join("missing"), 2).starts_with("<cannot read"));
    }

    #[tokio::test]
    async fn a_missing_binary_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Process::spawn("nope", &dir.path().join("nope"), &[], dir.path()).unwrap_err();
        assert!(err.to_string().contains("just testenv"), "{err}");
    }

    #[test]
    fn cpu_time_grows_while_a_process_computes() {
        let pid = std::process::id();
        let before = cpu_time_of(pid).unwrap();
        let started = std::time::Instant::now();
        let mut x: u64 = 1;
        while started.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        let after = cpu_time_of(pid).unwrap();
        assert!(
            after >= before + std::time::Duration::from_millis(100),
            "{before:?} → {after:?}"
        );
        assert!(cpu_time_of(u32::MAX).is_none());
    }
}
