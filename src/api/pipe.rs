//! [`pipe`]: the bounded queue between a stream's task and its response body.
//!
//! What a tokio `mpsc` channel would do, in the footprint an open stream can afford: a run
//! stream stays open for hours, mostly idle, and there may be thousands. An `mpsc` channel
//! allocates its shared state and a first block of 32 slots up front, about 1.5 KiB a
//! stream (valgrind massif); this queue is a small shared state whose buffer grows only
//! while frames wait, and frames rarely wait (each is a batch of everything available).
//! One writer (the stream's task) and one reader (the body), as the stream needs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

struct Shared {
    state: Mutex<State>,
    /// A frame was queued, or the writer went.
    readable: Notify,
    /// A frame was taken, or the reader went.
    writable: Notify,
}

struct State {
    frames: VecDeque<Bytes>,
    capacity: usize,
    writer_gone: bool,
    reader_gone: bool,
}

/// The stream task's end.
pub struct Writer(Arc<Shared>);

/// The response body's end.
pub struct Reader(Arc<Shared>);

/// The reader went away, or did not take a frame in time.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// A queue of at most `capacity` frames.
pub fn pipe(capacity: usize) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            frames: VecDeque::new(),
            capacity: capacity.max(1),
            writer_gone: false,
            reader_gone: false,
        }),
        readable: Notify::new(),
        writable: Notify::new(),
    });
    (Writer(shared.clone()), Reader(shared))
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Writer {
    /// Queues `frame`, waiting up to `slow` for room; [`Closed`] if the reader is gone or
    /// took nothing for that long.
    pub async fn send_timeout(&self, frame: Bytes, slow: Duration) -> Result<(), Closed> {
        let deadline = tokio::time::Instant::now() + slow;
        let mut frame = Some(frame);
        loop {
            {
                let mut st = self.0.lock();
                if st.reader_gone {
                    return Err(Closed);
                }
                if st.frames.len() < st.capacity {
                    st.frames.push_back(frame.take().expect("sent once"));
                    drop(st);
                    self.0.readable.notify_one();
                    return Ok(());
                }
            }
            // Full. A frame taken after the check above leaves a permit in `writable`
            // (notify_one stores one when nobody waits), so this wait cannot miss it.
            if tokio::time::timeout_at(deadline, self.0.writable.notified())
                .await
                .is_err()
            {
                return Err(Closed);
            }
        }
    }
}

impl Writer {
    /// Resolves once the reader is gone (the response body was dropped: the client left).
    pub async fn closed(&self) {
        loop {
            let notified = self.0.writable.notified();
            tokio::pin!(notified);
            // Registered before the check: a drop between the two still wakes us.
            notified.as_mut().enable();
            if self.0.lock().reader_gone {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.0.lock().writer_gone = true;
        self.0.readable.notify_one();
    }
}

impl Reader {
    /// The next frame; `None` once the writer is gone and every frame was taken.
    pub async fn recv(&self) -> Option<Bytes> {
        loop {
            {
                let mut st = self.0.lock();
                if let Some(frame) = st.frames.pop_front() {
                    if st.frames.is_empty() && st.frames.capacity() > 4 {
                        // Give the memory of a burst back: an idle stream holds no more
                        // than the few slots its usual single frame needs.
                        st.frames = VecDeque::new();
                    }
                    drop(st);
                    self.0.writable.notify_one();
                    return Some(frame);
                }
                if st.writer_gone {
                    return None;
                }
            }
            self.0.readable.notified().await;
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.0.lock().reader_gone = true;
        self.0.writable.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLOW: Duration = Duration::from_millis(200);

    #[tokio::test]
    async fn frames_arrive_in_order_and_the_end_follows_the_last() {
        let (w, r) = pipe(2);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(f) = r.recv().await {
                got.push(f);
            }
            got
        });
        for i in 0..100u32 {
            w.send_timeout(Bytes::from(i.to_string()), SLOW)
                .await
                .unwrap();
        }
        drop(w);
        let got = reader.await.unwrap();
        let want: Vec<Bytes> = (0..100u32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_reader_that_takes_nothing_for_the_slow_time_closes_the_pipe() {
        let (w, r) = pipe(2);
        w.send_timeout(Bytes::from("a"), SLOW).await.unwrap();
        w.send_timeout(Bytes::from("b"), SLOW).await.unwrap();
        let started = tokio::time::Instant::now();
        let third = tokio::time::timeout(SLOW * 10, w.send_timeout(Bytes::from("c"), SLOW));
        assert_eq!(
            third.await,
            Ok(Err(Closed)),
            "given up after `slow`, not never"
        );
        assert!(started.elapsed() >= SLOW, "not before `slow`");
        // What was queued is still there for the reader.
        assert_eq!(r.recv().await, Some(Bytes::from("a")));
    }

    #[tokio::test]
    async fn a_full_pipe_waits_for_the_reader_and_goes_on() {
        let (w, r) = pipe(1);
        w.send_timeout(Bytes::from("a"), SLOW).await.unwrap();
        let reader = tokio::spawn(async move {
            tokio::time::sleep(SLOW / 2).await;
            let first = r.recv().await;
            (first, r)
        });
        w.send_timeout(Bytes::from("b"), SLOW).await.unwrap();
        let (first, r) = reader.await.unwrap();
        assert_eq!(first, Some(Bytes::from("a")));
        assert_eq!(r.recv().await, Some(Bytes::from("b")));
    }

    #[tokio::test]
    async fn a_gone_reader_fails_the_next_send_at_once() {
        let (w, r) = pipe(4);
        drop(r);
        assert_eq!(w.send_timeout(Bytes::from("a"), SLOW).await, Err(Closed));
    }
}
