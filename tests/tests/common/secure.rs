//! A mesopod serving HTTPS with authentication and RBAC, on a PKI it made itself, with
//! static token users; and kubectl runs as its admin, a token user, or nobody.

use std::path::{Path, PathBuf};

use framework::app::{App, AppConfig};
use framework::security::SecurityArgs;

use super::cluster::{self, Setup};

/// Static token users of the test cluster: token, user.
pub const USERS: [(&str, &str); 4] = [
    ("alice-token", "alice"),
    ("victor-token", "victor"),
    ("ada-token", "ada"),
    ("nobody-token", "nobody"),
];

/// The security flags of the test cluster: HTTPS on 127.0.0.1, any port.
pub fn security_args(token_file: &Path) -> SecurityArgs {
    SecurityArgs {
        secure_port: Some(0),
        bind_address: [127, 0, 0, 1].into(),
        tls_cert_file: None,
        tls_private_key_file: None,
        client_ca_file: None,
        token_auth_file: Some(token_file.to_owned()),
        anonymous_auth: false,
        authorization_mode: "RBAC".into(),
        service_account_signing_key_file: None,
        service_account_key_files: Vec::new(),
        service_account_issuers: Vec::new(),
        api_audiences: Vec::new(),
    }
}

/// A running secure mesopod with no agents (pods stay Pending, which is all the
/// API tests need) and where its files are.
pub struct Secure {
    pub app: App,
    pub dir: tempfile::TempDir,
}

impl Secure {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// [`Secure::start`] with `tweak` applied to the configuration last.
    pub async fn start_with(tweak: impl FnOnce(&mut framework::app::AppConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.csv");
        let csv: String = USERS
            .iter()
            .enumerate()
            .map(|(i, (t, u))| format!("{t},{u},{}\n", 1000 + i))
            .collect();
        std::fs::write(&tokens, csv).unwrap();
        let data = dir.path().join("data");
        let mut cfg = cluster::app_config(Setup {
            agents: Vec::new(),
            data_dir: Some(data.clone()),
            ..Setup::default()
        });
        let (listen, security) = security_args(&tokens).resolve(&data, cfg.listen).unwrap();
        cfg.listen = listen;
        cfg.security = security;
        tweak(&mut cfg);
        let app = App::start(cfg).await.expect("secure mesopod starts");
        Self { app, dir }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("kubeconfig")
    }

    /// A rustls client configuration trusting mesopod's CA and presenting
    /// its admin certificate (ring, explicitly: no process provider needed).
    pub fn admin_tls(&self) -> std::sync::Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let pki = self.data_dir().join("pki");
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(pki.join("ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(pki.join("admin.crt"))
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let key = PrivateKeyDer::from_pem_file(pki.join("admin.key")).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
        std::sync::Arc::new(config)
    }

    pub fn ca(&self) -> String {
        format!(
            "--certificate-authority={}",
            self.data_dir().join("pki/ca.crt").display()
        )
    }

    /// Namespaces `a` and `b`, alice an editor of `a`, and each of `more`
    /// (binding name, cluster role, user) a RoleBinding in `a`, made by the admin.
    pub async fn tenants(&self, more: &[(&str, &str, &str)]) {
        let k = super::KUBECTL_133;
        for ns in ["a", "b"] {
            testkit::ok(&self.admin(k, &["create", "namespace", ns]).await);
        }
        for &(name, role, user) in [("alice-edit", "edit", "alice")].iter().chain(more) {
            let role = format!("--clusterrole={role}");
            let user = format!("--user={user}");
            let args = [
                "create",
                "rolebinding",
                name,
                role.as_str(),
                user.as_str(),
                "-n",
                "a",
            ];
            testkit::ok(&self.admin(k, &args).await);
        }
    }

    /// A secure mesopod with one agent on the embedded runtime
    /// ([`with_embedded_agent`]), in a temporary directory of its own.
    pub async fn embedded(store: &Path, executor_args: &[&str]) -> Self {
        Self::embedded_tuned(store, executor_args, |_| {}).await
    }

    /// [`Secure::embedded`] with `tune` applied to the configuration first.
    pub async fn embedded_tuned(
        store: &Path,
        executor_args: &[&str],
        tune: impl FnOnce(&mut AppConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let app = with_embedded_agent_tuned(dir.path(), store, executor_args, tune).await;
        Self { app, dir }
    }

    /// kubectl `program` with `args` as the admin (the kubeconfig mesopod wrote).
    pub async fn admin(&self, program: &str, args: &[&str]) -> std::process::Output {
        self.admin_stdin(program, args, None).await
    }

    /// [`Secure::admin`] with `stdin` on kubectl's standard input.
    pub async fn admin_stdin(
        &self,
        program: &str,
        args: &[&str],
        stdin: Option<&str>,
    ) -> std::process::Output {
        let kc = format!("--kubeconfig={}", self.kubeconfig().display());
        let mut all = vec![kc.as_str()];
        all.extend_from_slice(args);
        super::kubectl(program, &self.app.api_url())
            .run_stdin(&all, stdin)
            .await
    }

    /// kubectl `program` with `args` as the user of `token` (`None`: no credentials).
    pub async fn user(
        &self,
        program: &str,
        token: Option<&str>,
        args: &[&str],
    ) -> std::process::Output {
        let ca = self.ca();
        let bearer = token.map(|t| format!("--token={t}"));
        let mut all = vec![ca.as_str()];
        all.extend(bearer.as_deref());
        all.extend_from_slice(args);
        super::kubectl(program, &self.app.api_url()).run(&all).await
    }
}

/// A secure mesopod (`--authorization-mode=Node,RBAC`, one token user
/// `nobody`) with one agent whose executor runs pods on the embedded
/// runtime from the image store `store`, plus `executor_args`. Its data dir
/// is `dir/data`, with the admin kubeconfig at `dir/data/kubeconfig`.
pub async fn with_embedded_agent(dir: &Path, store: &Path, executor_args: &[&str]) -> App {
    with_embedded_agent_tuned(dir, store, executor_args, |_| {}).await
}

/// [`with_embedded_agent`] with `tune` applied to the configuration before the start.
pub async fn with_embedded_agent_tuned(
    dir: &Path,
    store: &Path,
    executor_args: &[&str],
    tune: impl FnOnce(&mut AppConfig),
) -> App {
    let tokens = dir.join("tokens.csv");
    std::fs::write(&tokens, "nobody-token,nobody,1000\n").unwrap();
    let data = dir.join("data");
    let mut cfg = cluster::app_config(Setup {
        agents: vec![cluster::agent("cpus:4;mem:4096;disk:4096", "", 0)],
        data_dir: Some(data.clone()),
        ..Default::default()
    });
    cfg.executor.args = vec![
        "--container-runtime=embedded".into(),
        format!("--image-store={}", store.display()),
    ];
    cfg.executor
        .args
        .extend(executor_args.iter().map(|a| a.to_string()));
    let mut args = security_args(&tokens);
    args.authorization_mode = "Node,RBAC".into();
    let (listen, security) = args.resolve(&data, cfg.listen).unwrap();
    cfg.listen = listen;
    cfg.security = security;
    tune(&mut cfg);
    App::start(cfg).await.expect("secure mesopod starts")
}
