//! Ownership across daemons: a pending approval names the daemon holding its call
//! ([`Approvals::owner`]) and a lease that daemon renews while it waits. Any daemon cancels
//! the pending approvals whose lease ran out (their daemon and its call are gone), at start
//! and every [`SWEEP`]; those of live daemons stay theirs, so starting a second daemon on
//! the same database never takes a live call's approval away.

use std::time::Duration;

use super::Approvals;
use crate::clock::now_ms;
use crate::store::StoreError;

/// How long a daemon vouches for its held calls: it renews the lease every third of this;
/// a pending approval whose lease ran out is cancelled by any daemon.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a daemon cancels pending approvals whose owner's lease ran out.
pub const SWEEP: Duration = Duration::from_secs(5);

impl Approvals {
    /// Cancels pending approvals whose owner's lease ran out (their daemon is gone).
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        let gone = self
            .inner
            .records
            .cancel_abandoned_approvals(
                "the daemon holding the call stopped while the approval was pending",
                now_ms(),
            )
            .await?;
        for rec in &gone {
            self.resolved(rec);
        }
        Ok(gone.len())
    }

    /// Sweeps every [`SWEEP`], until aborted.
    pub fn spawn_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP).await;
                match me.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        approvals = n,
                        "pending approvals of a daemon that is gone were cancelled"
                    ),
                    Err(e) => tracing::warn!(error = %e, "cannot sweep abandoned approvals"),
                }
            }
        })
    }

    /// Renews the lease of every approval this daemon holds.
    pub(super) async fn renew(&self) {
        let until = now_ms() + LEASE.as_millis() as i64;
        let a = &self.inner;
        if let Err(e) = a.records.renew_approval_leases(&a.owner, until).await {
            tracing::warn!(error = %e, "cannot renew the lease of held approvals");
        }
    }
}
