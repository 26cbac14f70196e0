//! Request parameters the way MAAS (piston3/Django) reads them.
//!
//! GET/DELETE parameters go in the query string, POST/PUT parameters in an
//! `application/x-www-form-urlencoded` body; never JSON (piston leaves `request.POST` empty for
//! JSON). Lists are repeated keys (`tags=a&tags=b`), never comma-joined.

/// An ordered list of form/query parameters; keys may repeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one `key=value`.
    pub fn push(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.pairs.push((key.to_owned(), value.into()));
        self
    }

    /// Appends `key=value` only when a value is present.
    pub fn push_opt<V: ToString>(&mut self, key: &str, value: Option<V>) -> &mut Self {
        if let Some(value) = value {
            self.pairs.push((key.to_owned(), value.to_string()));
        }
        self
    }

    /// Appends one `key=value` per item (repeated key).
    pub fn push_all<I, V>(&mut self, key: &str, values: I) -> &mut Self
    where
        I: IntoIterator<Item = V>,
        V: ToString,
    {
        for value in values {
            self.pairs.push((key.to_owned(), value.to_string()));
        }
        self
    }

    /// Appends `key=true` when the flag is set; MAAS treats an absent flag as false.
    pub fn push_flag(&mut self, key: &str, flag: bool) -> &mut Self {
        if flag {
            self.pairs.push((key.to_owned(), "true".to_owned()));
        }
        self
    }

    /// Appends `key=true|false` when a value is present.
    pub fn push_bool(&mut self, key: &str, value: Option<bool>) -> &mut Self {
        if let Some(value) = value {
            self.pairs.push((key.to_owned(), value.to_string()));
        }
        self
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The pairs, in insertion order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// `application/x-www-form-urlencoded` encoding (also used for query strings).
    pub fn encode(&self) -> String {
        let mut serializer = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in &self.pairs {
            serializer.append_pair(key, value);
        }
        serializer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_repeated_keys() {
        let mut params = Params::new();
        params.push_all("tags", ["a", "b"]).push("zone", "z1");
        assert_eq!(params.encode(), "tags=a&tags=b&zone=z1");
    }

    #[test]
    fn optional_and_flag_values() {
        let mut params = Params::new();
        params
            .push_opt::<u32>("cpu_count", None)
            .push_opt("mem", Some(4096))
            .push_flag("erase", false)
            .push_flag("quick_erase", true)
            .push_bool("ephemeral_deploy", Some(false));
        assert_eq!(
            params.encode(),
            "mem=4096&quick_erase=true&ephemeral_deploy=false"
        );
        assert!(!params.is_empty());
        assert!(Params::new().is_empty());
    }

    #[test]
    fn values_are_form_encoded() {
        let mut params = Params::new();
        params
            .push("comment", "a b&c=d/é")
            .push("ip_addresses", "10.0.0.1 10.0.0.2");
        assert_eq!(
            params.encode(),
            "comment=a+b%26c%3Dd%2F%C3%A9&ip_addresses=10.0.0.1+10.0.0.2"
        );
        let decoded: Vec<(String, String)> =
            url::form_urlencoded::parse(params.encode().as_bytes())
                .into_owned()
                .collect();
        assert_eq!(decoded, params.pairs());
    }
}
