//! `SupervisedJob`: an actor that runs one piece of background work (a helper's turn) under
//! watch — a panic inside it, or a run past its time limit, becomes a reported failure instead
//! of taking anything else down — and that `StopJob` cancels.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Duration;

use actix::prelude::*;
use futures_util::FutureExt as _;
use tokio::sync::oneshot;

/// How a supervised job ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobFailure {
    /// The work returned an error.
    #[error("{0}")]
    Failed(String),
    /// The work panicked; the panic's message.
    #[error("it crashed ({0})")]
    Panicked(String),
    /// The work ran past its time limit and was cancelled.
    #[error("it ran longer than {0:?} and was stopped")]
    TimedOut(Duration),
    /// `StopJob` (`/stop`) cancelled it.
    #[error("it was stopped")]
    Stopped,
}

/// The work a job runs.
pub type Work = Pin<Box<dyn Future<Output = Result<String, String>>>>;

/// Runs one piece of work; stops itself when it ends.
pub struct SupervisedJob {
    /// The work, until the actor starts it.
    work: Option<Work>,
    /// Longest the work may run.
    limit: Duration,
    /// Where the outcome goes.
    done: Option<oneshot::Sender<Result<String, JobFailure>>>,
}

impl SupervisedJob {
    /// Starts `work` on the current arbiter with `limit`; the outcome comes through the
    /// returned receiver (a job that vanished reads as a closed channel).
    pub fn start(work: Work, limit: Duration) -> (Addr<SupervisedJob>, oneshot::Receiver<Result<String, JobFailure>>) {
        let (done, outcome) = oneshot::channel();
        let addr = SupervisedJob { work: Some(work), limit, done: Some(done) }.start();
        (addr, outcome)
    }

    fn finish(&mut self, outcome: Result<String, JobFailure>, ctx: &mut Context<Self>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(outcome);
        }
        ctx.stop();
    }
}

impl Actor for SupervisedJob {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let Some(work) = self.work.take() else { return };
        let limit = self.limit;
        let guarded = async move {
            match tokio::time::timeout(limit, AssertUnwindSafe(work).catch_unwind()).await {
                Ok(Ok(Ok(text))) => Ok(text),
                Ok(Ok(Err(error))) => Err(JobFailure::Failed(error)),
                Ok(Err(panic)) => Err(JobFailure::Panicked(panic_message(panic.as_ref()))),
                Err(_) => Err(JobFailure::TimedOut(limit)),
            }
        };
        ctx.spawn(guarded.into_actor(self).map(|outcome, actor, ctx| actor.finish(outcome, ctx)));
    }
}

/// Cancel the job now; its outcome reads [`JobFailure::Stopped`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopJob;

impl Handler<StopJob> for SupervisedJob {
    type Result = ();

    fn handle(&mut self, _: StopJob, ctx: &mut Context<Self>) {
        // Stopping the actor drops the spawned work with it.
        self.finish(Err(JobFailure::Stopped), ctx);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(work: Work, limit: Duration, stop: bool) -> Result<String, JobFailure> {
        actix::System::new().block_on(async move {
            let (addr, outcome) = SupervisedJob::start(work, limit);
            if stop {
                addr.do_send(StopJob);
            }
            outcome.await.unwrap_or(Err(JobFailure::Failed("vanished".into())))
        })
    }

    #[test]
    fn a_job_that_finishes_hands_over_its_result() {
        assert_eq!(run(Box::pin(async { Ok("42".to_owned()) }), Duration::from_secs(5), false), Ok("42".to_owned()));
    }

    #[test]
    fn a_job_that_panics_is_reported_and_the_system_goes_on() {
        let work: Work = Box::pin(async {
            if std::hint::black_box(true) {
                panic!("index out of range");
            }
            Ok(String::new())
        });
        assert_eq!(run(work, Duration::from_secs(5), false), Err(JobFailure::Panicked("index out of range".into())));
    }

    #[test]
    fn a_job_that_hangs_is_stopped_at_its_limit() {
        let work: Work = Box::pin(std::future::pending());
        assert_eq!(run(work, Duration::from_millis(50), false), Err(JobFailure::TimedOut(Duration::from_millis(50))));
    }

    #[test]
    fn a_stopped_job_reports_that_it_was_stopped() {
        let work: Work = Box::pin(std::future::pending());
        assert_eq!(run(work, Duration::from_secs(60), true), Err(JobFailure::Stopped));
    }
}
