//! RFC 6902 operations between two encodings of one Envoy message, rendering only the parts
//! that differ.
//!
//! Rendering a resource to proto3 JSON (prost-reflect decode, then serialize) is most of the
//! cost of a shadow diff (see BENCHMARKS.md), yet a policy usually changes a few fields of a
//! large listener or cluster. Here both encodings are walked field by field along the message
//! descriptors: a field whose bytes are equal on both sides renders to equal JSON, so it is
//! skipped unrendered; a differing sub-message (including an `Any` payload of one type) is
//! descended into; anything else (scalars, maps, well-known types with their own JSON form) is
//! rendered alone and diffed with `json_patch::diff`.
//!
//! The operations are exactly those `json_patch::diff` gives on the two full renderings (with
//! sorted keys, as [`crate::render::encoded_to_json`] produces): that diff is compositional
//! (objects key by key, right-hand keys first in order, then removed keys; arrays index by
//! index), so pruning equal subtrees and diffing the rest in the same order changes nothing.
//! A test checks this on every pair of same-typed resources the test scenarios generate.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation};
use prost::encoding::{decode_key, decode_varint, WireType};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

use crate::render::{encoded_to_json, pool, RenderError};

/// One field record on the wire: its bytes (key included) and, when length-delimited, its
/// payload.
#[derive(Clone, Copy)]
struct Record<'a> {
    whole: &'a [u8],
    payload: &'a [u8],
}

/// The records of one encoding, ordered by field number, in wire order within a number (two
/// vectors rather than a map of vectors: one walk allocates two buffers per message level).
struct Records<'a> {
    numbers: Vec<u32>,
    recs: Vec<Record<'a>>,
}

impl<'a> Records<'a> {
    /// The records of field `number`, in wire order (empty when absent).
    fn get(&self, number: u32) -> &[Record<'a>] {
        let lo = self.numbers.partition_point(|n| *n < number);
        let hi = self.numbers.partition_point(|n| *n <= number);
        &self.recs[lo..hi]
    }

    /// The field numbers present, ascending, once each.
    fn distinct(&self) -> impl Iterator<Item = u32> + '_ {
        self.numbers
            .iter()
            .enumerate()
            .filter(|(i, n)| *i == 0 || self.numbers[i - 1] != **n)
            .map(|(_, n)| *n)
    }
}

/// The records of `bytes` by field number, in wire order; `None` when the bytes are not a
/// plain sequence of records (groups, truncation): the caller then renders the whole message.
fn records(bytes: &[u8]) -> Option<Records<'_>> {
    let mut out: Vec<(u32, Record<'_>)> = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let start = rest;
        let (tag, wire_type) = decode_key(&mut rest).ok()?;
        let payload = match wire_type {
            WireType::Varint => {
                decode_varint(&mut rest).ok()?;
                &[][..]
            }
            WireType::SixtyFourBit => {
                rest = rest.get(8..)?;
                &[][..]
            }
            WireType::ThirtyTwoBit => {
                rest = rest.get(4..)?;
                &[][..]
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut rest).ok()?).ok()?;
                let payload = rest.get(..len)?;
                rest = &rest[len..];
                payload
            }
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        let used = start.len() - rest.len();
        out.push((
            tag,
            Record {
                whole: &start[..used],
                payload,
            },
        ));
    }
    // Stable: records of one number keep their wire order (fields are usually in order already).
    out.sort_by_key(|(n, _)| *n);
    let (numbers, recs) = out.into_iter().unzip();
    Some(Records { numbers, recs })
}

fn same(a: &[Record<'_>], b: &[Record<'_>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.whole == y.whole)
}

/// Well-known types have their own JSON forms (`"5s"`, a bare scalar, a free object...).
fn has_own_json_form(desc: &MessageDescriptor) -> bool {
    desc.full_name().starts_with("google.protobuf.")
}

