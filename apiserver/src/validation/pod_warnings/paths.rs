//! Volume paths that hide one another (kube's
//! `warningsForOverlappingVirtualPaths`).

use k8s_openapi::api::core::v1::{Volume, VolumeProjection};

use super::go_quote;

/// `warningsForOverlappingVirtualPaths`: within one configMap, secret or downwardAPI
/// volume, and across one projected volume's sources, paths that are the same or one
/// inside the other, so one file hides another or cannot be written.
pub(super) fn overlapping_virtual_paths(volumes: &[Volume]) -> Vec<String> {
    let mut out = Vec::new();
    for v in volumes {
        let name = go_quote(&v.name);
        if let Some(items) = v.config_map.as_ref().and_then(|c| c.items.as_ref()) {
            let cm = go_quote(
                &v.config_map
                    .as_ref()
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
            );
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (ConfigMap {cm}): overlapping paths"),
            );
        }
        if let Some(s) = &v.secret
            && let Some(items) = &s.items
        {
            let secret = go_quote(s.secret_name.as_deref().unwrap_or_default());
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (Secret {secret}): overlapping paths"),
            );
        }
        if let Some(items) = v.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (DownwardAPI): overlapping paths"),
            );
        }
        if let Some(p) = &v.projected {
            projected(&mut out, &name, p.sources.as_deref().unwrap_or_default());
        }
    }
    out
}

/// The projected part of [`overlapping_virtual_paths`]. As in kube, a source none of
/// the cases match checks the previous source's paths again.
fn projected(out: &mut Vec<String>, name: &str, sources: &[VolumeProjection]) {
    let mut source_paths: Vec<String> = Vec::new();
    let mut message = String::new();
    let mut all_paths: Vec<String> = Vec::new();
    for source in sources {
        if *source == VolumeProjection::default() {
            out.push(format!("volume {name} (Projected) has no sources provided"));
            continue;
        }
        if let Some(items) = source.config_map.as_ref().and_then(|c| c.items.as_ref()) {
            let cm = source
                .config_map
                .as_ref()
                .map(|c| c.name.as_str())
                .unwrap_or_default();
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name} (Projected ConfigMap {}): overlapping paths",
                go_quote(cm)
            );
        } else if let Some(items) = source.secret.as_ref().and_then(|s| s.items.as_ref()) {
            let secret = source
                .secret
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or_default();
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name} (Projected Secret {}): overlapping paths",
                go_quote(secret)
            );
        } else if let Some(items) = source.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!("volume {name} (Projected DownwardAPI): overlapping paths");
        } else if let Some(t) = &source.service_account_token {
            source_paths = vec![t.path.clone()];
            message = format!("volume {name} (Projected ServiceAccountToken): overlapping paths");
        } else if let Some(b) = &source.cluster_trust_bundle {
            source_paths = vec![b.path.clone()];
            let id = b
                .name
                .as_deref()
                .or(b.signer_name.as_deref())
                .unwrap_or_default();
            message = format!(
                "volume {name} (Projected ClusterTrustBundle {}): overlapping paths",
                go_quote(id)
            );
        }
        if source_paths.is_empty() {
            continue;
        }
        let refs: Vec<&str> = source_paths.iter().map(String::as_str).collect();
        overlaps(out, &refs, &message);
        let mut unique: Vec<String> = Vec::new();
        for p in &source_paths {
            if !unique.contains(p) {
                unique.push(p.clone());
            }
        }
        let mut ordered: Vec<&str> = unique
            .iter()
            .chain(&all_paths)
            .map(String::as_str)
            .collect();
        ordered.sort_unstable();
        overlaps(out, &ordered, &message);
        for p in unique {
            if !all_paths.contains(&p) {
                all_paths.push(p);
            }
        }
    }
}

/// `checkVolumeMappingForOverlap`: each path (trailing `/` trimmed) against the ones
/// before it.
fn overlaps(out: &mut Vec<String>, paths: &[&str], message: &str) {
    let mut seen: Vec<&str> = Vec::new();
    for path in paths {
        let normalized = path.trim_end_matches('/');
        if let Some(collision) = overlap(&seen, normalized) {
            out.push(format!(
                "{message}: {} with {}",
                go_quote(normalized),
                go_quote(collision)
            ));
        }
        if !seen.contains(&normalized) {
            seen.push(normalized);
        }
    }
}

/// kube's `checkForOverlap`, prefix tests included as written: `"test"` is taken to
/// overlap `"testing"` too.
fn overlap<'a>(seen: &[&'a str], path: &str) -> Option<&'a str> {
    for item in seen {
        if item.is_empty() || path.is_empty() {
            return None;
        }
        if *item == path
            || format!("{item}/").starts_with(path)
            || format!("{path}/").starts_with(item)
        {
            return Some(item);
        }
    }
    None
}
