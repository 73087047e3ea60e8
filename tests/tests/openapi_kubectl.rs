//! OpenAPI with the real kubectl 1.27, 1.28, 1.30 and 1.33: `explain` from the v3 schemas
//! (and from v2 protobuf), the read-only metrics kinds' included, strict validation of unknown fields and duplicate keys, and a
//! multi-document file with a ConfigMap and a Pod.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::shim::*;
use common::*;
use testkit::{ok, stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_walks_the_served_schemas_from_v3_and_from_v2_protobuf() {
    let server = Server::start().await;
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server.url);
        let out = ok(&kc.run(&["explain", "pod.spec.containers"]).await);
        assert!(out.contains("KIND:") && out.contains("Pod"), "{v}: {out}");
        for field in ["image", "env", "volumeMounts", "resources"] {
            assert!(out.contains(field), "{v}: explain lacks {field}: {out}");
        }
        for target in [
            "configmap.data",
            "secret.stringData",
            "serviceaccount.automountServiceAccountToken",
        ] {
            let out = kc.run(&["explain", target]).await;
            assert!(
                out.status.success(),
                "{v} explain {target}: {}",
                stderr(&out)
            );
        }
        // The metrics kinds, read-only, are described as metrics-server describes them.
        let out = ok(&kc.run(&["explain", "podmetrics.containers"]).await);
        assert!(
            out.contains("PodMetrics")
                && out.contains("metrics.k8s.io")
                && out.contains("Metrics for all containers are collected within the same time")
                && out.contains("usage"),
            "{v}: {out}"
        );
        let out = ok(&kc.run(&["explain", "nodemetrics.usage"]).await);
        assert!(
            out.contains("The memory usage is the memory working set."),
            "{v}: {out}"
        );
        // The v2 document, which kubectl fetches as gnostic protobuf.
        let out = kc
            .run(&[
                "explain",
                "pod.spec.containers.image",
                "--output",
                "plaintext-openapiv2",
            ])
            .await;
        assert!(
            ok(&out).contains("Container image name"),
            "{v}: {}",
            stderr(&out)
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_and_1_28_load_openapi_v2_as_protobuf_then_leave_validation_to_the_server() {
    let server = Server::start().await;
    for k in &ISSUE_18_KUBECTLS[..2] {
        let v = kubectl_version(k);
        let yaml =
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: verbose-VER\ndata:\n  a: b\n"
                .replace("VER", &v.replace('.', "-"));
        let out = kubectl(k, &server.url)
            .run_stdin(&["create", "-v=8", "-f", "-"], Some(&yaml))
            .await;
        let log = stderr(&out);
        assert!(out.status.success(), "{v}: {log}");
        assert!(
            log.contains("GET") && log.contains("/openapi/v2"),
            "{v}: {log}"
        );
        assert!(
            log.contains("application/com.github.proto-openapi.spec.v2"),
            "{v}: kubectl asked for protobuf: {log}"
        );
        assert!(log.contains("fieldValidation=Strict"), "{v}: {log}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_refuses_unknown_fields_and_a_multi_document_file_applies() {
    let server = Server::start().await;
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server.url);
        let tag = v.replace('.', "-");
        let bad = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad-{tag}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    bogus: 1\n"
        );
        let out = kc
            .run_stdin(&["create", "--validate=strict", "-f", "-"], Some(&bad))
            .await;
        assert!(
            stderr(&out)
                .contains("strict decoding error: unknown field \"spec.containers[0].bogus\""),
            "{v}: {}",
            stderr(&out)
        );
        let bad_cm =
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad-{tag}\nextra: true\n");
        let out = kc.run_stdin(&["apply", "-f", "-"], Some(&bad_cm)).await;
        assert!(
            stderr(&out).contains("unknown field \"extra\""),
            "{v}: {}",
            stderr(&out)
        );
        let multi = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-{tag}\ndata:\n  mode: fast\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata:\n  name: app-{tag}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    envFrom:\n    - configMapRef:\n        name: app-{tag}\n"
        );
        let out = kc.apply(&multi).await;
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            [
                format!("configmap/app-{tag} created"),
                format!("pod/app-{tag} created")
            ],
            "{v}"
        );
        let again = kc.apply(&multi).await;
        assert!(
            again.contains(&format!("configmap/app-{tag} unchanged")),
            "{v}: {again}"
        );
        let out = ok(&kc
            .run_stdin(&["delete", "--wait=false", "-f", "-"], Some(&multi))
            .await);
        assert!(
            out.contains(&format!("configmap \"app-{tag}\" deleted")),
            "{v}: {out}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documents_are_served_as_kube_apiserver_serves_them() {
    let server = Server::start().await;
    testkit::init_crypto();
    let client = reqwest::Client::new();
    let get = |path: &str, accept: &str| {
        client
            .get(format!("{}{path}", server.url))
            .header("accept", accept)
            .send()
    };
    let json = get("/openapi/v2", "application/json").await.unwrap();
    assert_eq!(json.status().as_u16(), 200);
    let etag = json.headers()["etag"].to_str().unwrap().to_string();
    let doc: serde_json::Value = json.json().await.unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let pod = &doc["definitions"]["io.k8s.api.core.v1.Pod"];
    assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
    assert_eq!(
        pod["properties"]["spec"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.PodSpec"
    );

    let proto = get(
        "/openapi/v2",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    )
    .await
    .unwrap();
    assert_eq!(
        proto.headers()["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert!(
        proto.bytes().await.unwrap().starts_with(b"\x0a\x032.0"),
        "swagger = 1"
    );
    assert_eq!(
        get("/openapi/v2", "text/html")
            .await
            .unwrap()
            .status()
            .as_u16(),
        406
    );
    let cached = client
        .get(format!("{}/openapi/v2", server.url))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status().as_u16(), 304);

    let index: serde_json::Value = get("/openapi/v3", "application/json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = index["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let v3 = get(&url, "application/json").await.unwrap();
    assert_eq!(v3.headers()["cache-control"], "public, immutable");
    let v3: serde_json::Value = v3.json().await.unwrap();
    testkit::init_crypto();
    let no_follow = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let stale = no_follow
        .get(format!("{}/openapi/v3/api/v1?hash=0BSOLETE", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status().as_u16(), 301, "a stale hash moved");
    assert_eq!(stale.headers()["location"], url.as_str());
    for kind in [
        "Pod",
        "Node",
        "Event",
        "Namespace",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
    ] {
        let def = &v3["components"]["schemas"][format!("io.k8s.api.core.v1.{kind}")];
        assert_eq!(
            def["x-kubernetes-group-version-kind"][0]["kind"], kind,
            "{kind}"
        );
    }
    server.stop().await;
}
