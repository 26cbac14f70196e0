//! Rendered metadata (data-controller) delivered with the user data: the cloud-init user data
//! becomes a `multipart/mixed` message of the original part and a cloud-config part writing
//! `/etc/capmaas/meta-data.yaml` (the rendered key: value YAML, mode 0644).
//!
//! The added part merges with `list(append)` and `dict(no_replace, recurse_list)`, so the
//! bootstrap's own `write_files` and every key it sets stay as they are. Only cloud-init user
//! data is extended (it starts with `#cloud-config`, `#!`, `#include`, `#cloud-boothook`,
//! `## template: jinja` or is MIME already); anything else — Ignition JSON for Flatcar — is
//! sent unchanged, and [`with_meta_data`] says so. The boundary is derived from the content,
//! so the same inputs always give the same bytes.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha1::{Digest, Sha1};

/// Where the metadata lands on the server.
pub const META_DATA_PATH: &str = "/etc/capmaas/meta-data.yaml";

/// The cloud-init content type of user data, by its first line; `None` when it is not
/// cloud-init user data.
pub fn cloud_init_type(user_data: &[u8]) -> Option<&'static str> {
    const STARTS: [(&str, &str); 6] = [
        ("#cloud-config", "text/cloud-config"),
        ("#!", "text/x-shellscript"),
        ("#include", "text/x-include-url"),
        ("#cloud-boothook", "text/cloud-boothook"),
        ("## template: jinja", "text/jinja2"),
        ("Content-Type: multipart/", "multipart/mixed"),
    ];
    let text = std::str::from_utf8(user_data.get(..64.min(user_data.len()))?).ok()?;
    STARTS
        .iter()
        .find(|(start, _)| text.starts_with(start))
        .map(|(_, kind)| *kind)
}

fn part(out: &mut String, boundary: &str, content_type: &str, name: &str, body: &[u8]) {
    let _ = write!(
        out,
        "--{boundary}\r\nContent-Type: {content_type}; charset=\"utf-8\"\r\nMIME-Version: 1.0\r\n\
         Content-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\r\n"
    );
    let encoded = STANDARD.encode(body);
    for line in encoded.as_bytes().chunks(76) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push_str("\r\n");
    }
}

/// The user data with the metadata added, or `Err(original)` when the user data is not
/// cloud-init (it is then sent unchanged).
pub fn with_meta_data(user_data: Option<Vec<u8>>, meta_data: &[u8]) -> Result<Vec<u8>, Vec<u8>> {
    let original = user_data.unwrap_or_default();
    let original_type = if original.is_empty() {
        None
    } else {
        match cloud_init_type(&original) {
            Some(kind) => Some(kind),
            None => return Err(original),
        }
    };
    let meta_part = format!(
        "#cloud-config\nmerge_how:\n  - name: list\n    settings: [append]\n  - name: dict\n    \
         settings: [no_replace, recurse_list]\nwrite_files:\n  - path: {META_DATA_PATH}\n    \
         permissions: \"0644\"\n    encoding: b64\n    content: {}\n",
        STANDARD.encode(meta_data)
    );
    let mut digest = Sha1::new();
    digest.update(&original);
    digest.update(meta_part.as_bytes());
    let hash = digest
        .finalize()
        .iter()
        .take(12)
        .fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        });
    let boundary = format!("==capmaas-{hash}==");
    let mut out = format!(
        "Content-Type: multipart/mixed; boundary=\"{boundary}\"\r\nMIME-Version: 1.0\r\n\r\n"
    );
    if let Some(kind) = original_type {
        part(&mut out, &boundary, kind, "bootstrap", &original);
    }
    part(
        &mut out,
        &boundary,
        "text/cloud-config",
        "capmaas-meta-data.cfg",
        meta_part.as_bytes(),
    );
    let _ = write!(out, "--{boundary}--\r\n");
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded_parts(message: &str) -> Vec<(String, Vec<u8>)> {
        let boundary = message
            .split("boundary=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap();
        message
            .split(&format!("--{boundary}"))
            .filter(|p| p.contains("Content-Type:") && !p.starts_with("--"))
            .filter(|p| !p.contains("multipart/mixed"))
            .map(|p| {
                let (headers, body) = p.split_once("\r\n\r\n").unwrap();
                let kind = headers
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Type: "))
                    .unwrap()
                    .split(';')
                    .next()
                    .unwrap()
                    .to_owned();
                let body: String = body.split_whitespace().collect();
                (kind, STANDARD.decode(body).unwrap())
            })
            .collect()
    }

    #[test]
    fn cloud_config_user_data_keeps_its_part_and_gains_the_metadata_file() {
        let bootstrap = b"#cloud-config\nwrite_files:\n- path: /etc/kubeadm.yaml\n  content: x\n";
        let meta = b"local-hostname: node-3\nindex: \"3\"\n";
        let out = with_meta_data(Some(bootstrap.to_vec()), meta).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with("Content-Type: multipart/mixed; boundary="));
        let parts = decoded_parts(&text);
        assert_eq!(parts.len(), 2, "{text}");
        assert_eq!(
            parts[0],
            ("text/cloud-config".to_owned(), bootstrap.to_vec())
        );
        let added = String::from_utf8(parts[1].1.clone()).unwrap();
        assert!(added.starts_with("#cloud-config\n"));
        assert!(added.contains(META_DATA_PATH));
        assert!(added.contains("settings: [append]"));
        let b64 = added
            .lines()
            .find_map(|l| l.trim().strip_prefix("content: "))
            .unwrap();
        assert_eq!(STANDARD.decode(b64).unwrap(), meta.to_vec());
        // The added part is valid YAML.
        let parsed: serde_json::Value = serde_saphyr::from_str(&added).unwrap();
        assert_eq!(parsed["write_files"][0]["path"], META_DATA_PATH);
        assert_eq!(
            with_meta_data(Some(bootstrap.to_vec()), meta).unwrap(),
            out,
            "deterministic"
        );
    }

    #[test]
    fn scripts_are_typed_and_ignition_is_left_alone() {
        let script = b"#!/bin/sh\necho hi\n".to_vec();
        let out =
            String::from_utf8(with_meta_data(Some(script.clone()), b"a: b\n").unwrap()).unwrap();
        assert_eq!(
            decoded_parts(&out)[0],
            ("text/x-shellscript".to_owned(), script)
        );
        let ignition = br#"{"ignition":{"version":"3.3.0"}}"#.to_vec();
        assert_eq!(
            with_meta_data(Some(ignition.clone()), b"a: b\n"),
            Err(ignition)
        );
        let only_meta = String::from_utf8(with_meta_data(None, b"a: b\n").unwrap()).unwrap();
        assert_eq!(decoded_parts(&only_meta).len(), 1);
    }
}
