//! One test per validation rule, each with the exact message; property
//! tests that no validated value can inject into XML, a volume name or a path.

use super::*;
use crate::ident::tests::assert_inert;
use proptest::prelude::*;

const SHA: &str = "8c0ad7e35fbca0ad7d6a3ba0d9ac3d8efd5fba8a1c8e7cd9e0a4c6e8f4b3c2a1";

/// A valid config; tests break one line of it.
fn base() -> String {
    format!(
        "\
providers:
  - name: kvm2-home
    type: kvm2
    kvm2:
      ssh:
        user: root
        key_file: /etc/kvm2/id_ed25519
        known_hosts_file: /etc/kvm2/known_hosts
      hosts:
        - name: host1
          address: 192.168.10.11
          port: 22
          bridge: br0
          pool: default
      images:
        debian-12:
          url: https://example.com/debian-12.qcow2
          sha256: {SHA}
          format: qcow2
      machine_types:
        small:
          vcpus: 1
          memory: 1GiB
          disk: 10GiB
      firmware: bios
      defaults:
        machine_type: small
        image: debian-12
"
    )
}

/// `base()` with the line containing `find` replaced by `with` (same
/// indentation; `with` may hold several lines, each indented alike; an
/// empty `with` deletes the line).
fn edit(yaml: &str, find: &str, with: &str) -> String {
    let mut out = String::new();
    let mut hit = 0;
    for line in yaml.lines() {
        if line.trim_start().starts_with(find) {
            hit += 1;
            let indent = &line[..line.len() - line.trim_start().len()];
            for w in with.lines() {
                out.push_str(indent);
                out.push_str(w);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert_eq!(hit, 1, "{find:?} must match exactly one line");
    out
}

/// `yaml` with the block whose first line starts with `find` (that line
/// and every more deeply indented line after it) replaced by `with` at the
/// same indentation (an empty `with` deletes the block).
fn replace_block(yaml: &str, find: &str, with: &str) -> String {
    let mut out = String::new();
    let mut hit = 0;
    let mut inside: Option<usize> = None;
    for line in yaml.lines() {
        let depth = line.len() - line.trim_start().len();
        if let Some(block) = inside {
            if depth > block {
                continue;
            }
            inside = None;
        }
        if line.trim_start().starts_with(find) {
            hit += 1;
            inside = Some(depth);
            if !with.is_empty() {
                out.push_str(&line[..depth]);
                out.push_str(with);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert_eq!(hit, 1, "{find:?} must match exactly one line");
    out
}

fn issues(yaml: &str) -> Vec<String> {
    match ProvidersConfig::from_yaml_str(yaml) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(ConfigError::Invalid(v)) => v.iter().map(ToString::to_string).collect(),
        Err(e) => panic!("not a validation error: {e}\n{yaml}"),
    }
}

fn one_issue(yaml: &str) -> String {
    let v = issues(yaml);
    assert_eq!(v.len(), 1, "{v:#?}");
    v.into_iter().next().unwrap_or_default()
}

fn syntax(yaml: &str) -> (String, String) {
    match ProvidersConfig::from_yaml_str(yaml) {
        Err(ConfigError::Syntax { path, message }) => (path, message),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

fn ok(yaml: &str) -> ProvidersConfig {
    match ProvidersConfig::from_yaml_str(yaml) {
        Ok(c) => c,
        Err(e) => panic!("rejected: {e}\n{yaml}"),
    }
}

const ID: &str = crate::ident::IDENTIFIER_RULE;

#[test]
fn base_config_is_valid_and_typed() {
    let c = ok(&base());
    assert_eq!(c.providers.len(), 1);
    let e = &c.providers[0];
    assert_eq!(e.name.as_str(), "kvm2-home");
    assert_eq!(e.provider_type(), ProviderType::Kvm2);
    let k = e.kvm2().unwrap();
    assert_eq!(k.hosts[0].port, 22);
    assert_eq!(k.hosts[0].bridge.as_str(), "br0");
    assert_eq!(k.images.len(), 1);
    let mt = &k.machine_types[&Identifier::parse("small").unwrap()];
    assert_eq!(
        (mt.vcpus, mt.memory.mib(), mt.disk.bytes()),
        (1, 1024, 10 << 30)
    );
    assert_eq!(k.firmware, Firmware::Bios);
    assert_eq!(
        k.defaults.image.as_ref().map(Identifier::as_str),
        Some("debian-12")
    );
    assert!(!k.ssh.insecure_ignore_host_key);
    assert!(
        c.provider(&Identifier::parse("kvm2-home").unwrap())
            .is_some()
    );
}

// ---- document level ----

#[test]
fn rule_providers_is_required() {
    assert_eq!(one_issue(""), "providers: is required");
    assert_eq!(one_issue("providers: null\n"), "providers: is required");
}

#[test]
fn rule_at_least_one_provider() {
    assert_eq!(
        one_issue("providers: []\n"),
        "providers: must list at least one provider"
    );
}

#[test]
fn rule_unknown_top_level_field() {
    let (path, msg) = syntax(&format!("{}extra: 1\n", base()));
    assert_eq!(path, "extra");
    assert!(msg.starts_with("unknown field `extra`"), "{msg}");
}

#[test]
fn rule_not_yaml() {
    let (path, msg) = syntax("providers: [\n");
    assert_eq!(path, "providers");
    assert!(msg.contains("at line 1, column"), "{msg}");
}

// ---- provider entry ----

#[test]
fn rule_provider_name_is_an_identifier() {
    assert_eq!(
        one_issue(&edit(&base(), "- name: kvm2-home", "- name: Kvm2_Home")),
        format!("providers[0].name: {ID}; got \"Kvm2_Home\"")
    );
}

#[test]
fn rule_provider_name_is_required() {
    let y = edit(&base(), "- name: kvm2-home", "- type: kvm2");
    let y = y.replacen("    type: kvm2\n", "", 1);
    assert_eq!(one_issue(&y), "providers[0].name: is required");
}

#[test]
fn rule_provider_names_are_unique() {
    let b = base();
    let entry = b.strip_prefix("providers:\n").unwrap();
    let y = format!("providers:\n{entry}{entry}");
    assert_eq!(
        one_issue(&y),
        "providers[1].name: must be unique; \"kvm2-home\" is also providers[0].name"
    );
}

#[test]
fn repeated_entries_are_still_validated() {
    let b = base();
    let entry = b.strip_prefix("providers:\n").unwrap();
    let second = entry.replace("vcpus: 1", "vcpus: 0");
    assert_eq!(
        issues(&format!("providers:\n{entry}{second}")),
        [
            "providers[1].kvm2.machine_types.small.vcpus: must be between 1 and 128; got 0",
            "providers[1].name: must be unique; \"kvm2-home\" is also providers[0].name",
        ]
    );
    let y = base().replace(
        "      images:\n",
        "        - {name: host1, address: 192.168.10.12, port: 0, bridge: br0, pool: default}\n      images:\n",
    );
    assert_eq!(
        issues(&y),
        [
            "providers[0].kvm2.hosts[1].port: must be between 1 and 65535; got 0",
            "providers[0].kvm2.hosts[1].name: must be unique; \"host1\" is also hosts[0].name",
        ]
    );
}

#[test]
fn rule_provider_type_is_known() {
    assert_eq!(
        one_issue(&edit(&base(), "type: kvm2", "type: kvm")),
        "providers[0].type: must be a known provider type (kvm2, kubernetes); got \"kvm\""
    );
}

#[test]
fn rule_provider_type_is_required() {
    assert_eq!(
        one_issue(&edit(&base(), "type: kvm2", "")),
        "providers[0].type: is required"
    );
}

#[test]
fn rule_kvm2_block_required_for_kvm2() {
    assert_eq!(
        one_issue("providers:\n  - name: a\n    type: kvm2\n"),
        "providers[0].kvm2: is required when type is kvm2"
    );
}

#[test]
fn rule_unknown_fields_rejected_everywhere() {
    for (after, field, path) in [
        ("type: kvm2", "typo: 1", "providers[0]"),
        ("firmware: bios", "extra: 1", "providers[0].kvm2"),
        ("user: root", "password: x", "providers[0].kvm2.ssh"),
        ("pool: default", "adress: x", "providers[0].kvm2.hosts[0]"),
        (
            "format: qcow2",
            "size: 1",
            "providers[0].kvm2.images.debian-12",
        ),
        (
            "disk: 10GiB",
            "gpu: 1",
            "providers[0].kvm2.machine_types.small",
        ),
        ("image: debian-12", "host: h", "providers[0].kvm2.defaults"),
    ] {
        let y = edit(&base(), after, &format!("{after}\n{field}"));
        let (p, msg) = syntax(&y);
        let name = field.split(':').next().unwrap();
        assert_eq!(p, format!("{path}.{name}"), "{msg}");
        assert!(msg.starts_with(&format!("unknown field `{name}`")), "{msg}");
    }
}

#[test]
fn rule_repeated_field_rejected() {
    let (p, msg) = syntax(&edit(
        &base(),
        "pool: default",
        "pool: default\npool: other",
    ));
    assert_eq!(p, "providers[0].kvm2.hosts[0]");
    assert!(msg.starts_with("duplicate field `pool`"), "{msg}");
}

#[test]
fn rule_wrong_value_type_rejected() {
    let (p, _) = syntax(&edit(&base(), "vcpus: 1", "vcpus: [1]"));
    assert_eq!(p, "providers[0].kvm2.machine_types.small.vcpus");
}

// ---- ssh ----

#[test]
fn rule_ssh_is_required() {
    let y = replace_block(&base(), "ssh:", "");
    assert_eq!(one_issue(&y), "providers[0].kvm2.ssh: is required");
}

#[test]
fn rule_ssh_user_is_a_user_name() {
    assert_eq!(
        one_issue(&edit(&base(), "user: root", "user: Root Admin")),
        format!(
            "providers[0].kvm2.ssh.user: {}; got \"Root Admin\"",
            values::SshUser::RULE
        )
    );
}

#[test]
fn rule_key_file_is_an_absolute_path() {
    assert_eq!(
        one_issue(&edit(&base(), "key_file:", "key_file: ../id_ed25519")),
        format!(
            "providers[0].kvm2.ssh.key_file: {}; got \"../id_ed25519\"",
            values::AbsolutePath::RULE
        )
    );
    assert_eq!(
        one_issue(&edit(
            &base(),
            "key_file:",
            "key_file: /etc/../root/.ssh/id"
        )),
        format!(
            "providers[0].kvm2.ssh.key_file: {}; got \"/etc/../root/.ssh/id\"",
            values::AbsolutePath::RULE
        )
    );
}

#[test]
fn rule_known_hosts_required_unless_insecure() {
    assert_eq!(
        one_issue(&edit(&base(), "known_hosts_file:", "")),
        "providers[0].kvm2.ssh.known_hosts_file: is required unless insecure_ignore_host_key is true"
    );
    let c = ok(&edit(
        &base(),
        "known_hosts_file:",
        "insecure_ignore_host_key: true",
    ));
    let ssh = &c.providers[0].kvm2().unwrap().ssh;
    assert!(ssh.insecure_ignore_host_key && ssh.known_hosts_file.is_none());
}

#[test]
fn rule_known_hosts_absent_when_insecure() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "known_hosts_file:",
            "known_hosts_file: /etc/kvm2/known_hosts\ninsecure_ignore_host_key: true"
        )),
        "providers[0].kvm2.ssh.known_hosts_file: must be absent when insecure_ignore_host_key is true"
    );
}

#[test]
fn rule_known_hosts_is_an_absolute_path() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "known_hosts_file:",
            "known_hosts_file: known_hosts"
        )),
        format!(
            "providers[0].kvm2.ssh.known_hosts_file: {}; got \"known_hosts\"",
            values::AbsolutePath::RULE
        )
    );
}

