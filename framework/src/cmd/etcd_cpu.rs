//! etcd's own CPU time, as its Prometheus endpoint reports it, so that
//! `mesopod bench --etcd-servers` shows what a run cost on both sides of the
//! store: on one machine etcd and mesopod share the cores, and pods/s alone
//! cannot say whose CPU the time went to.

use std::time::Duration;

/// The metric every Prometheus Go client exports for its process (user and
/// system time, seconds).
const METRIC: &str = "process_cpu_seconds_total";

/// etcd's CPU over a stretch of a run: read when started and when asked.
pub(crate) struct Meter {
    servers: Option<Vec<String>>,
    before: Option<f64>,
}

impl Meter {
    /// Starts measuring `servers` (`None`: not on etcd, nothing to measure).
    pub(crate) async fn start(servers: Option<Vec<String>>) -> Self {
        let before = match &servers {
            Some(servers) => cpu_seconds(servers).await,
            None => None,
        };
        Self { servers, before }
    }

    /// The CPU seconds etcd has used since the start, if both readings worked.
    pub(crate) async fn elapsed(&self) -> Option<f64> {
        let before = self.before?;
        let after = cpu_seconds(self.servers.as_deref()?).await?;
        Some(after - before)
    }
}

/// The CPU seconds `servers` have used so far, summed over the members, or
/// `None` with a warning when one cannot be read. Only plain `http://`
/// members are read: a member behind TLS would want the bench's client
/// certificate for its `/metrics`, and the figure is left out instead.
pub(crate) async fn cpu_seconds(servers: &[String]) -> Option<f64> {
    let client = reqwest::Client::new();
    let mut total = 0.0;
    for server in servers {
        if !server.starts_with("http://") {
            tracing::warn!(%server, "etcd_cpu_s is left out: only plain http:// members are read");
            return None;
        }
        let url = format!("{}/metrics", server.trim_end_matches('/'));
        let text = match metrics(&client, &url).await {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(%url, error = %e, "etcd_cpu_s is left out: cannot read etcd's metrics");
                return None;
            }
        };
        let Some(seconds) = process_cpu(&text) else {
            tracing::warn!(%url, "etcd_cpu_s is left out: no {METRIC} in etcd's metrics");
            return None;
        };
        total += seconds;
    }
    Some(total)
}

/// One member's metrics page.
async fn metrics(client: &reqwest::Client, url: &str) -> reqwest::Result<String> {
    client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

/// The value of `process_cpu_seconds_total` in a Prometheus text exposition.
fn process_cpu(text: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == METRIC)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_cpu_line_is_found_among_the_others() {
        let text = "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
                    # TYPE process_cpu_seconds_total counter\n\
                    process_cpu_seconds_total_other 9\n\
                    process_cpu_seconds_total 4.37\n\
                    process_max_fds 1024\n";
        assert_eq!(process_cpu(text), Some(4.37));
        assert_eq!(process_cpu("process_max_fds 1024\n"), None);
        assert_eq!(process_cpu("process_cpu_seconds_total NaNx\n"), None);
    }
}
