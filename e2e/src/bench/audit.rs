//! Writes per writer, resource and verb, from the management API server's audit log
//! (`capmaas_testenv::Builder::audit_log`: one JSON line per write request, Metadata level).
//!
//! `apiserver_request_total` says how many writes each resource took, not who made them; the
//! audit log names the user of each request, and every writer in the harness has its own: our
//! binaries their ServiceAccounts, CAPI core `capi-manager`, the null provider
//! `bench-null-provider`, kube-controller-manager its own, the bench the admin.

use std::collections::BTreeMap;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::harness::DEPLOY_NAMESPACE;

/// The user of the null provider's client (a `system:masters` member).
pub const NULL_PROVIDER_USER: &str = "bench-null-provider";

/// Who wrote, to what, how.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteKey {
    /// Short writer name ([`writer_name`]).
    pub writer: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    /// `create`, `update`, `patch` (server-side apply included), `delete`, `deletecollection`.
    pub verb: String,
}

/// Writes of one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCount {
    /// Every request, whatever the answer.
    pub all: u64,
    /// Requests answered with something other than 2xx (409 conflicts, mostly).
    pub refused: u64,
}

impl WriteCount {
    fn add(&mut self, other: Self) {
        self.all += other.all;
        self.refused += other.refused;
    }
}

/// Writes counted from an audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditCounts(pub BTreeMap<WriteKey, WriteCount>);

impl AuditCounts {
    /// Counts the write events of `text` (JSON lines). Lines that are not a completed write
    /// (other stages, other verbs, a line cut short at the end of the file) are skipped.
    pub fn parse(text: &str) -> Self {
        let mut counts = Self::default();
        for line in text.lines() {
            if let Some((key, code)) = parse_line(line) {
                let entry = counts.0.entry(key).or_default();
                entry.all += 1;
                if !(200..300).contains(&code) {
                    entry.refused += 1;
                }
            }
        }
        counts
    }

    /// Totals per writer.
    pub fn by_writer(&self) -> BTreeMap<String, WriteCount> {
        let mut out: BTreeMap<String, WriteCount> = BTreeMap::new();
        for (key, count) in &self.0 {
            out.entry(key.writer.clone()).or_default().add(*count);
        }
        out
    }

    /// All writes.
    pub fn total(&self) -> WriteCount {
        let mut total = WriteCount::default();
        for count in self.0.values() {
            total.add(*count);
        }
        total
    }
}

/// One audit line: its key and response code, if it is a completed write.
fn parse_line(line: &str) -> Option<(WriteKey, u16)> {
    let event: Value = serde_json::from_str(line).ok()?;
    if event["stage"] != "ResponseComplete" {
        return None;
    }
    let verb = event["verb"].as_str()?;
    if !matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    ) {
        return None;
    }
    let object = &event["objectRef"];
    let mut resource = object["resource"].as_str()?.to_owned();
    if let Some(sub) = object["subresource"].as_str().filter(|s| !s.is_empty()) {
        resource = format!("{resource}/{sub}");
    }
    let code = event["responseStatus"]["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(0);
    let writer = writer_name(event["user"]["username"].as_str().unwrap_or("?"));
    Some((
        WriteKey {
            writer,
            resource,
            verb: verb.to_owned(),
        },
        code,
    ))
}

/// The short name of an API user: our binaries by name (`maas-client` for
/// `system:serviceaccount:capmaas-system:capmaas-maas-client`), the other users of the
/// harness by role.
pub fn writer_name(username: &str) -> String {
    let ours = format!("system:serviceaccount:{DEPLOY_NAMESPACE}:capmaas-");
    if let Some(binary) = username.strip_prefix(&ours) {
        return binary.to_owned();
    }
    match username {
        crate::capi::CAPI_USER => "CAPI core".to_owned(),
        NULL_PROVIDER_USER => "null provider".to_owned(),
        "admin" => "bench (admin)".to_owned(),
        other => other
            .strip_prefix("system:")
            .filter(|rest| !rest.contains(':'))
            .unwrap_or(other)
            .to_owned(),
    }
}