#[test]
fn rule_booleans_are_strict() {
    let (p, _) = syntax(&edit(
        &base(),
        "known_hosts_file:",
        "insecure_ignore_host_key: yes",
    ));
    assert_eq!(p, "providers[0].kvm2.ssh.insecure_ignore_host_key");
}

// ---- hosts ----

#[test]
fn rule_hosts_is_required() {
    let y = replace_block(&base(), "hosts:", "");
    assert_eq!(one_issue(&y), "providers[0].kvm2.hosts: is required");
}

#[test]
fn rule_at_least_one_host() {
    let y = replace_block(&base(), "hosts:", "hosts: []");
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.hosts: must list at least one host"
    );
}

#[test]
fn rule_host_name_is_an_identifier() {
    assert_eq!(
        one_issue(&edit(&base(), "- name: host1", "- name: Host_1")),
        format!("providers[0].kvm2.hosts[0].name: {ID}; got \"Host_1\"")
    );
}

#[test]
fn rule_host_names_are_unique() {
    let y = base().replace(
        "      images:\n",
        "        - {name: host1, address: 192.168.10.12, bridge: br0, pool: default}\n      images:\n",
    );
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.hosts[1].name: must be unique; \"host1\" is also hosts[0].name"
    );
}

#[test]
fn rule_host_endpoints_are_unique() {
    let y = base().replace(
        "      images:\n",
        "        - {name: host2, address: 192.168.10.11, bridge: br0, pool: default}\n      images:\n",
    );
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.hosts[1].address: must be unique with its port; 192.168.10.11:22 is also hosts[0]"
    );
}

