//! [`StoreCall::parse`]: the input object of a `CallStore` request read field by field,
//! each refusal naming the field.

use std::collections::HashMap;

use base64::alphabet::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::value::RawValue;

use super::*;

/// Standard base64 (what the bridge sends), padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl StoreCall {
    /// Parses `{substore, method, input}`; `input` is the JSON text of the input object.
    pub fn parse(substore: &str, method: &str, input: &str) -> Result<StoreCall, StoreError> {
        let f = Fields::parse(input, "input")?;
        let call = match (substore, method) {
            ("agents", "get") => StoreCall::AgentsGet {
                agent_id: f.id("agentId")?,
            },
            ("agents", "create") => StoreCall::AgentsCreate(agent_doc(&f)?),
            ("agents", "update") => StoreCall::AgentsUpdate(agent_doc(&f)?),
            ("agents", "delete") => StoreCall::AgentsDelete(agent_filter(&f.filter(true)?)?),
            ("agents", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, AgentCursor::decode)?;
                StoreCall::AgentsList(agent_filter(&filter)?, page)
            }
            ("runs", "get") => StoreCall::RunsGet {
                agent_id: f.id("agentId")?,
                run_id: f.id("runId")?,
            },
            ("runs", "create") => StoreCall::RunsCreate(run_doc(&f)?),
            ("runs", "update") => StoreCall::RunsUpdate(run_doc(&f)?),
            ("runs", "delete") => StoreCall::RunsDelete(run_filter(&f.filter(true)?)?),
            ("runs", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, RunCursor::decode)?;
                StoreCall::RunsList(run_filter(&filter)?, page)
            }
            ("runEvents", "append") => StoreCall::EventsAppend(NewEvent {
                run_id: f.id("runId")?,
                event_type: f.string("eventType")?,
                payload: f
                    .get("payload")
                    .map_or_else(JsonText::null, JsonText::from_raw),
                payload_ref: f.opt_string("payloadRef")?,
                idempotency_key: f.opt_string("idempotencyKey")?,
                max_events: None,
            }),
            ("runEvents", "list") => StoreCall::EventsList {
                run_id: f.id("runId")?,
                after_seq: after_offset(&f)?,
                limit: f.opt_limit("limit")?.unwrap_or(DEFAULT_EVENTS_LIMIT),
            },
            ("runEvents", "delete") => StoreCall::EventsDelete {
                run_ids: f.filter(true)?.opt_list("runIds")?,
            },
            ("checkpoints", "get") => StoreCall::CheckpointsGet {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
            },
            ("checkpoints", "create") => StoreCall::CheckpointsCreate {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
                data: blob_data(&f)?,
            },
            ("checkpoints", "update") => StoreCall::CheckpointsUpdate {
                agent_id: f.id("agentId")?,
                blob_id: f.id("blobId")?,
                data: blob_data(&f)?,
            },
            ("checkpoints", "delete") => {
                StoreCall::CheckpointsDelete(checkpoint_filter(&f.filter(true)?)?)
            }
            ("checkpoints", "list") => {
                let filter = f.filter(false)?;
                let page = page(&filter, DEFAULT_CATALOG_LIMIT, |s| Ok(s.to_string()))?;
                StoreCall::CheckpointsList(checkpoint_filter(&filter)?, page)
            }
            ("agents" | "runs" | "runEvents" | "checkpoints", _) => {
                return Err(StoreError::invalid(format!(
                    "unknown {substore} method {method:?}: expected one of {}",
                    methods_of(substore)
                )))
            }
            _ => {
                return Err(StoreError::invalid(format!(
                    "unknown substore {substore:?}: expected agents, runs, runEvents or checkpoints"
                )))
            }
        };
        Ok(call)
    }
}

fn methods_of(substore: &str) -> &'static str {
    match substore {
        "runEvents" => "append, list, delete",
        _ => "get, create, update, delete, list",
    }
}

