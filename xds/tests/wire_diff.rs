//! `wire_diff::encoded_diff`, which renders only the parts of two encodings that differ, gives
//! exactly the operations of `json_patch::diff` on the two full renderings: checked on every
//! pair of same-typed resources (up to a cap per type) that the test scenarios generate, Live
//! and Shadow, so the pairs cover changed durations, added and removed fields and list
//! elements, `Any` payloads of one and of different types, maps and oneofs.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use prost::{Message, Name};
use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::View;
use umbra_xds::render::encoded_to_json;
use umbra_xds::snapshot::Snapshot;
use umbra_xds::wire_diff::encoded_diff;

/// Distinct encodings per message type, at most `cap` each.
#[derive(Default)]
struct Corpus(BTreeMap<String, BTreeSet<Vec<u8>>>);

impl Corpus {
    fn add<M: Message + Name>(&mut self, m: &M, cap: usize) {
        let set = self.0.entry(M::full_name()).or_default();
        if set.len() < cap {
            set.insert(m.encode_to_vec());
        }
    }

    fn add_snapshot(&mut self, s: &Snapshot, cap: usize) {
        s.clusters.values().for_each(|m| self.add(&**m, cap));
        s.endpoints.values().for_each(|m| self.add(&**m, cap));
        s.listeners.values().for_each(|m| self.add(&**m, cap));
        s.routes.values().for_each(|m| self.add(&**m, cap));
    }
}

#[test]
fn pruned_diff_equals_the_diff_of_full_renderings() {
    let data = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut corpus = Corpus::default();
    let mut files: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for path in files {
        let Ok(resources) = Resource::all_from_bytes(&std::fs::read(&path).unwrap()) else {
            continue;
        };
        if !resources.iter().any(|r| r.ty() == ResourceType::Mesh) {
            continue;
        }
        for dp in resources
            .iter()
            .filter(|r| r.ty() == ResourceType::Dataplane)
        {
            for view in [View::Live, View::Shadow] {
                if let Ok(s) = common::try_snapshot(&resources, &dp.meta.name, view) {
                    corpus.add_snapshot(&s, 40);
                }
            }
        }
    }
    let mut pairs = 0;
    let mut changed = 0;
    for (type_name, encodings) in &corpus.0 {
        assert!(encodings.len() > 1, "{type_name}: too few resources");
        for a in encodings {
            let full_a = encoded_to_json(type_name, a).unwrap();
            for b in encodings {
                let full_b = encoded_to_json(type_name, b).unwrap();
                let expected = json_patch::diff(&full_a, &full_b).0;
                let mut prefix = json_patch::jsonptr::PointerBuf::new();
                let mut actual = Vec::new();
                encoded_diff(type_name, a, b, &mut prefix, &mut actual).unwrap();
                assert_eq!(
                    serde_json::to_value(&actual).unwrap(),
                    serde_json::to_value(&expected).unwrap(),
                    "{type_name}:\n{full_a:#}\n->\n{full_b:#}"
                );
                pairs += 1;
                changed += usize::from(!expected.is_empty());
            }
        }
    }
    assert!(
        pairs > 1000 && changed > 500,
        "{pairs} pairs, {changed} changed"
    );
}
