//! A simulated task client: what it has received and not yet
//! acknowledged, and what it remembers. A crash forgets all of it, as a
//! restarted task process would; the planner must re-send what is owed.

use dingo_proto::planner as pb;

pub(crate) struct Client {
    pub(crate) name: String,
    /// The callback stream it holds open.
    pub(crate) stream: Option<u64>,
    /// Callbacks received and not yet looked at.
    pub(crate) inbox: Vec<pb::Callback>,
    /// Deliveries being processed: `(delivery, may ack from ms)`.
    pub(crate) held: Vec<(u64, u64)>,
    /// Deliveries whose ack succeeded (acking them again must too).
    pub(crate) acked: Vec<u64>,
    /// Deliveries in an ack whose answer has not come (or never will:
    /// the planner crashed); acked again later.
    pub(crate) unsure: Vec<u64>,
    /// Its declarations, as far as it heard.
    pub(crate) decls: Vec<u64>,
}

impl Client {
    pub(crate) fn new(name: &str) -> Client {
        Client {
            name: name.to_string(),
            stream: None,
            inbox: Vec::new(),
            held: Vec::new(),
            acked: Vec::new(),
            unsure: Vec::new(),
            decls: Vec::new(),
        }
    }

    /// The process dies and starts afresh; returns the stream it held.
    pub(crate) fn crash(&mut self) -> Option<u64> {
        let name = std::mem::take(&mut self.name);
        *self = Client::new(&name);
        self.stream.take()
    }

    /// Starts processing what arrived; each delivery may be acknowledged
    /// `late_ms` from now at the earliest. A re-sent delivery already in
    /// hand is not taken twice.
    pub(crate) fn take_inbox(&mut self, now_ms: u64, mut late_ms: impl FnMut() -> u64) {
        for cb in std::mem::take(&mut self.inbox) {
            if !self.held.iter().any(|&(d, _)| d == cb.delivery) && !self.unsure.contains(&cb.delivery) {
                self.held.push((cb.delivery, now_ms + late_ms()));
            }
        }
    }

    /// Deliveries it has finished processing by `now_ms`.
    pub(crate) fn ackable(&self, now_ms: u64) -> Vec<u64> {
        self.held.iter().filter(|&&(_, at)| at <= now_ms).map(|&(d, _)| d).collect()
    }
}
