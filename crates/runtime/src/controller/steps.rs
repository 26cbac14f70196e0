//! One step loop for the controllers whose reconcile is a walk of small steps: decide on what is
//! known, perform one step (one write at most), decide again on what it left.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use kube::runtime::controller::Action;
use tracing::debug;

use crate::error::error_chain;

/// Whether a reconcile goes on with the next step or stops with an action.
#[derive(Debug)]
pub enum Flow {
    /// Decide again with the updated state.
    Continue,
    /// Stop here.
    Done(Action),
}

/// A reconcile that walks steps: one value per reconcile, holding what it knows and the context
/// it writes through.
pub trait Steps: Send {
    /// What [`decide`](Steps::decide) picks.
    type Step: Debug + Send;
    /// What a step fails with.
    type Error: std::error::Error + Send + 'static;

    /// Most steps one reconcile performs before yielding; then it looks again in a second, so a
    /// reconcile is never an unbounded loop.
    const MAX_STEPS: usize;

    /// The next step, from what is known now.
    fn decide(&self) -> Self::Step;

    /// Performs `step` and updates what is known from the API's answers.
    fn perform(
        &mut self,
        step: Self::Step,
    ) -> impl Future<Output = Result<Flow, Self::Error>> + Send;

    /// Whether `error` means "someone wrote in between": what is known is read again and the
    /// step decided again, instead of failing the reconcile.
    fn is_conflict(error: &Self::Error) -> bool;

    /// Reads everything again after a conflict; `false` when the object is gone.
    fn observe_again(&mut self) -> impl Future<Output = Result<bool, Self::Error>> + Send;
}

/// Walks `steps`: decide, perform, decide again on what the step left, until a step stops the
/// reconcile or [`Steps::MAX_STEPS`] were performed.
pub async fn walk<S: Steps>(steps: &mut S) -> Result<Action, S::Error> {
    for _ in 0..S::MAX_STEPS {
        let step = steps.decide();
        debug!(?step, "step");
        match steps.perform(step).await {
            Ok(Flow::Continue) => {}
            Ok(Flow::Done(action)) => return Ok(action),
            Err(e) if S::is_conflict(&e) => {
                debug!(error = %error_chain(&e), "conflict, observing again");
                if !steps.observe_again().await? {
                    return Ok(Action::await_change());
                }
            }
            Err(e) => return Err(e),
        }
    }
    // Progress every step so far; look again soon rather than loop unbounded.
    Ok(Action::requeue(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum TestError {
        #[error("conflict")]
        Conflict,
        #[error("broken")]
        Broken,
    }

    /// Counts steps; `script` says what each step does.
    #[derive(Debug, Default)]
    struct Counter {
        steps: u32,
        reads: u32,
        conflicts: u32,
        done_at: Option<u32>,
        conflict_at: Option<u32>,
        broken: bool,
        gone: bool,
    }

    impl Steps for Counter {
        type Step = u32;
        type Error = TestError;
        const MAX_STEPS: usize = 4;

        fn decide(&self) -> u32 {
            self.steps
        }

        async fn perform(&mut self, step: u32) -> Result<Flow, TestError> {
            if self.broken {
                return Err(TestError::Broken);
            }
            if self.conflict_at == Some(step) && self.conflicts == 0 {
                self.conflicts += 1;
                return Err(TestError::Conflict);
            }
            self.steps += 1;
            Ok(if Some(self.steps) == self.done_at {
                Flow::Done(Action::await_change())
            } else {
                Flow::Continue
            })
        }

        fn is_conflict(error: &TestError) -> bool {
            matches!(error, TestError::Conflict)
        }

        async fn observe_again(&mut self) -> Result<bool, TestError> {
            self.reads += 1;
            Ok(!self.gone)
        }
    }

    #[tokio::test]
    async fn steps_until_done_and_reads_again_after_a_conflict() {
        let mut walked = Counter {
            done_at: Some(3),
            conflict_at: Some(1),
            ..Counter::default()
        };
        let action = walk(&mut walked).await;
        assert_eq!(action.ok(), Some(Action::await_change()));
        assert_eq!((walked.steps, walked.reads, walked.conflicts), (3, 1, 1));
    }

    #[tokio::test]
    async fn stops_after_max_steps_on_other_errors_and_when_gone() {
        let mut endless = Counter::default();
        let action = walk(&mut endless).await;
        assert_eq!(endless.steps, 4);
        assert_eq!(action.ok(), Some(Action::requeue(Duration::from_secs(1))));
        let mut broken = Counter {
            broken: true,
            ..Counter::default()
        };
        assert!(matches!(walk(&mut broken).await, Err(TestError::Broken)));
        let mut gone = Counter {
            conflict_at: Some(0),
            gone: true,
            ..Counter::default()
        };
        assert_eq!(walk(&mut gone).await.ok(), Some(Action::await_change()));
        assert_eq!(gone.steps, 0);
    }
}
