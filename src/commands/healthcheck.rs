//! `callbackd healthcheck`: asks the daemon's `/healthz` (a container's HEALTHCHECK).

use callbackd::cli::ConfigArgs;

use super::load;

pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let addr = config.server.listen_addr()?;
    callbackd::health::probe(addr, std::time::Duration::from_secs(3))
        .map_err(|e| anyhow::anyhow!("unhealthy: {e}"))?;
    // One line, so a person running it by hand sees it worked (exit 0 alone says so
    // to a container runtime).
    println!("healthy: {addr} answered /healthz");
    Ok(())
}
