//! The web console at `/ui/`: a static single-page client of the run API (`/v1`).
//!
//! Every asset is compiled into the binary (`include_bytes!`), so the console works with no
//! network and no files next to the daemon, and a deployed binary always serves the console
//! of its own version. The files themselves need no auth: they hold no data. The page asks
//! for the API token (or takes it from a `#token=` fragment, which browsers never send to a
//! server) and calls `/v1` with `fetch` and an `Authorization` header.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

/// Where the console is mounted.
pub const PREFIX: &str = "/ui/";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("sse.js", JS),
    asset!("fork.js", JS),
    asset!("follow.js", JS),
    asset!("run.js", JS),
    asset!("dom.js", JS),
    asset!("approvals.js", JS),
    asset!("questions.js", JS),
    asset!("sessions.js", JS),
    asset!("find.js", JS),
    asset!("usage.js", JS),
    asset!("webhooks.js", JS),
    asset!("see.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
];

/// The page may load only its own files and talk only to its own origin: a console that
/// holds an API token must not run or fetch anything else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console's routes, to merge into the daemon's router (any state).
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/ui",
            get(|| async { Redirect::permanent(PREFIX) }).fallback(wrong_method),
        )
        .route(
            "/ui/",
            get(|headers: HeaderMap| async move { serve("index.html", &headers) })
                .fallback(wrong_method),
        )
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>, headers: HeaderMap| async move {
                serve(&file, &headers)
            })
            .fallback(wrong_method),
        )
}

/// Its own answer, not the Connect services' ("use POST" would be wrong here).
async fn wrong_method(method: axum::http::Method) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [
            (header::ALLOW, "GET, HEAD"),
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
        ],
        format!("{method} is not supported: the console's files are read with GET\n"),
    )
        .into_response()
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!(
                "no console file {name:?}: the console is at {PREFIX} (files: {})\n",
                ASSETS.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
            ),
        )
            .into_response();
    };
    // The content's checksum as a validator: a reload after an upgrade gets the new files,
    // an unchanged file costs a 304.
    let etag = format!("\"{:08x}\"", crc32fast::hash(asset.body));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex etag"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_no_inline_script_the_csp_would_block() {
        // script-src 'self' without 'unsafe-inline': an inline script or handler would not
        // run, so none may exist.
        let html = String::from_utf8_lossy(ASSETS[0].body).to_lowercase();
        assert_eq!(ASSETS[0].name, "index.html");
        for tag in html.split("<script").skip(1) {
            let open = &tag[..tag.find('>').expect("a closed <script> tag")];
            assert!(open.contains("src="), "inline <script{open}>");
            assert!(tag[open.len() + 1..].trim_start().starts_with("</script>"));
        }
        for attr in [
            " onclick=",
            " onload=",
            " onerror=",
            " onsubmit=",
            "javascript:",
        ] {
            assert!(!html.contains(attr), "index.html has {attr}");
        }
        for asset in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let js = String::from_utf8_lossy(asset.body);
            for bad in [
                "eval(",
                "new Function(",
                ".innerHTML =",
                "setAttribute(\"on",
            ] {
                assert!(!js.contains(bad), "{} uses {bad}", asset.name);
            }
        }
        assert!(CSP.contains("default-src 'none'") && CSP.contains("script-src 'self'"));
        assert!(!CSP.contains("unsafe-inline") && !CSP.contains("unsafe-eval"));
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        // A file referenced by the HTML or imported by a module but missing from ASSETS
        // would be a 404 only a browser notices.
        let names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        for asset in ASSETS {
            let text = String::from_utf8_lossy(asset.body);
            for piece in text.split(['"', '\'']) {
                if let Some(file) = piece.strip_prefix("./") {
                    if file.ends_with(".js") || file.ends_with(".css") || file.ends_with(".svg") {
                        assert!(
                            names.contains(&file),
                            "{} refers to {file}, which is not embedded",
                            asset.name
                        );
                    }
                }
            }
        }
    }
}
