//! `/debug/`: one HTML page for people, no JavaScript.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::DebugState;
use super::tasks::rows;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub(crate) async fn index(State(s): State<DebugState>) -> Response {
    let snap = s.observed.snapshot();
    let tasks = rows(&s, None, None);
    let mut html = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mesopod debug</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}th{background:#eee}</style></head><body>\
         <h1>mesopod</h1><ul>",
    );
    for (href, label) in [
        ("/debug/registry/tasks?format=text", "registry: tasks"),
        ("/debug/offers", "live offers"),
        ("/debug/queue", "scheduling queue"),
        ("/debug/reconciliation", "reconciliation"),
        ("/debug/framework", "framework and subscription"),
        ("/metrics", "metrics (Prometheus)"),
        ("/healthz", "health"),
        ("/readyz", "readiness"),
    ] {
        html.push_str(&format!("<li><a href=\"{href}\">{label}</a></li>"));
    }
    html.push_str(&format!(
        "</ul><p>framework: <code>{}</code>, subscribed: <b>{}</b>, offers: {}, queued pods: {}</p>",
        esc(snap.framework_id.as_deref().unwrap_or("none")),
        s.term.mesos().is_subscribed(),
        snap.offers.len(),
        snap.queue.len()
    ));
    html.push_str("<h2>Registry</h2><table><tr><th>task</th><th>pod</th><th>state</th><th>flags</th><th>host</th><th>ports</th><th>age</th></tr>");
    for t in tasks {
        html.push_str(&format!(
            "<tr><td><a href=\"/debug/registry/tasks/{id}\">{id}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}s</td></tr>",
            esc(&t.pod),
            esc(&t.state),
            esc(&t.flags.join(",")),
            esc(t.hostname.as_deref().unwrap_or("")),
            esc(&t.ports.join(",")),
            t.age_seconds,
            id = esc(&t.id),
        ));
    }
    html.push_str("</table></body></html>\n");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}
