//! What the namespaces make of `[[namespaces]]` (the entries themselves are plain data in
//! `config`): an entry's checked name, and the entry of a namespace.

use crate::config::{Config, ConfigError, NamespaceConfig};
use crate::store::Namespace;

/// The `[[namespaces]]` entry named `ns` (with its index, for messages), or an error that
/// lists the configured ones.
pub fn entry<'a>(
    config: &'a Config,
    ns: &Namespace,
) -> Result<(usize, &'a NamespaceConfig), ConfigError> {
    config
        .namespaces
        .iter()
        .enumerate()
        .find(|(_, e)| e.name == ns.as_str())
        .ok_or_else(|| {
            let names: Vec<&str> = config.namespaces.iter().map(|e| e.name.as_str()).collect();
            ConfigError::Invalid(format!(
                "namespace {:?} is not configured; [[namespaces]] has {}",
                ns.as_str(),
                if names.is_empty() {
                    "none (only the default namespace exists)".to_string()
                } else {
                    names.join(", ")
                }
            ))
        })
}

/// The namespaces' reading of an entry (kept here, beside [`Namespace`], so the config stays
/// a leaf).
impl NamespaceConfig {
    /// The namespace's name, checked.
    pub fn namespace(&self, index: usize) -> Result<Namespace, ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "{}: name is missing",
                self.label(index)
            )));
        }
        Namespace::parse(&self.name)
            .map_err(|e| ConfigError::Invalid(format!("{}: {e}", self.label(index))))
    }
}
