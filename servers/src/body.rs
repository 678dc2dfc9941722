//! The response body as it goes on the wire: whole, in two halves with a pause between them
//! (`--slow-body`), or cut short with a stream error (close-mid-body over HTTP/2).
//!
//! Handlers build complete bodies ([`crate::reply::Reply`]); the server picks the shape here
//! after the handler is done. Every shape reports its full length as an exact size hint, so
//! hyper still sends `Content-Length` and a client can tell a short body from a complete one.
//! This module does not decide which shape a response gets.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

type Delay = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a cut HTTP/2 body waits before failing. Resetting a stream drops whatever of it
/// h2 has not written yet, headers included, so the first half needs a moment to go out:
/// the connection task writes queued frames within microseconds unless the machine is
/// swamped, and a client that was going to wait for the rest does not notice 20 ms.
const CUT_FLUSH_DELAY: Duration = Duration::from_millis(20);

/// The body type every response of the server has.
pub(crate) struct ResponseBody {
    /// Sent first, as soon as hyper asks.
    first: Option<Bytes>,
    /// What comes after `first`.
    then: Then,
    /// What is left of the length announced in `Content-Length`: hyper reads it before the
    /// first frame, and a cut body keeps promising bytes it will never send.
    promised_bytes: u64,
}

enum Then {
    Nothing,
    /// Wait, then end with `last`. The timer starts when `first` has been handed over, so the
    /// pause counts from the first half, not from when the response was built.
    Pause {
        delay: Duration,
        timer: Option<Delay>,
        last: Last,
    },
}

enum Last {
    Data(Bytes),
    /// Fail the stream, so hyper resets it (HTTP/2) instead of finishing it.
    Fail,
}

impl ResponseBody {
    pub(crate) fn whole(bytes: Bytes) -> Self {
        Self {
            promised_bytes: bytes.len() as u64,
            first: non_empty(bytes),
            then: Then::Nothing,
        }
    }

    /// The first half at once and the rest `delay` later. An empty body has nothing to hold
    /// back and goes out whole.
    pub(crate) fn split(mut first: Bytes, delay: Duration) -> Self {
        if first.is_empty() {
            return Self::whole(first);
        }
        let promised_bytes = first.len() as u64;
        let rest = first.split_off(first.len() / 2);
        Self {
            promised_bytes,
            first: non_empty(first),
            then: Then::Pause {
                delay,
                timer: None,
                last: Last::Data(rest),
            },
        }
    }

    /// At most the first half, then an error. The length stays that of the whole body, so
    /// the client was promised more than it gets.
    pub(crate) fn cut(mut first: Bytes) -> Self {
        let promised_bytes = first.len() as u64;
        first.truncate(first.len() / 2);
        Self {
            promised_bytes,
            first: non_empty(first),
            then: Then::Pause {
                delay: CUT_FLUSH_DELAY,
                timer: None,
                last: Last::Fail,
            },
        }
    }
}

fn non_empty(bytes: Bytes) -> Option<Bytes> {
    (!bytes.is_empty()).then_some(bytes)
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            this.promised_bytes = this.promised_bytes.saturating_sub(first.len() as u64);
            return Poll::Ready(Some(Ok(Frame::data(first))));
        }
        let Then::Pause { delay, timer, .. } = &mut this.then else {
            return Poll::Ready(None);
        };
        let timer = timer.get_or_insert_with(|| Box::pin(crate::delay::sleep(*delay)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let Then::Pause { last, .. } = std::mem::replace(&mut this.then, Then::Nothing) else {
            unreachable!("matched just above");
        };
        this.promised_bytes = 0;
        Poll::Ready(Some(match last {
            Last::Data(rest) => Ok(Frame::data(rest)),
            Last::Fail => Err(io::Error::other(
                "response cut short on purpose (--close-mid-body-rate)",
            )),
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && matches!(self.then, Then::Nothing)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.then {
            // An empty body cut short has no length that could be "more than it gets": left
            // unknown, the stream error is what tells the client.
            Then::Pause {
                last: Last::Fail, ..
            } if self.promised_bytes == 0 => SizeHint::default(),
            _ => SizeHint::with_exact(self.promised_bytes),
        }
    }
}
