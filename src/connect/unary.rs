//! Reading a Connect unary request (headers and body) and writing its successful response.

use std::io::Read;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::{Code, ConnectError};

/// The message encoding of a request, chosen by its `Content-Type`. The response uses the
/// same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// `application/json`: proto3 JSON. The bridge always uses this one.
    Json,
    /// `application/proto`: binary protobuf.
    Proto,
}

/// Bounds applied while reading a request body.
#[derive(Debug, Clone, Copy)]
pub struct UnaryLimits {
    /// Largest accepted body, both as sent and after gzip decompression.
    pub max_body_bytes: usize,
    /// How long the whole body may take to arrive once the headers are in.
    pub body_read_timeout: Duration,
}

/// A unary request that passed the protocol checks: its codec, its (decompressed) body and
/// the deadline the client asked for, if any.
#[derive(Debug)]
pub struct UnaryRequest {
    pub codec: Codec,
    pub body: Bytes,
    pub timeout: Option<Duration>,
}

/// Checks the Connect headers of a unary request and reads its body within `limits`.
///
/// Order: protocol version, content type, content encoding, timeout header, declared
/// length, then the body itself (chunked or not; hyper removes the framing).
pub async fn read_unary(
    headers: &HeaderMap,
    body: Body,
    limits: UnaryLimits,
) -> Result<UnaryRequest, ConnectError> {
    if let Some(v) = headers.get("connect-protocol-version") {
        if v.as_bytes() != b"1" {
            return Err(ConnectError::invalid_argument(format!(
                "unsupported Connect-Protocol-Version {:?}: this server speaks version 1",
                String::from_utf8_lossy(v.as_bytes())
            )));
        }
    }
    let codec = codec_of(headers)?;
    let gzip = match headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()) {
        None | Some(b"identity") => false,
        Some(b"gzip") => true,
        // 415 rather than the code's own 501: it is the client's choice of encoding that is
        // wrong, and RFC 9110 gives 415 for an unsupported content coding.
        Some(other) => {
            return Err(ConnectError::new(
                Code::Unimplemented,
                format!(
                    "unsupported Content-Encoding {:?}: send gzip or identity",
                    String::from_utf8_lossy(other)
                ),
            )
            .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE))
        }
    };
    let timeout = timeout_of(headers)?;
    if let Some(len) = headers.get(header::CONTENT_LENGTH) {
        let len: u64 = std::str::from_utf8(len.as_bytes())
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ConnectError::invalid_argument("invalid Content-Length header"))?;
        if len > limits.max_body_bytes as u64 {
            return Err(too_large(limits.max_body_bytes));
        }
    }

    let collect = Limited::new(body, limits.max_body_bytes).collect();
    let raw = match tokio::time::timeout(limits.body_read_timeout, collect).await {
        // 408 rather than the code's own 504: the daemon was waiting for the client.
        Err(_) => {
            return Err(ConnectError::new(
                Code::DeadlineExceeded,
                format!(
                    "request body not received within {} ms",
                    limits.body_read_timeout.as_millis()
                ),
            )
            .with_status(StatusCode::REQUEST_TIMEOUT))
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => return Err(too_large(limits.max_body_bytes)),
        Ok(Err(e)) => {
            return Err(ConnectError::invalid_argument(format!(
                "request body is incomplete or malformed: {e}"
            )))
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    let body = if gzip {
        gunzip(&raw, limits.max_body_bytes)?
    } else {
        raw
    };
    Ok(UnaryRequest {
        codec,
        body,
        timeout,
    })
}

/// A successful unary response carrying an encoded message.
pub fn unary_response(codec: Codec, body: impl Into<Body>) -> Response {
    let content_type = match codec {
        Codec::Json => "application/json",
        Codec::Proto => "application/proto",
    };
    let mut response = (StatusCode::OK, body.into()).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn codec_of(headers: &HeaderMap) -> Result<Codec, ConnectError> {
    let raw = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let mut parts = raw.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let params_ok = parts.all(|p| {
        let p = p.trim().to_ascii_lowercase().replace(' ', "");
        p.is_empty() || p == "charset=utf-8"
    });
    match essence.as_str() {
        "application/json" if params_ok => Ok(Codec::Json),
        "application/proto" if params_ok => Ok(Codec::Proto),
        _ => Err(ConnectError::new(
            Code::Unimplemented,
            if raw.is_empty() {
                "missing Content-Type: send application/json or application/proto".to_string()
            } else {
                format!(
                    "unsupported Content-Type {raw:?}: send application/json or application/proto"
                )
            },
        )
        .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE)),
    }
}

/// `connect-timeout-ms`: at most 10 ASCII digits (Connect spec).
fn timeout_of(headers: &HeaderMap) -> Result<Option<Duration>, ConnectError> {
    let Some(v) = headers.get("connect-timeout-ms") else {
        return Ok(None);
    };
    let bytes = v.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(ConnectError::invalid_argument(format!(
            "invalid connect-timeout-ms {:?}: expected 1 to 10 digits",
            String::from_utf8_lossy(bytes)
        )));
    }
    let ms: u64 = std::str::from_utf8(bytes)
        .expect("checked ASCII digits")
        .parse()
        .expect("checked at most 10 digits");
    Ok(Some(Duration::from_millis(ms)))
}

fn too_large(limit: usize) -> ConnectError {
    ConnectError::new(
        Code::ResourceExhausted,
        format!("request body exceeds the limit of {limit} bytes"),
    )
}

/// Decompresses a gzip body, refusing to produce more than `limit` bytes: the bound is on
/// the decompressed size, so a small bomb cannot balloon in memory.
fn gunzip(raw: &[u8], limit: usize) -> Result<Bytes, ConnectError> {
    let mut out = Vec::with_capacity(raw.len().saturating_mul(4).min(limit));
    let decoder = flate2::read::GzDecoder::new(raw);
    decoder
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ConnectError::invalid_argument(format!("invalid gzip request body: {e}")))?;
    if out.len() > limit {
        return Err(ConnectError::new(
            Code::ResourceExhausted,
            format!("decompressed request body exceeds the limit of {limit} bytes"),
        ));
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    const LIMITS: UnaryLimits = UnaryLimits {
        max_body_bytes: 1024,
        body_read_timeout: Duration::from_secs(5),
    };

    #[tokio::test]
    async fn json_with_charset_is_accepted() {
        let h = headers(&[("content-type", "application/json; charset=utf-8")]);
        let req = read_unary(&h, Body::from("{}"), LIMITS).await.unwrap();
        assert_eq!(req.codec, Codec::Json);
        assert_eq!(&req.body[..], b"{}");
    }

    #[tokio::test]
    async fn other_content_types_are_415_unimplemented() {
        for ct in ["text/plain", "application/json; charset=latin1", ""] {
            let h = headers(&[("content-type", ct)]);
            let err = read_unary(&h, Body::from("{}"), LIMITS).await.unwrap_err();
            assert_eq!(err.code, Code::Unimplemented, "{ct}");
            assert_eq!(err.http_status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        }
    }

    #[tokio::test]
    async fn protocol_version_other_than_1_is_rejected() {
        let h = headers(&[
            ("content-type", "application/json"),
            ("connect-protocol-version", "2"),
        ]);
        let err = read_unary(&h, Body::from("{}"), LIMITS).await.unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument);
        assert!(err.message.contains("Connect-Protocol-Version"));
    }

    #[tokio::test]
    async fn timeout_header_is_parsed_and_validated() {
        let h = headers(&[
            ("content-type", "application/json"),
            ("connect-timeout-ms", "250"),
        ]);
        let req = read_unary(&h, Body::from("{}"), LIMITS).await.unwrap();
        assert_eq!(req.timeout, Some(Duration::from_millis(250)));
        let h = headers(&[
            ("content-type", "application/json"),
            ("connect-timeout-ms", "12345678901"),
        ]);
        assert!(read_unary(&h, Body::from("{}"), LIMITS).await.is_err());
    }

    #[tokio::test]
    async fn a_stalled_body_is_deadline_exceeded_with_408() {
        let h = headers(&[("content-type", "application/json")]);
        let stalled = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
        let limits = UnaryLimits {
            body_read_timeout: Duration::from_millis(20),
            ..LIMITS
        };
        let err = read_unary(&h, Body::from_stream(stalled), limits)
            .await
            .unwrap_err();
        assert_eq!(err.code, Code::DeadlineExceeded);
        assert_eq!(err.http_status(), StatusCode::REQUEST_TIMEOUT);
    }

    #[tokio::test]
    async fn oversized_body_is_resource_exhausted() {
        let h = headers(&[("content-type", "application/json")]);
        let err = read_unary(&h, Body::from(vec![b' '; 2000]), LIMITS)
            .await
            .unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted);
    }

    #[tokio::test]
    async fn gzip_is_decompressed_and_bombs_are_bounded() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(b"{\"a\":1}").unwrap();
        let small = enc.finish().unwrap();
        let h = headers(&[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ]);
        let req = read_unary(&h, Body::from(small), LIMITS).await.unwrap();
        assert_eq!(&req.body[..], b"{\"a\":1}");

        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![b' '; 256 * 1024]).unwrap();
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < LIMITS.max_body_bytes);
        let err = read_unary(&h, Body::from(bomb), LIMITS).await.unwrap_err();
        assert_eq!(err.code, Code::ResourceExhausted);
        assert!(err.message.contains("decompressed"));
    }
}