#[test]
fn rule_host_address_is_ip_or_dns_name() {
    assert_eq!(
        one_issue(&edit(&base(), "address:", "address: \"host1; rm -rf /\"")),
        format!(
            "providers[0].kvm2.hosts[0].address: {}; got \"host1; rm -rf /\"",
            values::HostAddress::RULE
        )
    );
}

#[test]
fn rule_port_in_range() {
    assert_eq!(
        one_issue(&edit(&base(), "port: 22", "port: 0")),
        "providers[0].kvm2.hosts[0].port: must be between 1 and 65535; got 0"
    );
    assert_eq!(
        one_issue(&edit(&base(), "port: 22", "port: 70000")),
        "providers[0].kvm2.hosts[0].port: must be between 1 and 65535; got 70000"
    );
    let c = ok(&edit(&base(), "port: 22", ""));
    assert_eq!(c.providers[0].kvm2().unwrap().hosts[0].port, 22);
}

#[test]
fn rule_host_limits() {
    // Defaults: no instance limit, nothing reserved.
    let c = ok(&base());
    let host = &c.providers[0].kvm2().unwrap().hosts[0];
    assert_eq!(host.max_instances, None);
    assert_eq!(host.reserved_memory.bytes(), 0);
    let c = ok(&edit(
        &base(),
        "port: 22",
        "port: 22\nmax_instances: 0\nreserved_memory: 2GiB",
    ));
    let host = &c.providers[0].kvm2().unwrap().hosts[0];
    assert_eq!(host.max_instances, Some(0), "0 drains the host");
    assert_eq!(host.reserved_memory.bytes(), 2 << 30);
    assert_eq!(
        one_issue(&edit(&base(), "port: 22", "port: 22\nmax_instances: -1")),
        "providers[0].kvm2.hosts[0].max_instances: must be between 0 and 100000; got -1"
    );
    assert_eq!(
        one_issue(&edit(&base(), "port: 22", "port: 22\nreserved_memory: 2GB")),
        format!(
            "providers[0].kvm2.hosts[0].reserved_memory: {}; got \"2GB\"",
            ByteSize::RULE
        )
    );
}

#[test]
fn rule_bridge_is_a_bridge_name() {
    assert_eq!(
        one_issue(&edit(&base(), "bridge: br0", "bridge: \"br0'/><x\"")),
        format!(
            "providers[0].kvm2.hosts[0].bridge: {}; got \"br0'/><x\"",
            values::BridgeName::RULE
        )
    );
}

#[test]
fn rule_pool_is_an_identifier() {
    assert_eq!(
        one_issue(&edit(&base(), "pool: default", "pool: ../images")),
        format!("providers[0].kvm2.hosts[0].pool: {ID}; got \"../images\"")
    );
}

