//! One in-flight job per key, shared by every caller that asks meanwhile.
//!
//! The image cache runs "make sure base `(host, key)` exists" through a
//! [`SingleFlight`], so five Creates that need the same cold image start one
//! download and all wait for its outcome.
//!
//! No task is spawned: the job is a shared future that every waiting caller
//! polls. If the caller that started it is cancelled, the others keep
//! driving it; when the last waiter is cancelled the job is dropped (for the
//! cache: its connection closed, its upload aborted), so nothing outlives
//! the callers, and the next caller for that key starts afresh. A finished
//! job is forgotten, so the next call runs the job again (which for the
//! cache means a cheap "already there" check).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

/// Runs at most one job per key at a time; see the [module docs](self).
pub struct SingleFlight<K, T: Clone> {
    inflight: Mutex<HashMap<K, Flight<T>>>,
}

/// A job and how many callers wait for it.
struct Flight<T: Clone> {
    job: Shared<BoxFuture<'static, T>>,
    waiters: usize,
}

impl<K: Eq + Hash, T: Clone> SingleFlight<K, T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, Flight<T>>> {
        self.inflight.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One caller's share of a job: when the last unfinished caller goes away,
/// the job goes with it.
struct Waiter<'a, K: Eq + Hash, T: Clone> {
    flight: &'a SingleFlight<K, T>,
    key: &'a K,
    job: &'a Shared<BoxFuture<'static, T>>,
    finished: bool,
}

impl<K: Eq + Hash, T: Clone> Drop for Waiter<'_, K, T> {
    fn drop(&mut self) {
        let mut map = self.flight.lock();
        let Some(flight) = map.get_mut(self.key) else {
            return;
        };
        if !flight.job.ptr_eq(self.job) {
            return; // a newer job for the key: not ours to count
        }
        flight.waiters = flight.waiters.saturating_sub(1);
        // Finished: forget it (the next call runs afresh). Abandoned by
        // every caller: drop it, so it holds nothing.
        if self.finished || flight.waiters == 0 {
            map.remove(self.key);
        }
    }
}

impl<K, T: Clone> Default for SingleFlight<K, T> {
    fn default() -> Self {
        Self {
            inflight: Mutex::new(HashMap::new()),
        }
    }
}

impl<K, T> SingleFlight<K, T>
where
    K: Eq + Hash + Clone,
    T: Clone + Send + Sync + 'static,
{
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The result of the job for `key`: joins the one in flight, or starts
    /// `job()` when there is none. `job` is called only when a new job
    /// starts.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the returned future leaves the job to the other
    /// waiters; dropping the last one drops the job.
    pub async fn run<F, Fut>(&self, key: K, job: F) -> T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let shared = {
            let mut map = self.lock();
            let flight = map.entry(key.clone()).or_insert_with(|| Flight {
                job: job().boxed().shared(),
                waiters: 0,
            });
            flight.waiters += 1;
            flight.job.clone()
        };
        let mut waiter = Waiter {
            flight: self,
            key: &key,
            job: &shared,
            finished: false,
        };
        let result = shared.clone().await;
        waiter.finished = true;
        drop(waiter);
        result
    }

    /// Keys with a job in flight.
    pub fn in_flight(&self) -> usize {
        self.lock().len()
    }
}

/// A job result that many callers share: errors are not `Clone`, so jobs
/// return them in an [`Arc`].
pub type SharedResult<T, E> = Result<T, Arc<E>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tokio::sync::Notify;

    #[tokio::test]
    async fn concurrent_callers_share_one_job() {
        let flight = SingleFlight::<&str, usize>::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(Notify::new());
        let callers = (0..5).map(|_| {
            let (starts, gate) = (starts.clone(), gate.clone());
            flight.run("debian", move || async move {
                let n = starts.fetch_add(1, Ordering::SeqCst) + 1;
                gate.notified().await;
                n * 100
            })
        });
        // join! polls the callers first: all five join the job, which then
        // waits on the gate until the second branch opens it.
        let (results, ()) = tokio::join!(futures::future::join_all(callers), async {
            gate.notify_one();
        });
        assert_eq!(results, vec![100; 5]);
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert_eq!(flight.in_flight(), 0);

        // Finished jobs are forgotten: the next call runs again.
        let again = flight.run("debian", || async { 7 }).await;
        assert_eq!(again, 7);
    }

    #[tokio::test]
    async fn different_keys_run_separately() {
        let flight = SingleFlight::<u32, u32>::new();
        let (a, b) = tokio::join!(
            flight.run(1, || async { 10 }),
            flight.run(2, || async { 20 })
        );
        assert_eq!((a, b), (10, 20));
    }

    /// Sets its flag when dropped.
    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_job_every_caller_abandoned_is_dropped_and_the_next_call_starts_afresh() {
        let flight = Arc::new(SingleFlight::<&str, u8>::new());
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (flight, dropped) = (flight.clone(), dropped.clone());
                tokio::spawn(async move {
                    flight
                        .run("k", move || async move {
                            // Holds a resource (here a flag) until dropped.
                            let _held = DropFlag(dropped);
                            std::future::pending::<u8>().await
                        })
                        .await
                })
            })
            .collect();
        while flight.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        callers[0].abort();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !dropped.load(Ordering::SeqCst),
            "one waiter still drives it"
        );
        assert_eq!(flight.in_flight(), 1);
        callers[1].abort();
        for c in callers {
            let _ = c.await;
        }
        assert!(dropped.load(Ordering::SeqCst), "the job was dropped");
        assert_eq!(flight.in_flight(), 0);
        assert_eq!(flight.run("k", || async { 3 }).await, 3);
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
            tokio::spawn(async move { flight.run("k", job).await })
        };
        while flight.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        let follower = {
            let (flight, job) = (flight.clone(), make(starts.clone(), gate.clone()));
            tokio::spawn(async move { flight.run("k", job).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        starter.abort();
        let _ = starter.await;
        gate.notify_one();
        let result = tokio::time::timeout(Duration::from_secs(10), follower)
            .await
            .expect("follower finished")
            .unwrap();
        assert_eq!(result.unwrap_err().as_str(), "download failed");
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }
}
