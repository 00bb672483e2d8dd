//! Bounded waits on counters.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Waits (up to 10 s) for `counter` to reach 0; false when it did not.
pub(crate) async fn zero(counter: &AtomicUsize) -> bool {
    for _ in 0..200 {
        if counter.load(Ordering::SeqCst) == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
