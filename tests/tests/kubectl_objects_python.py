"""The official Kubernetes Python client against mesopod's API shim: create and
read back a ConfigMap and a Secret. Usage: kubectl_objects_python.py URL"""
import base64
import sys

from kubernetes import client

config = client.Configuration(host=sys.argv[1])
api = client.CoreV1Api(client.ApiClient(config))

cm = client.V1ConfigMap(
    metadata=client.V1ObjectMeta(name="py-settings", labels={"made-by": "python"}),
    data={"mode": "fast"},
)
api.create_namespaced_config_map("default", cm)
read = api.read_namespaced_config_map("py-settings", "default")
assert read.data == {"mode": "fast"}, read.data
listed = api.list_namespaced_config_map("default", label_selector="made-by=python")
assert [i.metadata.name for i in listed.items] == ["py-settings"], listed.items

secret = client.V1Secret(
    metadata=client.V1ObjectMeta(name="py-token"),
    type="kubernetes.io/basic-auth",
    string_data={"username": "admin", "password": "s3cret"},
)
api.create_namespaced_secret("default", secret)
read = api.read_namespaced_secret("py-token", "default")
assert read.type == "kubernetes.io/basic-auth", read.type
assert base64.b64decode(read.data["password"]) == b"s3cret", read.data

try:
    api.create_namespaced_secret(
        "default",
        client.V1Secret(metadata=client.V1ObjectMeta(name="py-bad"), type="kubernetes.io/tls"),
    )
    raise SystemExit("an invalid TLS secret was accepted")
except client.exceptions.ApiException as e:
    assert e.status == 422, e

api.delete_namespaced_secret("py-token", "default")
print("ok")