// ---- images ----

#[test]
fn rule_images_is_required() {
    let y = replace_block(&base(), "images:", "");
    let y = replace_block(&y, "image: debian-12", "");
    assert_eq!(one_issue(&y), "providers[0].kvm2.images: is required");
}

#[test]
fn rule_at_least_one_image() {
    let y = replace_block(&base(), "images:", "images: {}");
    let y = replace_block(&y, "image: debian-12", "");
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.images: must define at least one image"
    );
}

#[test]
fn rule_image_key_is_an_identifier() {
    let y = edit(&base(), "debian-12:", "\"../debian 12\":")
        .replace("image: debian-12", "image: small");
    let v = issues(&y);
    assert_eq!(
        v[0],
        format!("providers[0].kvm2.images[\"../debian 12\"]: {ID}; got \"../debian 12\"")
    );
}

#[test]
fn rule_image_keys_are_unique() {
    let y = base().replace(
        "      machine_types:\n",
        &format!(
            "        debian-12:\n          url: https://example.com/other.qcow2\n          sha256: {SHA}\n          format: raw\n      machine_types:\n"
        ),
    );
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.images.debian-12: must be unique; key \"debian-12\" appears more than once"
    );
}

#[test]
fn rule_image_url_is_http() {
    assert_eq!(
        one_issue(&edit(&base(), "url:", "url: file:///etc/shadow")),
        format!(
            "providers[0].kvm2.images.debian-12.url: {}; got \"file:///etc/shadow\"",
            values::HttpUrl::RULE
        )
    );
}

#[test]
fn rule_image_url_has_no_credentials() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "url:",
            "url: https://u:p@example.com/x.qcow2"
        )),
        format!(
            "providers[0].kvm2.images.debian-12.url: {}; got \"https://u:p@example.com/x.qcow2\"",
            values::HttpUrl::RULE
        )
    );
}

#[test]
fn rule_image_sha256_is_64_hex() {
    assert_eq!(
        one_issue(&edit(&base(), "sha256:", "sha256: abc")),
        format!(
            "providers[0].kvm2.images.debian-12.sha256: {}; got \"abc\"",
            values::Sha256Digest::RULE
        )
    );
}

#[test]
fn rule_image_format_is_qcow2_or_raw() {
    assert_eq!(
        one_issue(&edit(&base(), "format: qcow2", "format: vmdk")),
        "providers[0].kvm2.images.debian-12.format: must be one of qcow2, raw; got \"vmdk\""
    );
    let c = ok(&edit(&base(), "format: qcow2", "format: raw"));
    let img = c.providers[0]
        .kvm2()
        .unwrap()
        .images
        .values()
        .next()
        .cloned()
        .unwrap();
    assert_eq!(img.format, ImageFormat::Raw);
}

#[test]
fn rule_image_fields_are_required() {
    assert_eq!(
        issues(&edit(&base(), "url:", "")),
        ["providers[0].kvm2.images.debian-12.url: is required"]
    );
}

// ---- machine types ----

#[test]
fn rule_machine_types_is_required() {
    let y = replace_block(&base(), "machine_types:", "");
    let y = replace_block(&y, "machine_type: small", "");
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.machine_types: is required"
    );
}

#[test]
fn rule_at_least_one_machine_type() {
    let y = replace_block(&base(), "machine_types:", "machine_types: {}");
    let y = replace_block(&y, "machine_type: small", "");
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.machine_types: must define at least one machine type"
    );
}

#[test]
fn rule_machine_type_name_is_an_identifier() {
    let y = edit(&base(), "small:", "Small:").replace("machine_type: small", "image: debian-12");
    let y = y.replacen(
        "        image: debian-12\n        image: debian-12\n",
        "        image: debian-12\n",
        1,
    );
    assert_eq!(
        one_issue(&y),
        format!("providers[0].kvm2.machine_types.Small: {ID}; got \"Small\"")
    );
}

#[test]
fn rule_vcpus_in_range() {
    assert_eq!(
        one_issue(&edit(&base(), "vcpus: 1", "vcpus: 0")),
        "providers[0].kvm2.machine_types.small.vcpus: must be between 1 and 128; got 0"
    );
    assert_eq!(
        one_issue(&edit(&base(), "vcpus: 1", "vcpus: 1000")),
        "providers[0].kvm2.machine_types.small.vcpus: must be between 1 and 128; got 1000"
    );
}

#[test]
fn rule_sizes_have_units() {
    assert_eq!(
        one_issue(&edit(&base(), "memory: 1GiB", "memory: 1024")),
        format!(
            "providers[0].kvm2.machine_types.small.memory: {}; got \"1024\"",
            values::ByteSize::RULE
        )
    );
}

#[test]
fn rule_memory_in_range() {
    assert_eq!(
        one_issue(&edit(&base(), "memory: 1GiB", "memory: 64MiB")),
        "providers[0].kvm2.machine_types.small.memory: must be between 128MiB and 1TiB; got 64MiB"
    );
    assert_eq!(
        one_issue(&edit(&base(), "memory: 1GiB", "memory: 2TiB")),
        "providers[0].kvm2.machine_types.small.memory: must be between 128MiB and 1TiB; got 2TiB"
    );
}

