//! The command line: `run`, `crd`, `check`, `validate`. Every setting not in
//! the providers config is a flag here (with an `EGRESS_*` environment
//! variable for the Deployment).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// The egress-proxies operator.
#[derive(Debug, Parser)]
#[command(name = "operator", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator (controllers, GC, health, HTTP endpoints).
    Run(Box<RunArgs>),
    /// Print the CustomResourceDefinitions (YAML) this operator serves.
    Crd {
        /// Leave out the CEL rules (for API servers before 1.25, whose
        /// kubectl validation refuses them): what
        /// `deploy/crds-without-cel/` renders (`deploy/crds/` holds the
        /// default form, with them).
        #[arg(long)]
        without_cel: bool,
    },
    /// Check every host of every provider entry: one row per host; exits 1
    /// when any host fails.
    Check {
        /// The providers config file.
        #[arg(long)]
        config: PathBuf,
        /// How long the whole check may take.
        #[arg(long, default_value = "20s")]
        timeout: Secs,
    },
    /// Validate a providers config: every problem at once; exits 1 when
    /// there is any.
    Validate {
        /// The providers config file.
        #[arg(long)]
        config: PathBuf,
    },
}

/// `operator run`'s flags.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The providers config file (mounted from the ConfigMap).
    #[arg(long, env = "EGRESS_PROVIDERS_CONFIG")]
    pub providers_config: PathBuf,
    /// A kubeconfig file; without it, the standard inference (KUBECONFIG,
    /// ~/.kube/config, in-cluster service account).
    #[arg(long, env = "EGRESS_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Watch Proxies only in this namespace (all namespaces when absent).
    #[arg(long, env = "EGRESS_NAMESPACE")]
    pub namespace: Option<String>,
    /// This cluster's identity, tagged on every instance and scoping the GC;
    /// default: the UID of the `kube-system` namespace.
    #[arg(long, env = "EGRESS_CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// Proxies reconciled at once, and provider calls in flight at once.
    #[arg(long, env = "EGRESS_CONCURRENCY", default_value_t = 16)]
    pub concurrency: u16,
    /// Deadline of a provider `create` (covers a cold base-image fill).
    #[arg(long, default_value = "30m")]
    pub create_timeout: Secs,
    /// Deadline of a provider `get`, `delete` or `list_by_tag`.
    #[arg(long, default_value = "60s")]
    pub call_timeout: Secs,
    /// How long one reconcile waits for a provider call before it lets the
    /// call run on in its task (the Proxy is reconciled again when it ends).
    #[arg(long, default_value = "5s")]
    pub reconcile_wait: Secs,
    /// The CONNECT target of the health probe (`host:port`) for every
    /// provider entry, over each entry's `proxy.probe_target`.
    #[arg(long, env = "EGRESS_PROBE_TARGET")]
    pub probe_target: Option<String>,
    /// Open each probe's connection from inside this network namespace
    /// (`ip netns` name; needs CAP_SYS_ADMIN), for proxies reachable only
    /// there; the operator itself stays in its own.
    #[arg(long, env = "EGRESS_PROBE_NETNS")]
    pub probe_netns: Option<String>,
    /// Interval between health probes of each running proxy.
    #[arg(long, default_value = "15s")]
    pub probe_interval: Secs,
    /// Deadline of one CONNECT probe.
    #[arg(long, default_value = "5s")]
    pub probe_timeout: Secs,
    /// Replace an instance whose own `Healthy` verdict has been `False` for
    /// this long (within the replacement cap); `0` never replaces for
    /// health alone.
    #[arg(long, env = "EGRESS_REPLACE_UNHEALTHY_AFTER", default_value = "5m")]
    pub replace_unhealthy_after: OffOrSecs,
    /// Make a Proxy's instance again on another host once its host has not
    /// answered for this long (cut off, frozen, down; within the
    /// replacement cap; the old instance is deleted by the GC when its host
    /// answers again); `0` waits for the host.
    #[arg(long, env = "EGRESS_HOST_LOSS_GRACE", default_value = "5m")]
    pub host_loss_grace: OffOrSecs,
    /// Reconcile a Proxy as soon as its provider reports its instance
    /// changed (crashed, stopped, removed); `false` polls only (every 60 s
    /// while a proxy runs).
    #[arg(
        long,
        env = "EGRESS_PROVIDER_EVENTS",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub provider_events: bool,
    /// Keep a selector-less Service per ProxyPool and per Proxy that is not
    /// a pool member, its endpoints the proxies behind it that are
    /// `Healthy`; `false` makes none (and leaves existing ones alone).
    #[arg(
        long,
        env = "EGRESS_SERVICES",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub services: bool,
    /// Interval between provider health checks.
    #[arg(long, default_value = "60s")]
    pub check_interval: Secs,
    /// Deadline of one provider health check.
    #[arg(long, default_value = "20s")]
    pub check_timeout: Secs,
    /// Interval between GC rounds.
    #[arg(long, default_value = "5m")]
    pub gc_interval: Secs,
    /// Instances younger than this are never garbage-collected.
    #[arg(long, default_value = "10m")]
    pub gc_min_age: Secs,
    /// The most instances one GC round deletes.
    #[arg(long, default_value_t = 10)]
    pub gc_max_deletes: usize,
    /// The Lease used for leader election.
    #[arg(
        long,
        env = "EGRESS_LEASE_NAME",
        default_value = "egress-proxies-operator"
    )]
    pub lease_name: String,
    /// The Lease's namespace (default: the pod's namespace from
    /// EGRESS_POD_NAMESPACE, else `egress-proxies-system`).
    #[arg(
        long,
        env = "EGRESS_POD_NAMESPACE",
        default_value = "egress-proxies-system"
    )]
    pub lease_namespace: String,
    /// How long a Lease holds without renewal.
    #[arg(long, default_value = "15s")]
    pub lease_duration: Secs,
    /// This replica's identity in the Lease (default: host name + pid).
    #[arg(long, env = "EGRESS_POD_NAME")]
    pub identity: Option<String>,
    /// The HTTP listen address (/metrics, /healthz, /readyz, /proxies).
    #[arg(long, env = "EGRESS_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    pub http_addr: SocketAddr,
    /// Who may read `/proxies` and `/metrics`: `kubernetes` (a bearer
    /// token, checked by TokenReview and authorized by SubjectAccessReview)
    /// or `none` (open to anyone who reaches the port: local development
    /// only). `/healthz` and `/readyz` are always open.
    #[arg(long, env = "EGRESS_HTTP_AUTH", value_enum, default_value_t = HttpAuth::Kubernetes)]
    pub http_auth: HttpAuth,
    /// How long a TokenReview or SubjectAccessReview answer is reused; `0`
    /// asks the API server on every request.
    #[arg(long, default_value = "10s")]
    pub http_auth_cache_ttl: OffOrSecs,
    /// Deadline of the auth checks of one request (every TokenReview and
    /// SubjectAccessReview it needs); past it the request is answered 503.
    #[arg(long, default_value = "5s")]
    pub http_auth_timeout: Secs,
    /// How long shutdown may take after SIGTERM before the process exits
    /// anyway.
    #[arg(long, default_value = "20s")]
    pub shutdown_timeout: Secs,
    /// Log filter (tracing-subscriber's EnvFilter syntax).
    #[arg(long, env = "EGRESS_LOG", default_value = "info")]
    pub log: String,
}

