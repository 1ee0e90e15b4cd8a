//! The slot a namespace's bridge is attached through: `callbackd run` attaches the bridge it
//! supervises once its ready line arrives; `serve` attaches the one `[bridge]` (or
//! `[namespaces.bridge]`) names, again on a reload when that changes. Without one, the run
//! API's writes answer `501 not_implemented` ([`NoBridge`]).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::BridgeClient;
use crate::config::BridgeConfig;
use crate::namespaces::Table;
use crate::store::Namespace;

/// No bridge is attached for the namespace (the run API answers `501 not_implemented`
/// with [`NoBridge::HOW`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoBridge;

impl NoBridge {
    /// How to attach one.
    pub const HOW: &'static str = "no bridge is attached to this daemon for this namespace: \
         start it as `callbackd run [--namespace N] -- <bridge>`, or set [bridge] (a \
         namespace's own: [namespaces.bridge]) url and token_file in the config of `callbackd \
         serve`; reads and streams work without one";
}

/// Where the bridge is attached, shared by the handlers and whoever attaches it.
#[derive(Clone, Default)]
pub struct BridgeSlot {
    inner: Arc<RwLock<Option<Arc<BridgeClient>>>>,
}

impl BridgeSlot {
    pub fn attach(&self, client: BridgeClient) {
        tracing::info!(url = client.url(), "run API attached to the bridge");
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(client));
    }

    pub fn detach(&self) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The attached bridge, or [`NoBridge`].
    pub fn get(&self) -> Result<Arc<BridgeClient>, NoBridge> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(NoBridge)
    }
}

/// The bridge slot of every namespace. A namespace's slot is attached from its configured
/// bridge (`[bridge]`, `[namespaces.bridge]`; re-attached on reload when that changes) or by
/// `callbackd run --namespace N`, which supervises it.
#[derive(Clone, Default)]
pub struct Bridges {
    inner: Arc<RwLock<HashMap<Namespace, BridgeSlot>>>,
    /// What each configured slot was attached from, to tell a reload's changes.
    configured: Arc<std::sync::Mutex<HashMap<Namespace, BridgeConfig>>>,
}

impl Bridges {
    /// `ns`'s slot (created empty on first use).
    pub fn slot(&self, ns: &Namespace) -> BridgeSlot {
        if let Some(slot) = self.inner.read().unwrap_or_else(|p| p.into_inner()).get(ns) {
            return slot.clone();
        }
        self.inner
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ns.clone())
            .or_default()
            .clone()
    }

    /// Attaches each namespace's configured bridge of `table` whose configuration is new or
    /// changed, and detaches those whose configuration is gone. A slot attached by
    /// `callbackd run` is left alone unless its namespace configures a bridge of its own.
    pub fn configure(&self, table: &Table) -> Result<(), String> {
        let mut configured = self.configured.lock().unwrap_or_else(|p| p.into_inner());
        let mut clients = Vec::new();
        for (ns, settings) in &table.settings {
            let Some(cfg) = &settings.bridge else {
                continue;
            };
            if configured.get(ns) == Some(cfg) {
                continue;
            }
            let client =
                BridgeClient::from_config(cfg, &format!("namespaces[{}].bridge", ns.as_str()))?;
            clients.push((ns.clone(), cfg.clone(), client));
        }
        let gone: Vec<Namespace> = configured
            .keys()
            .filter(|ns| table.settings.get(*ns).is_none_or(|s| s.bridge.is_none()))
            .cloned()
            .collect();
        for ns in gone {
            configured.remove(&ns);
            self.slot(&ns).detach();
        }
        for (ns, cfg, client) in clients {
            self.slot(&ns).attach(client);
            configured.insert(ns, cfg);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Problem, ProblemCode};
    use crate::namespaces::Settings;

    fn table(bridges: &[(&str, Option<&str>)]) -> Table {
        let mut t = Table::default();
        for (ns, url) in bridges {
            t.settings.insert(
                Namespace::new(ns),
                Arc::new(Settings {
                    bridge: url.map(|u| BridgeConfig {
                        url: Some(u.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            );
        }
        t
    }

    #[test]
    fn a_reload_attaches_new_bridges_and_detaches_removed_ones_only() {
        let bridges = Bridges::default();
        bridges
            .configure(&table(&[("a", Some("http://127.0.0.1:7001")), ("b", None)]))
            .unwrap();
        assert_eq!(
            bridges.slot(&Namespace::new("a")).get().unwrap().url(),
            "http://127.0.0.1:7001"
        );
        assert!(bridges.slot(&Namespace::new("b")).get().is_err());
        // b's bridge attached by `callbackd run --namespace b`, not by the config.
        let run = BridgeClient::new(
            "http://127.0.0.1:7009",
            None,
            None,
            "m".into(),
            String::new(),
        )
        .unwrap();
        bridges.slot(&Namespace::new("b")).attach(run);
        // a's bridge moves; b's supervised one stays.
        bridges
            .configure(&table(&[("a", Some("http://127.0.0.1:7002")), ("b", None)]))
            .unwrap();
        assert_eq!(
            bridges.slot(&Namespace::new("a")).get().unwrap().url(),
            "http://127.0.0.1:7002"
        );
        assert_eq!(
            bridges.slot(&Namespace::new("b")).get().unwrap().url(),
            "http://127.0.0.1:7009"
        );
        // a's configured bridge is gone from the config: detached.
        bridges.configure(&table(&[("b", None)])).unwrap();
        let err = Problem::from(bridges.slot(&Namespace::new("a")).get().err().unwrap());
        assert_eq!(err.code, ProblemCode::NotImplemented);
        // A bridge whose token file cannot be read refuses the reload, changing nothing.
        let mut bad = table(&[("c", Some("http://127.0.0.1:7003"))]);
        Arc::make_mut(bad.settings.get_mut(&Namespace::new("c")).unwrap())
            .bridge
            .as_mut()
            .unwrap()
            .token_file = Some("/nonexistent/token".into());
        let e = bridges.configure(&bad).unwrap_err();
        assert!(
            e.contains("namespaces[c].bridge") && e.contains("token_file"),
            "{e}"
        );
        assert_eq!(
            bridges.slot(&Namespace::new("b")).get().unwrap().url(),
            "http://127.0.0.1:7009"
        );
    }
}