#[test]
fn rule_disk_in_range() {
    assert_eq!(
        one_issue(&edit(&base(), "disk: 10GiB", "disk: 512MiB")),
        "providers[0].kvm2.machine_types.small.disk: must be between 1GiB and 16TiB; got 512MiB"
    );
    assert_eq!(
        one_issue(&edit(&base(), "disk: 10GiB", "disk: 17TiB")),
        "providers[0].kvm2.machine_types.small.disk: must be between 1GiB and 16TiB; got 17TiB"
    );
}

#[test]
fn rule_machine_type_fields_are_required() {
    assert_eq!(
        one_issue(&edit(&base(), "vcpus: 1", "")),
        "providers[0].kvm2.machine_types.small.vcpus: is required"
    );
}

// ---- firmware and defaults ----

#[test]
fn rule_firmware_is_bios_or_uefi() {
    assert_eq!(
        one_issue(&edit(&base(), "firmware: bios", "firmware: efi")),
        "providers[0].kvm2.firmware: must be one of bios, uefi; got \"efi\""
    );
    let c = ok(&edit(&base(), "firmware: bios", ""));
    assert_eq!(c.providers[0].kvm2().unwrap().firmware, Firmware::Bios);
    let c = ok(&edit(&base(), "firmware: bios", "firmware: uefi"));
    assert_eq!(c.providers[0].kvm2().unwrap().firmware, Firmware::Uefi);
}

#[test]
fn rule_default_machine_type_exists() {
    assert_eq!(
        one_issue(&edit(&base(), "machine_type: small", "machine_type: large")),
        "providers[0].kvm2.defaults.machine_type: must name a key of providers[0].kvm2.machine_types; got \"large\""
    );
}

#[test]
fn rule_default_image_exists() {
    assert_eq!(
        one_issue(&edit(&base(), "image: debian-12", "image: debian-13")),
        "providers[0].kvm2.defaults.image: must name a key of providers[0].kvm2.images; got \"debian-13\""
    );
}

#[test]
fn defaults_are_optional() {
    let y = replace_block(&base(), "defaults:", "");
    let c = ok(&y);
    assert_eq!(
        c.providers[0].kvm2().unwrap().defaults,
        Kvm2Defaults::default()
    );
}

#[test]
fn lookups_resolve_defaults_and_refuse_unknown_names() {
    let c = ok(&base());
    let k = c.providers[0].kvm2().unwrap();
    let small = Identifier::parse("small").unwrap();
    assert_eq!(k.machine_type_for(None).unwrap().0, &small);
    assert_eq!(k.machine_type_for(Some(&small)).unwrap().1.vcpus, 1);
    let e = k
        .machine_type_for(Some(&Identifier::parse("huge").unwrap()))
        .unwrap_err();
    assert!(e.is_permanent());
    assert_eq!(e.to_string(), "unknown machine type huge");
    assert_eq!(k.image_for(None).unwrap().0.as_str(), "debian-12");
    assert_eq!(
        k.image_for(Some(&Identifier::parse("x").unwrap()))
            .unwrap_err()
            .to_string(),
        "unknown image x"
    );
    let y = replace_block(&base(), "defaults:", "");
    let c = ok(&y);
    let k = c.providers[0].kvm2().unwrap();
    let e = k.image_for(None).unwrap_err();
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "no image requested and no default configured"
    );
    assert!(k.host(&Identifier::parse("host1").unwrap()).is_some());
    assert!(k.host(&Identifier::parse("host9").unwrap()).is_none());
}

// ---- reporting ----

#[test]
fn every_issue_is_reported_at_once() {
    let y = edit(&base(), "port: 22", "port: 0");
    let y = edit(&y, "vcpus: 1", "vcpus: 0");
    let y = edit(&y, "sha256:", "sha256: x");
    let v = issues(&y);
    assert_eq!(v.len(), 3, "{v:#?}");
    let e = ProvidersConfig::from_yaml_str(&y).unwrap_err();
    assert_eq!(e.issues().len(), 3);
    let text = e.to_string();
    assert!(
        text.starts_with("providers config is invalid:\n  providers[0]"),
        "{text}"
    );
    assert_eq!(super::validate::render(e.issues()).lines().count(), 3);
}

#[test]
fn long_values_are_truncated_in_messages() {
    let long = "A".repeat(500);
    let msg = one_issue(&edit(&base(), "pool: default", &format!("pool: {long}")));
    assert!(msg.len() < 300, "{msg}");
    assert!(msg.ends_with("\"…"), "{msg}");
}

#[test]
fn config_error_converts_to_permanent() {
    let e: crate::Error = ProvidersConfig::from_yaml_str("providers: []")
        .unwrap_err()
        .into();
    assert_eq!(e.class(), crate::ErrorClass::Permanent);
}

#[test]
fn load_reads_files_and_bounds_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.yaml");
    std::fs::write(&p, base()).unwrap();
    assert_eq!(ProvidersConfig::load(&p).unwrap().providers.len(), 1);
    std::fs::write(&p, " ".repeat((MAX_CONFIG_BYTES + 1) as usize)).unwrap();
    assert!(matches!(
        ProvidersConfig::load(&p),
        Err(ConfigError::Read { .. })
    ));
    std::fs::write(&p, [0xff, 0xfe]).unwrap();
    assert!(matches!(
        ProvidersConfig::load(&p),
        Err(ConfigError::Read { .. })
    ));
    assert!(matches!(
        ProvidersConfig::load(&dir.path().join("missing")),
        Err(ConfigError::Read { .. })
    ));
}

#[test]
fn alias_bomb_is_bounded() {
    let bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\nproviders: []\n";
    assert!(ProvidersConfig::from_yaml_str(bomb).is_err());
}

