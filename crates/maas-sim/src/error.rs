//! Startup errors ([`SimError`]) and MAAS-shaped HTTP error answers ([`ApiError`]).

use http::StatusCode;
use serde_json::Value;

/// Errors that stop the simulator from starting or from saving its state.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Binding the listener or reading a file failed.
    #[error("I/O error on {what}: {source}")]
    Io {
        /// What was being read, written or bound.
        what: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The inventory file could not be parsed.
    #[error("invalid inventory {path}: {message}")]
    Inventory {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The state file could not be parsed or written.
    #[error("state file {path}: {message}")]
    State {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The TLS certificate or key could not be loaded.
    #[error("TLS setup failed: {0}")]
    Tls(String),
}

impl SimError {
    /// Low-cardinality label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Config(_) => "config",
            Self::Io { .. } => "io",
            Self::Inventory { .. } => "inventory",
            Self::State { .. } => "state",
            Self::Tls(_) => "tls",
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// Body of an error answer; MAAS answers plain text except for form validation errors.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorBody {
    /// `text/plain; charset=utf-8`.
    Text(String),
    /// `text/html; charset=utf-8` (bare Django answers: auth failures, retry exhaustion).
    Html(String),
    /// `application/json; charset=utf-8` (validation errors).
    Json(Value),
    /// No body at all (403 without message, 405).
    Empty,
}

/// A MAAS error answer: status, body and extra headers.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Body.
    pub body: ErrorBody,
    /// Extra headers (`Retry-After`, `Allow`, `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
}

impl ApiError {
    pub(crate) fn text(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: ErrorBody::Text(message.into()),
            headers: Vec::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// 400 with a plain-text message (`MAASAPIBadRequest`).
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::text(StatusCode::BAD_REQUEST, message)
    }

    /// 400 with the JSON `{"field": ["message"]}` of a form validation error.
    pub(crate) fn field(field: &str, message: impl Into<String>) -> Self {
        let mut map = serde_json::Map::new();
        map.insert(
            field.to_owned(),
            Value::Array(vec![Value::String(message.into())]),
        );
        Self {
            status: StatusCode::BAD_REQUEST,
            body: ErrorBody::Json(Value::Object(map)),
            headers: Vec::new(),
        }
    }

    /// 400 of a `CharField(max_length=limit)` given a longer value, in Django's words
    /// (`MaxLengthValidator`, run by `full_clean` when a MAAS model saves). The length is in
    /// characters (code points, as Python counts), not bytes.
    pub(crate) fn check_max_length(field: &str, limit: usize, value: &str) -> Result<(), Self> {
        let count = value.chars().count();
        if count > limit {
            return Err(Self::field(
                field,
                format!("Ensure this value has at most {limit} characters (it has {count})."),
            ));
        }
        Ok(())
    }

    /// 400 of a form field left out or empty, in Django's words.
    pub(crate) fn required(field: &str) -> Self {
        Self::field(field, "This field is required.")
    }

    /// 400 of a choice field given a value outside its choices, in Django's words.
    pub(crate) fn invalid_choice(field: &str, value: impl std::fmt::Display) -> Self {
        Self::field(
            field,
            format!("Select a valid choice. {value} is not one of the available choices."),
        )
    }

    /// 400 of a model choice field given an unknown object; Django does not echo the value.
    pub(crate) fn invalid_model_choice(field: &str) -> Self {
        Self::invalid_choice(field, "That choice")
    }

    /// 404 `No <Model> matches the given query.`
    pub(crate) fn no_match(model: &str) -> Self {
        Self::text(
            StatusCode::NOT_FOUND,
            format!("No {model} matches the given query."),
        )
    }

    /// 404 for a URL that no route matches.
    pub(crate) fn unknown_endpoint(path: &str) -> Self {
        Self::text(
            StatusCode::NOT_FOUND,
            format!("Unknown API endpoint: {path}."),
        )
    }

    /// 409 with a plain-text message.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        Self::text(StatusCode::CONFLICT, message)
    }

    /// 403 with an empty body, as MAAS answers most permission failures.
    pub(crate) fn forbidden_empty() -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            body: ErrorBody::Empty,
            headers: Vec::new(),
        }
    }

    /// 403 for admin-only methods.
    pub(crate) fn admin_only() -> Self {
        Self::text(
            StatusCode::FORBIDDEN,
            "This method is reserved for admin users.",
        )
    }

    /// 405 with an `Allow` header and no body.
    pub(crate) fn method_not_allowed(allow: &str) -> Self {
        Self {
            status: StatusCode::METHOD_NOT_ALLOWED,
            body: ErrorBody::Empty,
            headers: vec![("allow", allow.to_owned())],
        }
    }

    /// 401 `Authorization Error: ...` as a bare Django HTML answer with the OAuth challenge.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            body: ErrorBody::Html(message.into()),
            headers: vec![("www-authenticate", "OAuth realm=\"OAuth\"".to_owned())],
        }
    }

    /// 500 with `str(exception)`.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::text(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Short label of the error kind, used in logs.
    pub fn category(&self) -> &'static str {
        match self.status.as_u16() {
            400 => "bad_request",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "not_found",
            405 => "method_not_allowed",
            409 => "conflict",
            410 => "gone",
            500..=599 => "server",
            _ => "other",
        }
    }
}
