//! The `to`/`from` flags of [`umbra_core::type_info`] agree with the `spec` properties of
//! Kuma 2.7.29's published policy schemas (`../shared/conformance/kuma-v2.7.29/openapi/
//! policies/<type>/schema.yaml`, or under `UMBRA_CONFORMANCE_DIR`). A missing schema is a
//! failure, not a skip.

use umbra_core::codec::{decode_one, Limits};
use umbra_core::resource::ResourceType;

#[test]
fn to_and_from_flags_match_kumas_policy_schemas() {
    let dir = std::env::var_os("UMBRA_CONFORMANCE_DIR").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/conformance/kuma-v2.7.29")
        },
        std::path::PathBuf::from,
    );
    let mut checked = 0;
    for ty in ResourceType::ALL.iter().filter(|t| t.is_target_ref()) {
        let path = dir.join(format!(
            "openapi/policies/{}/schema.yaml",
            ty.name().to_lowercase()
        ));
        let text = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (set UMBRA_CONFORMANCE_DIR)", path.display()));
        let doc = decode_one(&text, Limits::default()).expect("a YAML schema");
        let spec = &doc["properties"]["spec"]["properties"];
        assert_eq!(
            ty.has_to_target_ref(),
            spec.get("to").is_some(),
            "{ty:?} to"
        );
        assert_eq!(
            ty.has_from_target_ref(),
            spec.get("from").is_some(),
            "{ty:?} from"
        );
        checked += 1;
    }
    assert_eq!(checked, 14, "every targetRef policy of Kuma 2.7");
}
