//! One in-flight job per key, shared by every caller that asks meanwhile.
//!
//! The image cache runs "make sure base `(host, key)` exists" through a
//! [`SingleFlight`], so five Creates that need the same cold image start one
//! download and all wait for its outcome.
//!
//! **Ownership.** The job runs in a task owned by the table (a
//! [`JoinSet`]): it is not the callers' — a caller that leaves at its
//! deadline, or is cancelled, leaves the job running for the others and
//! for the next caller, who joins it instead of starting over (a slow
//! fill that every Create's deadline cut short would otherwise restart
//! forever). The job must bound itself (the cache's fill budget does);
//! dropping the table aborts every job it owns. A finished job is
//! forgotten, so the next call runs the job again (which for the cache
//! means a cheap "already there" check).
//!
//! Needs a tokio runtime (the job is spawned on the current one).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Runs at most one job per key at a time; see the [module docs](self).
pub struct SingleFlight<K, T: Clone> {
    state: Arc<Mutex<State<K, T>>>,
}

struct State<K, T: Clone> {
    flights: HashMap<K, Flight<T>>,
    /// The jobs' tasks; dropping the set (with the table) aborts them.
    tasks: JoinSet<()>,
    next_id: u64,
}

/// A job's shared outcome (`None`: the job's task was aborted).
struct Flight<T: Clone> {
    id: u64,
    outcome: Shared<BoxFuture<'static, Option<T>>>,
}

/// Why a caller got no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// The caller's deadline came first; the job goes on.
    DeadlineReached,
    /// The job's task ended without a result (the table is being dropped,
    /// or the job panicked).
    JobLost,
}

impl<K, T: Clone> Default for SingleFlight<K, T> {
    fn default() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                flights: HashMap::new(),
                tasks: JoinSet::new(),
                next_id: 0,
            })),
        }
    }
}

fn lock<K, T: Clone>(state: &Mutex<State<K, T>>) -> std::sync::MutexGuard<'_, State<K, T>> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<K, T> SingleFlight<K, T>
where
    K: Eq + Hash + Clone + Send + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The result of the job for `key`: joins the one in flight, or starts
    /// `job()` in a task of the table's when there is none (`job` is called
    /// only then). Waits until `deadline` at most (`None`: until the job
    /// ends).
    ///
    /// # Errors
    /// [`Left::DeadlineReached`] when `deadline` passed first (the job goes
    /// on); [`Left::JobLost`] when the job's task ended without a result.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the returned future only stops waiting; the
    /// job goes on.
    pub async fn run<F, Fut>(&self, key: K, deadline: Option<Instant>, job: F) -> Result<T, Left>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let outcome = {
            let mut state = lock(&self.state);
            // Reap finished tasks so the set does not grow.
            while state.tasks.try_join_next().is_some() {}
            match state.flights.get(&key) {
                Some(flight) => flight.outcome.clone(),
                None => {
                    let id = state.next_id;
                    state.next_id = state.next_id.wrapping_add(1);
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    let work = job();
                    let weak: Weak<Mutex<State<K, T>>> = Arc::downgrade(&self.state);
                    let task_key = key.clone();
                    // The first caller's span is the job's parent: a fill
                    // shows in the trace of the Create that started it.
                    let parent = tracing::Span::current();
                    state.tasks.spawn(tracing::Instrument::instrument(
                        async move {
                            let out = work.await;
                            // Forgotten before anyone sees the result, so a
                            // caller that got it finds no job in flight.
                            if let Some(state) = weak.upgrade() {
                                let mut state = lock(&state);
                                if state.flights.get(&task_key).is_some_and(|f| f.id == id) {
                                    state.flights.remove(&task_key);
                                }
                            }
                            let _ = tx.send(out);
                        },
                        parent,
                    ));
                    let outcome = rx.map(Result::ok).boxed().shared();
                    state.flights.insert(
                        key,
                        Flight {
                            id,
                            outcome: outcome.clone(),
                        },
                    );
                    outcome
                }
            }
        };
        let result = match deadline {
            Some(at) => tokio::time::timeout_at(at, outcome)
                .await
                .map_err(|_| Left::DeadlineReached)?,
            None => outcome.await,
        };
        result.ok_or(Left::JobLost)
    }

    /// Keys with a job in flight.
    pub fn in_flight(&self) -> usize {
        lock(&self.state).flights.len()
    }
}

