//! The console's files at `/ui/`: served from the binary without auth, with headers that keep
//! a page holding an API token to its own origin; unknown files and methods are clear errors.

use crate::helpers::{Framing, TestApp};

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> crate::helpers::Resp {
    app.request("GET", path, headers, "", Framing::ContentLength)
        .await
}

#[tokio::test]
async fn the_console_is_served_from_the_binary_without_auth() {
    let app = TestApp::spawn().await;
    let page = get(&app, "/ui/", &[]).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.content_type, "text/html; charset=utf-8");
    assert!(page
        .text()
        .contains(r#"<script type="module" src="./app.js">"#));
    for (file, ty) in [
        ("app.js", "text/javascript"),
        ("follow.js", "text/javascript"),
        ("style.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let r = get(&app, &format!("/ui/{file}"), &[]).await;
        assert_eq!(r.status, 200, "{file}");
        assert!(r.content_type.starts_with(ty), "{file}: {}", r.content_type);
        assert!(!r.body.is_empty());
    }
    // No token is needed, and the page never holds data: the API is what needs the token.
    let api = get(&app, "/v1/sessions", &[]).await;
    assert_eq!(api.status, 401);
}

#[tokio::test]
async fn headers_keep_the_page_to_its_origin_and_revalidate_with_an_etag() {
    let app = TestApp::spawn().await;
    let resp = {
        let stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = http::Request::get("/ui/app.js")
            .header("host", app.addr.to_string())
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        sender.send_request(req).await.unwrap()
    };
    let h = resp.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"),
        "{csp}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-cache");
    let etag = h["etag"].to_str().unwrap().to_string();
    let again = get(&app, "/ui/app.js", &[("if-none-match", &etag)]).await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    let other = get(&app, "/ui/app.js", &[("if-none-match", "\"0\"")]).await;
    assert_eq!(other.status, 200);
}

#[tokio::test]
async fn unknown_files_and_methods_are_clear_errors() {
    let app = TestApp::spawn().await;
    let r = get(&app, "/ui/nope.js", &[]).await;
    assert_eq!(r.status, 404);
    assert!(
        r.text().contains("no console file \"nope.js\""),
        "{}",
        r.text()
    );
    // A dot-segment never climbs out of the console into the run API, even with a token
    // that would read the sessions there: 404, not the sessions list (nor a redirect).
    let auth = format!("Bearer {}", app.api_token);
    let r = get(&app, "/ui/../v1/sessions", &[("authorization", &auth)]).await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert!(!r.text().contains("sessions\":["), "{}", r.text());
    let r = get(&app, "/ui", &[]).await;
    assert_eq!(r.status, 308, "/ui redirects to /ui/");
    let r = app
        .request("POST", "/ui/app.js", &[], "x", Framing::ContentLength)
        .await;
    assert_eq!(r.status, 405);
    assert!(r.text().contains("read with GET"), "{}", r.text());
}
