//! The driver's side of the callback streams: each open stream's channel,
//! and the sending of a [`Ready`](crate::state::Ready)'s messages.
//!
//! Each stream is bounded: it holds the callbacks replayed when it opened
//! plus [`STREAM_BUFFER_CALLBACKS`] more. A client that lets more pile up
//! unread (connected but not reading) has fallen behind: its stream ends
//! with `RESOURCE_EXHAUSTED` after the callbacks already buffered, and the
//! client counts as having no stream — its declarations are paused, as for
//! a client that went away — until it subscribes again, which re-sends
//! every unacknowledged callback. So one slow client holds at most one
//! stream's worth of callbacks in memory, beyond its unacknowledged
//! deliveries.

use crate::state::{Outgoing, StreamId, StreamMessage};
use dingo_proto::planner as pb;
use futures::{Stream, StreamExt};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// Callbacks a stream buffers for its client beyond those replayed when it
/// opened: far more than one quantum dispatches to a client that keeps up.
pub(crate) const STREAM_BUFFER_CALLBACKS: usize = 1024;

/// A stream as the gRPC `Subscribe` call returns it.
pub(crate) type CallbackStream = Pin<Box<dyn Stream<Item = Result<pb::Callback, Status>> + Send>>;

/// The sending half of one open stream.
pub(crate) struct Sink {
    tx: mpsc::Sender<pb::Callback>,
    /// How the stream ends once its buffer is drained; a plain end if unset.
    end: Arc<OnceLock<Status>>,
}

/// Runs a closure when dropped: tells the driver that a client's side of
/// a stream is gone.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Opens a stream with room for `room` callbacks; `on_drop` runs once the
/// client's side is done with the channel (the client went away, or the
/// stream ended).
pub(crate) fn open(room: usize, on_drop: impl FnOnce() + Send + 'static) -> (Sink, CallbackStream) {
    let (tx, rx) = mpsc::channel(room.max(1));
    let end = Arc::new(OnceLock::new());
    let guard = OnDrop(Some(on_drop));
    let callbacks = ReceiverStream::new(rx).map(move |cb| {
        let _owned_by_the_stream = &guard;
        Ok(cb)
    });
    let ending = end.clone();
    let last =
        futures::stream::once(async move { ending.get().cloned() }).filter_map(|end| async move { end.map(Err) });
    (Sink { tx, end }, Box::pin(callbacks.chain(last)))
}

/// The open streams, by id.
#[derive(Default)]
pub(crate) struct Outbox {
    open: HashMap<StreamId, Sink>,
}

impl Outbox {
    pub(crate) fn insert(&mut self, stream: StreamId, sink: Sink) {
        self.open.insert(stream, sink);
    }

    /// Forgets a stream whose client went away.
    pub(crate) fn remove(&mut self, stream: StreamId) {
        self.open.remove(&stream);
    }

    /// Ends every stream with a plain end (at shutdown, so the server can
    /// drain).
    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }

    /// Sends each message to its stream. Returns the streams that ended,
    /// each with the deliveries whose callbacks it did not take.
    pub(crate) fn send(&mut self, messages: Vec<StreamMessage>) -> HashMap<StreamId, Vec<u64>> {
        let mut ended: HashMap<StreamId, Vec<u64>> = HashMap::new();
        for StreamMessage { stream, item } in messages {
            let Some(sink) = self.open.get(&stream) else {
                if let Outgoing::Callback(cb) = item {
                    ended.entry(stream).or_default().push(cb.delivery);
                }
                continue;
            };
            match item {
                Outgoing::Replaced(why) => {
                    let _ = sink.end.set(Status::aborted(why));
                    self.open.remove(&stream);
                    ended.entry(stream).or_default();
                }
                Outgoing::Callback(cb) => match sink.tx.try_send(cb) {
                    Ok(()) => {}
                    Err(TrySendError::Full(cb)) => {
                        let _ = sink.end.set(Status::resource_exhausted(format!(
                            "this client fell behind: more than {STREAM_BUFFER_CALLBACKS} callbacks unread; \
                             subscribe again to get every unacknowledged one"
                        )));
                        self.open.remove(&stream);
                        ended.entry(stream).or_default().push(cb.delivery);
                    }
                    Err(TrySendError::Closed(cb)) => {
                        self.open.remove(&stream);
                        ended.entry(stream).or_default().push(cb.delivery);
                    }
                },
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn callback(delivery: u64) -> StreamMessage {
        StreamMessage { stream: StreamId(1), item: Outgoing::Callback(pb::Callback { delivery, ..Default::default() }) }
    }

    #[tokio::test]
    async fn a_client_that_falls_behind_loses_its_stream_with_resource_exhausted() {
        let mut outbox = Outbox::default();
        let (sink, mut stream) = open(2, || {});
        outbox.insert(StreamId(1), sink);
        assert!(outbox.send(vec![callback(1), callback(2)]).is_empty(), "two fit");
        let ended = outbox.send(vec![callback(3), callback(4)]);
        assert_eq!(
            ended,
            HashMap::from([(StreamId(1), vec![3, 4])]),
            "the third overflows; the fourth finds no stream"
        );
        assert!(outbox.open.is_empty());
        let mut got = Vec::new();
        while let Some(item) = stream.next().await {
            got.push(item.map(|cb| cb.delivery).map_err(|s| s.code()));
        }
        assert_eq!(got, vec![Ok(1), Ok(2), Err(tonic::Code::ResourceExhausted)], "what was buffered, then the end");
    }

    #[tokio::test]
    async fn a_replaced_stream_ends_with_aborted() {
        let mut outbox = Outbox::default();
        let (sink, mut stream) = open(4, || {});
        outbox.insert(StreamId(1), sink);
        let replaced = StreamMessage { stream: StreamId(1), item: Outgoing::Replaced("newer one".into()) };
        assert_eq!(outbox.send(vec![callback(7), replaced]), HashMap::from([(StreamId(1), vec![])]));
        assert_eq!(stream.next().await.unwrap().unwrap().delivery, 7);
        let end = stream.next().await.unwrap().unwrap_err();
        assert_eq!((end.code(), end.message()), (tonic::Code::Aborted, "newer one"));
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn the_driver_hears_when_a_client_goes_away() {
        let gone = Arc::new(AtomicBool::new(false));
        let flag = gone.clone();
        let (sink, stream) = open(4, move || flag.store(true, Ordering::SeqCst));
        let mut outbox = Outbox::default();
        outbox.insert(StreamId(1), sink);
        assert!(outbox.send(vec![callback(1)]).is_empty());
        assert!(!gone.load(Ordering::SeqCst));
        drop(stream);
        assert!(gone.load(Ordering::SeqCst));
        assert_eq!(outbox.send(vec![callback(2)]), HashMap::from([(StreamId(1), vec![2])]), "and no send reaches it");
    }
}