/// Size of the audit log now: where a measurement starts reading.
pub(super) fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Counts the writes logged after byte `offset`.
pub(super) fn read_since(path: &Path, offset: u64) -> Result<AuditCounts> {
    let context = || format!("reading the audit log {}", path.display());
    let mut file = std::fs::File::open(path).map_err(Error::io(context()))?;
    file.seek(SeekFrom::Start(offset))
        .map_err(Error::io(context()))?;
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(Error::io(context()))?;
    Ok(AuditCounts::parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, verb: &str, resource: &str, sub: Option<&str>, code: u16) -> String {
        let mut object =
            serde_json::json!({"resource": resource, "namespace": "bench", "name": "x"});
        if let Some(sub) = sub {
            object["subresource"] = sub.into();
        }
        serde_json::json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
            "stage": "ResponseComplete", "verb": verb, "user": {"username": user, "groups": []},
            "objectRef": object, "responseStatus": {"metadata": {}, "code": code}
        })
        .to_string()
    }

    #[test]
    fn completed_writes_are_counted_per_writer_resource_and_verb() {
        let gateway = "system:serviceaccount:capmaas-system:capmaas-maas-client";
        let text = [
            line(gateway, "patch", "maashosts", Some("status"), 200),
            line(gateway, "patch", "maashosts", Some("status"), 409),
            line("capi-manager", "create", "maasmachines", None, 201),
            line("admin", "get", "maasmachines", None, 200),
            line(
                "system:kube-controller-manager",
                "delete",
                "events",
                None,
                200,
            ),
            r#"{"stage":"ResponseStarted","verb":"patch"}"#.to_owned(),
            r#"{"kind":"Event","stage":"ResponseComp"#.to_owned(),
        ]
        .join("\n");
        let counts = AuditCounts::parse(&text);
        let key = |writer: &str, resource: &str, verb: &str| WriteKey {
            writer: writer.into(),
            resource: resource.into(),
            verb: verb.into(),
        };
        assert_eq!(
            counts
                .0
                .get(&key("maas-client", "maashosts/status", "patch")),
            Some(&WriteCount { all: 2, refused: 1 })
        );
        assert_eq!(
            counts.0.get(&key("CAPI core", "maasmachines", "create")),
            Some(&WriteCount { all: 1, refused: 0 })
        );
        assert!(
            counts
                .0
                .contains_key(&key("kube-controller-manager", "events", "delete"))
        );
        assert_eq!(counts.0.len(), 3, "reads and other stages are not writes");
        assert_eq!(counts.total(), WriteCount { all: 4, refused: 1 });
        assert_eq!(
            counts.by_writer().get("maas-client"),
            Some(&WriteCount { all: 2, refused: 1 })
        );
    }

    #[test]
    fn writers_get_short_names() {
        assert_eq!(
            writer_name("system:serviceaccount:capmaas-system:capmaas-machine-controller"),
            "machine-controller"
        );
        assert_eq!(writer_name("capi-manager"), "CAPI core");
        assert_eq!(writer_name("bench-null-provider"), "null provider");
        assert_eq!(writer_name("admin"), "bench (admin)");
        assert_eq!(writer_name("system:apiserver"), "apiserver");
        assert_eq!(
            writer_name("system:serviceaccount:kube-system:generic-garbage-collector"),
            "system:serviceaccount:kube-system:generic-garbage-collector"
        );
    }

    #[test]
    fn only_what_was_logged_after_the_offset_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let before = line("admin", "create", "secrets", None, 201);
        std::fs::write(&path, format!("{before}\n")).unwrap();
        let offset = log_len(&path);
        let after = line("capi-manager", "patch", "machines/status", None, 200);
        std::fs::write(&path, format!("{before}\n{after}\n")).unwrap();
        let counts = read_since(&path, offset).unwrap();
        assert_eq!(counts.total().all, 1);
        assert_eq!(counts.by_writer().keys().collect::<Vec<_>>(), ["CAPI core"]);
    }
}
