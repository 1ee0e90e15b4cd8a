//! The null server: HTTP/1.1 keep-alive, `TCP_NODELAY`, reads each request body and answers
//! `{}` without looking at it. What it reaches is the ceiling of HTTP on this machine's
//! loopback, the yardstick every callbackd figure is divided by.

use std::convert::Infallible;
use std::io::{BufRead, Write};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Serves on a free loopback port until stdin closes (the bench exiting closes it); prints
/// `null-server ready http://127.0.0.1:PORT/` once listening. The runtime is tokio's default
/// multi-threaded one, as callbackd's.
pub fn run() -> anyhow::Result<()> {
    // Exit when the parent goes away, whatever happens to it.
    std::thread::spawn(|| {
        let mut sink = String::new();
        while std::io::stdin().lock().read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let mut out = std::io::stdout().lock();
        writeln!(out, "null-server ready http://127.0.0.1:{port}/")?;
        out.flush()?;
        drop(out);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await;
            });
        }
    })
}

async fn answer(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read (and drop) the body, as any server must before it can answer on a keep-alive
    // connection; never parse it.
    let _ = req.into_body().collect().await;
    let mut resp = Response::new(Full::new(Bytes::from_static(b"{}")));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
