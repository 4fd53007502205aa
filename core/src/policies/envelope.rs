//! The `{targetRef, to, from}` envelope of the `targetRef` policies with item lists: one
//! generic spec type, [`Envelope`], for every such policy (Kuma 2.7's `<Type>` structs of
//! `pkg/plugins/policies/<name>/api/v1alpha1/<name>.go`: `TargetRef`, `To []To`,
//! `From []From`).
//!
//! A policy module describes its envelope with a marker type implementing [`Lists`]: its
//! resource type, the configuration of its `to` and `from` items (or [`Absent`] for a list the
//! type does not have) and the order of the two lists. Its spec is then
//! `Envelope<ItsMarker>`, and its own rules stay in its module as an inherent
//! `impl Envelope<ItsMarker>`.
//!
//! The serde shape is that of a struct `<Type>` with `rename_all = "camelCase"`,
//! `deny_unknown_fields`, a defaulted `targetRef` and `Option` lists skipped when absent:
//! field names, order, messages (`unknown field `x`, expected one of `targetRef`, `to``,
//! `expected struct MeshTimeout`) and error paths are those serde derives for such a struct;
//! a list the type does not have is an unknown field.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::Item;
use crate::target_ref::TargetRef;
use crate::type_info::ResourceType;

/// What a policy's envelope holds: see the module documentation.
pub trait Lists {
    /// The policy type; its Kuma name is the serde struct name (`struct MeshTimeout`).
    const TYPE: ResourceType;
    /// `true` when `from` comes before `to` (in encoded specs and in the "expected" list of
    /// unknown-field messages); `to` comes first otherwise.
    const FROM_FIRST: bool = false;
    /// The `to` list: [`Items`] of the item configuration, or [`Absent`].
    type To: List;
    /// The `from` list: [`Items`] of the item configuration, or [`Absent`].
    type From: List;
}

/// A list of items an envelope may have (`Items<C>`), or not ([`Absent`]).
pub trait List: Default + fmt::Debug + Clone + PartialEq + Serialize + DeserializeOwned {
    /// Whether the type has this list at all.
    const EXISTS: bool;
    /// The item type.
    type Item;
    /// The items (empty when the list is absent).
    fn items(&self) -> &[Self::Item];
    /// Whether the list is present (and so encoded), even empty (`to: []` round-trips).
    fn is_present(&self) -> bool;
}

/// A `to` or `from` list: `None` when absent, so an explicit `[]` survives a round trip.
pub type Items<C> = Option<Vec<Item<C>>>;

impl<C> List for Items<C>
where
    C: fmt::Debug + Clone + PartialEq + Serialize + DeserializeOwned,
{
    const EXISTS: bool = true;
    type Item = Item<C>;

    fn items(&self) -> &[Item<C>] {
        self.as_deref().unwrap_or_default()
    }

    fn is_present(&self) -> bool {
        self.is_some()
    }
}

/// The list a policy type does not have: never decoded (its name is an unknown field) and
/// never encoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Absent;

/// No item: the item type of [`Absent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoItem {}

impl List for Absent {
    const EXISTS: bool = false;
    type Item = NoItem;

    fn items(&self) -> &[NoItem] {
        &[]
    }

    fn is_present(&self) -> bool {
        false
    }
}

/// A `targetRef` policy spec with item lists: the proxies it applies to and its `to` and
/// `from` items (each [`Absent`] when the type [`L`](Lists) has no such list).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<L: Lists> {
    /// The proxies (or gateway / route) the policy applies to. Absent means an empty
    /// reference, which validation reports (`spec.targetRef.kind: must be defined`), as Kuma
    /// does.
    pub target_ref: TargetRef,
    /// Outbound items: destinations and their configuration (`None` when absent).
    pub to: L::To,
    /// Inbound items: clients and their configuration (`None` when absent).
    pub from: L::From,
}

impl<L: Lists> Default for Envelope<L> {
    fn default() -> Self {
        Envelope {
            target_ref: TargetRef::default(),
            to: L::To::default(),
            from: L::From::default(),
        }
    }
}

impl<L: Lists> Envelope<L> {
    /// The `to` items (empty when absent).
    pub fn to_items(&self) -> &[<L::To as List>::Item] {
        self.to.items()
    }

    /// The `from` items (empty when absent).
    pub fn from_items(&self) -> &[<L::From as List>::Item] {
        self.from.items()
    }
}

/// One field of an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    TargetRef,
    To,
    From,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::TargetRef => "targetRef",
            Field::To => "to",
            Field::From => "from",
        }
    }
}

