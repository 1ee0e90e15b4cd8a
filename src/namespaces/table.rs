//! [`Table`]: the namespaces in force, built from a configuration: every token with its
//! role and namespace, and each namespace's settings (allowlist, quotas, bridge). Immutable:
//! a reload builds a new one and swaps it in ([`super::Namespaces::apply`]), so a request
//! sees either the old table or the new, never half of each.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{BridgeConfig, Config, ConfigError, Quotas, TokenRole};
use crate::secret::Secret;
use crate::store::Namespace;
use crate::tokens::Tokens;

/// What one namespace may do, beyond its tokens.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The tools it may call; `None`: every tool the registry serves.
    pub tools: Option<BTreeSet<String>>,
    pub quotas: Quotas,
    /// Its bridge, for the run API (`None`: none configured; `callbackd run` may attach one).
    pub bridge: Option<BridgeConfig>,
}

impl Settings {
    /// Whether this namespace may call `tool`.
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.as_ref().is_none_or(|t| t.contains(tool))
    }
}

/// One token: who presents it, for what.
#[derive(Debug, Clone)]
pub struct Entry {
    pub role: TokenRole,
    pub token: Secret,
    pub ns: Namespace,
}

/// The store and tool tokens of namespace `ns` of `config` (`bridge-args --namespace`, which
/// reads them without the daemon). `None` for the default namespace, whose tokens are
/// `tokens::find`'s.
pub fn bridge_tokens(
    config: &Config,
    ns: &Namespace,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(Secret, Secret)>, ConfigError> {
    if *ns == Namespace::default() {
        return Ok(None);
    }
    let (i, entry) = super::config::entry(config, ns)?;
    let get = |role: TokenRole| {
        entry.token(i, role, env)?.ok_or_else(|| {
            ConfigError::Invalid(format!("{}: {} is missing", entry.label(i), role.key()))
        })
    };
    Ok(Some((get(TokenRole::Store)?, get(TokenRole::Tool)?)))
}

/// The namespaces of one configuration.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub entries: Vec<Entry>,
    pub settings: HashMap<Namespace, Arc<Settings>>,
    /// The token files read to build this table (the reload watch polls them).
    pub files: Vec<PathBuf>,
}

