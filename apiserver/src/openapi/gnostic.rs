//! OpenAPI v2 as the protobuf kubectl asks for: gnostic's `openapi.v2.Document`
//! (github.com/google/gnostic-models, `openapiv2/OpenAPIv2.proto`), encoded from the JSON
//! document. Field numbers are that file's; only what a Kubernetes document uses is
//! written (info, paths with their operations, definitions), and vendor extensions travel
//! as YAML in `Any.yaml`, as kube-openapi writes them.

use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::{Map, Value};

/// A protobuf message being written: the document's shape is only known at run time, so
/// fields are written one by one with prost's encoding primitives.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn key(&mut self, field: u32, wire: WireType) {
        encode_key(field, wire, &mut self.0);
    }

    /// A varint field, written even when zero (a `oneof` member says which it is).
    fn varint(&mut self, field: u32, v: u64) {
        self.key(field, WireType::Varint);
        encode_varint(v, &mut self.0);
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, WireType::LengthDelimited);
        encode_varint(b.len() as u64, &mut self.0);
        self.0.extend_from_slice(b);
    }

    /// A string field; proto3 leaves empty ones out.
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn msg(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            self.varint(field, 1);
        }
    }

    fn double(&mut self, field: u32, f: f64) {
        self.key(field, WireType::SixtyFourBit);
        self.0.extend_from_slice(&f.to_le_bytes());
    }

    fn int64(&mut self, field: u32, i: i64) {
        self.varint(field, i as u64);
    }
}

fn str_of<'a>(o: &'a Map<String, Value>, k: &str) -> &'a str {
    o.get(k).and_then(Value::as_str).unwrap_or("")
}

/// `Any { yaml = 2 }`.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    let yaml = serde_yaml_ng::to_string(v).unwrap_or_default();
    m.string(2, &yaml);
    m
}

/// `NamedAny { name = 1, value = 2 }`, one per `x-` key of `o`.
fn vendor_extensions(m: &mut Msg, field: u32, o: &Map<String, Value>) {
    for (k, v) in o.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Msg::default();
        named.string(1, k);
        named.msg(2, any(v));
        m.msg(field, named);
    }
}

/// `Schema`.
fn schema(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(o) = v.as_object() else {
        return m;
    };
    m.string(1, str_of(o, "$ref"));
    m.string(2, str_of(o, "format"));
    m.string(3, str_of(o, "title"));
    m.string(4, str_of(o, "description"));
    if let Some(d) = o.get("default") {
        m.msg(5, any(d));
    }
    for (field, key) in [(6, "multipleOf"), (7, "maximum"), (9, "minimum")] {
        if let Some(f) = o.get(key).and_then(Value::as_f64) {
            m.double(field, f);
        }
    }
    m.boolean(8, o.get("exclusiveMaximum") == Some(&Value::Bool(true)));
    m.boolean(10, o.get("exclusiveMinimum") == Some(&Value::Bool(true)));
    for (field, key) in [
        (11, "maxLength"),
        (12, "minLength"),
        (14, "maxItems"),
        (15, "minItems"),
        (17, "maxProperties"),
        (18, "minProperties"),
    ] {
        if let Some(i) = o.get(key).and_then(Value::as_i64) {
            m.int64(field, i);
        }
    }
    m.string(13, str_of(o, "pattern"));
    m.boolean(16, o.get("uniqueItems") == Some(&Value::Bool(true)));
    for r in o
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.string(19, r.as_str().unwrap_or(""));
    }
    for e in o
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.msg(20, any(e));
    }
    match o.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Msg::default();
            item.varint(2, u64::from(*b));
            m.msg(21, item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Msg::default();
            item.msg(1, schema(s));
            m.msg(21, item);
        }
        _ => {}
    }
    let types: Vec<&str> = match o.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let mut item = Msg::default();
        for t in types {
            item.string(1, t);
        }
        m.msg(22, item);
    }
    let items: Vec<&Value> = match o.get("items") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => Vec::new(),
    };
    if !items.is_empty() {
        let mut item = Msg::default();
        for s in items {
            item.msg(1, schema(s));
        }
        m.msg(23, item);
    }
    for s in o
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.msg(24, schema(s));
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        m.msg(25, named_schemas(props));
    }
    m.boolean(27, o.get("readOnly") == Some(&Value::Bool(true)));
    if let Some(e) = o.get("example") {
        m.msg(30, any(e));
    }
    vendor_extensions(&mut m, 31, o);
    m
}

/// `Properties` / `Definitions`: `repeated NamedSchema additional_properties = 1`.
fn named_schemas(map: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (name, s) in map {
        let mut named = Msg::default();
        named.string(1, name);
        named.msg(2, schema(s));
        m.msg(1, named);
    }
    m
}

