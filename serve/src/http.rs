//! Connections: accepted, each served by hyper's HTTP/1.1 connection with the parser's
//! bounds set above the API's own ([`crate::limits`]), so that a request too large is
//! answered by the API in JSON rather than by the parser with an empty 431; and stopped
//! gracefully: the event streams end, the requests in progress are answered.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::limits::{PARSER_MAX_BUF, PARSER_MAX_HEADERS};

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` completes, then tells `stopping` (event
/// streams end on it) and waits for the connections to finish what they are answering.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    stopping: watch::Sender<bool>,
) -> std::io::Result<()> {
    // Every connection holds a receiver: the sender's `closed` is when the last has ended.
    let (open_tx, open_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let (socket, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or memory: the connections being served go on;
                    // accepting resumes once some have closed.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = socket.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stopping.subscribe();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_headers(PARSER_MAX_HEADERS)
                .max_buf_size(PARSER_MAX_BUF);
            let mut connection = pin!(builder.serve_connection(TokioIo::new(socket), service));
            tokio::select! {
                served = connection.as_mut() => {
                    if let Err(e) = served {
                        tracing::debug!("connection ended: {e}");
                    }
                }
                () = async { let _ = stop.wait_for(|stopping| *stopping).await; } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(open);
        });
    }
    drop(open_rx);
    stopping.send_replace(true);
    open_tx.closed().await;
    Ok(())
}
