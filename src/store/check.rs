//! `callbackd check`: what an offline verification of a store found, whatever the backend.

/// What a check found.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub schema_version: u32,
    /// The engine's own integrity findings (SQLite's `integrity_check` lines other than
    /// "ok"); empty when the engine has none to offer.
    pub integrity_errors: Vec<String>,
    pub blobs_checked: u64,
    /// `(namespace, agent id, blob id)` of each blob whose bytes fail their checksum.
    pub corrupt_blobs: Vec<(String, String, String)>,
}

impl CheckReport {
    pub fn is_ok(&self) -> bool {
        self.integrity_errors.is_empty() && self.corrupt_blobs.is_empty()
    }
}

impl CheckReport {
    /// Counts a checkpoint blob as checked, and notes its key (read only then) when its
    /// bytes fail their stored checksum.
    pub fn blob<E>(
        &mut self,
        data: &[u8],
        crc32: i64,
        key: impl FnOnce() -> Result<(String, String, String), E>,
    ) -> Result<(), E> {
        self.blobs_checked += 1;
        if super::blob::checksum(data) != crc32 {
            self.corrupt_blobs.push(key()?);
        }
        Ok(())
    }
}