/// `ParametersItem { parameter = 1 }` of a query parameter, or of the body.
fn parameter(p: &Value) -> Msg {
    let o = p.as_object().cloned().unwrap_or_default();
    let mut inner = Msg::default();
    let mut param = Msg::default();
    if str_of(&o, "in") == "body" {
        inner.string(1, str_of(&o, "description"));
        inner.string(2, str_of(&o, "name"));
        inner.string(3, "body");
        inner.boolean(4, o.get("required") == Some(&Value::Bool(true)));
        if let Some(s) = o.get("schema") {
            inner.msg(5, schema(s));
        }
        param.msg(1, inner);
    } else {
        // NonBodyParameter { query_parameter_sub_schema = 3 | path_parameter_sub_schema = 4 }
        let (which, type_field, unique_field) = if str_of(&o, "in") == "path" {
            (4, 5, 19)
        } else {
            (3, 6, 20)
        };
        inner.boolean(1, o.get("required") == Some(&Value::Bool(true)));
        inner.string(2, str_of(&o, "in"));
        inner.string(3, str_of(&o, "description"));
        inner.string(4, str_of(&o, "name"));
        inner.string(type_field, str_of(&o, "type"));
        inner.boolean(
            unique_field,
            o.get("uniqueItems") == Some(&Value::Bool(true)),
        );
        let mut non_body = Msg::default();
        non_body.msg(which, inner);
        param.msg(2, non_body);
    }
    let mut item = Msg::default();
    item.msg(1, param);
    item
}

/// `Operation`.
fn operation(op: &Value) -> Msg {
    let o = op.as_object().cloned().unwrap_or_default();
    let mut m = Msg::default();
    m.string(3, str_of(&o, "description"));
    m.string(5, str_of(&o, "operationId"));
    for (field, key) in [(6, "produces"), (7, "consumes")] {
        for s in o.get(key).and_then(Value::as_array).into_iter().flatten() {
            m.string(field, s.as_str().unwrap_or(""));
        }
    }
    for p in o
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.msg(8, parameter(p));
    }
    if let Some(responses) = o.get("responses").and_then(Value::as_object) {
        let mut rs = Msg::default();
        for (code, r) in responses {
            let ro = r.as_object().cloned().unwrap_or_default();
            let mut resp = Msg::default();
            resp.string(1, str_of(&ro, "description"));
            if let Some(s) = ro.get("schema") {
                let mut item = Msg::default();
                item.msg(1, schema(s));
                resp.msg(2, item);
            }
            let mut value = Msg::default();
            value.msg(1, resp);
            let mut named = Msg::default();
            named.string(1, code);
            named.msg(2, value);
            rs.msg(1, named);
        }
        m.msg(9, rs);
    }
    vendor_extensions(&mut m, 13, &o);
    m
}

/// The whole document.
pub(super) fn document(doc: &Value) -> Vec<u8> {
    let o = doc.as_object().cloned().unwrap_or_default();
    let mut m = Msg::default();
    m.string(1, str_of(&o, "swagger"));
    if let Some(info) = o.get("info").and_then(Value::as_object) {
        let mut i = Msg::default();
        i.string(1, str_of(info, "title"));
        i.string(2, str_of(info, "version"));
        m.msg(2, i);
    }
    if let Some(paths) = o.get("paths").and_then(Value::as_object) {
        let mut ps = Msg::default();
        for (path, item) in paths {
            let mut pi = Msg::default();
            for (field, verb) in [
                (2, "get"),
                (3, "put"),
                (4, "post"),
                (5, "delete"),
                (8, "patch"),
            ] {
                if let Some(op) = item.get(verb) {
                    pi.msg(field, operation(op));
                }
            }
            let mut named = Msg::default();
            named.string(1, path);
            named.msg(2, pi);
            ps.msg(2, named);
        }
        m.msg(8, ps);
    }
    if let Some(defs) = o.get("definitions").and_then(Value::as_object) {
        m.msg(9, named_schemas(defs));
    }
    m.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_encodes_with_gnostics_field_numbers() {
        let s = json!({"type": "object", "description": "d", "required": ["name"],
            "properties": {"name": {"type": "string"}}});
        let bytes = schema(&s).0;
        // description = 4 (tag 0x22), required = 19 (tag 0x9a 0x01), type = 22 (0xb2 0x01),
        // properties = 25 (0xca 0x01).
        assert_eq!(&bytes[..3], &[0x22, 1, b'd']);
        let find = |tag: &[u8]| bytes.windows(tag.len()).any(|w| w == tag);
        assert!(find(&[0x9a, 0x01, 4, b'n', b'a', b'm', b'e']));
        assert!(find(&[
            0xb2, 0x01, 8, 0x0a, 6, b'o', b'b', b'j', b'e', b'c', b't'
        ]));
        assert!(find(&[0xca, 0x01]));
    }
}
