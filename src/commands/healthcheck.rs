//! `callbackd healthcheck`: asks the daemon's `/healthz` (a container's HEALTHCHECK). The
//! daemon is found as the client commands find it ([`callbackd::client::discover::locate`]):
//! a `callbackd run` on an automatic port is found through its runtime file.

use anyhow::Context;

use callbackd::cli::ConfigArgs;

use super::load;

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let found = callbackd::client::discover::locate(args, &config, &Default::default())?;
    let addr = socket_addr(&found.url)
        .with_context(|| format!("the daemon's URL {} (from {})", found.url, found.from))?;
    callbackd::health::probe(addr, std::time::Duration::from_secs(3))
        .map_err(|e| anyhow::anyhow!("unhealthy: {e} (address from {})", found.from))?;
    // One line, so a person running it by hand sees it worked (exit 0 alone says so
    // to a container runtime).
    println!("healthy: {addr} answered /healthz");
    Ok(())
}

/// `127.0.0.1:7420` of `http://127.0.0.1:7420/`: the daemon's own URLs name an address,
/// never a host name (`app::base_url`).
fn socket_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let rest = url.strip_prefix("http://").context("not an http:// URL")?;
    let host = rest.split('/').next().unwrap_or_default();
    host.parse()
        .with_context(|| format!("{host:?} is not an IP address and port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_of_a_daemon_url() {
        assert_eq!(
            socket_addr("http://127.0.0.1:7420/").unwrap().to_string(),
            "127.0.0.1:7420"
        );
        assert_eq!(
            socket_addr("http://[::1]:9/").unwrap().to_string(),
            "[::1]:9"
        );
        assert!(socket_addr("https://x/").is_err());
        assert!(socket_addr("http://localhost:1/").is_err());
    }
}