fn agent_doc(f: &Fields<'_>) -> Result<AgentDoc, StoreError> {
    let raw = f.object("agent")?;
    let doc = Fields::parse(raw.get(), "agent")?;
    Ok(AgentDoc {
        agent_id: doc.id("agentId")?,
        cwd: doc.string("cwd")?,
        updated_at: doc.opt_number("updatedAt")?.unwrap_or(0.0),
        json: JsonText::from_raw(raw),
    })
}

fn run_doc(f: &Fields<'_>) -> Result<RunDoc, StoreError> {
    let raw = f.object("run")?;
    let doc = Fields::parse(raw.get(), "run")?;
    Ok(RunDoc {
        agent_id: doc.id("agentId")?,
        run_id: doc.id("runId")?,
        turn_number: doc.opt_number("turnNumber")?.unwrap_or(0.0),
        json: JsonText::from_raw(raw),
    })
}

fn agent_filter(f: &Fields<'_>) -> Result<AgentFilter, StoreError> {
    Ok(AgentFilter {
        agent_ids: f.opt_list("agentIds")?,
        cwd: f.opt_string("cwd")?,
    })
}

fn run_filter(f: &Fields<'_>) -> Result<RunFilter, StoreError> {
    Ok(RunFilter {
        agent_ids: f.opt_list("agentIds")?,
        run_ids: f.opt_list("runIds")?,
    })
}

fn checkpoint_filter(f: &Fields<'_>) -> Result<CheckpointFilter, StoreError> {
    Ok(CheckpointFilter {
        agent_ids: f.opt_list("agentIds")?,
        blob_ids: f.opt_list("blobIds")?,
    })
}

fn page<C>(
    filter: &Fields<'_>,
    default_limit: usize,
    decode: impl Fn(&str) -> Result<C, StoreError>,
) -> Result<Page<C>, StoreError> {
    // The bridge treats "" like an absent cursor, and so do we.
    let cursor = match filter.opt_string("cursor")? {
        Some(c) if !c.is_empty() => Some(decode(&c)?),
        _ => None,
    };
    Ok(Page {
        cursor,
        limit: filter.opt_limit("limit")?.unwrap_or(default_limit),
    })
}

/// `afterOffset`: absent, null or "" means from the start; otherwise the decimal seq of
/// the last event already seen (exclusive).
fn after_offset(f: &Fields<'_>) -> Result<u64, StoreError> {
    let Some(raw) = f.get("afterOffset") else {
        return Ok(0);
    };
    let invalid = || StoreError::invalid(format!("invalid run event offset {}", raw.get()));
    if let Ok(s) = serde_json::from_str::<String>(raw.get()) {
        if s.is_empty() {
            return Ok(0);
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        return s.parse().map_err(|_| invalid());
    }
    serde_json::from_str::<u64>(raw.get()).map_err(|_| invalid())
}

fn blob_data(f: &Fields<'_>) -> Result<Vec<u8>, StoreError> {
    let data = f.string("data")?;
    BASE64
        .decode(data.as_bytes())
        .map_err(|e| StoreError::invalid(format!("input.data is not valid base64: {e}")))
}

/// An object's members, refusing a key that appears twice. Parsers disagree on which
/// duplicate wins, and here the choice decides what is stored or deleted: with last-wins,
/// `{"filter":{"runIds":["r"],"runIds":null}}` would read as a delete of every run.
struct UniqueKeys<'a>(HashMap<String, &'a RawValue>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for UniqueKeys<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Members<'a> {
            type Value = UniqueKeys<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut members: A,
            ) -> Result<Self::Value, A::Error> {
                let mut map = HashMap::with_capacity(members.size_hint().unwrap_or(8));
                while let Some((key, value)) = members.next_entry::<String, &'de RawValue>()? {
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    map.insert(key, value);
                }
                Ok(UniqueKeys(map))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// The top-level keys of a JSON object, each value left as raw JSON text. Nested values are
