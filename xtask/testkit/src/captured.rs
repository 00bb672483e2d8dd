//! Log output captured for assertions (for example that a secret never
//! reaches the logs).

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::subscriber::DefaultGuard;

/// A shared in-memory log sink: every clone writes to the same buffer.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Captures every event up to `level`, without colours, on this thread
/// until the guard is dropped (the thread's default subscriber: use a
/// current-thread runtime so the code under test logs on this thread).
pub fn capture(level: tracing::Level) -> (Captured, DefaultGuard) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (captured, tracing::subscriber::set_default(subscriber))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_collects_events_up_to_the_level() {
        let (captured, guard) = capture(tracing::Level::INFO);
        tracing::info!("kept");
        tracing::debug!("dropped");
        drop(guard);
        tracing::info!("after");
        let text = captured.text();
        assert!(text.contains("kept"), "{text}");
        assert!(
            !text.contains("dropped") && !text.contains("after"),
            "{text}"
        );
    }
}
