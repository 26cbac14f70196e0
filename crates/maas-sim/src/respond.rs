//! HTTP responses as MAAS shapes them: JSON, text and error bodies with their content types.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::Value;

use crate::api::Reply;
use crate::error::{ApiError, ErrorBody};

pub(crate) type HttpResponse = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: Option<&'static str>, body: Bytes) -> HttpResponse {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if let Some(ct) = content_type {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    }
    response
}

pub(crate) fn json_response(status: StatusCode, value: &Value) -> HttpResponse {
    let body = serde_json::to_vec(value).unwrap_or_default();
    respond(
        status,
        Some("application/json; charset=utf-8"),
        Bytes::from(body),
    )
}

pub(crate) fn error_response(error: ApiError) -> HttpResponse {
    let mut response = match error.body {
        ErrorBody::Text(text) => respond(
            error.status,
            Some("text/plain; charset=utf-8"),
            Bytes::from(text),
        ),
        ErrorBody::Html(text) => respond(
            error.status,
            Some("text/html; charset=utf-8"),
            Bytes::from(text),
        ),
        ErrorBody::Json(value) => json_response(error.status, &value),
        ErrorBody::Empty => respond(error.status, None, Bytes::new()),
    };
    for (name, value) in error.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

pub(crate) fn reply_response(reply: Reply) -> HttpResponse {
    match reply {
        Reply::Json(status, value) => json_response(status, &value),
        Reply::Text(status, text) => {
            respond(status, Some("text/plain; charset=utf-8"), Bytes::from(text))
        }
        Reply::Empty(status) => respond(status, None, Bytes::new()),
    }
}