/// A job result that many callers share: errors are not `Clone`, so jobs
/// return them in an [`Arc`].
pub type SharedResult<T, E> = Result<T, Arc<E>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::sync::Notify;

    #[tokio::test]
    async fn concurrent_callers_share_one_job() {
        let flight = SingleFlight::<&str, usize>::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Notify::new());
        let callers = (0..5).map(|_| {
            let (starts, gate) = (starts.clone(), gate.clone());
            flight.run("debian", None, move || async move {
                let n = starts.fetch_add(1, Ordering::SeqCst) + 1;
                gate.notified().await;
                n * 100
            })
        });
        let (results, ()) = tokio::join!(futures::future::join_all(callers), async {
            // Let every caller join before the job may finish.
            tokio::task::yield_now().await;
            gate.notify_one();
        });
        assert_eq!(results, vec![Ok(100); 5]);
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert_eq!(flight.in_flight(), 0);

        // Finished jobs are forgotten: the next call runs again.
        let again = flight.run("debian", None, || async { 7 }).await;
        assert_eq!(again, Ok(7));
    }

    #[tokio::test]
    async fn different_keys_run_separately() {
        let flight = SingleFlight::<u32, u32>::new();
        let (a, b) = tokio::join!(
            flight.run(1, None, || async { 10 }),
            flight.run(2, None, || async { 20 })
        );
        assert_eq!((a, b), (Ok(10), Ok(20)));
    }

    #[tokio::test]
    async fn a_waiter_leaves_at_its_deadline_and_the_job_goes_on_for_the_next() {
        let flight = SingleFlight::<&str, u8>::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Notify::new());
        let job = |starts: Arc<AtomicUsize>, gate: Arc<Notify>| {
            move || async move {
                starts.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                9
            }
        };
        let soon = Instant::now() + Duration::from_millis(50);
        let first = flight
            .run("k", Some(soon), job(starts.clone(), gate.clone()))
            .await;
        assert_eq!(first, Err(Left::DeadlineReached));
        // Nobody waits now, yet the job still runs.
        assert_eq!(flight.in_flight(), 1);
        let (second, ()) = tokio::join!(
            flight.run("k", None, job(starts.clone(), gate.clone())),
            async {
                tokio::task::yield_now().await;
                gate.notify_one();
            }
        );
        assert_eq!(second, Ok(9));
        assert_eq!(starts.load(Ordering::SeqCst), 1, "joined, not restarted");
        assert_eq!(flight.in_flight(), 0);
    }

    /// Sets its flag when dropped.
    struct DropFlag(Arc<AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn dropping_the_table_aborts_its_jobs() {
        let flight = SingleFlight::<&str, u8>::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let soon = Instant::now() + Duration::from_millis(20);
        let left = flight
            .run("k", Some(soon), move || async move {
                let _held = DropFlag(d);
                std::future::pending::<u8>().await
            })
            .await;
        assert_eq!(left, Err(Left::DeadlineReached));
        assert!(!dropped.load(Ordering::SeqCst));
        drop(flight);
        // The abort lands when the runtime next polls the task.
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(dropped.load(Ordering::SeqCst), "the job was dropped");
    }

    #[tokio::test]
    async fn a_cancelled_starter_does_not_strand_the_others() {
        let flight = Arc::new(SingleFlight::<&str, SharedResult<u8, String>>::new());
        let starts = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Notify::new());
        let make = |starts: Arc<AtomicUsize>, gate: Arc<Notify>| {
            move || async move {
                starts.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                Err(Arc::new("download failed".to_owned()))
            }
        };
        let starter = {
            let (flight, job) = (flight.clone(), make(starts.clone(), gate.clone()));
            tokio::spawn(async move { flight.run("k", None, job).await })
        };
        while flight.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let follower = {
            let (flight, job) = (flight.clone(), make(starts.clone(), gate.clone()));
            tokio::spawn(async move { flight.run("k", None, job).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        starter.abort();
        let _ = starter.await;
        gate.notify_one();
        let result = tokio::time::timeout(Duration::from_secs(10), follower)
            .await
            .expect("follower finished")
            .unwrap();
        assert_eq!(result.unwrap().unwrap_err().as_str(), "download failed");
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }
}