impl Table {
    /// The table of `config`, whose default namespace has the `default` tokens (resolved by
    /// `tokens::resolve` or `find`); `env` reads `*_token_env` variables.
    pub fn build(
        config: &Config,
        default: &Tokens,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Table, ConfigError> {
        let mut table = Table::default();
        let ns = Namespace::default();
        for (role, token) in [
            (TokenRole::Store, Some(&default.store)),
            (TokenRole::Tool, Some(&default.tool)),
            (TokenRole::Api, Some(&default.api)),
            (TokenRole::ApiRead, default.api_read.as_ref()),
        ] {
            if let Some(token) = token {
                table.entries.push(Entry {
                    role,
                    token: token.clone(),
                    ns: ns.clone(),
                });
            }
        }
        table.files.extend(
            [
                &config.auth.store_token_file,
                &config.auth.tool_token_file,
                &config.api.token_file,
                &config.api.read_token_file,
            ]
            .into_iter()
            .flatten()
            .cloned(),
        );
        let top_bridge = config.bridge.url.is_some().then(|| config.bridge.clone());
        table
            .settings
            .insert(ns.clone(), Arc::new(Settings::default()));
        let mut labels: HashMap<Namespace, String> = HashMap::new();
        labels.insert(ns.clone(), "namespaces[default]".into());
        for (i, entry) in config.namespaces.iter().enumerate() {
            let ns = entry.namespace(i)?;
            let label = entry.label(i);
            let is_default = ns == Namespace::default();
            // An entry named `default` refines the default namespace (once).
            let taken = if is_default {
                config.namespaces[..i].iter().any(|e| e.name == "default")
            } else {
                labels.contains_key(&ns)
            };
            if taken {
                return Err(ConfigError::Invalid(format!(
                    "{label}: the name {:?} is used by more than one namespace",
                    ns.as_str()
                )));
            }
            labels.insert(ns.clone(), label.clone());
            let quotas = entry.quotas(i)?;
            let tools = entry
                .tools
                .as_ref()
                .map(|t| t.iter().cloned().collect::<BTreeSet<_>>());
            if is_default {
                if let Some(role) = TokenRole::ALL.into_iter().find(|r| entry.has_token(*r)) {
                    return Err(ConfigError::Invalid(format!(
                        "{label}.{}: the default namespace's tokens are [auth] and [api] (or the \
                         generated tokens file); remove it here",
                        role.key()
                    )));
                }
                if entry.bridge.is_some() && top_bridge.is_some() {
                    return Err(ConfigError::Invalid(format!(
                        "{label}.bridge: the default namespace's bridge is already [bridge]; \
                         set it in one place"
                    )));
                }
            } else {
                for role in TokenRole::ALL {
                    match entry.token(i, role, env)? {
                        Some(token) => table.entries.push(Entry {
                            role,
                            token,
                            ns: ns.clone(),
                        }),
                        None if matches!(role, TokenRole::Store | TokenRole::Tool) => {
                            return Err(ConfigError::Invalid(format!(
                                "{label}: {key} is missing (set {key}, {key}_file or \
                                 {key}_env): the namespace's bridge presents it",
                                key = role.key()
                            )))
                        }
                        None => {}
                    }
                }
                table
                    .files
                    .extend(entry.token_files().map(std::path::Path::to_path_buf));
            }
            let bridge = match (&entry.bridge, is_default) {
                (Some(b), _) => {
                    if b.url.is_none() {
                        return Err(ConfigError::Invalid(format!(
                            "{label}.bridge.url is missing"
                        )));
                    }
                    Some(b.clone())
                }
                (None, true) => top_bridge.clone(),
                (None, false) => None,
            };
            table.settings.insert(
                ns,
                Arc::new(Settings {
                    tools,
                    quotas,
                    bridge,
                }),
            );
        }
        if let Some(s) = table.settings.get_mut(&Namespace::default()) {
            if s.bridge.is_none() && top_bridge.is_some() {
                Arc::make_mut(s).bridge = top_bridge;
            }
        }
        table.check_unique(&labels)?;
        Ok(table)
    }

    /// The table of `config` for a command that reads the namespaces without the daemon's
    /// default tokens (`check-config`, `namespaces`), so that it works before the daemon
    /// ever ran: the default namespace gets placeholders, which no configured token can
    /// equal (they hold a space, which a token may not).
    pub fn without_default_tokens(config: &Config) -> Result<Table, ConfigError> {
        let placeholder = |role: &str| Secret::new(format!("(default {role})"));
        let default = Tokens {
            store: placeholder("store"),
            tool: placeholder("tool"),
            api: placeholder("api"),
            api_read: None,
        };
        Table::build(config, &default, &|k| std::env::var(k).ok())
    }

    /// Every token differs from every other, in any namespace and any role: a token names
    /// exactly one namespace and one service.
    fn check_unique(&self, labels: &HashMap<Namespace, String>) -> Result<(), ConfigError> {
        let mut seen: HashMap<&str, &Entry> = HashMap::new();
        for e in &self.entries {
            if let Some(first) = seen.insert(e.token.expose(), e) {
                let name = |x: &Entry| {
                    if x.ns == Namespace::default() {
                        let key = match x.role {
                            TokenRole::Store => "auth.store_token",
                            TokenRole::Tool => "auth.tool_token",
                            TokenRole::Api => "api.token",
                            TokenRole::ApiRead => "api.read_token",
                        };
                        return format!("{key} (the default namespace's)");
                    }
                    format!(
                        "{}.{}",
                        labels.get(&x.ns).map_or(x.ns.as_str(), String::as_str),
                        x.role.key()
                    )
                };
                return Err(ConfigError::Invalid(format!(
                    "{} is the same token as {}: every token must differ, so that each names \
                     one namespace and one service",
                    name(e),
                    name(first)
                )));
            }
        }
        Ok(())
    }

    /// Refuses an allowlist naming a tool `serves` does not know.
    pub fn check_tools(&self, serves: &dyn Fn(&str) -> bool) -> Result<(), ConfigError> {
        let mut names: Vec<_> = self.settings.iter().collect();
        names.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        for (ns, s) in names {
            if let Some(unknown) = s.tools.iter().flatten().find(|t| !serves(t)) {
                return Err(ConfigError::Invalid(format!(
                    "namespaces[{}].tools names {unknown:?}, which is not a tool this daemon \
                     serves (see `callbackd tools export`)",
                    ns.as_str()
                )));
            }
        }
        Ok(())
    }

    /// The tokens of `role`, with their namespaces.
    pub fn tokens(&self, role: TokenRole) -> Vec<(Secret, Namespace)> {
        self.entries
            .iter()
            .filter(|e| e.role == role)
            .map(|e| (e.token.clone(), e.ns.clone()))
            .collect()
    }

    /// The token of `role` of namespace `ns`.
    pub fn token_of(&self, ns: &Namespace, role: TokenRole) -> Option<&Secret> {
        self.entries
            .iter()
            .find(|e| e.role == role && &e.ns == ns)
            .map(|e| &e.token)
    }

    /// The configured namespaces, by name.
    pub fn names(&self) -> Vec<Namespace> {
        let mut names: Vec<_> = self.settings.keys().cloned().collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_tokens() -> Tokens {
        let s = |x: &str| Secret::new(format!("default-{x}-0123456789"));
        Tokens {
            store: s("store"),
            tool: s("tool"),
            api: s("api"),
            api_read: Some(s("read")),
        }
    }

    fn config(toml: &str) -> Config {
        toml::from_str(toml).unwrap_or_else(|e| panic!("{toml}: {e}"))
    }

    fn build(toml: &str) -> Result<Table, String> {
        let env = |k: &str| (k == "B_STORE").then(|| "b-store-from-env-012345".to_string());
        Table::build(&config(toml), &default_tokens(), &env).map_err(|e| e.to_string())
    }

    const TWO: &str = r#"
[[namespaces]]
name = "a"
store_token = "a-store-0123456789"
tool_token = "a-tool-0123456789"
api_token = "a-api-0123456789"
tools = ["echo"]
[namespaces.quotas]
max_agents = 3
[[namespaces]]
name = "b"
store_token_env = "B_STORE"
tool_token = "b-tool-0123456789"
"#;

    #[test]
    fn each_token_grants_one_namespace_and_one_role() {
        let t = build(TWO).unwrap();
        let ns = |n: &str| Namespace::new(n);
        assert_eq!(
            t.token_of(&ns("b"), TokenRole::Store).unwrap().expose(),
            "b-store-from-env-012345"
        );
        assert_eq!(t.tokens(TokenRole::Store).len(), 3, "default, a, b");
        assert_eq!(t.tokens(TokenRole::Api).len(), 2, "b has no run API token");
        let a = &t.settings[&ns("a")];
        assert!(a.allows("echo") && !a.allows("memory"));
        assert_eq!(a.quotas.max_agents, Some(3));
        assert!(t.settings[&ns("b")].allows("memory"));
        assert_eq!(t.names().len(), 3);
    }

    #[test]
    fn bad_namespaces_are_refused_naming_the_namespace_and_the_key() {
        let cases: &[(&str, &[&str])] = &[
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n\
                 [[namespaces]]\nname = \"a\"\nstore_token = \"s2-0123456789\"\ntool_token = \"t2-0123456789\"\n",
                &["namespaces[a]", "more than one namespace"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"same-0123456789\"\ntool_token = \"t-0123456789\"\n\
                 [[namespaces]]\nname = \"b\"\nstore_token = \"s-0123456789\"\ntool_token = \"same-0123456789\"\n",
                &["namespaces[b].tool_token", "namespaces[a].store_token", "same token"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"same-0123456789\"\ntool_token = \"same-0123456789\"\n",
                &["namespaces[a].tool_token", "namespaces[a].store_token"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"default-api-0123456789\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[a].store_token", "api.token (the default namespace's)"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n\
                 [namespaces.quotas]\nmax_agents = 0\n",
                &["namespaces[a].quotas.max_agents", "at least 1"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n\
                 [namespaces.quotas]\nmax_events_per_run = -5\n",
                &["namespaces[a].quotas.max_events_per_run", "-5"],
            ),
            (
                "[[namespaces]]\nname = \"A b\"\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[A b]", "namespace name"],
            ),
            (
                "[[namespaces]]\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[#0]", "name is missing"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[a]", "store_token is missing"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"s-0123456789\"\nstore_token_env = \"X\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[a]", "only one of store_token"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token_env = \"NOT_SET_ANYWHERE\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[a].store_token_env", "NOT_SET_ANYWHERE"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"has space\"\ntool_token = \"t-0123456789\"\n",
                &["namespaces[a].store_token", "visible ASCII"],
            ),
            (
                "[[namespaces]]\nname = \"default\"\nstore_token = \"s-0123456789\"\n",
                &["namespaces[default].store_token", "[auth]"],
            ),
            (
                "[[namespaces]]\nname = \"a\"\nstore_token = \"s-0123456789\"\ntool_token = \"t-0123456789\"\n\
                 [namespaces.bridge]\ndefault_model = \"x\"\n",
                &["namespaces[a].bridge.url is missing"],
            ),
        ];
        for (toml, wanted) in cases {
            let err = build(toml)
                .err()
                .unwrap_or_else(|| panic!("accepted: {toml}"));
            for w in *wanted {
                assert!(err.contains(w), "{toml}\nerror {err:?} does not name {w:?}");
            }
        }
    }

    #[test]
    fn a_default_entry_refines_the_default_namespace() {
        let t = build(
            "[[namespaces]]\nname = \"default\"\ntools = [\"echo\"]\n[namespaces.quotas]\nmax_agents = 7\n",
        )
        .unwrap();
        let d = &t.settings[&Namespace::default()];
        assert_eq!(d.quotas.max_agents, Some(7));
        assert!(!d.allows("memory"));
        assert_eq!(t.tokens(TokenRole::Store).len(), 1);
    }

    #[test]
    fn an_allowlist_naming_an_unknown_tool_is_refused() {
        let t = build(TWO).unwrap();
        t.check_tools(&|n| n == "echo").unwrap();
        let err = t.check_tools(&|n| n == "memory").unwrap_err().to_string();
        assert!(
            err.contains("namespaces[a].tools") && err.contains("\"echo\""),
            "{err}"
        );
    }
}
