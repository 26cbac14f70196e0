//! Field errors in the API server's own words, and the verdict a validation returns.
//!
//! A rejection reads like the API server's: `spec.pools[1].end: Invalid value: "10.0.0.5":
//! must not be before spec.pools[1].start`, so a person (and a test) finds the field at once.

use std::fmt;

/// A field path such as `spec.pools[1].end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path starting at a top-level field (`spec`, `metadata`).
    pub fn root(name: &str) -> Self {
        Self(name.to_owned())
    }

    /// `self.name`.
    #[must_use]
    pub fn child(&self, name: &str) -> Self {
        Self(format!("{}.{name}", self.0))
    }

    /// `self[index]`.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// `self[key]`, for map entries.
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{key}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is wrong with a field (the API server's `field.ErrorType`s we use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The value is not acceptable; carries the value as the user wrote it.
    Invalid(String),
    /// The field may not be set or changed now.
    Forbidden,
    /// A value that must be unique appears twice; carries the value.
    Duplicate(String),
    /// A value is missing.
    Required,
    /// The value is not one of the supported ones; carries the value.
    NotSupported(String),
}

/// One rejected field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Where.
    pub path: FieldPath,
    /// What kind of problem.
    pub problem: Problem,
    /// Why, for a person.
    pub detail: String,
}

impl FieldError {
    /// The API server's `field.Error` reason (`FieldValueInvalid`, ...), for `status.details.causes`.
    pub fn reason(&self) -> &'static str {
        match self.problem {
            Problem::Invalid(_) => "FieldValueInvalid",
            Problem::Forbidden => "FieldValueForbidden",
            Problem::Duplicate(_) => "FieldValueDuplicate",
            Problem::Required => "FieldValueRequired",
            Problem::NotSupported(_) => "FieldValueNotSupported",
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = &self.path;
        let detail = &self.detail;
        match &self.problem {
            Problem::Invalid(value) => write!(f, "{path}: Invalid value: {value:?}: {detail}"),
            Problem::Forbidden => write!(f, "{path}: Forbidden: {detail}"),
            Problem::Duplicate(value) => write!(f, "{path}: Duplicate value: {value:?}: {detail}"),
            Problem::Required => write!(f, "{path}: Required value: {detail}"),
            Problem::NotSupported(value) => {
                write!(f, "{path}: Unsupported value: {value:?}: {detail}")
            }
        }
    }
}

/// What a validation found: errors reject the request, warnings are shown to the client
/// (`kubectl` prints them) and the request goes through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Fields that make the request invalid.
    pub errors: Vec<FieldError>,
    /// Things a person should look at; never a reason to reject.
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Nothing to say.
    pub fn ok() -> Self {
        Self::default()
    }

    /// `path` has a value that is not acceptable.
    pub fn invalid(
        &mut self,
        path: &FieldPath,
        value: impl fmt::Display,
        detail: impl Into<String>,
    ) {
        self.push(path, Problem::Invalid(value.to_string()), detail);
    }

    /// `path` may not be set or changed now.
    pub fn forbidden(&mut self, path: &FieldPath, detail: impl Into<String>) {
        self.push(path, Problem::Forbidden, detail);
    }

    /// `path` repeats a value that must be unique.
    pub fn duplicate(
        &mut self,
        path: &FieldPath,
        value: impl fmt::Display,
        detail: impl Into<String>,
    ) {
        self.push(path, Problem::Duplicate(value.to_string()), detail);
    }

    /// `path` must be set.
    pub fn required(&mut self, path: &FieldPath, detail: impl Into<String>) {
        self.push(path, Problem::Required, detail);
    }

    /// `path` has a value we do not support.
    pub fn not_supported(
        &mut self,
        path: &FieldPath,
        value: impl fmt::Display,
        detail: impl Into<String>,
    ) {
        self.push(path, Problem::NotSupported(value.to_string()), detail);
    }

    /// A warning for the client, naming the field it is about.
    pub fn warn(&mut self, path: &FieldPath, message: impl fmt::Display) {
        self.warnings.push(format!("{path}: {message}"));
    }

    /// Adds everything `other` found.
    pub fn merge(&mut self, other: Verdict) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }

    /// Whether the request may go through.
    pub fn allowed(&self) -> bool {
        self.errors.is_empty()
    }

    fn push(&mut self, path: &FieldPath, problem: Problem, detail: impl Into<String>) {
        self.errors.push(FieldError {
            path: path.clone(),
            problem,
            detail: detail.into(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_like_the_api_servers() {
        let pools = FieldPath::root("spec").child("pools");
        let mut v = Verdict::ok();
        v.invalid(
            &pools.index(1).child("end"),
            "10.0.0.5",
            "must not be before spec.pools[1].start",
        );
        v.forbidden(
            &FieldPath::root("spec").child("hostSelector"),
            "immutable once a host is claimed",
        );
        v.duplicate(&pools.index(2), "a", "listed twice");
        v.required(&FieldPath::root("spec").child("x"), "must be set");
        v.not_supported(
            &FieldPath::root("spec").child("kind"),
            "Foo",
            "supported: MaasIPPool",
        );
        v.warn(&FieldPath::root("spec").key("k"), "suspicious");
        let text: Vec<String> = v.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                r#"spec.pools[1].end: Invalid value: "10.0.0.5": must not be before spec.pools[1].start"#,
                "spec.hostSelector: Forbidden: immutable once a host is claimed",
                r#"spec.pools[2]: Duplicate value: "a": listed twice"#,
                "spec.x: Required value: must be set",
                r#"spec.kind: Unsupported value: "Foo": supported: MaasIPPool"#,
            ]
        );
        assert_eq!(v.warnings, ["spec[k]: suspicious"]);
        assert!(!v.allowed());
        assert_eq!(v.errors[0].reason(), "FieldValueInvalid");
    }
}