/// Appends to `ops` the operations turning the JSON of `live` into that of `shadow` (both
/// encodings of `type_name`), with every path under `prefix`.
///
/// # Errors
/// [`RenderError`] when the type is unknown or a part that differs cannot be rendered.
pub fn encoded_diff(
    type_name: &str,
    live: &[u8],
    shadow: &[u8],
    prefix: &mut PointerBuf,
    ops: &mut Vec<PatchOperation>,
) -> Result<(), RenderError> {
    let desc = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| RenderError::UnknownType(type_name.to_owned()))?;
    Walk { path: prefix, ops }.message(&desc, live, shadow)
}

/// A walk over two encodings: the JSON Pointer of the part being compared, and the operations
/// found so far.
struct Walk<'a> {
    path: &'a mut PointerBuf,
    ops: &'a mut Vec<PatchOperation>,
}

impl Walk<'_> {
    /// Two encodings of `desc`, at the current path.
    fn message(
        &mut self,
        desc: &MessageDescriptor,
        live: &[u8],
        shadow: &[u8],
    ) -> Result<(), RenderError> {
        if live == shadow {
            return Ok(());
        }
        if desc.full_name() == "google.protobuf.Any" {
            return self.any(desc, live, shadow);
        }
        if has_own_json_form(desc) {
            return self.whole(desc, live, shadow);
        }
        let (Some(l), Some(r)) = (records(live), records(shadow)) else {
            return self.whole(desc, live, shadow);
        };
        // Every field number on either side, by JSON name (the order of sorted keys).
        let mut fields: Vec<(FieldDescriptor, &[Record<'_>], &[Record<'_>])> = Vec::new();
        for number in l
            .distinct()
            .chain(r.distinct().filter(|n| l.get(*n).is_empty()))
        {
            let Some(field) = desc.get_field(number) else {
                return self.whole(desc, live, shadow); // unknown field: render as a whole
            };
            fields.push((field, l.get(number), r.get(number)));
        }
        fields.sort_by(|a, b| a.0.json_name().cmp(b.0.json_name()));
        // As json_patch diffs objects: the right-hand keys in order, then the removed ones.
        for (field, lrecs, rrecs) in fields.iter().filter(|f| !f.2.is_empty()) {
            self.path.push_back(field.json_name());
            if lrecs.is_empty() {
                if let Some(value) = render_field(desc, field, rrecs)? {
                    self.add(value);
                }
            } else if !same(lrecs, rrecs) {
                self.field(desc, field, lrecs, rrecs)?;
            }
            self.path.pop_back();
        }
        for (field, _, _) in fields.iter().filter(|f| f.2.is_empty()) {
            self.path.push_back(field.json_name());
            self.remove();
            self.path.pop_back();
        }
        Ok(())
    }

    /// A field present, and different, on both sides.
    fn field(
        &mut self,
        parent: &MessageDescriptor,
        field: &FieldDescriptor,
        live: &[Record<'_>],
        shadow: &[Record<'_>],
    ) -> Result<(), RenderError> {
        match field.kind() {
            Kind::Message(element) if field.is_list() => {
                // As json_patch diffs arrays: index by index, removals shifting later indexes.
                let mut shift = 0usize;
                for i in 0..live.len().max(shadow.len()) {
                    self.path.push_back(i - shift);
                    match (live.get(i), shadow.get(i)) {
                        (Some(l), Some(r)) => self.message(&element, l.payload, r.payload)?,
                        (Some(_), None) => {
                            shift += 1;
                            self.remove();
                        }
                        (None, Some(r)) => {
                            let value = render_field(parent, field, std::slice::from_ref(r))?
                                .and_then(|v| match v {
                                    Value::Array(mut a) if a.len() == 1 => a.pop(),
                                    _ => None,
                                })
                                .unwrap_or(Value::Null);
                            self.add(value);
                        }
                        (None, None) => {}
                    }
                    self.path.pop_back();
                }
                Ok(())
            }
            Kind::Message(inner) if !field.is_map() && live.len() == 1 && shadow.len() == 1 => {
                self.message(&inner, live[0].payload, shadow[0].payload)
            }
            _ => {
                // Scalars, enums, repeated scalars, maps: rendered alone.
                let l = render_field(parent, field, live)?;
                let r = render_field(parent, field, shadow)?;
                self.json_ops(l.as_ref(), r.as_ref());
                Ok(())
            }
        }
    }

    /// `Any`: one payload type on both sides renders as that message's fields next to an equal
    /// `@type`, so the payloads are diffed in place; anything else is rendered whole.
    fn any(
        &mut self,
        desc: &MessageDescriptor,
        live: &[u8],
        shadow: &[u8],
    ) -> Result<(), RenderError> {
        let parts = |bytes| {
            let recs = records(bytes)?;
            let one = |n: u32| match recs.get(n) {
                [] => Some(&[][..]),
                [r] => Some(r.payload),
                _ => None,
            };
            Some((one(1)?, one(2)?))
        };
        if let (Some((lt, lv)), Some((rt, rv))) = (parts(live), parts(shadow)) {
            let payload = std::str::from_utf8(lt)
                .ok()
                .filter(|_| lt == rt)
                .and_then(|url| url.rsplit('/').next())
                .and_then(|name| pool().get_message_by_name(name))
                .filter(|d| !has_own_json_form(d));
            if let Some(payload) = payload {
                return self.message(&payload, lv, rv);
            }
        }
        self.whole(desc, live, shadow)
    }

    /// Render both sides whole and diff them.
    fn whole(
        &mut self,
        desc: &MessageDescriptor,
        live: &[u8],
        shadow: &[u8],
    ) -> Result<(), RenderError> {
        let l = encoded_to_json(desc.full_name(), live)?;
        let r = encoded_to_json(desc.full_name(), shadow)?;
        self.json_ops(Some(&l), Some(&r));
        Ok(())
    }

    /// The operations between two JSON values (`None`: absent) at `path`.
    fn json_ops(&mut self, live: Option<&Value>, shadow: Option<&Value>) {
        match (live, shadow) {
            (Some(l), Some(r)) => {
                for mut op in json_patch::diff(l, r).0 {
                    prefix_op(&mut op, self.path);
                    self.ops.push(op);
                }
            }
            (None, Some(r)) => self.add(r.clone()),
            (Some(_), None) => self.remove(),
            (None, None) => {}
        }
    }

    /// `add` of `value` at the current path.
    fn add(&mut self, value: Value) {
        self.ops.push(PatchOperation::Add(AddOperation {
            path: self.path.clone(),
            value,
        }));
    }

    /// `remove` of the current path.
    fn remove(&mut self) {
        self.ops.push(PatchOperation::Remove(RemoveOperation {
            path: self.path.clone(),
        }));
    }
}

/// The JSON of one field of `parent` holding `records`; `None` when it renders to nothing.
fn render_field(
    parent: &MessageDescriptor,
    field: &FieldDescriptor,
    records: &[Record<'_>],
) -> Result<Option<Value>, RenderError> {
    let bytes: Vec<u8> = records
        .iter()
        .flat_map(|r| r.whole.iter().copied())
        .collect();
    let mut json = encoded_to_json(parent.full_name(), &bytes)?;
    Ok(json
        .as_object_mut()
        .and_then(|m| m.remove(field.json_name())))
}
/// Prefix every path (and `from`) of `op` with `prefix`: an operation of a nested document
/// moved to its place in the enclosing one.
fn prefix_op(op: &mut PatchOperation, prefix: &json_patch::jsonptr::PointerBuf) {
    let join = |p: &json_patch::jsonptr::PointerBuf| {
        let mut out = prefix.clone();
        for t in p.tokens() {
            out.push_back(t);
        }
        out
    };
    match op {
        PatchOperation::Add(o) => o.path = join(&o.path),
        PatchOperation::Remove(o) => o.path = join(&o.path),
        PatchOperation::Replace(o) => o.path = join(&o.path),
        PatchOperation::Move(o) => {
            o.path = join(&o.path);
            o.from = join(&o.from);
        }
        PatchOperation::Copy(o) => {
            o.path = join(&o.path);
            o.from = join(&o.from);
        }
        PatchOperation::Test(o) => o.path = join(&o.path),
    }
}