/// never parsed; `null` values count as absent.
struct Fields<'a> {
    map: HashMap<String, &'a RawValue>,
    /// Where these fields sit, for messages: "input", "input.filter", "agent".
    path: &'static str,
}

impl<'a> Fields<'a> {
    fn parse(json: &'a str, path: &'static str) -> Result<Self, StoreError> {
        if !json.trim_start().starts_with('{') {
            return Err(StoreError::invalid(format!("{path} must be a JSON object")));
        }
        let UniqueKeys(map) = serde_json::from_str(json)
            .map_err(|e| StoreError::invalid(format!("{path} is not a valid JSON object: {e}")))?;
        Ok(Fields { map, path })
    }

    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.map.get(key).copied().filter(|raw| raw.get() != "null")
    }

    fn required(&self, key: &str) -> Result<&'a RawValue, StoreError> {
        self.get(key)
            .ok_or_else(|| StoreError::invalid(format!("{}.{key} is required", self.path)))
    }

    fn string(&self, key: &str) -> Result<String, StoreError> {
        serde_json::from_str(self.required(key)?.get())
            .map_err(|_| StoreError::invalid(format!("{}.{key} must be a string", self.path)))
    }

    /// A required, non-empty string.
    fn id(&self, key: &str) -> Result<String, StoreError> {
        let s = self.string(key)?;
        if s.is_empty() {
            return Err(StoreError::invalid(format!(
                "{}.{key} must not be empty",
                self.path
            )));
        }
        Ok(s)
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.get(key).map(|_| self.string(key)).transpose()
    }

    fn opt_number(&self, key: &str) -> Result<Option<f64>, StoreError> {
        self.get(key)
            .map(|raw| {
                serde_json::from_str::<f64>(raw.get()).map_err(|_| {
                    StoreError::invalid(format!("{}.{key} must be a number", self.path))
                })
            })
            .transpose()
    }

    /// A non-negative integer (proto Struct numbers are doubles, so `2.0` counts too).
    fn opt_limit(&self, key: &str) -> Result<Option<usize>, StoreError> {
        let Some(n) = self.opt_number(key)? else {
            return Ok(None);
        };
        if n < 0.0 || n.fract() != 0.0 || !n.is_finite() {
            return Err(StoreError::invalid(format!(
                "{}.{key} must be a non-negative integer",
                self.path
            )));
        }
        Ok(Some(if n > usize::MAX as f64 {
            usize::MAX
        } else {
            n as usize
        }))
    }

    /// A list of strings; absent, null or `[]` give `None` (no constraint).
    fn opt_list(&self, key: &str) -> Result<Option<Vec<String>>, StoreError> {
        let Some(raw) = self.get(key) else {
            return Ok(None);
        };
        let list: Vec<String> = serde_json::from_str(raw.get()).map_err(|_| {
            StoreError::invalid(format!("{}.{key} must be a list of strings", self.path))
        })?;
        Ok(if list.is_empty() { None } else { Some(list) })
    }

    fn object(&self, key: &str) -> Result<&'a RawValue, StoreError> {
        let raw = self.required(key)?;
        if !raw.get().starts_with('{') {
            return Err(StoreError::invalid(format!(
                "{}.{key} must be a JSON object",
                self.path
            )));
        }
        Ok(raw)
    }

    /// `input.filter` as fields. A delete must carry one (an object, possibly empty): a
    /// missing or mistyped filter is never read as "everything".
    fn filter(&self, required: bool) -> Result<Fields<'a>, StoreError> {
        let raw = if required {
            Some(self.object("filter")?)
        } else {
            self.get("filter")
                .map(|_| self.object("filter"))
                .transpose()?
        };
        match raw {
            Some(raw) => Fields::parse(raw.get(), "input.filter"),
            None => Ok(Fields {
                map: HashMap::new(),
                path: "input.filter",
            }),
        }
    }
}