// ---- property tests: nothing validated can inject ----

/// A YAML double-quoted scalar holding `s` exactly: printable ASCII as is,
/// everything else as `\\uXXXX` / `\\UXXXXXXXX` escapes.
fn yq(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            ' '..='~' => out.push(c),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

fn check_all_inert(c: &ProvidersConfig) {
    for p in &c.providers {
        assert_inert(p.name.as_str());
        let k = p.kvm2().unwrap();
        assert_inert(k.ssh.user.as_str());
        for h in &k.hosts {
            assert_inert(h.name.as_str());
            assert_inert(h.bridge.as_str());
            assert_inert(h.pool.as_str());
            if let values::HostAddress::Dns(n) = &h.address {
                assert_inert(n.as_str());
            }
        }
        for (key, img) in &k.images {
            assert_inert(key.as_str());
            let u = img.url.as_str();
            assert!(
                !u.contains(['<', '>', '"', '\'', ' ', '\n', '\t', '\\', '`']),
                "{u:?}"
            );
            assert!(img.url.as_url().username().is_empty());
        }
        for key in k.machine_types.keys() {
            assert_inert(key.as_str());
        }
        for c in &k.proxy.allowed_clients {
            let t = c.to_string();
            assert!(
                t.chars()
                    .all(|ch| ch.is_ascii_hexdigit() || ".:/".contains(ch)),
                "{t:?}"
            );
        }
        for f in [Some(&k.ssh.key_file), k.ssh.known_hosts_file.as_ref()]
            .into_iter()
            .flatten()
        {
            let s = f.to_string();
            assert!(
                !s.contains("/../") && !s.contains("/./") && !s.contains(char::is_whitespace),
                "{s:?}"
            );
        }
    }
}

fn hostile() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,20}",
        // Mostly valid names with at most one dangerous character: many pass
        // validation only when the character is absent, so both branches run.
        "[a-z0-9][a-z0-9-]{0,8}([./<>&\"' \\:%]|\\.\\.)?[a-z0-9]{0,4}",
        Just("a'/><b".to_owned()),
        Just("../../etc".to_owned()),
        Just("a..b".to_owned()),
        Just("x y".to_owned()),
        Just("ok-name".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn no_validated_value_can_inject(which in 0usize..10, bad in hostile()) {
        // One field at a time takes the hostile value; the rest are valid.
        let pick = |i: usize, ok: &str| if i == which { bad.clone() } else { ok.to_owned() };
        let y = format!(
            "providers:\n  - name: {}\n    type: kvm2\n    kvm2:\n      ssh:\n        user: {}\n        key_file: {}\n        insecure_ignore_host_key: true\n      hosts:\n        - name: {}\n          address: {}\n          bridge: {}\n          pool: {}\n      images:\n        {}:\n          url: {}\n          sha256: {SHA}\n          format: qcow2\n      machine_types:\n        {}: {{vcpus: 1, memory: 1GiB, disk: 10GiB}}\n",
            yq(&pick(0, "p")), yq(&pick(1, "root")), yq(&format!("/k/{}", pick(2, "id"))),
            yq(&pick(3, "h")), yq(&pick(4, "kvm.lan")), yq(&pick(5, "br0")), yq(&pick(6, "default")),
            yq(&pick(7, "img")), yq(&format!("https://e.com/{}", pick(8, "x.qcow2"))), yq(&pick(9, "small")),
        );
        match ProvidersConfig::from_yaml_str(&y) {
            Ok(c) => check_all_inert(&c),
            Err(ConfigError::Invalid(v)) => prop_assert!(!v.is_empty()),
            Err(e) => prop_assert!(false, "unexpected {e}\n{y}"),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = ProvidersConfig::from_yaml_str(&s);
    }
}

// ---- domain type, libvirt socket, proxy settings ----

#[test]
fn domain_type_defaults_to_kvm_and_accepts_qemu() {
    let k = ok(&base()).providers[0].kvm2().unwrap().clone();
    assert_eq!(k.domain_type, DomainType::Kvm);
    let c = ok(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\ndomain_type: qemu",
    ));
    assert_eq!(c.providers[0].kvm2().unwrap().domain_type, DomainType::Qemu);
}

#[test]
fn rule_domain_type_is_kvm_or_qemu() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "firmware: bios",
            "firmware: bios\ndomain_type: xen"
        )),
        "providers[0].kvm2.domain_type: must be one of kvm, qemu; got \"xen\""
    );
}

#[test]
fn host_socket_defaults_to_libvirts_and_accepts_absolute_paths() {
    let k = ok(&base()).providers[0].kvm2().unwrap().clone();
    assert_eq!(k.hosts[0].socket, None, "libvirt's system socket");
    let c = ok(&edit(
        &base(),
        "pool: default",
        "pool: default\nsocket: /run/libvirt/libvirt-sock",
    ));
    assert_eq!(
        c.providers[0].kvm2().unwrap().hosts[0]
            .socket
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("/run/libvirt/libvirt-sock")
    );
}

#[test]
fn rule_host_socket_is_an_absolute_path() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "pool: default",
            "pool: default\nsocket: run/sock"
        )),
        format!(
            "providers[0].kvm2.hosts[0].socket: {}; got \"run/sock\"",
            AbsolutePath::RULE
        )
    );
}

