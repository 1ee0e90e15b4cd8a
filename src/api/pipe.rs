//! [`pipe`]: the bounded queue between a stream's task and its response body.
//!
//! What a tokio `mpsc` channel would do, in the footprint an open stream can afford: a run
//! stream stays open for hours, mostly idle, and there may be thousands. An `mpsc` channel
//! allocates its shared state and a first block of 32 slots up front, about 1.5 KiB a
//! stream (valgrind massif); this queue is a small shared state whose buffer grows only
//! while frames wait, and frames rarely wait (each is a batch of everything available).
//! One writer (the stream's task) and one reader (the body), as the stream needs.
//!
//! Bounded in bytes, not frames (`api.stream_buffer_bytes`): a frame is anything from a
//! keepalive to a 2 MB tool result, so a cap in frames bounds nothing. Frames are the feed's
//! shared `Bytes` (never copied per stream), and the bytes counted are those the queue holds
//! up, whoever else shares them: N readers that take nothing cost at most N × the budget here
//! (and what hyper and the kernel buffer below it), then each is dropped after
//! `api.slow_reader_ms` without room.

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
    /// The bytes in `frames`.
    queued: usize,
    /// The most bytes `frames` may hold (a bigger frame still goes, alone).
    budget: usize,
    writer_gone: bool,
    reader_gone: bool,
    /// The writer gave up on a reader that took nothing for `slow`: what was queued is
    /// dropped, and the reader is told so (its connection is cut, not ended cleanly, so
    /// hyper's and the kernel's buffers of a stalled client go too).
    aborted: bool,
}

/// The stream task's end.
pub struct Writer(Arc<Shared>);

/// The response body's end.
pub struct Reader(Arc<Shared>);

/// The reader went away, or did not take a frame in time.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// A queue of at most `budget` bytes (one frame of any size when empty).
pub fn pipe(budget: usize) -> (Writer, Reader) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            frames: VecDeque::new(),
            queued: 0,
            budget: budget.max(1),
            writer_gone: false,
            reader_gone: false,
            aborted: false,
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

impl State {
    fn fits(&self, frame: &Bytes) -> bool {
        self.frames.is_empty() || self.queued + frame.len() <= self.budget
    }
}

impl Writer {
    /// Queues `frame`, waiting up to `slow` for room; [`Closed`] if the reader is gone or
    /// took nothing for that long.
    #[cfg(test)]
    pub async fn send_timeout(&self, frame: Bytes, slow: Duration) -> Result<(), Closed> {
        self.send_all(std::iter::once(frame), slow).await
    }

    /// Queues `frames` in order, as many at a time as fit (one wake-up of the reader for
    /// each such group), waiting up to `slow` each time there is no room; [`Closed`] if the
    /// reader is gone or took nothing for that long.
    pub async fn send_all(
        &self,
        frames: impl IntoIterator<Item = Bytes>,
        slow: Duration,
    ) -> Result<(), Closed> {
        let mut frames = frames.into_iter().peekable();
        while frames.peek().is_some() {
            let deadline = tokio::time::Instant::now() + slow;
            loop {
                let mut pushed = false;
                {
                    let mut st = self.0.lock();
                    if st.reader_gone {
                        return Err(Closed);
                    }
                    while let Some(frame) = frames.next_if(|f| st.fits(f)) {
                        st.queued += frame.len();
                        st.frames.push_back(frame);
                        pushed = true;
                    }
                }
                if pushed {
                    self.0.readable.notify_one();
                    break;
                }
                // Full. A frame taken after the check above leaves a permit in `writable`
                // (notify_one stores one when nobody waits), so this wait cannot miss it.
                if tokio::time::timeout_at(deadline, self.0.writable.notified())
                    .await
                    .is_err()
                {
                    let mut st = self.0.lock();
                    st.aborted = true;
                    st.frames = VecDeque::new();
                    st.queued = 0;
                    drop(st);
                    self.0.readable.notify_one();
                    return Err(Closed);
                }
            }
        }
        Ok(())
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
    /// The next frame; `None` once the writer is gone and every frame was taken, or at
    /// once when the writer dropped this reader as too slow ([`Self::aborted`]).
    pub async fn recv(&self) -> Option<Bytes> {
        loop {
            {
                let mut st = self.0.lock();
                if let Some(frame) = st.frames.pop_front() {
                    st.queued -= frame.len();
                    if st.frames.is_empty() && st.frames.capacity() > 4 {
                        // Give the memory of a burst back: an idle stream holds no more
                        // than the few slots its usual single frame needs.
                        st.frames = VecDeque::new();
                    }
                    drop(st);
                    self.0.writable.notify_one();
                    return Some(frame);
                }
                if st.writer_gone || st.aborted {
                    return None;
                }
            }
            self.0.readable.notified().await;
        }
    }
}

impl Reader {
    /// Whether the writer dropped this reader as too slow (the stream did not end).
    pub fn aborted(&self) -> bool {
        self.0.lock().aborted
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
        // What was queued is freed, and the reader learns it was cut off.
        assert_eq!(r.recv().await, None);
        assert!(r.aborted());
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
    async fn the_budget_is_in_bytes_and_a_bigger_frame_goes_alone() {
        let (w, r) = pipe(10);
        let big = Bytes::from(vec![b'x'; 100]);
        w.send_timeout(big.clone(), SLOW).await.unwrap();
        // Not even one byte more while the big frame waits.
        let waits = tokio::time::timeout(SLOW / 2, w.send_timeout(Bytes::from("a"), SLOW));
        assert!(waits.await.is_err(), "a byte over the budget was queued");
        assert_eq!(r.recv().await, Some(big));
        // Ten bytes in three frames fit; the eleventh byte waits for the reader.
        let frames = ["abcd", "efgh", "ij"].map(Bytes::from);
        w.send_all(frames.clone(), SLOW).await.unwrap();
        let waits = tokio::time::timeout(SLOW / 2, w.send_timeout(Bytes::from("k"), SLOW));
        assert!(waits.await.is_err(), "a byte over the budget was queued");
        for f in frames {
            assert_eq!(r.recv().await, Some(f));
        }
    }

    #[tokio::test]
    async fn send_all_waits_for_room_between_groups() {
        let (w, r) = pipe(4);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(f) = r.recv().await {
                got.push(f);
            }
            got
        });
        let frames: Vec<Bytes> = (0..50u32).map(|i| Bytes::from(format!("{i:03}"))).collect();
        w.send_all(frames.clone(), SLOW).await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), frames);
    }

    #[tokio::test]
    async fn a_gone_reader_fails_the_next_send_at_once() {
        let (w, r) = pipe(4);
        drop(r);
        assert_eq!(w.send_timeout(Bytes::from("a"), SLOW).await, Err(Closed));
    }
}
