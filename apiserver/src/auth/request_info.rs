//! What a request asks to do, read from its method, path and query as kube-apiserver's
//! `RequestInfoFactory` reads it: the attributes the authorizer decides on.

use http::Method;

/// The attributes of one request (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Whether the path names an API resource (else it is a non-resource URL).
    pub resource_request: bool,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`;
    /// for a non-resource URL the lower-case method.
    pub verb: String,
    /// The API group (`""` is the core group).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace; empty for cluster-scoped requests and all-namespace lists.
    pub namespace: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`status`, `log`, `token`, `binding`).
    pub subresource: String,
    /// The object name; empty for create and plain lists.
    pub name: String,
    /// The request path (non-resource URLs are authorized by it).
    pub path: String,
}

impl Attributes {
    /// A resource request's attributes.
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Self {
            resource_request: true,
            verb: verb.into(),
            api_group: group.into(),
            namespace: namespace.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// A non-resource URL request's attributes.
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.into(),
            path: path.into(),
            ..Self::default()
        }
    }

    /// `resource` or `resource/subresource`, as RBAC rules name it.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// Reads the attributes of a request.
    pub fn from_request(method: &Method, path: &str, query: Option<&str>) -> Self {
        let non_resource = || Self::non_resource(&method.as_str().to_ascii_lowercase(), path);
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .collect();
        if parts.len() < 3 {
            return non_resource();
        }
        let (group, rest) = match parts[0] {
            "api" => ("", &parts[1..]),
            "apis" if parts.len() >= 4 => (parts[1], &parts[2..]),
            _ => return non_resource(),
        };
        let version = rest[0];
        let mut rest = &rest[1..];
        let mut verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_owned();
        let mut namespace = "";
        if rest.first() == Some(&"namespaces")
            && let Some(ns) = rest.get(1)
        {
            namespace = ns;
            // `namespaces/NS/status` and `/finalize` are the namespace's own subresources.
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        let resource = rest.first().copied().unwrap_or("");
        let mut name = rest.get(1).copied().unwrap_or("").to_owned();
        let subresource = rest.get(2).copied().unwrap_or("");
        if rest.len() == 1 && verb == "get" {
            verb = "list".into();
        }
        if verb == "list" {
            let q = Query(query.unwrap_or(""));
            if matches!(q.get("watch").as_deref(), Some("true" | "1")) {
                verb = "watch".into();
            }
            if let Some(sel) = q.get("fieldSelector") {
                // A list of one object by name is authorized as that name, as in Kubernetes.
                for term in sel.split(',') {
                    if let Some(v) = term
                        .strip_prefix("metadata.name==")
                        .or_else(|| term.strip_prefix("metadata.name="))
                    {
                        name = v.to_owned();
                    }
                }
            }
        }
        if verb == "delete" && name.is_empty() {
            verb = "deletecollection".into();
        }
        Self {
            resource_request: true,
            verb,
            api_group: group.into(),
            api_version: version.into(),
            namespace: namespace.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name,
            path: path.into(),
        }
    }
}

/// A raw query string.
struct Query<'a>(&'a str);

impl Query<'_> {
    /// The last value of `key`, percent-decoded (`+` is a space).
    fn get(&self, key: &str) -> Option<String> {
        self.0
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .rfind(|(k, _)| *k == key)
            .map(|(_, v)| percent_decode(v))
    }
}

fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() && v.is_char_boundary(i + 3) => {
                match u8::from_str_radix(&v[i + 1..i + 3], 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(m: Method, p: &str, q: Option<&str>) -> Attributes {
        Attributes::from_request(&m, p, q)
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let a = info(
            Method::GET,
            "/api/v1/namespaces/a/pods",
            Some("fieldSelector=metadata.name%3Dx%2Cspec.nodeName%3Dn&watch=1"),
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "x"));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn paths_read_as_kube_apiserver_reads_them() {
        let a = info(Method::GET, "/api/v1/namespaces/a/pods", None);
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.resource.as_str()),
            ("list", "a", "pods")
        );
        let a = info(Method::GET, "/api/v1/pods", Some("watch=true"));
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = info(Method::PUT, "/api/v1/namespaces/a/pods/x/status", None);
        assert_eq!(
            (
                a.verb.as_str(),
                a.combined_resource().as_str(),
                a.name.as_str()
            ),
            ("update", "pods/status", "x")
        );
        let a = info(Method::GET, "/api/v1/namespaces/a", None);
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.namespace.as_str()
            ),
            ("get", "namespaces", "a", "a")
        );
        let a = info(
            Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles",
            None,
        );
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str(), a.resource.as_str()),
            ("create", "rbac.authorization.k8s.io", "roles")
        );
        let a = info(Method::DELETE, "/api/v1/namespaces/a/pods", None);
        assert_eq!(a.verb, "deletecollection");
        let a = info(
            Method::GET,
            "/api/v1/namespaces/a/pods",
            Some("fieldSelector=metadata.name=x"),
        );
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("list", "x"));
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/rbac.authorization.k8s.io",
            "/healthz",
            "/version",
        ] {
            let a = info(Method::GET, p, None);
            assert!(!a.resource_request, "{p}");
            assert_eq!(a.verb, "get");
        }
        let a = info(Method::GET, "/apis/rbac.authorization.k8s.io/v1", None);
        assert!(!a.resource_request);
    }
}
