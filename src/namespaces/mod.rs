//! Namespaces: many bridges on one daemon (docs/namespaces.md). Each token grants one
//! namespace; every row the store keeps, every tool call and every run API request is
//! scoped by it.
//!
//! - [`config`]: what the namespaces make of `[[namespaces]]` (written in `crate::config`).
//! - [`table`]: the namespaces of one configuration: tokens by role, settings by name.
//! - [`Namespaces`] (here): the table in force, shared by every service, swapped whole by a
//!   reload (`app::reload`).
//! - [`quota`]: the quota gate in front of the store's writes.
//! - [`usage`]: what each namespace holds (`callbackd namespaces`, metrics).

pub mod config;
pub mod quota;
pub mod table;
pub mod usage;

pub use crate::config::{NamespaceConfig, OverRate, Quotas, TokenRole};
pub use table::{Settings, Table};

use std::sync::{Arc, RwLock};

use crate::auth::TokenSet;
use crate::store::Namespace;

/// The namespaces in force: the token sets each service checks (replaced in place on
/// reload, so the services hold them, not a copy) and each namespace's settings.
#[derive(Clone)]
pub struct Namespaces {
    inner: Arc<Inner>,
}

struct Inner {
    store: TokenSet,
    tool: TokenSet,
    api: TokenSet,
    api_read: TokenSet,
    /// The store and tool tokens together: the run API recognises them to say they are the
    /// wrong kind.
    bridge: TokenSet,
    table: RwLock<Arc<Table>>,
}

impl Namespaces {
    pub fn new(table: Table) -> Self {
        let empty = || TokenSet::new(Vec::new());
        let namespaces = Namespaces {
            inner: Arc::new(Inner {
                store: empty(),
                tool: empty(),
                api: empty(),
                api_read: empty(),
                bridge: empty(),
                table: RwLock::new(Arc::new(Table::default())),
            }),
        };
        namespaces.apply(table);
        namespaces
    }

    /// Puts `table` in force: from the next request on, only its tokens are accepted.
    pub fn apply(&self, table: Table) {
        let i = &self.inner;
        // Settings first, then tokens: a token of a new namespace is never accepted before
        // its quotas and allowlist are in place.
        let tokens = |role| table.tokens(role);
        let (store, tool, api, read) = (
            tokens(TokenRole::Store),
            tokens(TokenRole::Tool),
            tokens(TokenRole::Api),
            tokens(TokenRole::ApiRead),
        );
        let mut bridge = store.clone();
        bridge.extend(tool.clone());
        *i.table.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(table);
        i.store.replace(store);
        i.tool.replace(tool);
        i.api.replace(api);
        i.api_read.replace(read);
        i.bridge.replace(bridge);
    }

    /// The table in force.
    pub fn table(&self) -> Arc<Table> {
        self.inner
            .table
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `ns`'s settings; `None` for a namespace that is not (or no longer) configured.
    pub fn settings(&self, ns: &Namespace) -> Option<Arc<Settings>> {
        self.table().settings.get(ns).cloned()
    }

    /// Whether `ns` may call `tool` (a namespace no longer configured may call nothing).
    pub fn allows_tool(&self, ns: &Namespace, tool: &str) -> bool {
        self.settings(ns).is_some_and(|s| s.allows(tool))
    }

    pub fn store_tokens(&self) -> &TokenSet {
        &self.inner.store
    }

    pub fn tool_tokens(&self) -> &TokenSet {
        &self.inner.tool
    }

    pub fn api_tokens(&self) -> &TokenSet {
        &self.inner.api
    }

    pub fn api_read_tokens(&self) -> &TokenSet {
        &self.inner.api_read
    }

    pub fn bridge_tokens(&self) -> &TokenSet {
        &self.inner.bridge
    }
}

impl Default for Namespaces {
    /// Only the default namespace, with no tokens (tests of single services).
    fn default() -> Self {
        Namespaces::new(Table::default())
    }
}

impl std::fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Namespaces({})", self.table().settings.len())
    }
}
