#!/usr/bin/env python3
"""Writes the Kubernetes protobuf schemas under k8s.io/ that build.rs compiles.

Why generated, and from what: Kubernetes' own generated.proto files are not
packaged on any registry this project builds from, but two crates.io crates
together carry everything a decoder needs:

- k8s-pb 0.8.0 (Kubernetes 1.33's protos compiled by prost-build) has every
  message with its field numbers, wire types and labels, but prost renamed
  the fields to snake_case (podIP -> pod_ip), which loses the JSON names;
- k8s-openapi 0.29.0 (the crate the shim already uses, module v1_33) has the
  exact JSON name of every field of every type.

This script joins them: each message of k8s-pb becomes a proto2 message whose
field names are the JSON names (Kubernetes' proto field names are its JSON
names), matched per type by comparing names without case or underscores, and
whose message names are k8s-openapi's (PodIP, not prost's PodIp). Fields and
messages are kept in k8s-pb's order, which is the order of the .proto files.

Only the packages in ROOTS and what they import are written. Run it from the
repository root after `cargo info k8s-pb@0.8.0` (which puts the crate in
cargo's cache) whenever the Kubernetes version changes:

    python3 apiserver/proto/generate.py

It prints what it could not match, so a new version's surprises are seen.
"""

import glob
import os
import re
import sys
import tarfile

K8S_PB = "k8s-pb-0.8.0"
K8S_OPENAPI = "k8s-openapi-0.29.0"
OPENAPI_VERSION = "v1_33"

# k8s-pb module paths (under src/) of the packages the shim serves or will.
ROOTS = [
    "api/core/v1",
    "api/apps/v1",
    "api/batch/v1",
    "api/coordination/v1",
    "api/rbac/v1",
    "api/autoscaling/v1",
    "api/autoscaling/v2",
    "api/policy/v1",
    "api/networking/v1",
    "api/discovery/v1",
    "api/authentication/v1",
    "api/authorization/v1",
    "api/scheduling/v1",
]

HEADER = """\
// Copyright The Kubernetes Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

// The wire schema of Kubernetes 1.33's {path}: messages, field numbers and
// types from the k8s-pb 0.8.0 crate, field names (the JSON names) from
// k8s-openapi 0.29.0. Written by apiserver/proto/generate.py; do not edit.

syntax = "proto2";

package {package};
"""


def crate_src(name):
    """Extracts crate `name` from cargo's download cache into /tmp; returns its src/."""
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(os.path.join(home, "registry/cache/*", name + ".crate"))
    if not found:
        sys.exit(f"{name}.crate is not in cargo's cache: run `cargo info {name.rsplit('-', 1)[0]}@{name.rsplit('-', 1)[1]}`")
    out = os.path.join("/tmp", "proto-generate")
    if not os.path.isdir(os.path.join(out, name)):
        with tarfile.open(found[0]) as t:
            t.extractall(out, filter="data")
    return os.path.join(out, name, "src")


def rust_structs(text):
    """The prost structs of a module: [(name, [(attr, field, rust_type)])]."""
    text = "\n".join(l for l in text.splitlines() if not l.strip().startswith("///"))
    structs = []
    for m in re.finditer(r"^pub struct (\w+) \{\n(.*?)^\}", text, re.M | re.S):
        fields = []
        body = m.group(2)
        for f in re.finditer(r"#\[prost\((.*?)\)\]\s*pub (?:r#)?(\w+):\s*", body, re.S):
            # The type runs to the first comma outside angle brackets.
            depth, i = 0, f.end()
            while i < len(body) and not (body[i] == "," and depth == 0):
                depth += {"<": 1, ">": -1}.get(body[i], 0)
                i += 1
            fields.append((f.group(1), f.group(2), "".join(body[f.end():i].split()).replace(",>", ">")))
        structs.append((m.group(1), fields))
    return structs


def openapi_types(src, module):
    """JSON names by type of one k8s-openapi module: {lower type name: (name, {key: json})}."""
    types = {}
    for path in glob.glob(os.path.join(src, OPENAPI_VERSION, module, "*.rs")):
        text = open(path).read()
        m = re.search(r"^pub struct (\w+)", text, re.M)
        if not m:
            continue
        names = re.findall(r'"([^"]+)" => Field::Key_\w+,', text)
        types[m.group(1).lower()] = (m.group(1), {key(n): n for n in names})
    return types


def key(name):
    return name.replace("_", "").lower()


def lower_camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def proto_path(module):
    """Where Kubernetes keeps a package's schema (its Go import path)."""
    return "k8s.io/" + module + "/generated.proto"


def package_of(module):
    return "k8s.io." + module.replace("/", ".")


