//! Which client has a callback stream open. The driver holds the streams
//! themselves; the state names each by a [`StreamId`] and hears from the
//! driver when one ends ([`State::close_stream`]).

use super::{Outgoing, Ready, State, StreamId, StreamMessage};
use crate::records::DeliveryState;

impl State {
    /// Whether `owner` has a callback stream open.
    pub(super) fn is_subscribed(&self, owner: &str) -> bool {
        self.subscribers.contains_key(owner)
    }

    /// Opens a callback stream for `owner`: the `Ready` sends it every
    /// dispatched but unacknowledged callback first (in delivery order;
    /// flagged as redelivery if a stream had it before), and new ones
    /// follow as they are dispatched. One stream per client: an open one is
    /// replaced and told so ([`Outgoing::Replaced`], not a plain end, which
    /// tells a client to subscribe again), so two processes sharing a token
    /// do not silently take turns at each other's callbacks.
    pub(crate) fn subscribe(&mut self, owner: &str) -> (StreamId, Ready) {
        let stream = StreamId(self.next_stream);
        self.next_stream += 1;
        let mut messages = Vec::new();
        if let Some(old) = self.subscribers.insert(owner.to_string(), stream) {
            let why = format!("client `{owner}` subscribed again; this stream was replaced by the newer one");
            messages.push(StreamMessage { stream: old, item: Outgoing::Replaced(why) });
        }
        for d in self.deliveries.values_mut().filter(|d| d.owner == owner && d.state == DeliveryState::Dispatched) {
            let callback = dingo_proto::planner::Callback { redelivery: d.streamed, ..d.callback.clone() };
            messages.push(StreamMessage { stream, item: Outgoing::Callback(callback) });
            self.metrics.redelivered += u64::from(d.streamed);
            d.streamed = true;
        }
        (stream, Ready { messages, ..Ready::default() })
    }

    /// The driver's news that `stream` ended (its client went away, fell
    /// behind, or was replaced) before it took the callbacks of deliveries
    /// `unsent`: its client has no stream from now on, unless it has opened
    /// a newer one, and those callbacks count as never seen.
    pub(crate) fn close_stream(&mut self, stream: StreamId, unsent: &[u64]) {
        self.subscribers.retain(|_, open| *open != stream);
        for id in unsent {
            if let Some(d) = self.deliveries.get_mut(id) {
                d.streamed = false;
            }
        }
    }
}