/// How the HTTP endpoints' callers are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpAuth {
    /// A bearer token, checked with the API server (TokenReview, then
    /// SubjectAccessReview).
    Kubernetes,
    /// No check at all (local development).
    None,
}

/// A duration written `500ms`, `30s`, `5m` or `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Secs(pub Duration);

impl From<Secs> for Duration {
    fn from(s: Secs) -> Duration {
        s.0
    }
}

/// A duration, or `0` (also `0s`, `off`) for none.
#[derive(Debug, Clone, Copy)]
pub struct OffOrSecs(pub Option<Duration>);

impl FromStr for OffOrSecs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if matches!(s, "0" | "0s" | "0m" | "0h" | "0ms" | "off") {
            return Ok(OffOrSecs(None));
        }
        s.parse::<Secs>().map(|d| OffOrSecs(Some(d.0)))
    }
}

impl FromStr for Secs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (n, unit) = s.split_at(split);
        let n: u64 = n
            .parse()
            .map_err(|_| format!("{s:?} is not a duration like 500ms, 30s, 5m or 1h"))?;
        let d = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(format!("{s:?}: the unit must be ms, s, m or h")),
        };
        if d.is_zero() {
            return Err(format!("{s:?}: must be more than zero"));
        }
        Ok(Secs(d))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(
            "500ms".parse::<Secs>().unwrap().0,
            Duration::from_millis(500)
        );
        assert_eq!("30s".parse::<Secs>().unwrap().0, Duration::from_secs(30));
        assert_eq!("5m".parse::<Secs>().unwrap().0, Duration::from_secs(300));
        assert_eq!("1h".parse::<Secs>().unwrap().0, Duration::from_secs(3600));
        for bad in ["", "5", "s", "0s", "5d", "-1s", "1.5s"] {
            assert!(bad.parse::<Secs>().is_err(), "{bad}");
        }
    }

    #[test]
    fn off_or_a_duration() {
        for off in ["0", "0s", "off"] {
            assert_eq!(off.parse::<OffOrSecs>().unwrap().0, None, "{off}");
        }
        assert_eq!(
            "5m".parse::<OffOrSecs>().unwrap().0,
            Some(Duration::from_secs(300))
        );
        assert!("5d".parse::<OffOrSecs>().is_err());
    }

    #[test]
    fn http_auth_is_on_unless_turned_off() {
        let run = |extra: &[&str]| {
            let mut args = vec!["operator", "run", "--providers-config", "p.yaml"];
            args.extend(extra);
            match Cli::try_parse_from(args).unwrap().command {
                Command::Run(args) => *args,
                other => panic!("{other:?}"),
            }
        };
        let default = run(&[]);
        assert_eq!(default.http_auth, HttpAuth::Kubernetes);
        assert_eq!(default.http_auth_cache_ttl.0, Some(Duration::from_secs(10)));
        assert_eq!(default.http_auth_timeout.0, Duration::from_secs(5));
        let off = run(&["--http-auth", "none", "--http-auth-cache-ttl", "0"]);
        assert_eq!(off.http_auth, HttpAuth::None);
        assert_eq!(off.http_auth_cache_ttl.0, None);
        assert!(
            Cli::try_parse_from([
                "operator",
                "run",
                "--providers-config",
                "p",
                "--http-auth",
                "basic"
            ])
            .is_err()
        );
    }

    #[test]
    fn the_cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
