//! The API server's limits, audit log and encryption at rest, and how
//! mesopod reaches Mesos securely: their flags (kube-apiserver's and Mesos'
//! names) and what [`crate::app::App::start`] does with them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use apiserver::limits::Limits;
use apiserver::store::encryption::Encryption;
use mesos::client::{ClientSecurity, Credential};

/// What the flags below configure; [`Hardening::default`] is kube-apiserver's
/// limits, no audit log, no encryption, plain Mesos without credentials.
#[derive(Debug, Clone, Default)]
pub struct Hardening {
    /// In-flight budgets, timeouts, watches per client, connection cap.
    pub limits: Limits,
    /// Where audit events go (`-`: stdout); `None`: no audit log.
    pub audit_log_path: Option<PathBuf>,
    /// Encrypts the configured resources (Secrets) in the store's file.
    pub encryption: Option<Arc<Encryption>>,
    /// TLS and the framework's credential towards Mesos.
    pub mesos: ClientSecurity,
    /// Pod Security Admission's defaults and exemptions; `None`: Kubernetes'
    /// default (privileged, no exemptions).
    pub pod_security: Option<apiserver::pod_security::PodSecurity>,
}

/// The API server's hardening flags (kube-apiserver's names and defaults).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Read-only requests served at once; past it 429 (0: no limit).
    #[arg(long, default_value_t = apiserver::limits::DEFAULT_MAX_REQUESTS_INFLIGHT)]
    pub max_requests_inflight: usize,
    /// Mutating requests served at once; past it 429 (0: no limit).
    #[arg(long, default_value_t = apiserver::limits::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT)]
    pub max_mutating_requests_inflight: usize,
    /// How long a request may take before 504 (watches are not cut).
    #[arg(long, default_value = "60s", value_parser = mesos::duration::parse_flag)]
    pub request_timeout: Duration,
    /// How long a request's body may take to arrive; past it 504. Bodies
    /// are received before a request takes an in-flight seat.
    #[arg(long, default_value = "10s", value_parser = mesos::duration::parse_flag)]
    pub body_read_timeout: Duration,
    /// Watches one client may hold open at once; past it 429.
    #[arg(long, default_value_t = apiserver::limits::DEFAULT_MAX_WATCHES_PER_USER)]
    pub max_watches_per_user: usize,
    /// Connections open at once (at most the descriptor limit less a reserve);
    /// at the cap the oldest idle connection makes room.
    #[arg(long, default_value_t = apiserver::limits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Write audit.k8s.io/v1 events (level Metadata) as JSON lines here; `-` is stdout.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// An EncryptionConfiguration (providers aesgcm, secretbox, identity)
    /// for Secrets at rest.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,
    /// An AdmissionConfiguration; its PodSecurity entry (a
    /// PodSecurityConfiguration) sets Pod Security Admission's defaults and
    /// exemptions.
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
}

/// How mesopod reaches Mesos (Mesos' flag names).
#[derive(Debug, Clone, clap::Args)]
pub struct MesosArgs {
    /// Trust only this CA (PEM) for https:// masters; plain http:// is then refused.
    #[arg(long)]
    pub mesos_cafile: Option<PathBuf>,
    /// The framework's secret (the file's text, or Mesos' credential JSON),
    /// sent with `--principal` as HTTP basic authentication.
    #[arg(long)]
    pub secret_file: Option<PathBuf>,
}

impl ApiArgs {
    fn apply(&self, h: &mut Hardening) -> anyhow::Result<()> {
        h.limits = Limits {
            max_requests_inflight: self.max_requests_inflight,
            max_mutating_requests_inflight: self.max_mutating_requests_inflight,
            request_timeout: self.request_timeout,
            body_read_timeout: self.body_read_timeout,
            max_watches_per_user: self.max_watches_per_user.max(1),
            max_connections: self.max_connections.max(1),
            ..Limits::default()
        };
        h.audit_log_path.clone_from(&self.audit_log_path);
        if let Some(path) = &self.admission_control_config_file {
            h.pod_security = Some(
                apiserver::pod_security::config::load(path)
                    .context("--admission-control-config-file")?,
            );
        }
        if let Some(path) = &self.encryption_provider_config {
            h.encryption = Some(Arc::new(
                Encryption::load(path).context("--encryption-provider-config")?,
            ));
        }
        Ok(())
    }
}