#[test]
fn proxy_defaults_to_3128_and_rfc1918() {
    let k = ok(&base()).providers[0].kvm2().unwrap().clone();
    assert_eq!(k.proxy.port, 3128);
    let nets: Vec<String> = k
        .proxy
        .allowed_clients
        .iter()
        .map(|c| c.to_string())
        .collect();
    assert_eq!(nets, ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);
    assert_eq!(k.proxy.probe_target.to_string(), "deb.debian.org:443");
    assert!(k.proxy.allowed_destinations.is_empty());
    assert_eq!(
        ok(&base()).providers[0].probe_target().to_string(),
        "deb.debian.org:443"
    );
}

#[test]
fn proxy_settings_are_read() {
    let c = ok(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy:\n  port: 8080\n  allowed_clients: [100.64.0.0/10, \"fd00::/8\"]",
    ));
    let p = &c.providers[0].kvm2().unwrap().proxy;
    assert_eq!(p.port, 8080);
    let nets: Vec<String> = p.allowed_clients.iter().map(|c| c.to_string()).collect();
    assert_eq!(nets, ["100.64.0.0/10", "fd00::/8"]);
}

#[test]
fn the_probe_target_is_read() {
    let c = ok(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy: {probe_target: \"upstream.lan.example:8443\"}",
    ));
    assert_eq!(
        c.providers[0].probe_target().to_string(),
        "upstream.lan.example:8443"
    );
}

#[test]
fn allowed_destinations_are_networks() {
    let c = ok(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy: {allowed_destinations: [10.1.2.3/32, \"fd00:1::/64\"]}",
    ));
    let nets: Vec<String> = c.providers[0]
        .kvm2()
        .unwrap()
        .proxy
        .allowed_destinations
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(nets, ["10.1.2.3/32", "fd00:1::/64"]);
    let issue = one_issue(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy: {allowed_destinations: [10.1.2.3]}",
    ));
    assert!(
        issue.starts_with("providers[0].kvm2.proxy.allowed_destinations[0]: "),
        "{issue}"
    );
}

#[test]
fn the_credentials_file_is_an_absolute_path() {
    let c = ok(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy: {credentials_file: /etc/egress-proxies/proxy-auth/credentials}",
    ));
    assert_eq!(
        c.providers[0]
            .kvm2()
            .unwrap()
            .proxy
            .credentials_file
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("/etc/egress-proxies/proxy-auth/credentials")
    );
    let issue = one_issue(&edit(
        &base(),
        "firmware: bios",
        "firmware: bios\nproxy: {credentials_file: credentials}",
    ));
    assert!(
        issue.starts_with("providers[0].kvm2.proxy.credentials_file: "),
        "{issue}"
    );
}

#[test]
fn rule_proxy_probe_target_is_host_port() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "firmware: bios",
            "firmware: bios\nproxy: {probe_target: upstream}"
        )),
        format!(
            "providers[0].kvm2.proxy.probe_target: {}; got \"upstream\"",
            crate::config::HostPort::RULE
        )
    );
}

#[test]
fn rule_proxy_port_in_range() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "firmware: bios",
            "firmware: bios\nproxy: {port: 0}"
        )),
        "providers[0].kvm2.proxy.port: must be between 1 and 65535; got 0"
    );
}

#[test]
fn rule_proxy_allowed_clients_not_empty() {
    assert_eq!(
        one_issue(&edit(
            &base(),
            "firmware: bios",
            "firmware: bios\nproxy: {allowed_clients: []}"
        )),
        "providers[0].kvm2.proxy.allowed_clients: must list at least one network"
    );
}

#[test]
fn rule_proxy_allowed_clients_are_cidrs() {
    for bad in [
        "10.0.0.1/8",
        "10.0.0.0",
        "10.0.0.0/33",
        "all",
        "10.0.0.0/8 deny",
    ] {
        assert_eq!(
            one_issue(&edit(
                &base(),
                "firmware: bios",
                &format!("firmware: bios\nproxy: {{allowed_clients: [\"{bad}\"]}}")
            )),
            format!(
                "providers[0].kvm2.proxy.allowed_clients[0]: {}; got \"{bad}\"",
                values::Cidr::RULE
            )
        );
    }
}

#[test]
fn cidr_parse_rules() {
    for good in [
        "0.0.0.0/0",
        "10.0.0.0/8",
        "192.168.1.128/25",
        "::/0",
        "fd00::/8",
        "2001:db8::1/128",
    ] {
        assert_eq!(values::Cidr::parse(good).unwrap().to_string(), good);
    }
    // Printed in canonical form (what reaches Squid's config).
    assert_eq!(
        values::Cidr::parse("2001:db8:0::/32").unwrap().to_string(),
        "2001:db8::/32"
    );
    for bad in [
        "",
        "/8",
        "10.0.0.0/",
        "10.0.0.0/+8",
        "10.0.0.0/008a",
        "fd00::1/8",
        "::/129",
        "1.2.3.4/32/1",
        // kvm2's former ClientRange cases (one type now).
        "10.0.0.1/8",
        "10.0.0.0/33",
        "10.0.0.0",
        "10.0.0.0/8\n  - evil",
        "x/8",
        "fd00::/129",
        "10.0.0.0/0008",
    ] {
        assert!(values::Cidr::parse(bad).is_err(), "{bad:?} accepted");
    }
}

proptest! {
    #[test]
    fn cidr_parse_never_panics_and_round_trips(s in "\\PC{0,48}") {
        if let Ok(c) = values::Cidr::parse(&s) {
            prop_assert_eq!(values::Cidr::parse(&c.to_string()), Ok(c));
        }
    }
}

