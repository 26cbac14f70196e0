//! Kubernetes name and label syntax (apimachinery's `validation` package), for fields the
//! schema cannot check with a pattern alone: qualified label keys, label values, DNS names.
//! Shared by webhook-server (which rejects bad values) and the controllers (which must never
//! write one).

/// Why `key` is not a valid label key (`[prefix/]name`), or `None` when it is.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(problem) = dns_subdomain_problem(prefix)
    {
        return Some(format!("prefix part {problem}"));
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !is_qualified_name_part(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start \
             and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// Why `value` is not a valid label value, or `None` when it is (empty is valid).
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        return Some(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// Why `name` is not a DNS-1123 subdomain (lowercase labels joined by dots, at most 253
/// characters), or `None` when it is.
pub fn dns_subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must be non-empty".into());
    }
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    if name
        .split('.')
        .any(|label| dns_label_problem(label).is_some())
    {
        return Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    None
}

/// Why `name` is not a DNS-1123 label (lowercase, at most 63 characters), or `None`.
pub fn dns_label_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 63 {
        return Some("must be 1 to 63 characters".into());
    }
    let bytes = name.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let inner_ok = |b: u8| edge_ok(b) || b == b'-';
    let ok = bytes.first().copied().is_some_and(edge_ok)
        && bytes.last().copied().is_some_and(edge_ok)
        && bytes.iter().copied().all(inner_ok);
    (!ok).then(|| {
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
         and must start and end with an alphanumeric character"
            .into()
    })
}

/// Why `host` is neither an IP address nor a DNS name (labels of letters, digits and '-',
/// case-insensitive, as resolvers accept them), or `None`.
pub fn host_problem(host: &str) -> Option<String> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    let lower = name.to_ascii_lowercase();
    dns_subdomain_problem(&lower).map(|_| "must be an IP address or a DNS name".into())
}

fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let edge_ok = |b: u8| b.is_ascii_alphanumeric();
    let inner_ok = |b: u8| edge_ok(b) || matches!(b, b'-' | b'_' | b'.');
    bytes.first().copied().is_some_and(edge_ok)
        && bytes.last().copied().is_some_and(edge_ok)
        && bytes.iter().copied().all(inner_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_keys_follow_apimachinery() {
        for ok in ["app", "maas.io/zone", "a.b-c_d", "x/Y", "example.com/a"] {
            assert_eq!(label_key_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Example.com/a",
            "a/b/c",
            "/a",
            "a/",
            &"x".repeat(64),
        ] {
            assert!(label_key_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn label_values_may_be_empty_but_not_malformed() {
        for ok in ["", "v1", "A.b_c-d"] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["-v", "v-", "a b", "a/b", &"v".repeat(64)] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn dns_names_and_hosts() {
        assert_eq!(dns_label_problem("node-1"), None);
        assert!(dns_label_problem("Node").is_some());
        assert!(dns_label_problem("a.b").is_some());
        assert_eq!(dns_subdomain_problem("maas.example.com"), None);
        assert!(dns_subdomain_problem("a..b").is_some());
        for ok in [
            "10.0.0.1",
            "::1",
            "api.Example.com",
            "api.example.com.",
            "localhost",
        ] {
            assert_eq!(host_problem(ok), None, "{ok}");
        }
        for bad in ["", "http://x", "a b", "-x.com", "x_y.com"] {
            assert!(host_problem(bad).is_some(), "{bad}");
        }
    }
}