impl MesosArgs {
    fn apply(&self, principal: Option<&str>, h: &mut Hardening) -> anyhow::Result<()> {
        if let Some(ca) = &self.mesos_cafile {
            h.mesos.tls =
                Some(mesos::client::security::tls_from_ca_file(ca).context("--mesos-cafile")?);
        }
        if let Some(file) = &self.secret_file {
            let principal = principal.context("--secret-file needs --principal")?;
            h.mesos.credential =
                Some(Credential::from_secret_file(principal, file).context("--secret-file")?);
        }
        Ok(())
    }
}

/// The [`Hardening`] these flags describe (`principal` is `--principal`).
///
/// # Errors
/// An unreadable or invalid file, or `--secret-file` without `--principal`.
pub fn from_flags(
    api: &ApiArgs,
    mesos: &MesosArgs,
    principal: Option<&str>,
) -> anyhow::Result<Hardening> {
    let mut h = Hardening::default();
    api.apply(&mut h)?;
    mesos.apply(principal, &mut h)?;
    Ok(h)
}

/// `router` with the per-request limits and, outside them (so refusals are
/// audited too), the audit log.
///
/// # Errors
/// The audit log cannot be opened.
pub fn layer(
    router: axum::Router,
    h: &Hardening,
    clock: Arc<dyn apiserver::Clock>,
) -> Result<axum::Router, apiserver::audit::AuditError> {
    let router = apiserver::limits::requests::layer(router, &h.limits);
    Ok(match &h.audit_log_path {
        Some(path) => {
            let log = apiserver::audit::AuditLog::open(
                path,
                clock,
                Arc::new(apiserver::audit::request_user),
            )?;
            log.layer(router)
        }
        None => router,
    })
}

/// The https client of `--admission-webhook-cafile`, if given.
///
/// # Errors
/// The CA file cannot be read or holds no certificate.
pub fn webhook_tls(cafile: Option<&std::path::Path>) -> anyhow::Result<Option<reqwest::Client>> {
    let Some(path) = cafile else { return Ok(None) };
    let config =
        mesos::client::security::tls_from_ca_file(path).context("--admission-webhook-cafile")?;
    let client = mesos::client::security::https_client(&config, Duration::from_secs(5))
        .context("--admission-webhook-cafile")?;
    Ok(Some(client))
}

#[cfg(test)]
mod pod_security_tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        api: ApiArgs,
        #[command(flatten)]
        mesos: MesosArgs,
    }

    fn hardening(args: &[&str]) -> anyhow::Result<Hardening> {
        let cli = Cli::try_parse_from(std::iter::once("mesopod").chain(args.iter().copied()))?;
        from_flags(&cli.api, &cli.mesos, None)
    }

    #[test]
    fn admission_control_config_file_sets_pod_security() {
        assert_eq!(hardening(&[]).unwrap().pod_security, None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admission.yaml");
        std::fs::write(
            &path,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults:\n      enforce: baseline\n",
        )
        .unwrap();
        let flag = path.to_str().unwrap();
        let h = hardening(&["--admission-control-config-file", flag]).unwrap();
        assert_eq!(
            h.pod_security.unwrap().defaults.enforce.to_string(),
            "baseline:latest"
        );
        let missing = dir.path().join("missing.yaml");
        let e =
            hardening(&["--admission-control-config-file", missing.to_str().unwrap()]).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("--admission-control-config-file: cannot read "),
            "{e:#}"
        );
    }
}