/// The fields of `L`'s envelope, in order, and their names (for serde's messages).
fn fields<L: Lists>() -> (&'static [Field], &'static [&'static str]) {
    use Field::{From, TargetRef, To};
    match (L::To::EXISTS, L::From::EXISTS, L::FROM_FIRST) {
        (true, true, false) => (&[TargetRef, To, From], &["targetRef", "to", "from"]),
        (true, true, true) => (&[TargetRef, From, To], &["targetRef", "from", "to"]),
        (true, false, _) => (&[TargetRef, To], &["targetRef", "to"]),
        (false, true, _) => (&[TargetRef, From], &["targetRef", "from"]),
        (false, false, _) => (&[TargetRef], &["targetRef"]),
    }
}

impl<L: Lists> Serialize for Envelope<L> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (order, _) = fields::<L>();
        let present = |f: &Field| match f {
            Field::TargetRef => true,
            Field::To => self.to.is_present(),
            Field::From => self.from.is_present(),
        };
        let len = order.iter().filter(|f| present(f)).count();
        let mut s = serializer.serialize_struct(L::TYPE.name(), len)?;
        for f in order {
            match f {
                Field::TargetRef => s.serialize_field("targetRef", &self.target_ref)?,
                Field::To if self.to.is_present() => s.serialize_field("to", &self.to)?,
                Field::From if self.from.is_present() => s.serialize_field("from", &self.from)?,
                Field::To | Field::From => s.skip_field(f.name())?,
            }
        }
        s.end()
    }
}

impl<'de, L: Lists> Deserialize<'de> for Envelope<L> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (_, names) = fields::<L>();
        deserializer.deserialize_struct(L::TYPE.name(), names, EnvelopeVisitor(PhantomData::<L>))
    }
}

/// Reads an envelope's field name: one of `L`'s fields, else serde's unknown-field error
/// (raised while the key is read, so its path ends with the key, as for a derived struct).
struct FieldSeed<L>(PhantomData<L>);

impl<'de, L: Lists> DeserializeSeed<'de> for FieldSeed<L> {
    type Value = Field;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Field, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<L: Lists> de::Visitor<'_> for FieldSeed<L> {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("field identifier")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Field, E> {
        let (order, _) = fields::<L>();
        usize::try_from(v)
            .ok()
            .and_then(|i| order.get(i).copied())
            .ok_or_else(|| {
                E::invalid_value(
                    de::Unexpected::Unsigned(v),
                    &format!("field index 0 <= i < {}", order.len()).as_str(),
                )
            })
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
        let (order, names) = fields::<L>();
        order
            .iter()
            .copied()
            .find(|f| f.name() == v)
            .ok_or_else(|| E::unknown_field(v, names))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Field, E> {
        match std::str::from_utf8(v) {
            Ok(s) => self.visit_str(s),
            Err(_) => {
                let (_, names) = fields::<L>();
                Err(E::unknown_field(&String::from_utf8_lossy(v), names))
            }
        }
    }
}

struct EnvelopeVisitor<L>(PhantomData<L>);

impl<'de, L: Lists> de::Visitor<'de> for EnvelopeVisitor<L> {
    type Value = Envelope<L>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "struct {}", L::TYPE.name())
    }

    /// The fields in order, each missing one (a short sequence) defaulted.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Envelope<L>, A::Error> {
        let (order, _) = fields::<L>();
        let mut out = Envelope::<L>::default();
        for f in order {
            match f {
                Field::TargetRef => {
                    if let Some(v) = seq.next_element()? {
                        out.target_ref = v;
                    }
                }
                Field::To => {
                    if let Some(v) = seq.next_element()? {
                        out.to = v;
                    }
                }
                Field::From => {
                    if let Some(v) = seq.next_element()? {
                        out.from = v;
                    }
                }
            }
        }
        Ok(out)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<L>, A::Error> {
        let mut target_ref: Option<TargetRef> = None;
        let mut to: Option<L::To> = None;
        let mut from: Option<L::From> = None;
        while let Some(field) = map.next_key_seed(FieldSeed::<L>(PhantomData))? {
            match field {
                Field::TargetRef => put(&mut target_ref, field, map.next_value()?)?,
                Field::To => put(&mut to, field, map.next_value()?)?,
                Field::From => put(&mut from, field, map.next_value()?)?,
            }
        }
        Ok(Envelope {
            target_ref: target_ref.unwrap_or_default(),
            to: to.unwrap_or_default(),
            from: from.unwrap_or_default(),
        })
    }
}

