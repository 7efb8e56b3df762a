//! The link to Batsim: a ZeroMQ REP socket on its own thread.
//!
//! Batsim is the REQ side and connects; the broker binds (default
//! `tcp://127.0.0.1:28000`) and answers every message exactly once,
//! SIMULATION_ENDS included. The socket lives on a dedicated OS thread so a
//! blocking `recv` never stalls the async runtime; messages cross to the
//! broker through channels. Every reply is checked against Batsim's ordering
//! rules before it is sent: a violation is a bug in the broker, reported as
//! an error instead of being sent to a simulator that would abort on it.
//!
//! The same [`BatsimLink`] can be paired in-process with the built-in
//! stand-in ([`BatsimLink::in_process`]), skipping ZeroMQ and JSON text.

use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::protocol::{Message, OrderError};

/// Default endpoint, as in Batsim.
pub const DEFAULT_ENDPOINT: &str = "tcp://127.0.0.1:28000";

/// What can go wrong on the link.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("cannot bind the Batsim socket on {endpoint}: {error}")]
    Bind {
        endpoint: String,
        /// Said in the message, not a `source()`: each cause once.
        error: zmq::Error,
    },
    #[error("ZeroMQ error: {0}")]
    Zmq(#[from] zmq::Error),
    #[error("Batsim sent a message that is not valid protocol JSON ({error}): {excerpt}")]
    Garbage { error: String, excerpt: String },
    #[error("refusing to send an out-of-order reply: {0}")]
    Order(#[from] OrderError),
    #[error("reply sent with no message to answer")]
    NoPendingMessage,
    #[error("the link is closed")]
    Closed,
}

/// A message from Batsim and its raw size.
#[derive(Debug)]
pub struct Incoming {
    pub message: Message,
    pub bytes: usize,
}

/// The broker's end of the link.
pub struct BatsimLink {
    incoming: mpsc::Receiver<Result<Incoming, LinkError>>,
    replies: std_mpsc::Sender<Message>,
    pending_now: Option<f64>,
    thread: Option<JoinHandle<()>>,
    /// Messages received and sent.
    pub exchanged: u64,
}

/// The Batsim side of an in-process link (used by the built-in stand-in).
pub struct InProcessBatsim {
    to_broker: mpsc::Sender<Result<Incoming, LinkError>>,
    from_broker: std_mpsc::Receiver<Message>,
}

impl crate::standin::DecisionProcess for InProcessBatsim {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        self.to_broker
            .blocking_send(Ok(Incoming {
                message: msg.clone(),
                bytes: 0,
            }))
            .map_err(|_| anyhow::anyhow!("the broker hung up"))?;
        self.from_broker
            .recv()
            .map_err(|_| anyhow::anyhow!("the broker hung up without replying"))
    }
}

impl BatsimLink {
    /// Binds a REP socket on `endpoint` and starts its thread.
    pub fn bind(endpoint: &str) -> Result<Self, LinkError> {
        let ctx = zmq::Context::new();
        let socket = ctx.socket(zmq::REP)?;
        socket.set_linger(0)?;
        socket.bind(endpoint).map_err(|error| LinkError::Bind {
            endpoint: endpoint.to_string(),
            error,
        })?;
        let (in_tx, in_rx) = mpsc::channel(1);
        let (rep_tx, rep_rx) = std_mpsc::channel::<Message>();
        let thread = std::thread::Builder::new()
            .name("batsim-link".into())
            .spawn(move || serve(ctx, socket, in_tx, rep_rx))
            .expect("spawning a thread");
        Ok(Self {
            incoming: in_rx,
            replies: rep_tx,
            pending_now: None,
            thread: Some(thread),
            exchanged: 0,
        })
    }

    /// A link whose other end is an in-process Batsim (the stand-in).
    pub fn in_process() -> (Self, InProcessBatsim) {
        let (in_tx, in_rx) = mpsc::channel(1);
        let (rep_tx, rep_rx) = std_mpsc::channel::<Message>();
        (
            Self {
                incoming: in_rx,
                replies: rep_tx,
                pending_now: None,
                thread: None,
                exchanged: 0,
            },
            InProcessBatsim {
                to_broker: in_tx,
                from_broker: rep_rx,
            },
        )
    }

    /// The next message from Batsim; `None` when the peer is gone.
    pub async fn recv(&mut self) -> Option<Result<Message, LinkError>> {
        let item = self.incoming.recv().await?;
        Some(item.map(|inc| self.accepted(inc)))
    }

    /// Blocking variant of [`recv`](Self::recv), for non-async callers.
    pub fn recv_blocking(&mut self) -> Option<Result<Message, LinkError>> {
        let item = self.incoming.blocking_recv()?;
        Some(item.map(|inc| self.accepted(inc)))
    }

    fn accepted(&mut self, inc: Incoming) -> Message {
        self.pending_now = Some(inc.message.now);
        self.exchanged += 1;
        for ev in &inc.message.events {
            if let crate::EventData::Unknown { kind, .. } = &ev.data {
                tracing::warn!(kind = %kind, "unknown Batsim event kept and ignored");
            }
        }
        inc.message
    }

    /// Answers the message last received. The reply is checked against
    /// Batsim's ordering rules first.
    pub fn reply(&mut self, msg: Message) -> Result<(), LinkError> {
        let request_now = self.pending_now.ok_or(LinkError::NoPendingMessage)?;
        msg.check_reply_order(request_now)?;
        self.pending_now = None;
        self.exchanged += 1;
        self.replies.send(msg).map_err(|_| LinkError::Closed)
    }
}

impl Drop for BatsimLink {
    fn drop(&mut self) {
        // Closing the reply channel ends the thread's wait.
        self.incoming.close();
        let (tx, _) = std_mpsc::channel();
        self.replies = tx;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    _ctx: zmq::Context,
    socket: zmq::Socket,
    to_broker: mpsc::Sender<Result<Incoming, LinkError>>,
    replies: std_mpsc::Receiver<Message>,
) {
    loop {
        // Poll so that the thread notices when the broker is gone.
        match socket.poll(zmq::POLLIN, 200) {
            Ok(0) => {
                if to_broker.is_closed() {
                    return;
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => {
                let _ = to_broker.blocking_send(Err(e.into()));
                return;
            }
        }
        let bytes = match socket.recv_bytes(0) {
            Ok(b) => b,
            Err(e) => {
                let _ = to_broker.blocking_send(Err(e.into()));
                return;
            }
        };
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|e| e.to_string())
            .and_then(|t| Message::from_json(t).map_err(|e| e.to_string()));
        let message = match parsed {
            Ok(m) => m,
            Err(error) => {
                let excerpt: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
                let _ = to_broker.blocking_send(Err(LinkError::Garbage { error, excerpt }));
                return;
            }
        };
        let size = bytes.len();
        if to_broker
            .blocking_send(Ok(Incoming {
                message,
                bytes: size,
            }))
            .is_err()
        {
            return;
        }
        let reply = loop {
            match replies.recv_timeout(Duration::from_millis(200)) {
                Ok(r) => break r,
                Err(std_mpsc::RecvTimeoutError::Timeout) => {
                    if to_broker.is_closed() {
                        return;
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            }
        };
        if let Err(e) = socket.send(reply.to_json().as_bytes(), 0) {
            let _ = to_broker.blocking_send(Err(e.into()));
            return;
        }
    }
}
