//! `umbractl apply/get/delete` as a script runs it: the real binary against a real in-process
//! Global (memory store). Checks output, round trips and every exit status the docs promise.

mod common;

const POLICIES: &str = "\
type: MeshTimeout
mesh: default
name: timeout-global
labels: {kuma.io/effect: shadow}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: Mesh}
    default: {connectionTimeout: 2s, idleTimeout: 1h}
---
type: Timeout
mesh: default
name: timeout-all
sources: [{match: {kuma.io/service: '*'}}]
destinations: [{match: {kuma.io/service: '*'}}]
conf: {connectTimeout: 5s}
---
type: Mesh
name: default
skipCreatingInitialPolicies: ['*']
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_delete_with_exit_codes_a_script_can_rely_on() {
    let global = common::Global::start().await;
    let url = global.url.clone();

    // Multi-document YAML from stdin; the Mesh (last in the file) is applied first.
    let (code, out, err) =
        common::text(&common::umbractl(&url, &["apply", "-f", "-"], POLICIES).await);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "Mesh default created",
            "MeshTimeout default/timeout-global created",
            "Timeout default/timeout-all created"
        ]
    );
    let (code, out, _) =
        common::text(&common::umbractl(&url, &["apply", "-f", "-"], POLICIES).await);
    assert_eq!(code, 0);
    assert!(
        out.contains("MeshTimeout default/timeout-global updated"),
        "{out}"
    );

    // Table, JSON and YAML; YAML applies back unchanged.
    let (code, out, err) =
        common::text(&common::umbractl(&url, &["get", "meshtimeouts", "-m", "default"], "").await);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["MESH", "NAME", "TARGETREF", "EFFECT", "AGE"]);
    assert_eq!(
        &rows[1][..4],
        ["default", "timeout-global", "Mesh", "shadow"]
    );
    let (code, out, _) = common::text(
        &common::umbractl(&url, &["get", "timeout", "timeout-all", "-o", "json"], "").await,
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["conf"]["connectTimeout"], "5s");
    let (code, yaml, _) =
        common::text(&common::umbractl(&url, &["get", "MeshTimeout", "-o", "yaml"], "").await);
    assert_eq!(code, 0);
    assert!(yaml.contains("name: timeout-global"), "{yaml}");
    let (code, out, err) =
        common::text(&common::umbractl(&url, &["apply", "-f", "-"], &yaml).await);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "MeshTimeout default/timeout-global updated");
    let (code, out, _) = common::text(&common::umbractl(&url, &["get", "meshes"], "").await);
    assert_eq!(code, 0);
    assert!(out.lines().nth(1).unwrap().starts_with("default"), "{out}");

    // Invalid local input: exit 2, every problem listed, nothing sent.
    let bad = "type: Mesh\nname: other\nskipCreatingInitialPolicies: ['*']\n---\ntype: MeshTimeout\nmesh: default\nname: t2\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: soon}\n";
    let (code, out, err) = common::text(&common::umbractl(&url, &["apply", "-f", "-"], bad).await);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("nothing applied") && err.contains("spec.to[0].default.idleTimeout"),
        "{err}"
    );
    let (code, _, _) = common::text(&common::umbractl(&url, &["get", "mesh", "other"], "").await);
    assert_eq!(
        code, 4,
        "an invalid file must not apply its valid documents"
    );
    let (code, _, err) =
        common::text(&common::umbractl(&url, &["apply", "-f", "/nonexistent.yaml"], "").await);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = common::text(&common::umbractl(&url, &["get", "widgets"], "").await);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown resource type"), "{err}");

    // The server refuses (a policy in a mesh that does not exist): exit 1 with its reason,
    // and the documents applied before it are put back as they were (issue 41: a file is
    // applied whole or not at all): the new Mesh deleted, the replaced MeshTimeout restored.
    let orphan = "type: Mesh\nname: second\nskipCreatingInitialPolicies: ['*']\n---\ntype: MeshTimeout\nmesh: default\nname: timeout-global\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 7s}\n---\ntype: MeshTimeout\nmesh: missing\nname: t3\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 1s}\n";
    let (code, out, err) =
        common::text(&common::umbractl(&url, &["apply", "-f", "-"], orphan).await);
    assert!(code == 1 || code == 4, "{code}: {out}{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "Mesh second created",
            "MeshTimeout default/timeout-global updated"
        ]
    );
    assert!(
        err.contains("MeshTimeout missing/t3")
            && err.contains("the 2 document(s) applied before it were put back"),
        "{err}"
    );
    let (code, _, _) = common::text(&common::umbractl(&url, &["get", "mesh", "second"], "").await);
    assert_eq!(code, 4, "the created Mesh is deleted again");
    let (_, json, _) = common::text(
        &common::umbractl(
            &url,
            &["get", "meshtimeout", "timeout-global", "-o", "json"],
            "",
        )
        .await,
    );
    let restored: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        restored["spec"]["to"][0]["default"]["idleTimeout"], "1h",
        "the replaced MeshTimeout is back: {restored}"
    );
    assert_eq!(restored["labels"]["kuma.io/effect"], "shadow", "{restored}");

    // --continue-on-error: the refused documents (locally and by the server) are skipped,
    // the others applied, and the skipped ones listed (exit 1).
    let mixed = format!("{orphan}---\n{}", bad.split("---\n").nth(1).unwrap());
    let (code, out, err) = common::text(
        &common::umbractl(&url, &["apply", "--continue-on-error", "-f", "-"], &mixed).await,
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("Mesh second created"), "{out}");
    assert!(
        out.contains("MeshTimeout default/timeout-global updated"),
        "{out}"
    );
    assert!(
        err.contains("skipped:")
            && err.contains("spec.to[0].default.idleTimeout")
            && err.contains("MeshTimeout missing/t3"),
        "{err}"
    );
    let (code, _, _) = common::text(&common::umbractl(&url, &["get", "mesh", "second"], "").await);
    assert_eq!(code, 0, "the valid documents are applied");

    // Delete, then not found.
    let (code, out, _) = common::text(
        &common::umbractl(&url, &["delete", "meshtimeout", "timeout-global"], "").await,
    );
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "MeshTimeout timeout-global deleted");
    let (code, _, err) = common::text(
        &common::umbractl(&url, &["delete", "meshtimeout", "timeout-global"], "").await,
    );
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("404"), "{err}");
    let (code, out, _) = common::text(&common::umbractl(&url, &["get", "meshtimeouts"], "").await);
    assert_eq!((code, out.trim()), (0, "No MeshTimeout found."));

    // Zones on a Global (none connected), and an unreachable control plane: exit 3.
    let (code, out, _) = common::text(&common::umbractl(&url, &["get", "zones"], "").await);
    assert_eq!((code, out.trim()), (0, "No Zone found."));
    global.stop().await;
    let (code, _, err) = common::text(&common::umbractl(&url, &["get", "meshes"], "").await);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("cannot reach"), "{err}");
}

