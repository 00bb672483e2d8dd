//! The one error type every provider operation returns, and its retry classes.
//!
//! The reconciler decides what to do next from [`ErrorClass`] alone; it never
//! parses messages. A provider therefore classifies every failure at the
//! point where it knows what the failure means, and wraps lower-layer errors
//! as the [`source`](std::error::Error::source) so that logs keep the detail.
//!
//! | class | meaning | what the caller does |
//! |---|---|---|
//! | [`Transient`](ErrorClass::Transient) | the operation may succeed if repeated unchanged (network, daemon busy, lock held, timeout) | retry the same call with backoff |
//! | [`Permanent`](ErrorClass::Permanent) | repeating the same call cannot succeed (bad request, unknown machine type, authentication refused, foreign domain) | do not retry until the input (spec or config) changes; surface the message |
//! | [`NotFound`](ErrorClass::NotFound) | the instance named by the request does not exist | `get`: the instance is gone (recreate it); `delete`: treat as success |
//! | [`QuotaExceeded`](ErrorClass::QuotaExceeded) | no capacity now (pool space, host full) | retry after a long wait; capacity may free up |
//!
//! Messages never carry secrets: no cloud-init user data, no key material.

use std::error::Error as StdError;
use std::fmt;

/// The boxed source type an [`Error`] carries.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// What the caller may do after a failed provider operation.
///
/// The class is the *only* input the reconciler uses to decide on a retry;
/// see the [module docs](self) for the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorClass {
    /// Repeating the same call unchanged may succeed: retry with backoff.
    Transient,
    /// Repeating the same call unchanged cannot succeed: wait for the input
    /// (spec or config) to change.
    Permanent,
    /// The named instance does not exist. For `delete` this is success.
    NotFound,
    /// The provider lacks capacity now: retry after a long wait.
    QuotaExceeded,
}

impl ErrorClass {
    /// Every class, in a stable order (for metrics and tests).
    pub const ALL: [ErrorClass; 4] = [
        ErrorClass::Transient,
        ErrorClass::Permanent,
        ErrorClass::NotFound,
        ErrorClass::QuotaExceeded,
    ];

    /// A short stable name: `transient`, `permanent`, `not_found`,
    /// `quota_exceeded`. Used as a metrics label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Permanent => "permanent",
            ErrorClass::NotFound => "not_found",
            ErrorClass::QuotaExceeded => "quota_exceeded",
        }
    }

    /// Whether repeating the same call unchanged may eventually succeed
    /// (`Transient` and `QuotaExceeded`). `NotFound` is not retryable: it is
    /// an answer, not a failure to get one.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorClass::Transient | ErrorClass::QuotaExceeded)
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed provider operation: a [class](ErrorClass), a message describing
/// this layer, and optionally the lower-layer error that caused it.
///
/// `Display` prints the message only; walk [`source`](StdError::source) for
/// the chain. Construct with the per-class helpers:
///
/// ```
/// use provider_api::{Error, ErrorClass};
///
/// let io = std::io::Error::other("connection reset");
/// let err = Error::transient("list domains on host1").with_source(io);
/// assert_eq!(err.class(), ErrorClass::Transient);
/// assert!(err.is_retryable());
/// assert_eq!(err.to_string(), "list domains on host1");
/// ```
pub struct Error {
    class: ErrorClass,
    message: String,
    source: Option<BoxError>,
}

