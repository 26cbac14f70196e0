//! Shorthands for the calls the resource modules build. Most calls are a GET of a collection
//! or of one item, or an `op` on one item; spelled out in full, each method repeated the same
//! constructor and hid the one or two things that set it apart.

use http::Method;
use serde::de::DeserializeOwned;

use crate::error::MaasError;
use crate::form::Params;
use crate::transport::{Call, MaasClient};

impl Call {
    /// A `GET` (retried: reads are idempotent).
    pub(crate) fn get(name: &'static str, segments: Vec<String>) -> Self {
        Self::new(name, Method::GET, segments)
    }

    /// A `POST` (not retried unless marked [`Call::idempotent`]).
    pub(crate) fn post(name: &'static str, segments: Vec<String>) -> Self {
        Self::new(name, Method::POST, segments)
    }

    /// A `PUT`, retried: a MAAS update sets fields to the values sent, so a repeat leaves the
    /// same state.
    pub(crate) fn put(name: &'static str, segments: Vec<String>) -> Self {
        Self::new(name, Method::PUT, segments).idempotent()
    }

    /// A `DELETE`, retried: a [`MaasError::NotFound`] after a retry means an earlier attempt
    /// already deleted it, which callers treat as done.
    pub(crate) fn delete(name: &'static str, segments: Vec<String>) -> Self {
        Self::new(name, Method::DELETE, segments).idempotent()
    }
}

/// The path of a top-level collection, e.g. `zones/`.
pub(crate) fn collection(name: &str) -> Vec<String> {
    vec![name.to_owned()]
}

/// The path of a numbered item of a top-level collection, e.g. `ipranges/7/`.
pub(crate) fn numbered_item(collection: &str, id: i64) -> Vec<String> {
    vec![collection.to_owned(), id.to_string()]
}

impl MaasClient {
    /// A parameterless `GET`, decoded.
    pub(crate) async fn get_json<T: DeserializeOwned>(
        &self,
        name: &'static str,
        segments: Vec<String>,
    ) -> Result<T, MaasError> {
        self.json(Call::get(name, segments)).await
    }

    /// A `PUT` of `params`, decoded as the updated object.
    pub(crate) async fn put_json<T: DeserializeOwned>(
        &self,
        name: &'static str,
        segments: Vec<String>,
        params: Params,
    ) -> Result<T, MaasError> {
        self.json(Call::put(name, segments).params(params)).await
    }

    /// A `POST` of `params` to top-level `collection`, decoded as the object it created. Not
    /// retried: a repeat would create a second object or clash with the first.
    pub(crate) async fn create<T: DeserializeOwned>(
        &self,
        name: &'static str,
        collection_name: &str,
        params: Params,
    ) -> Result<T, MaasError> {
        self.json(Call::post(name, collection(collection_name)).params(params))
            .await
    }

    /// A `DELETE`; MAAS answers 204 with no body.
    pub(crate) async fn delete_item(
        &self,
        name: &'static str,
        segments: Vec<String>,
    ) -> Result<(), MaasError> {
        self.discard(Call::delete(name, segments)).await
    }
}
