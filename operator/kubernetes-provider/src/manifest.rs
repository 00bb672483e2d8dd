//! The objects one instance is made of, built from the request and the
//! entry (pure): a Pod running Squid as an unprivileged user, and a Secret
//! holding its squid.conf (and password file) that the Pod mounts. The
//! Secret is owned by the Pod (an owner reference), so deleting the Pod
//! removes it even when the provider's own delete of it never runs.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, Pod, PodSecurityContext, PodSpec, Probe,
    ResourceRequirements, SeccompProfile, Secret, SecretVolumeSource, SecurityContext,
    TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use provider_api::config::{PodImage, PodResources};

/// Where the Secret is mounted in the container.
pub const CONFIG_DIR: &str = "/etc/egress-proxy";
/// The Secret's key (and file) holding squid.conf.
pub const SQUID_CONF_KEY: &str = "squid.conf";
/// The Secret's key (and file) holding the password file.
pub const PASSWD_KEY: &str = "passwd";
/// The password file's path in the container.
pub const PASSWD_PATH: &str = "/etc/egress-proxy/passwd";
/// The container's name.
pub const CONTAINER: &str = "squid";
/// Debian's `proxy` user and group, which Squid runs as.
pub const PROXY_UID: i64 = 13;
/// Seconds a deleted Pod has to stop (Squid is told to take 2).
pub const GRACE_SECONDS: i64 = 10;

/// What a Pod is made from.
#[derive(Debug)]
pub struct PodParts<'a> {
    /// The instance name (the Pod's and the Secret's).
    pub name: &'a str,
    /// The namespace.
    pub namespace: &'a str,
    /// The ownership mark and tags.
    pub labels: BTreeMap<String, String>,
    /// The owning Proxy, `namespace/name`, for people reading the Pod.
    pub proxy: String,
    /// The image.
    pub image: &'a PodImage,
    /// Its size.
    pub resources: &'a PodResources,
    /// Squid's port.
    pub port: u16,
}

/// The Pod.
pub fn pod(parts: &PodParts<'_>) -> Pod {
    let quantities = BTreeMap::from([
        ("cpu".to_owned(), Quantity(parts.resources.cpu.to_string())),
        (
            "memory".to_owned(),
            Quantity(format!("{}Mi", parts.resources.memory.mib())),
        ),
    ]);
    let port = i32::from(parts.port);
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(parts.image.reference.to_string()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec![
            "/usr/sbin/squid".to_owned(),
            "-N".to_owned(),
            "-f".to_owned(),
            format!("{CONFIG_DIR}/{SQUID_CONF_KEY}"),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("proxy".to_owned()),
            container_port: port,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(quantities.clone()),
            limits: Some(quantities),
            ..ResourceRequirements::default()
        }),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(port),
                ..TCPSocketAction::default()
            }),
            period_seconds: Some(2),
            ..Probe::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                ..Capabilities::default()
            }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "config".to_owned(),
            mount_path: CONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(parts.name.to_owned()),
            namespace: Some(parts.namespace.to_owned()),
            labels: Some(parts.labels.clone()),
            annotations: Some(BTreeMap::from([(
                "egress-proxies.io/proxy".to_owned(),
                parts.proxy.clone(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container],
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(GRACE_SECONDS),
            restart_policy: Some("Always".to_owned()),
            security_context: Some(PodSecurityContext {
                run_as_user: Some(PROXY_UID),
                run_as_group: Some(PROXY_UID),
                run_as_non_root: Some(true),
                // The Secret's files belong to this group (mode 0440).
                fs_group: Some(PROXY_UID),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    ..SeccompProfile::default()
                }),
                ..PodSecurityContext::default()
            }),
            volumes: Some(vec![Volume {
                name: "config".to_owned(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(parts.name.to_owned()),
                    default_mode: Some(0o440),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The Secret of `pod` (named and labelled like it, owned by it).
///
/// The password line, when given, is as confidential as the password: it
/// lives only in this Secret's data.
pub fn secret(pod: &Pod, pod_uid: &str, squid_conf: &[String], passwd: Option<&str>) -> Secret {
    let mut text = squid_conf.join("\n");
    text.push('\n');
    let mut data = BTreeMap::from([(SQUID_CONF_KEY.to_owned(), ByteString(text.into_bytes()))]);
    if let Some(line) = passwd {
        data.insert(
            PASSWD_KEY.to_owned(),
            ByteString(format!("{line}\n").into_bytes()),
        );
    }
    Secret {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            labels: pod.metadata.labels.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: pod.metadata.name.clone().unwrap_or_default(),
                uid: pod_uid.to_owned(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::config::{ImageReference, MilliCpu};

    #[test]
    fn the_pod_runs_squid_unprivileged_with_its_secret() {
        let image = PodImage::new(ImageReference::parse("localhost/squid:1").unwrap());
        let resources = PodResources::new(
            MilliCpu::parse("250m").unwrap(),
            provider_api::config::ByteSize::parse("128MiB").unwrap(),
        );
        let p = pod(&PodParts {
            name: "ep-0123",
            namespace: "pods",
            labels: BTreeMap::from([("a".into(), "b".into())]),
            proxy: "ns/p".into(),
            image: &image,
            resources: &resources,
            port: 3128,
        });
        let json = serde_json::to_value(&p).unwrap();
        let c = &json["spec"]["containers"][0];
        assert_eq!(c["image"], "localhost/squid:1");
        assert_eq!(c["resources"]["limits"]["cpu"], "250m");
        assert_eq!(c["resources"]["limits"]["memory"], "128Mi");
        assert_eq!(c["ports"][0]["containerPort"], 3128);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(json["spec"]["securityContext"]["runAsUser"], 13);
        assert_eq!(json["spec"]["automountServiceAccountToken"], false);
        assert_eq!(
            json["spec"]["volumes"][0]["secret"]["secretName"],
            "ep-0123"
        );

        let s = secret(&p, "uid-1", &["http_port 3128".into()], Some("u:$6$x"));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(json["metadata"]["labels"]["a"], "b");
        let data = s.data.unwrap();
        assert_eq!(data[SQUID_CONF_KEY].0, b"http_port 3128\n");
        assert_eq!(data[PASSWD_KEY].0, b"u:$6$x\n");
    }
}
