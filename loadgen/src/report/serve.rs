//! The accept loop of the run's own HTTP endpoints (`--metrics-addr`, `--dashboard`): each
//! connection served by hyper's HTTP/1.1 on its own task. A failed accept — out of file
//! descriptors (EMFILE) while the run holds a thousand connections, a connection reset
//! before it was accepted — ends neither the loop nor the endpoint: it waits a moment and
//! accepts again, as hyper's and axum's servers do. It holds at most [`MAX_CONNECTIONS`] at
//! a time (others wait in the listen queue): a page's visitors never take the file
//! descriptors the run's connections and segments need. It does not decide what is answered.

use std::convert::Infallible;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// How long to wait after a failed accept before the next (the failure, such as EMFILE,
/// lasts until some connection closes; retrying at once would spin).
pub const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// Connections served at once: a few browsers (two each: the page and its events) and a
/// scraper, well inside the spare files a run keeps beside its connections.
pub const MAX_CONNECTIONS: usize = 16;

/// Serves `listener` until the task is aborted, answering each request with `answer`.
pub async fn serve<F, B>(listener: tokio::net::TcpListener, answer: F)
where
    F: Fn(Request<Incoming>) -> Response<B> + Clone + Send + Sync + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let open = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = open.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = answer(request);
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}
