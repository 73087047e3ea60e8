//! The messages whose JSON is not their shape: Go gives their types their own JSON
//! (un)marshalling, so `metav1.Time` is a string on the JSON wire but
//! `{seconds, nanos}` on the protobuf one. Each is written as Go's `MarshalJSON` would,
//! after Go's `Unmarshal` of the message.

use prost_reflect::{DynamicMessage, ReflectMessage as _, Value as Proto};
use serde_json::Value;

use super::walker::Problem;

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// The JSON of `msg` if its type is one of these, `None` for an ordinary message.
pub(super) fn json(msg: &DynamicMessage) -> Result<Option<Value>, Problem> {
    let name = msg.descriptor().full_name().to_owned();
    let v = match name.strip_prefix(META) {
        Some("Time") => time(msg, false)?,
        Some("MicroTime") => time(msg, true)?,
        Some("Duration") => Value::String(go_duration(int(msg, 1))),
        Some("FieldsV1") => embedded_json(msg)?,
        Some("Verbs") => items(msg),
        _ => match name.as_str() {
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => int_or_string(msg)?,
            "k8s.io.apimachinery.pkg.api.resource.Quantity"
            | "k8s.io.apimachinery.pkg.api.resource.QuantityValue" => quantity(msg),
            "k8s.io.apimachinery.pkg.runtime.RawExtension" => embedded_json(msg)?,
            "k8s.io.apimachinery.pkg.runtime.Unknown" => {
                return Err(Problem::new("a runtime.Unknown inside an object"));
            }
            "k8s.io.api.authentication.v1.ExtraValue"
            | "k8s.io.api.authorization.v1.ExtraValue" => items(msg),
            _ => return Ok(None),
        },
    };
    Ok(Some(v))
}

/// Field `number` of `msg` as an integer (0 when absent).
fn int(msg: &DynamicMessage, number: u32) -> i64 {
    match msg.get_field_by_number(number).as_deref() {
        Some(Proto::I64(n)) => *n,
        Some(Proto::I32(n)) => i64::from(*n),
        _ => 0,
    }
}

/// Field `number` of `msg` as a string, if present.
fn string(msg: &DynamicMessage, number: u32) -> Option<String> {
    if !msg.has_field_by_number(number) {
        return None;
    }
    msg.get_field_by_number(number)
        .and_then(|v| v.as_str().map(str::to_owned))
}

/// The earliest and latest seconds Go's `Time.MarshalJSON` writes (years 0 to 9999).
const FIRST_SECOND: i64 = -62_167_219_200;
const LAST_SECOND: i64 = 253_402_300_799;

/// `metav1.Time` (`{seconds, nanos}`): the zero time, an empty message, is `null`;
/// otherwise RFC 3339 in UTC, to the second (Go's `Time.Unmarshal` drops the nanos),
/// or, for `MicroTime`, with six fractional digits.
fn time(msg: &DynamicMessage, micro: bool) -> Result<Value, Problem> {
    let (seconds, nanos) = (int(msg, 1), int(msg, 2));
    if !msg.has_field_by_number(1) && !msg.has_field_by_number(2) {
        return Ok(Value::Null);
    }
    // As Go's time.Unix, nanoseconds outside a second carry into the seconds.
    let (seconds, nanos) = match micro {
        true => (
            seconds.checked_add(nanos.div_euclid(1_000_000_000)),
            nanos.rem_euclid(1_000_000_000),
        ),
        false => (Some(seconds), 0),
    };
    let Some(seconds) = seconds.filter(|s| (FIRST_SECOND..=LAST_SECOND).contains(s)) else {
        return Err(Problem::new("a time outside the years 0 to 9999"));
    };
    let ts = k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map_err(|_| Problem::new("a time outside the years 0 to 9999"))?;
    let whole = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    Ok(Value::String(match micro {
        true => format!("{whole}.{:06}Z", nanos / 1000),
        false => format!("{whole}Z"),
    }))
}

/// Go's `time.Duration.String()` of `ns` nanoseconds (`1h2m3.5s`, `1.5ms`, `0s`), which
/// is `metav1.Duration`'s JSON.
pub(crate) fn go_duration(ns: i64) -> String {
    let u = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    if u == 0 {
        return "0s".into();
    }
    let out = if u < 1_000_000_000 {
        let (prec, unit) = if u < 1_000 {
            (0, "ns")
        } else if u < 1_000_000 {
            (3, "µs")
        } else {
            (6, "ms")
        };
        let (frac, whole) = fraction(u, prec);
        format!("{whole}{frac}{unit}")
    } else {
        let (frac, secs) = fraction(u, 9);
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        match (h, secs / 60) {
            (0, 0) => format!("{s}{frac}s"),
            (0, _) => format!("{m}m{s}{frac}s"),
            _ => format!("{h}h{m}m{s}{frac}s"),
        }
    };
    format!("{sign}{out}")
}

/// Go's `fmtFrac`: the last `prec` digits of `v` as a fraction without trailing zeros
/// (`.5`, or nothing when they are all zero), and `v` without them.
fn fraction(v: u64, prec: u32) -> (String, u64) {
    let div = 10u64.pow(prec);
    let digits = v % div;
    if digits == 0 {
        return (String::new(), v / div);
    }
    let width = usize::try_from(prec).unwrap_or(9);
    let text = format!("{digits:0width$}");
    (format!(".{}", text.trim_end_matches('0')), v / div)
}

/// `intstr.IntOrString` (`{type, intVal, strVal}`): the number or the string.
fn int_or_string(msg: &DynamicMessage) -> Result<Value, Problem> {
    match int(msg, 1) {
        0 => Ok(Value::from(int(msg, 2))),
        1 => Ok(Value::String(string(msg, 3).unwrap_or_default())),
        _ => Err(Problem::new("an IntOrString of no known type")),
    }
}

/// `resource.Quantity` (`{string}`): the string; an empty message is Go's zero, `"0"`.
fn quantity(msg: &DynamicMessage) -> Value {
    Value::String(string(msg, 1).unwrap_or_else(|| "0".into()))
}

/// `runtime.RawExtension` and `metav1.FieldsV1` (`{raw}`): the JSON their bytes hold;
/// none is `null`.
fn embedded_json(msg: &DynamicMessage) -> Result<Value, Problem> {
    let raw = msg
        .get_field_by_number(1)
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    if raw.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&raw).map_err(|_| Problem::new("an embedded object that is not JSON"))
}

/// The messages Go's named string slices become (`{items}`): the list.
fn items(msg: &DynamicMessage) -> Value {
    match msg.get_field_by_number(1).as_deref() {
        Some(Proto::List(items)) => Value::Array(
            items
                .iter()
                .filter_map(|v| v.as_str().map(|s| Value::String(s.to_owned())))
                .collect(),
        ),
        _ => Value::Array(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::go_duration;

    #[test]
    fn durations_read_as_go_prints_them() {
        for (ns, s) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (1_500_000, "1.5ms"),
            (1_000_000_000, "1s"),
            (1_500_000_000, "1.5s"),
            (60_000_000_000, "1m0s"),
            (3_600_000_000_000, "1h0m0s"),
            (3_723_000_000_001, "1h2m3.000000001s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(go_duration(ns), s, "{ns}");
        }
    }
}
