//! The identity an operator child runs as: a ServiceAccount of the test's
//! own holding exactly the rules of deploy/'s ClusterRole
//! (`deploy/operator/rbac.yaml`, rendered under a name of its own), so a
//! rule missing from deploy/ fails the test, while another worktree's
//! `kubectl apply -k deploy/` on the shared API server (an older
//! `egress-proxies-operator` ClusterRole) cannot change what this one may
//! do.
//!
//! Shared by `tests/it` (`#[path]`), `tests/instant_provider.rs` and the
//! benchmarks; whoever includes it declares it `mod operator_account` at
//! its root.

// Each includer uses a part of it.
#![allow(dead_code)]

use std::path::Path;

use testkit::KubeService;

/// deploy/'s RBAC for the operator: the ClusterRole, then the Lease's Role.
const DEPLOY_RBAC: &str = include_str!("../../../deploy/operator/rbac.yaml");
/// deploy/'s namespace for the operator (its Lease and the Lease's Role).
const DEPLOY_NS: &str = "egress-proxies-system";
/// deploy/'s Role for consumer leases (in the operator's namespace).
const CONSUMER_LEASES_ROLE: &str = "egress-proxies-consumer-leases";

/// Which Lease the account may hold.
pub enum Lease {
    /// deploy/'s (`egress-proxies-operator` in `egress-proxies-system`),
    /// through deploy/'s Role; consumer leases there through deploy/'s.
    Deploy,
    /// None: the test grants what it wants; consumer leases in the
    /// account's own namespace (deploy/'s Role rendered there).
    Own,
}

/// A ServiceAccount with deploy/'s operator rules; its cluster-scoped
/// objects (and its binding to deploy/'s Lease Role) are deleted on drop.
pub struct OperatorAccount {
    kube: KubeService,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    objects: Vec<String>,
}

impl OperatorAccount {
    /// The ServiceAccount `name` in `namespace` with deploy/'s ClusterRole
    /// rules and `lease`.
    pub fn new(kube: &KubeService, namespace: &str, name: &str, lease: Lease) -> OperatorAccount {
        OperatorAccount::with_rules(kube, namespace, name, lease, |rules| rules.to_owned())
    }

    /// As [`OperatorAccount::new`], with deploy/'s ClusterRole (its YAML
    /// document) changed by `edit` first: how a test takes a rule away.
    pub fn with_rules(
        kube: &KubeService,
        namespace: &str,
        name: &str,
        lease: Lease,
        edit: impl FnOnce(&str) -> String,
    ) -> OperatorAccount {
        let mut account = OperatorAccount {
            kube: kube.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            objects: Vec::new(),
        };
        account.apply(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        ));
        let role = format!("egress-proxies-operator-{namespace}-{name}");
        let cluster_role = DEPLOY_RBAC.split("\n---\n").next().unwrap().replace(
            "  name: egress-proxies-operator\n",
            &format!("  name: {role}\n"),
        );
        assert!(cluster_role.contains("kind: ClusterRole\n") && cluster_role.contains(&role));
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {role}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {role}\nsubjects:\n  - kind: ServiceAccount\n    name: {name}\n    namespace: {namespace}\n"
        );
        account.apply(&format!("{}\n---\n{binding}", edit(&cluster_role)));
        account.objects.push(format!("clusterrolebinding/{role}"));
        account.objects.push(format!("clusterrole/{role}"));
        let lease_binding = |role_ns: &str, role_name: &str, binding: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {binding}\n  namespace: {role_ns}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {role_name}\nsubjects:\n  - kind: ServiceAccount\n    name: {name}\n    namespace: {namespace}\n"
            )
        };
        match lease {
            Lease::Deploy => {
                // deploy/'s Roles: the leader Lease and the consumer leases.
                for (deploy_role, suffix) in [
                    ("egress-proxies-operator-lease", ""),
                    (CONSUMER_LEASES_ROLE, "-consumer-leases"),
                ] {
                    let binding = format!("{role}{suffix}");
                    account.apply(&lease_binding(DEPLOY_NS, deploy_role, &binding));
                    account
                        .objects
                        .push(format!("-n {DEPLOY_NS} rolebinding/{binding}"));
                }
            }
            Lease::Own => {
                // deploy/'s consumer-lease Role, in the account's namespace
                // (where its own Lease lives).
                let deploy_role = DEPLOY_RBAC
                    .split("\n---\n")
                    .find(|d| d.contains(&format!("  name: {CONSUMER_LEASES_ROLE}\nrules:")))
                    .unwrap();
                let own = format!("{CONSUMER_LEASES_ROLE}-{name}");
                let rendered = deploy_role
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .replace(
                        &format!("  name: {CONSUMER_LEASES_ROLE}\n"),
                        &format!("  name: {own}\n  namespace: {namespace}\n"),
                    );
                assert!(rendered.contains(&own));
                account.apply(&format!(
                    "{rendered}\n---\n{}",
                    lease_binding(namespace, &own, &own)
                ));
            }
        }
        account
    }

    /// `system:serviceaccount:NS:NAME`.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// A one-hour token of the account.
    pub fn token(&self) -> String {
        self.kube
            .kubectl(&[
                "-n",
                &self.namespace,
                "create",
                "token",
                &self.name,
                "--duration=1h",
            ])
            .unwrap()
            .trim()
            .to_owned()
    }

    /// Writes a kubeconfig for the account (talking to `kube.server`) to
    /// `path`; returns its token.
    pub fn write_kubeconfig(&self, kube: &KubeService, path: &Path) -> String {
        let token = self.token();
        std::fs::write(path, kube.kubeconfig_with_token(&self.user(), &token)).unwrap();
        token
    }

    fn apply(&self, yaml: &str) {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), yaml).unwrap();
        self.kube
            .kubectl(&["apply", "-f", &file.path().to_string_lossy()])
            .unwrap();
    }
}

impl Drop for OperatorAccount {
    fn drop(&mut self) {
        for object in &self.objects {
            let mut args: Vec<&str> = object.split(' ').collect();
            args.insert(0, "delete");
            args.extend(["--ignore-not-found", "--wait=false"]);
            let _ = self.kube.kubectl(&args);
        }
    }
}