impl Error {
    /// A new error of `class` with `message` and no source.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        Error {
            class,
            message: message.into(),
            source: None,
        }
    }

    /// A [`Transient`](ErrorClass::Transient) error.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Transient, message)
    }

    /// A [`Permanent`](ErrorClass::Permanent) error.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Permanent, message)
    }

    /// A [`NotFound`](ErrorClass::NotFound) error.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::NotFound, message)
    }

    /// A [`QuotaExceeded`](ErrorClass::QuotaExceeded) error.
    pub fn quota_exceeded(message: impl Into<String>) -> Self {
        Self::new(ErrorClass::QuotaExceeded, message)
    }

    /// Wraps `source` in a new error of `class` with `message`.
    pub fn wrap(
        class: ErrorClass,
        message: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::new(class, message).with_source(source)
    }

    /// Adds context to an existing provider error: the new error keeps the
    /// class of `self` and carries `self` as its source.
    ///
    /// ```
    /// use provider_api::{Error, ErrorClass};
    /// let inner = Error::quota_exceeded("pool default: 1 GiB free, 10 GiB needed");
    /// let outer = inner.context("create ep-0123456789abcdef");
    /// assert_eq!(outer.class(), ErrorClass::QuotaExceeded);
    /// ```
    pub fn context(self, message: impl Into<String>) -> Self {
        let class = self.class;
        Self::wrap(class, message, self)
    }

    /// Replaces this error's class and message, keeping its source: for a
    /// caller whose message restates this one's (adding what it knows), so
    /// that a printed [`chain`] says the restated part once.
    ///
    /// ```
    /// use provider_api::{Error, ErrorClass};
    /// let e = Error::not_found("host h: look up domain ep-1")
    ///     .with_source(std::io::Error::other("no domain"));
    /// let e = e.restate(ErrorClass::Transient, "host h: look up domain ep-1 (it vanished)");
    /// assert_eq!(
    ///     provider_api::error::chain(&e),
    ///     "host h: look up domain ep-1 (it vanished): no domain"
    /// );
    /// ```
    pub fn restate(self, class: ErrorClass, message: impl Into<String>) -> Self {
        Self {
            class,
            message: message.into(),
            source: self.source,
        }
    }

    /// Sets the source (replacing any previous one).
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The retry class.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The message of this layer (without the source chain).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `class() == Transient`.
    pub fn is_transient(&self) -> bool {
        self.class == ErrorClass::Transient
    }

    /// `class() == Permanent`.
    pub fn is_permanent(&self) -> bool {
        self.class == ErrorClass::Permanent
    }

    /// `class() == NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.class == ErrorClass::NotFound
    }

    /// `class() == QuotaExceeded`.
    pub fn is_quota_exceeded(&self) -> bool {
        self.class == ErrorClass::QuotaExceeded
    }

    /// See [`ErrorClass::is_retryable`].
    pub fn is_retryable(&self) -> bool {
        self.class.is_retryable()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("class", &self.class)
            .field("message", &self.message);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

/// The class of the first provider [`Error`] in `err`'s chain (`err` itself
/// first, then its sources), or `None` when the chain holds none.
///
/// Use it where a provider error may arrive wrapped in another error type.
///
/// ```
/// use provider_api::{Error, ErrorClass, error::classify};
///
/// #[derive(Debug)]
/// struct Outer(Error);
/// impl std::fmt::Display for Outer {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("reconcile failed")
///     }
/// }
/// impl std::error::Error for Outer {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
/// }
///
/// let wrapped = Outer(Error::not_found("domain ep-1"));
/// assert_eq!(classify(&wrapped), Some(ErrorClass::NotFound));
/// assert_eq!(classify(&std::io::Error::other("x")), None);
/// ```
pub fn classify(err: &(dyn StdError + 'static)) -> Option<ErrorClass> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(pe) = e.downcast_ref::<Error>() {
            return Some(pe.class());
        }
        cur = e.source();
    }
    None
}

/// `err` and its sources, `": "`-separated: the one way this workspace
/// prints an error chain (logs, CLI output, check reasons).
///
/// Each error's `Display` describes its own layer only (the workspace's
/// error convention), so the chain says each thing once.
///
/// ```
/// use provider_api::Error;
/// let io = std::io::Error::other("connection refused");
/// let e = Error::transient("dial host1").with_source(io).context("create ep-1");
/// assert_eq!(
///     provider_api::error::chain(&e),
///     "create ep-1: dial host1: connection refused"
/// );
/// ```
pub fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