/// A Kubernetes-form file (mixed with a universal Mesh) applies, and `get --format k8s` prints
/// the same documents back; an invalid one names its Kubernetes paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_documents_apply_and_print_back_unchanged() {
    const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
    const K8S: &str = "\
apiVersion: kuma.io/v1alpha1
kind: MeshTimeout
metadata:
  name: timeout-k8s
  namespace: kuma-system
  labels:
    kuma.io/effect: shadow
    kuma.io/mesh: default
spec:
  targetRef:
    kind: Mesh
  to:
  - default:
      idleTimeout: 1h
    targetRef:
      kind: Mesh
---
apiVersion: kuma.io/v1alpha1
kind: TrafficPermission
mesh: default
metadata:
  name: allow-all
spec:
  destinations:
  - match:
      kuma.io/service: '*'
  sources:
  - match:
      kuma.io/service: '*'
";
    let global = common::Global::start().await;
    let url = global.url.clone();
    let (code, out, err) = common::text(
        &common::umbractl(&url, &["apply", "-f", "-"], &format!("{MESH}---\n{K8S}")).await,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("MeshTimeout default/timeout-k8s created"),
        "{out}"
    );

    let (code, first, err) = common::text(
        &common::umbractl(
            &url,
            &[
                "get",
                "MeshTimeout",
                "timeout-k8s",
                "-o",
                "yaml",
                "--format",
                "k8s",
            ],
            "",
        )
        .await,
    );
    assert_eq!(code, 0, "{err}");
    let (code, second, err) = common::text(
        &common::umbractl(
            &url,
            &[
                "get",
                "traffic-permissions",
                "-o",
                "yaml",
                "--format",
                "k8s",
            ],
            "",
        )
        .await,
    );
    assert_eq!(code, 0, "{err}");
    let decode = |s: &str| {
        umbra_core::codec::decode_documents(s.as_bytes(), umbra_core::codec::Limits::default())
            .unwrap()
    };
    let mut got = decode(&first);
    got.extend(decode(&second));
    assert_eq!(got, decode(K8S));

    // The universal answer carries the mesh, not the label.
    let (_, json, _) = common::text(
        &common::umbractl(
            &url,
            &["get", "meshtimeout", "timeout-k8s", "-o", "json"],
            "",
        )
        .await,
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (v["mesh"].as_str(), v["labels"].get("kuma.io/mesh")),
        (Some("default"), None)
    );

    let bad = "apiVersion: kuma.io/v1alpha1\nkind: MeshTimeout\nmetadata: {name: bad}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: soon}\n";
    let (code, _, err) = common::text(&common::umbractl(&url, &["apply", "-f", "-"], bad).await);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("(MeshTimeout bad)") && err.contains("spec.to[0].default.idleTimeout"),
        "{err}"
    );
}