def main():
    pb, openapi = crate_src(K8S_PB), crate_src(K8S_OPENAPI)
    modules, todo = {}, list(ROOTS)
    while todo:
        module = todo.pop()
        if module in modules:
            continue
        structs = rust_structs(open(os.path.join(pb, module, "mod.rs")).read())
        modules[module] = structs
        for _, fields in structs:
            for _, _, ty in fields:
                target = resolve(module, ty)[0]
                if target not in modules and target != module:
                    todo.append(target)

    # Message names: k8s-openapi's spelling where the type is there.
    openapi_by_module = {m: openapi_types(openapi, m) for m in modules}
    names = {}
    for module, structs in modules.items():
        for name, _ in structs:
            names[(module, name)] = openapi_by_module[module].get(name.lower(), (name, {}))[0]
    every_json = {}
    for types in openapi_by_module.values():
        for _, keys in types.values():
            for k, j in keys.items():
                every_json.setdefault(k, set()).add(j)

    # Pass 1: every field's JSON name.
    problems, inline = [], []
    json_names = {}
    for module, structs in modules.items():
        for name, fields in structs:
            known = openapi_by_module[module].get(name.lower(), (None, {}))[1]
            for _, field, _ in fields:
                json = known.get(key(field))
                if json is None:
                    guesses = every_json.get(key(field), set())
                    json = next(iter(guesses)) if len(guesses) == 1 else lower_camel(field)
                json_names[(module, name, field)] = json

    def keys_of(module, struct):
        """The JSON keys a message stands for, its inlined messages' included."""
        out = set()
        for _, field, ty in dict(modules[module])[struct]:
            target, inner = resolve(module, ty)
            if (module, struct, field) in inlined:
                out |= keys_of(target, inner)
            else:
                out.add(key(json_names[(module, struct, field)]))
        return out

    # Pass 2: fields k8s-openapi's type lacks are Go structs embedded with
    # `json:",inline"` when the type has all of their fields: in JSON their
    # fields are the parent's. Anything else is a version difference.
    inlined = set()
    for module, structs in modules.items():
        for name, fields in structs:
            known = openapi_by_module[module].get(name.lower(), (None, {}))[1]
            for _, field, ty in fields:
                target, inner = resolve(module, ty)
                if known and key(field) not in known and inner:
                    if all(key(json_names[(target, inner, f)]) in known for _, f, _ in dict(modules[target])[inner]):
                        inlined.add((module, name, field))
                        inline.append(f"{package_of(module)}.{names[(module, name)]}.{json_names[(module, name, field)]}")
                if known and key(field) not in known and (module, name, field) not in inlined:
                    problems.append(f"{module} {name}.{field}: not in k8s-openapi {OPENAPI_VERSION}")
            if known:
                for k in known.keys() - keys_of(module, name) - {"apiversion", "kind"}:
                    problems.append(f"{module} {name}: k8s-openapi {OPENAPI_VERSION} has {known[k]}, the protos do not")

    for module, structs in sorted(modules.items()):
        imports, lines = set(), []
        for name, fields in structs:
            lines.append(f"\nmessage {names[(module, name)]} {{")
            for attr, field, ty in fields:
                label, proto_ty = field_type(attr, module, ty, names, imports)
                number = re.search(r'tag = "(\d+)"', attr).group(1)
                lines.append(f"  {label}{proto_ty} {json_names[(module, name, field)]} = {number};")
            lines.append("}")
        path = os.path.join("apiserver/proto", proto_path(module))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as out:
            out.write(HEADER.replace("{path}", module).replace("{package}", package_of(module)))
            if imports:
                out.write("\n" + "".join(f'import "{i}";\n' for i in sorted(imports)))
            out.write("\n".join(lines) + "\n")
        print(f"wrote {path}: {len(structs)} messages")
    with open("apiserver/proto/inline.txt", "w") as out:
        out.write("".join(f + "\n" for f in sorted(inline)))
    print(f"wrote apiserver/proto/inline.txt: {len(inline)} inline fields")
    for p in problems:
        print("unmatched:", p)


def resolve(module, rust_type):
    """The (module, struct) a field's Rust type names, seen from `module`."""
    inner = rust_type
    for wrapper in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while inner.startswith(wrapper):
            inner = inner[len(wrapper):-1]
    if inner.startswith("::std::collections::BTreeMap<") or inner.startswith("::prost::alloc::collections::BTreeMap<"):
        inner = inner[inner.index(",") + 1:-1].strip()
    if inner.startswith("::") or "::" not in inner and not inner[:1].isupper():
        return module, None  # a scalar or string
    parts = inner.split("::")
    path = module.split("/")
    while parts[0] == "super":
        parts.pop(0)
        path.pop()
    return "/".join(path + parts[:-1]), parts[-1]


SCALARS = {"string", "bool", "int32", "int64", "double", "bytes"}


def field_type(attr, module, ty, names, imports):
    """The label and proto type of a field from its prost attribute and Rust type."""
    def message():
        target, struct = resolve(module, ty)
        if target != module:
            imports.add(proto_path(target))
            return "." + package_of(target) + "." + names[(target, struct)]
        return names[(target, struct)]

    m = re.match(r'(?:btree_)?map = "string, (\w+)"', attr)
    if m:
        value = message() if m.group(1) == "message" else m.group(1)
        return "", f"map<string, {value}>"
    kind = attr.split(",")[0].split("=")[0].strip()
    label = "repeated " if "repeated" in attr else "optional "
    if kind == "message":
        return label, message()
    if kind not in SCALARS:
        sys.exit(f"{module}: unhandled prost attribute {attr}")
    return label, kind


if __name__ == "__main__":
    main()