/// Like [`classify`], falling back to `default` when the chain holds no
/// provider [`Error`].
pub fn classify_or(err: &(dyn StdError + 'static), default: ErrorClass) -> ErrorClass {
    classify(err).unwrap_or(default)
}

/// Classifying conversions on `Result`: turn any error into a provider
/// [`Error`] of the named class, with `message` as this layer's context.
///
/// ```
/// use provider_api::{ErrorClass, ResultExt};
/// fn parse(s: &str) -> Result<u32, provider_api::Error> {
///     s.parse::<u32>().permanent(format!("parse port {s:?}"))
/// }
/// assert_eq!(parse("x").unwrap_err().class(), ErrorClass::Permanent);
/// ```
pub trait ResultExt<T> {
    /// Wraps the error as `class` with `message`.
    ///
    /// # Errors
    /// The wrapped error when `self` is `Err`.
    fn or_class(self, class: ErrorClass, message: impl Into<String>) -> Result<T, Error>;

    /// Wraps the error as [`Transient`](ErrorClass::Transient).
    ///
    /// # Errors
    /// The wrapped error when `self` is `Err`.
    fn transient(self, message: impl Into<String>) -> Result<T, Error>
    where
        Self: Sized,
    {
        self.or_class(ErrorClass::Transient, message)
    }

    /// Wraps the error as [`Permanent`](ErrorClass::Permanent).
    ///
    /// # Errors
    /// The wrapped error when `self` is `Err`.
    fn permanent(self, message: impl Into<String>) -> Result<T, Error>
    where
        Self: Sized,
    {
        self.or_class(ErrorClass::Permanent, message)
    }

    /// Wraps the error as [`NotFound`](ErrorClass::NotFound).
    ///
    /// # Errors
    /// The wrapped error when `self` is `Err`.
    fn not_found(self, message: impl Into<String>) -> Result<T, Error>
    where
        Self: Sized,
    {
        self.or_class(ErrorClass::NotFound, message)
    }

    /// Wraps the error as [`QuotaExceeded`](ErrorClass::QuotaExceeded).
    ///
    /// # Errors
    /// The wrapped error when `self` is `Err`.
    fn quota_exceeded(self, message: impl Into<String>) -> Result<T, Error>
    where
        Self: Sized,
    {
        self.or_class(ErrorClass::QuotaExceeded, message)
    }
}

impl<T, E> ResultExt<T> for Result<T, E>
where
    E: Into<BoxError>,
{
    fn or_class(self, class: ErrorClass, message: impl Into<String>) -> Result<T, Error> {
        self.map_err(|e| Error::wrap(class, message, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_chain_does_not_repeat_itself() {
        let io = std::io::Error::other("connection refused");
        let e = Error::wrap(ErrorClass::Transient, "dial host1", io)
            .context("create ep-1")
            .context("reconcile default/p");
        let printed = chain(&e);
        assert_eq!(
            printed,
            "reconcile default/p: create ep-1: dial host1: connection refused"
        );
        for part in [
            "reconcile default/p",
            "create ep-1",
            "dial host1",
            "connection refused",
        ] {
            assert_eq!(printed.matches(part).count(), 1, "{printed}");
        }
    }

    fn io(msg: &str) -> std::io::Error {
        std::io::Error::other(msg.to_owned())
    }

    #[test]
    fn constructors_set_their_class() {
        assert_eq!(Error::transient("m").class(), ErrorClass::Transient);
        assert_eq!(Error::permanent("m").class(), ErrorClass::Permanent);
        assert_eq!(Error::not_found("m").class(), ErrorClass::NotFound);
        assert_eq!(
            Error::quota_exceeded("m").class(),
            ErrorClass::QuotaExceeded
        );
        assert_eq!(
            Error::new(ErrorClass::Permanent, "m").class(),
            ErrorClass::Permanent
        );
    }

    #[test]
    fn predicates_match_exactly_one_class() {
        for class in ErrorClass::ALL {
            let e = Error::new(class, "m");
            let flags = [
                e.is_transient(),
                e.is_permanent(),
                e.is_not_found(),
                e.is_quota_exceeded(),
            ];
            assert_eq!(flags.iter().filter(|f| **f).count(), 1, "{class}");
            assert!(flags[ErrorClass::ALL.iter().position(|c| *c == class).unwrap()]);
        }
    }

    #[test]
    fn retryable_is_transient_and_quota_only() {
        assert!(ErrorClass::Transient.is_retryable());
        assert!(ErrorClass::QuotaExceeded.is_retryable());
        assert!(!ErrorClass::Permanent.is_retryable());
        assert!(!ErrorClass::NotFound.is_retryable());
        assert!(Error::transient("m").is_retryable());
        assert!(!Error::permanent("m").is_retryable());
    }

    #[test]
    fn class_names_are_stable() {
        let names: Vec<_> = ErrorClass::ALL.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            names,
            ["transient", "permanent", "not_found", "quota_exceeded"]
        );
    }

    #[test]
    fn wrap_keeps_source_and_display_is_this_layer_only() {
        let e = Error::wrap(ErrorClass::Transient, "dial host1", io("refused"));
        assert_eq!(e.to_string(), "dial host1");
        assert_eq!(e.message(), "dial host1");
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("refused")
        );
    }

    #[test]
    fn with_source_replaces_source() {
        let e = Error::permanent("m")
            .with_source(io("a"))
            .with_source(io("b"));
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("b"));
    }

    #[test]
    fn context_keeps_class_and_chains() {
        let inner = Error::not_found("domain ep-1");
        let outer = inner.context("get kvm2://e/h/ep-1");
        assert_eq!(outer.class(), ErrorClass::NotFound);
        assert_eq!(outer.to_string(), "get kvm2://e/h/ep-1");
        let src = outer.source().and_then(|s| s.downcast_ref::<Error>());
        assert_eq!(src.map(Error::message), Some("domain ep-1"));
    }

    #[test]
    fn classify_finds_provider_error_anywhere_in_chain() {
        let e = Error::quota_exceeded("pool full");
        assert_eq!(classify(&e), Some(ErrorClass::QuotaExceeded));
        let wrapped = io_wrapping(Error::permanent("auth refused"));
        assert_eq!(classify(&wrapped), Some(ErrorClass::Permanent));
        assert_eq!(classify(&io("plain")), None);
        assert_eq!(
            classify_or(&io("plain"), ErrorClass::Transient),
            ErrorClass::Transient
        );
        assert_eq!(
            classify_or(&wrapped, ErrorClass::Transient),
            ErrorClass::Permanent
        );
    }

    /// A foreign error type whose source is a provider error.
    #[derive(Debug)]
    struct Outer(Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("outer layer")
        }
    }

    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    fn io_wrapping(e: Error) -> Outer {
        Outer(e)
    }

    #[test]
    fn classify_takes_outermost_provider_error() {
        let inner = Error::not_found("inner");
        let outer = Error::wrap(ErrorClass::Transient, "outer", inner);
        assert_eq!(classify(&outer), Some(ErrorClass::Transient));
    }

    #[test]
    fn result_ext_helpers_classify() {
        let r: Result<(), std::io::Error> = Err(io("x"));
        assert_eq!(r.transient("t").unwrap_err().class(), ErrorClass::Transient);
        let r: Result<(), std::io::Error> = Err(io("x"));
        assert_eq!(r.permanent("p").unwrap_err().class(), ErrorClass::Permanent);
        let r: Result<(), std::io::Error> = Err(io("x"));
        assert_eq!(r.not_found("n").unwrap_err().class(), ErrorClass::NotFound);
        let r: Result<(), std::io::Error> = Err(io("x"));
        let e = r.quota_exceeded("q").unwrap_err();
        assert_eq!(e.class(), ErrorClass::QuotaExceeded);
        assert_eq!(e.to_string(), "q");
        assert_eq!(e.source().map(|s| s.to_string()).as_deref(), Some("x"));
        let ok: Result<u8, std::io::Error> = Ok(7);
        assert_eq!(ok.transient("t").unwrap(), 7);
    }

    #[test]
    fn debug_shows_class_message_and_source() {
        let e = Error::wrap(ErrorClass::Transient, "dial", io("refused"));
        let d = format!("{e:?}");
        assert!(
            d.contains("Transient") && d.contains("dial") && d.contains("refused"),
            "{d}"
        );
    }

    #[test]
    fn error_is_send_sync_static() {
        fn assert_bounds<T: Send + Sync + 'static>() {}
        assert_bounds::<Error>();
    }
}
