//! `callbackd healthcheck`: asks a running daemon's `/healthz` and exits 0 when it answers
//! 200. For container health checks in images that have no curl.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// `GET /healthz` on `addr` (a wildcard address is asked on loopback); `Ok` on HTTP 200.
pub fn probe(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    let mut addr = addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: callbackd\r\nconnection: close\r\n\r\n")
        .map_err(|e| format!("cannot send to {addr}: {e}"))?;
    let mut head = [0u8; 12];
    stream
        .read_exact(&mut head)
        .map_err(|e| format!("no answer from {addr}: {e}"))?;
    if &head[..] == b"HTTP/1.1 200" {
        Ok(())
    } else {
        Err(format!(
            "{addr} answered {:?}",
            String::from_utf8_lossy(&head)
        ))
    }
}
