//! The order in which a config type declares its keys, for the config reference: a JSON
//! Schema object keeps its properties sorted, but a person reads a section in the order its
//! struct lists them (`listen` before `max_connections`). serde already knows that order:
//! a derived `Deserialize` hands its field list to `deserialize_struct`. [`field_order`]
//! walks `T`'s `Deserialize` down a key path with a deserializer that only records that
//! list, so any section added to [`super::Config`] is ordered without being named here.

use std::cell::Cell;

use serde::de::{self, value::Error, DeserializeOwned, DeserializeSeed, Visitor};

/// The keys of the table at `path` (`["server"]`, `["tools", "command"]` for the items of
/// `[[tools.command]]`, `["tools", "limits"]` for the values of `[tools.limits.NAME]`), in
/// their declared order; `None` when `path` leads to no struct.
pub fn field_order<T: DeserializeOwned>(path: &[&str]) -> Option<&'static [&'static str]> {
    let found = Cell::new(None);
    // The walk always ends in an error (it has no values to give): what counts is the
    // field list it recorded on the way.
    let _ = T::deserialize(Recorder {
        path,
        found: &found,
    });
    found.get()
}

struct Recorder<'a> {
    path: &'a [&'a str],
    found: &'a Cell<Option<&'static [&'static str]>>,
}

impl<'de> de::Deserializer<'de> for Recorder<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(de::Error::custom("not a table"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.path.split_first() {
            None => {
                self.found.set(Some(fields));
                Err(de::Error::custom("recorded"))
            }
            Some((key, rest)) => visitor.visit_map(OneEntry {
                key: Some(key),
                value: Recorder {
                    path: rest,
                    found: self.found,
                },
            }),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    /// `[[name]]`: the fields of its items, at the same path.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_seq(OneItem(Some(self)))
    }

    /// `[name.NAME]`: the fields of its values, at the same path.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_map(OneEntry {
            key: Some("NAME"),
            value: self,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf unit unit_struct tuple tuple_struct enum identifier ignored_any
    }
}

struct OneEntry<'a> {
    key: Option<&'a str>,
    value: Recorder<'a>,
}

impl<'de, 'a> de::MapAccess<'de> for OneEntry<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.key.take() {
            Some(key) => seed
                .deserialize(de::value::StrDeserializer::<Error>::new(key))
                .map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(Recorder {
            path: self.value.path,
            found: self.value.found,
        })
    }
}

struct OneItem<'a>(Option<Recorder<'a>>);

impl<'de> de::SeqAccess<'de> for OneItem<'_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.0.take() {
            Some(recorder) => seed.deserialize(recorder).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_declared_order_of_sections_nested_tables_lists_and_maps() {
        let top = field_order::<Config>(&[]).unwrap();
        assert_eq!(&top[..3], ["server", "auth", "store"]);
        assert_eq!(field_order::<Config>(&["server"]).unwrap()[0], "listen");
        assert!(field_order::<Config>(&["tools", "command"]).is_some());
        assert!(field_order::<Config>(&["tools", "limits"]).is_some());
        assert!(field_order::<Config>(&["namespaces", "bridge"]).is_some());
        assert_eq!(field_order::<Config>(&["server", "listen"]), None);
    }
}
