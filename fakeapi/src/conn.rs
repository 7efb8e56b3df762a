//! Connections that report when their bytes reach the socket.
//!
//! A handler that returns a response, or a watch stream that yields a frame,
//! has only handed bytes to hyper; hyper writes them on its connection task a
//! moment later. Counting them as done at hand-over leaves a gap in which the
//! API looks idle, the client's socket is still empty, and a broker asking
//! "is the scheduler quiescent?" would get a wrong yes. So every accepted
//! connection carries a [`ConnTrack`]: responses and watch events handed over
//! are parked there and reported to [`Activity`] only when hyper flushes the
//! connection (`poll_flush` on the socket, which hyper calls after every
//! buffered byte has been written), or dropped when the connection closes.

use crate::activity::Activity;
use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What one connection has handed to hyper and not yet flushed.
#[derive(Debug)]
pub(crate) struct ConnTrack {
    activity: Arc<Activity>,
    responses: AtomicUsize,
    events: AtomicUsize,
}

impl ConnTrack {
    fn new(activity: Arc<Activity>) -> Self {
        ConnTrack {
            activity,
            responses: AtomicUsize::new(0),
            events: AtomicUsize::new(0),
        }
    }

    /// A response (or a watch's headers) was handed to hyper.
    pub(crate) fn response_handed(&self) {
        self.responses.fetch_add(1, Ordering::SeqCst);
    }

    /// `n` watch events were handed to hyper in one frame.
    pub(crate) fn events_handed(&self, n: usize) {
        self.events.fetch_add(n, Ordering::SeqCst);
    }

    /// Everything handed so far is in the socket (or lost with it).
    fn settle(&self, written: bool) {
        let e = self.events.swap(0, Ordering::SeqCst);
        self.activity.events_done(e, written);
        for _ in 0..self.responses.swap(0, Ordering::SeqCst) {
            self.activity.request_finished();
        }
    }
}

/// The connection a request came in on (an axum `ConnectInfo`).
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    pub(crate) track: Arc<ConnTrack>,
    #[allow(dead_code)]
    pub(crate) peer: SocketAddr,
}

/// A TCP listener whose connections carry a [`ConnTrack`].
pub(crate) struct TrackedListener {
    pub(crate) inner: TcpListener,
    pub(crate) activity: Arc<Activity>,
}

impl Listener for TrackedListener {
    type Io = TrackedIo;
    type Addr = ConnHandle;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            // Accepted and registered under the registry's lock: someone
            // looking at the accept queue and the open connections together
            // never misses a connection in between.
            let accepted = std::future::poll_fn(|cx| {
                let mut conns = self.activity.conns.lock();
                conns.listener = Some(self.inner.as_raw_fd());
                match self.inner.poll_accept(cx) {
                    Poll::Ready(Ok((stream, peer))) => {
                        let local = stream.local_addr().unwrap_or(peer);
                        let id = conns.opened(local, peer, stream.as_raw_fd());
                        Poll::Ready(Ok((stream, peer, id)))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await;
            match accepted {
                Ok((stream, peer, id)) => {
                    let _ = stream.set_nodelay(true);
                    let track = Arc::new(ConnTrack::new(self.activity.clone()));
                    let io = TrackedIo {
                        inner: stream,
                        track: track.clone(),
                        id,
                    };
                    return (io, ConnHandle { track, peer });
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait, as axum does.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        let addr = self.inner.local_addr()?;
        Ok(ConnHandle {
            track: Arc::new(ConnTrack::new(self.activity.clone())),
            peer: addr,
        })
    }
}

impl Connected<IncomingStream<'_, TrackedListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, TrackedListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A socket that settles its connection's counts on every completed flush.
pub(crate) struct TrackedIo {
    inner: TcpStream,
    track: Arc<ConnTrack>,
    /// Entry in the activity's connection registry.
    id: u64,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            self.track.settle(true);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Drop for TrackedIo {
    fn drop(&mut self) {
        // Out of the registry before the socket closes (the field drops
        // after this body), so the registry never names a closed fd.
        self.track.activity.connection_closed(self.id);
        self.track.settle(false);
    }
}

impl Drop for TrackedListener {
    fn drop(&mut self) {
        // Out of the registry before the listener's socket closes.
        self.activity.conns.lock().listener = None;
    }
}
