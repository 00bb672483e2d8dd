//! What the client asks of the machine it runs on — the effective user,
//! environment variables, which files exist — behind one trait, so the
//! lookups that depend on it (the local socket of a URI, the TLS files)
//! are tested with a fake machine.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The machine as the client's lookups see it.
pub(crate) trait Host {
    /// Whether the process runs as root (effective user).
    fn is_root(&self) -> bool;
    /// An environment variable, `None` when unset or empty.
    fn var(&self, name: &str) -> Option<OsString>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> bool;

    /// `$HOME`.
    fn home(&self) -> Option<PathBuf> {
        self.var("HOME").map(PathBuf::from)
    }

    /// The per-user daemon's directory, as libvirt computes it:
    /// `$XDG_RUNTIME_DIR/libvirt`, else `$XDG_CACHE_HOME/libvirt`, else
    /// `$HOME/.cache/libvirt`.
    fn runtime_dir(&self) -> Option<PathBuf> {
        let base = self
            .var("XDG_RUNTIME_DIR")
            .or_else(|| self.var("XDG_CACHE_HOME"))
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(".cache")))?;
        Some(base.join("libvirt"))
    }
}

/// The machine the process runs on.
pub(crate) struct RealHost;

impl Host for RealHost {
    fn is_root(&self) -> bool {
        effective_user_is_root()
    }

    fn var(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name).filter(|v| !v.is_empty())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
}

/// Whether the process's effective user is root (the owner of
/// `/proc/self`). Unreadable (no procfs): assume not, as the per-user
/// paths then apply only to session URIs.
pub(crate) fn effective_user_is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Env(&'static [(&'static str, &'static str)]);

    impl Host for Env {
        fn is_root(&self) -> bool {
            false
        }
        fn var(&self, name: &str) -> Option<OsString> {
            self.0
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.into())
        }
        fn exists(&self, _: &Path) -> bool {
            false
        }
    }

    #[test]
    fn the_runtime_dir_follows_libvirts_order() {
        let dir = |vars| Env(vars).runtime_dir();
        assert_eq!(
            dir(&[("XDG_RUNTIME_DIR", "/run/user/1"), ("HOME", "/h")]),
            Some("/run/user/1/libvirt".into())
        );
        assert_eq!(
            dir(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")]),
            Some("/c/libvirt".into())
        );
        assert_eq!(dir(&[("HOME", "/h")]), Some("/h/.cache/libvirt".into()));
        assert_eq!(dir(&[]), None);
    }
}
