//! Whether a request's client is still there: the HTTP server goes on
//! polling a handler whose client closed its connection (it finds out only
//! when it writes the answer), so a costly read (a filtered report, a
//! funnel) would compute for nobody. Each connection's socket is noted
//! when it is accepted ([`on_connect`]); [`watch_client`] gives the
//! request's handling a probe of it, which `reports::costly` asks while a
//! read runs and stops the read when the client has hung up.

use actix_web::body::MessageBody;
use actix_web::dev::{Extensions, ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use std::any::Any;
use std::sync::Arc;

/// The connection's socket, as the operating system numbers it.
#[derive(Debug, Clone, Copy)]
struct Socket(i32);

/// `HttpServer::on_connect`: notes a plain TCP connection's socket.
pub fn on_connect(connection: &dyn Any, data: &mut Extensions) {
    #[cfg(unix)]
    if let Some(stream) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() {
        use std::os::fd::AsRawFd;
        data.insert(Socket(stream.as_raw_fd()));
    }
}

/// Middleware: the request is handled with a probe of whether its client
/// has left. The pixel and the trackers' endpoints never start a costly
/// read, and are left as they are.
pub async fn watch_client(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let socket = req.conn_data::<Socket>().copied();
    let costly = req.path().starts_with("/sites/")
        || req.path().starts_with("/api/v1/")
        || req.path().starts_with("/share/");
    match socket {
        Some(Socket(fd)) if costly => {
            let left: crate::reports::costly::ClientLeft = Arc::new(move || hung_up(fd));
            crate::reports::costly::for_client(left, next.call(req)).await
        }
        _ => next.call(req).await,
    }
}

/// Whether the peer of socket `fd` has closed its side (or the connection
/// failed). Asked only while the request's handling is polled, which the
/// connection outlives, so `fd` is still this connection's socket. An HTTP
/// client never half-closes while it waits for its answer.
#[cfg(target_os = "linux")]
fn hung_up(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one pollfd of ours, no wait; `fd` is open (see above).
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(not(target_os = "linux"))]
fn hung_up(_: i32) -> bool {
    false
}