/// Set a field read once; serde's duplicate-field error the second time.
fn put<T, E: de::Error>(slot: &mut Option<T>, field: Field, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(field.name()));
    }
    *slot = Some(value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::fields::{decode_at, Names};
    use crate::validate::PathBuilder;

    /// The derived structs the envelope replaces, to compare with.
    mod derived {
        use serde::{Deserialize, Serialize};

        use crate::policies::Item;
        use crate::target_ref::TargetRef;

        #[derive(Debug, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct MeshTimeout {
            #[serde(default)]
            pub target_ref: TargetRef,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub to: Option<Vec<Item<serde_json::Value>>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub from: Option<Vec<Item<serde_json::Value>>>,
        }

        #[derive(Debug, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct MeshRateLimit {
            #[serde(default)]
            pub target_ref: TargetRef,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub from: Option<Vec<Item<serde_json::Value>>>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub to: Option<Vec<Item<serde_json::Value>>>,
        }

        #[derive(Debug, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct MeshRetry {
            #[serde(default)]
            pub target_ref: TargetRef,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub to: Option<Vec<Item<serde_json::Value>>>,
        }

        #[derive(Debug, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct MeshTrafficPermission {
            #[serde(default)]
            pub target_ref: TargetRef,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub from: Option<Vec<Item<serde_json::Value>>>,
        }
    }

    #[derive(Debug, Clone, PartialEq)]
    enum Both {}
    impl Lists for Both {
        const TYPE: ResourceType = ResourceType::MeshTimeout;
        type To = Items<Value>;
        type From = Items<Value>;
    }

    #[derive(Debug, Clone, PartialEq)]
    enum FromFirst {}
    impl Lists for FromFirst {
        const TYPE: ResourceType = ResourceType::MeshRateLimit;
        const FROM_FIRST: bool = true;
        type To = Items<Value>;
        type From = Items<Value>;
    }

    #[derive(Debug, Clone, PartialEq)]
    enum ToOnly {}
    impl Lists for ToOnly {
        const TYPE: ResourceType = ResourceType::MeshRetry;
        type To = Items<Value>;
        type From = Absent;
    }

    #[derive(Debug, Clone, PartialEq)]
    enum FromOnly {}
    impl Lists for FromOnly {
        const TYPE: ResourceType = ResourceType::MeshTrafficPermission;
        type To = Absent;
        type From = Items<Value>;
    }

    /// Decode `v` as `A` and as `B` at `spec` and compare the outcomes: the same re-encoded
    /// JSON text (field order included) or the same violation text.
    fn same<A, B>(v: &Value)
    where
        A: DeserializeOwned + Serialize,
        B: DeserializeOwned + Serialize,
    {
        let root = PathBuilder::rooted_at("spec");
        let show = |r: Result<String, crate::validate::ValidationError>| match r {
            Ok(s) => s,
            Err(e) => format!("error: {e}"),
        };
        let a = decode_at::<A>(&root, v.clone(), Names::Json)
            .map(|a| serde_json::to_string(&a).unwrap());
        let b = decode_at::<B>(&root, v.clone(), Names::Json)
            .map(|b| serde_json::to_string(&b).unwrap());
        assert_eq!(show(a), show(b), "{v}");
    }

    #[test]
    fn behaves_like_the_derived_structs() {
        let item = json!({"targetRef": {"kind": "Mesh"}, "default": {"a": 1}});
        let cases = [
            json!({}),
            json!({"targetRef": {"kind": "Mesh"}}),
            json!({"targetRef": {"kind": "Mesh"}, "to": [item], "from": [item]}),
            json!({"from": [], "targetRef": {"kind": "Mesh"}, "to": []}),
            json!({"to": null, "from": null}),
            json!({"to": [item]}),
            json!({"from": [item]}),
            json!({"default": {}}),
            json!({"tO": []}),
            json!({"targetref": {}}),
            json!({"to": 5}),
            json!({"to": [{"targetRef": {"kind": "Mesh"}, "extra": 1}]}),
            json!({"from": [5]}),
            json!({"targetRef": 5}),
            json!({"targetRef": {"kind": "Nope"}}),
            json!([]),
            json!([{"kind": "Mesh"}]),
            json!([{"kind": "Mesh"}, [item]]),
            json!([{"kind": "Mesh"}, [item], [item]]),
            json!([{"kind": "Mesh"}, [item], [item], 1]),
            json!(5),
            json!("x"),
            json!(null),
        ];
        for v in &cases {
            same::<Envelope<Both>, derived::MeshTimeout>(v);
            same::<Envelope<FromFirst>, derived::MeshRateLimit>(v);
            same::<Envelope<ToOnly>, derived::MeshRetry>(v);
            same::<Envelope<FromOnly>, derived::MeshTrafficPermission>(v);
        }
    }

    #[test]
    fn absent_lists_are_never_encoded() {
        let e = Envelope::<ToOnly> {
            to: Some(Vec::new()),
            ..Envelope::default()
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"targetRef":{},"to":[]}"#
        );
        assert!(e.from_items().is_empty());
    }
}