/// A valid kubernetes entry beside `base()`'s kvm2 one.
fn with_pods() -> String {
    format!(
        "{}  - name: pods
    type: kubernetes
    kubernetes:
      namespace: egress-pods
      images:
        squid:
          reference: localhost/egress-proxies/squid:5.7
      machine_types:
        small:
          cpu: 250m
          memory: 128MiB
      proxy:
        allowed_clients: [10.213.9.0/24]
      defaults:
        machine_type: small
        image: squid
",
        base()
    )
}

#[test]
fn a_kubernetes_entry_parses_beside_a_kvm2_one() {
    let c = ok(&with_pods());
    let entry = &c.providers[1];
    assert_eq!(entry.provider_type(), ProviderType::Kubernetes);
    assert!(entry.kvm2().is_none());
    let k = entry.kubernetes().unwrap();
    assert_eq!(k.namespace.as_str(), "egress-pods");
    assert_eq!(k.kubeconfig_file, None);
    let (key, image) = k.image_for(None).unwrap();
    assert_eq!(key.as_str(), "squid");
    assert_eq!(
        image.reference.as_str(),
        "localhost/egress-proxies/squid:5.7"
    );
    let (_, size) = k.machine_type_for(None).unwrap();
    assert_eq!((size.cpu.millis(), size.memory.mib()), (250, 128));
    assert_eq!(
        entry.proxy().allowed_clients[0].to_string(),
        "10.213.9.0/24"
    );
    assert_eq!(entry.probe_target().to_string(), kvm2::DEFAULT_PROBE_TARGET);
    // No placeholder rule applies to a kubernetes entry.
    assert!(
        c.placeholders()
            .iter()
            .all(|i| !i.path.starts_with("providers[1]"))
    );
}

#[test]
fn rule_kubernetes_values() {
    let y = with_pods()
        .replace("namespace: egress-pods", "namespace: Egress_Pods")
        .replace("reference: localhost", "reference: -localhost")
        .replace("cpu: 250m", "cpu: 0.5")
        .replace("memory: 128MiB\n      proxy", "memory: 32MiB\n      proxy")
        .replace("image: squid\n", "image: envoy\n");
    assert_eq!(
        issues(&y),
        [
            format!("providers[1].kubernetes.namespace: {ID}; got \"Egress_Pods\""),
            format!(
                "providers[1].kubernetes.images.squid.reference: {}; got \"-localhost/egress-proxies/squid:5.7\"",
                ImageReference::RULE
            ),
            format!(
                "providers[1].kubernetes.machine_types.small.cpu: {}; got \"0.5\"",
                MilliCpu::RULE
            ),
            "providers[1].kubernetes.machine_types.small.memory: must be between 64MiB and 1TiB; got 32MiB".to_owned(),
            "providers[1].kubernetes.defaults.image: must name a key of providers[1].kubernetes.images; got \"envoy\"".to_owned(),
        ]
    );
}

#[test]
fn rule_kubernetes_block_matches_the_type() {
    let y = "providers:\n  - name: pods\n    type: kubernetes\n";
    assert_eq!(
        issues(y),
        ["providers[0].kubernetes: is required when type is kubernetes"]
    );
    let y = format!("{}    kubernetes: {{namespace: x}}\n", base());
    assert_eq!(
        issues(&y),
        ["providers[0].kubernetes: must be absent when type is kvm2"]
    );
}

#[test]
fn rule_kubernetes_required_fields() {
    let y = "providers:\n  - name: pods\n    type: kubernetes\n    kubernetes: {}\n";
    assert_eq!(
        issues(y),
        [
            "providers[0].kubernetes.namespace: is required",
            "providers[0].kubernetes.images: is required",
            "providers[0].kubernetes.machine_types: is required",
        ]
    );
}

#[test]
fn a_host_may_be_reached_through_jump_hosts() {
    let y = edit(
        &base(),
        "pool: default",
        "pool: default\njump:\n  - {address: bastion.example.com}\n  - {address: 10.0.0.2, port: 2222, user: jump}",
    );
    let c = ok(&y);
    let host = &c.providers[0].kvm2().unwrap().hosts[0];
    assert_eq!(host.jump.len(), 2);
    assert_eq!(host.jump[0].address.to_string(), "bastion.example.com");
    assert_eq!((host.jump[0].port, host.jump[0].user.is_none()), (22, true));
    assert_eq!(host.jump[1].port, 2222);
    assert_eq!(host.jump[1].user.as_ref().unwrap().as_str(), "jump");
    let bad = edit(
        &base(),
        "pool: default",
        "pool: default\njump:\n  - {address: \"bad host\", port: 0}",
    );
    assert_eq!(
        issues(&bad),
        [
            format!(
                "providers[0].kvm2.hosts[0].jump[0].address: {}; got \"bad host\"",
                HostAddress::RULE
            ),
            "providers[0].kvm2.hosts[0].jump[0].port: must be between 1 and 65535; got 0"
                .to_owned(),
        ]
    );
    let many = (0..9)
        .map(|i| format!("\n  - {{address: 10.0.0.{i}}}"))
        .collect::<String>();
    let y = edit(
        &base(),
        "pool: default",
        &format!("pool: default\njump:{many}"),
    );
    assert_eq!(
        one_issue(&y),
        "providers[0].kvm2.hosts[0].jump: must list at most 8 jump hosts; got 9"
    );
}
