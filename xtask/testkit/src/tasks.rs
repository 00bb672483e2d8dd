//! Counting the tasks alive in the current tokio runtime: a test compares
//! the count before and after an operation to prove it left none behind.

/// Alive tokio tasks in the current runtime.
///
/// # Panics
/// Outside a tokio runtime.
pub fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}
