//! libvirt's `virErrorDomain` and `virErrorLevel` as Rust enums (from
//! `include/libvirt/virterror.h`).

use crate::error_code::wire_enum;

wire_enum! {
/// The subsystem that raised an error (`virErrorDomain`), with a fallback
/// for numbers newer than this crate.
ErrorDomain {
    /// No particular subsystem.
    None = 0,
    /// The Xen hypervisor layer.
    Xen = 1,
    /// The connection with the xend daemon.
    Xend = 2,
    /// The connection with the Xen store.
    Xenstore = 3,
    /// The S-expression code.
    Sexpr = 4,
    /// The XML code.
    Xml = 5,
    /// An operation on a domain.
    Dom = 6,
    /// The RPC code.
    Rpc = 7,
    /// The proxy code (unused since libvirt 0.8.6).
    Proxy = 8,
    /// Configuration file handling.
    Conf = 9,
    /// The QEMU driver.
    Qemu = 10,
    /// An operation on a network.
    Net = 11,
    /// The test driver.
    Test = 12,
    /// The remote driver.
    Remote = 13,
    /// The OpenVZ driver.
    Openvz = 14,
    /// The Xen XM layer.
    Xenxm = 15,
    /// The Linux statistics code.
    StatsLinux = 16,
    /// The Linux container driver.
    Lxc = 17,
    /// The storage driver.
    Storage = 18,
    /// Network configuration.
    Network = 19,
    /// Domain configuration.
    Domain = 20,
    /// The UML driver (unused since libvirt 5.0.0).
    Uml = 21,
    /// The node device monitor.
    Nodedev = 22,
    /// The Xen inotify layer.
    XenInotify = 23,
    /// The security framework.
    Security = 24,
    /// The VirtualBox driver.
    Vbox = 25,
    /// An operation on a host interface.
    Interface = 26,
    /// The OpenNebula driver (removed).
    One = 27,
    /// The ESX driver.
    Esx = 28,
    /// The phyp driver (unused since libvirt 6.0.0).
    Phyp = 29,
    /// Secret storage.
    Secret = 30,
    /// The CPU driver.
    Cpu = 31,
    /// XenAPI.
    Xenapi = 32,
    /// The network filter driver.
    Nwfilter = 33,
    /// Synchronous hooks.
    Hook = 34,
    /// Domain snapshots.
    DomainSnapshot = 35,
    /// The auditing subsystem.
    Audit = 36,
    /// sysinfo / SMBIOS.
    Sysinfo = 37,
    /// IO streams.
    Streams = 38,
    /// The VMware driver.
    Vmware = 39,
    /// The event loop.
    Event = 40,
    /// The libxenlight driver.
    Libxl = 41,
    /// The lock manager.
    Locking = 42,
    /// The Hyper-V driver.
    Hyperv = 43,
    /// Capabilities.
    Capabilities = 44,
    /// URI handling.
    Uri = 45,
    /// Authentication handling.
    Auth = 46,
    /// D-Bus.
    Dbus = 47,
    /// Parallels.
    Parallels = 48,
    /// Devices.
    Device = 49,
    /// The libssh2 connection transport.
    Ssh = 50,
    /// Lockspaces.
    Lockspace = 51,
    /// initctl device communication.
    Initctl = 52,
    /// Identity code.
    Identity = 53,
    /// cgroups.
    Cgroup = 54,
    /// The access control manager.
    Access = 55,
    /// systemd code.
    Systemd = 56,
    /// The bhyve driver.
    Bhyve = 57,
    /// Crypto code.
    Crypto = 58,
    /// The firewall.
    Firewall = 59,
    /// polkit code.
    Polkit = 60,
    /// Thread utilities.
    Thread = 61,
    /// The admin backend.
    Admin = 62,
    /// The log manager.
    Logging = 63,
    /// Xen xl configuration code.
    Xenxl = 64,
    /// perf.
    Perf = 65,
    /// The libssh connection transport.
    Libssh = 66,
    /// Resource control.
    Resctrl = 67,
    /// firewalld.
    Firewalld = 68,
    /// Domain checkpoints.
    DomainCheckpoint = 69,
    /// TPM.
    Tpm = 70,
    /// BPF code.
    Bpf = 71,
    /// The Cloud-Hypervisor driver.
    Ch = 72,
}
}

wire_enum! {
/// How serious an error is (`virErrorLevel`), with a fallback for numbers
/// newer than this crate.
ErrorLevel {
    /// No level.
    None = 0,
    /// A warning.
    Warning = 1,
    /// An error.
    Error = 2,
}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_unknown_falls_back() {
        for n in -3..100 {
            assert_eq!(ErrorDomain::from_i32(n).to_i32(), n);
            assert_eq!(ErrorLevel::from_i32(n).to_i32(), n);
        }
        assert_eq!(ErrorDomain::from_i32(10), ErrorDomain::Qemu);
        assert_eq!(ErrorDomain::from_i32(18), ErrorDomain::Storage);
        assert_eq!(ErrorDomain::from_i32(72), ErrorDomain::Ch);
        assert_eq!(ErrorDomain::from_i32(73), ErrorDomain::Unknown(73));
        assert_eq!(ErrorLevel::from_i32(2), ErrorLevel::Error);
    }
}
