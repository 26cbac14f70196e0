//! One reconcile wrapper, one error policy and one run loop for every controller.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use kube::Resource;
use kube::ResourceExt;
use kube::runtime::Controller;
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::ObjectRef;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backoff::ObjectBackoff;
use crate::error::{ErrorCategory, error_chain};
use crate::metrics::ControllerMetrics;
use crate::runtime::Term;
use crate::trace_context::{self, Relation};

/// What the kit needs to run one controller.
#[derive(Debug, Clone)]
pub struct ReconcilerSettings {
    /// Controller name: the `controller` label of the reconcile metrics and a log field.
    pub name: String,
    /// Reconcile metrics labelled with `name`.
    pub metrics: ControllerMetrics,
    /// Per-object backoff after errors (reset after each successful reconcile).
    pub backoff: ObjectBackoff,
    /// Objects reconciled in parallel.
    pub concurrency: u16,
    /// Stops the controller (it finishes running reconciles first).
    pub cancel: CancellationToken,
}

impl ReconcilerSettings {
    /// Settings for the controller `name` in this leadership term: the term's metrics,
    /// `--concurrency` and cancellation, a fresh error backoff.
    pub fn for_term(term: &Term, name: &str) -> Self {
        Self {
            name: name.to_owned(),
            metrics: term.reconcile.controller(name),
            backoff: ObjectBackoff::default(),
            concurrency: term.settings.concurrency,
            cancel: term.cancel.clone(),
        }
    }
}

struct Wrapped<C, T> {
    settings: ReconcilerSettings,
    ctx: Arc<C>,
    relation: T,
}

/// Runs `controller` until `settings.cancel` fires, calling `reconcile` for each object.
///
/// Every reconcile is timed and counted (`capmaas_reconcile_*{controller=name}`), runs inside a
/// `reconcile` span with the object's namespace and name, and resets the object's backoff when
/// it succeeds; a failure goes through [`error_policy`]. Concurrency is `settings.concurrency`.
/// An object carrying a trace context ([`trace_context::TRACEPARENT_ANNOTATION`]) gets a span
/// linked to that trace; [`run_traced`] lets the controller make it part of the trace instead.
pub async fn run<K, C, E, R, Fut>(
    controller: Controller<K>,
    settings: ReconcilerSettings,
    ctx: Arc<C>,
    reconcile: R,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + ErrorCategory + Send + Sync + 'static,
{
    run_traced(controller, settings, ctx, reconcile, |_: &K| Relation::Link).await;
}

/// [`run`], with `relation` deciding per object whether its reconcile span is a child of the
/// trace its annotation names (work on that request is outstanding) or only links to it.
pub async fn run_traced<K, C, E, R, Fut, T>(
    controller: Controller<K>,
    settings: ReconcilerSettings,
    ctx: Arc<C>,
    mut reconcile: R,
    relation: T,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    C: Send + Sync + 'static,
    R: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::error::Error + ErrorCategory + Send + Sync + 'static,
    T: Fn(&K) -> Relation + Send + Sync + 'static,
{
    let name = settings.name.clone();
    let config = controller::Config::default().concurrency(settings.concurrency);
    let stop = settings.cancel.clone().cancelled_owned();
    let wrapped = Arc::new(Wrapped {
        settings,
        ctx,
        relation,
    });
    info!(controller = %name, "controller started");
    controller
        .with_config(config)
        .graceful_shutdown_on(stop)
        .run(
            move |obj, wrapped: Arc<Wrapped<C, T>>| {
                let span = reconcile_span(obj.as_ref(), &wrapped.settings, &wrapped.relation);
                let fut = reconcile(obj.clone(), wrapped.ctx.clone());
                async move { observe(obj.as_ref(), &wrapped.settings, span, fut).await }
            },
            |obj, error, wrapped| error_policy(obj.as_ref(), error, &wrapped.settings),
            wrapped,
        )
        .for_each(|result| {
            let name = &name;
            async move {
                match result {
                    Ok((obj, action)) => debug!(controller = %name, object = %obj, ?action, "reconciled"),
                    Err(controller::Error::ObjectNotFound(obj)) => {
                        debug!(controller = %name, object = %obj, "object gone before its reconcile");
                    }
                    // Logged by the error policy, with the object.
                    Err(controller::Error::ReconcilerFailed(..)) => {}
                    Err(e) => warn!(controller = %name, error = %error_chain(&e), "controller stream error"),
                }
            }
        })
        .await;
    info!(controller = %name, "controller stopped");
}

/// The span of one reconcile of `obj`, following the trace its annotation names.
fn reconcile_span<K>(
    obj: &K,
    settings: &ReconcilerSettings,
    relation: impl Fn(&K) -> Relation,
) -> tracing::Span
where
    K: Resource<DynamicType = ()>,
{
    let span = info_span!(
        "reconcile",
        otel.name = %format_args!("reconcile {}", settings.name),
        capmaas.controller = %settings.name,
        k8s.namespace.name = obj.meta().namespace.as_deref().unwrap_or_default(),
        capmaas.object.kind = %K::kind(&()),
        capmaas.object.name = %obj.name_any(),
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    );
    if let Some(traceparent) = trace_context::annotation(obj.meta()) {
        trace_context::follow(&span, traceparent, relation(obj));
    }
    span
}

async fn observe<K, E>(
    obj: &K,
    settings: &ReconcilerSettings,
    span: tracing::Span,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E>
where
    K: Resource<DynamicType = ()>,
    E: ErrorCategory,
{
    let _timer = settings.metrics.start_reconcile();
    let result = reconcile.instrument(span.clone()).await;
    if let Err(e) = &result {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", e.category());
    }
    match &result {
        Ok(_) => {
            settings.backoff.reset(&ObjectRef::from_obj(obj));
            settings.metrics.reconcile_succeeded();
        }
        Err(e) => settings.metrics.reconcile_failed(e.category()),
    }
    result
}

/// The requeue after a failed reconcile of `obj`: per-object exponential backoff for transient
/// errors, a long fixed delay for invalid specs, none for [`crate::Requeue::Never`]. Logs the
/// error with its whole chain (at debug level when [`ErrorCategory::quiet`]).
pub fn error_policy<K, E>(obj: &K, error: &E, settings: &ReconcilerSettings) -> Action
where
    K: Resource<DynamicType = ()>,
    E: std::error::Error + ErrorCategory + 'static,
{
    let action = settings
        .backoff
        .error_action(&ObjectRef::from_obj(obj), error);
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    if error.quiet() {
        debug!(controller = %settings.name, %namespace, %name, category = error.category(),
               error = %error_chain(error), ?action, "reconcile retried");
    } else {
        warn!(controller = %settings.name, %namespace, %name, category = error.category(),
              error = %error_chain(error), ?action, "reconcile failed");
    }
    action
}
