//! A scripted in-memory provider for the decorator and registry tests.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use provider_api::*;

/// What the fake's operations return.
pub enum Script {
    Ok,
    Fail(ErrorClass),
    /// Never completes (for cancellation tests).
    Hang,
}

pub struct Fake {
    pub name: Identifier,
    pub script: Mutex<Script>,
    pub checker: Option<FakeChecker>,
    pub calls: AtomicUsize,
}

pub struct FakeChecker {
    pub calls: AtomicUsize,
}

pub fn id(s: &str) -> Identifier {
    Identifier::parse(s).unwrap()
}

pub fn pid() -> ProviderId {
    ProviderId::parse("kvm2://fake/h1/ep-1").unwrap()
}

impl Fake {
    pub fn new(name: &str, with_checker: bool) -> Self {
        Fake {
            name: id(name),
            script: Mutex::new(Script::Ok),
            checker: with_checker.then(|| FakeChecker {
                calls: AtomicUsize::new(0),
            }),
            calls: AtomicUsize::new(0),
        }
    }

    pub fn set(&self, s: Script) {
        *self.script.lock().unwrap() = s;
    }

    async fn run<T>(&self, ok: T) -> Result<T, Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (outcome, hang) = match &*self.script.lock().unwrap() {
            Script::Ok => (Ok(()), false),
            Script::Fail(c) => (Err(*c), false),
            Script::Hang => (Ok(()), true),
        };
        if hang {
            std::future::pending::<()>().await;
        }
        match outcome {
            Ok(()) => Ok(ok),
            Err(class) => Err(Error::new(class, format!("scripted {class}"))
                .with_source(std::io::Error::other("root cause"))),
        }
    }

    pub fn instance(&self) -> Instance {
        Instance::new(
            pid(),
            InstanceState::Running,
            Some("10.0.0.2".parse().unwrap()),
            None,
        )
    }
}

#[async_trait]
impl Provider for Fake {
    fn name(&self) -> &Identifier {
        &self.name
    }

    fn provider_type(&self) -> ProviderType {
        ProviderType::Kvm2
    }

    async fn create(&self, _req: &CreateRequest) -> Result<Instance, Error> {
        self.run(self.instance()).await
    }

    async fn get(&self, _id: &ProviderId) -> Result<Instance, Error> {
        self.run(self.instance()).await
    }

    async fn delete(&self, _id: &ProviderId) -> Result<(), Error> {
        self.run(()).await
    }

    async fn list_by_tag(&self, _tag: &Tag) -> Result<Vec<ListedInstance>, Error> {
        self.run(Vec::new()).await
    }

    fn checker(&self) -> Option<&dyn Checker> {
        self.checker.as_ref().map(|c| c as &dyn Checker)
    }

    /// A watch that reports one Resync of `h1`, when the fake has a checker
    /// (the two capabilities travel together in these tests).
    fn instance_events(&self) -> Option<provider_api::InstanceEvents> {
        self.checker.as_ref()?;
        Some(Box::new(OneResync(true)))
    }

    /// Three fills, when the fake has a checker (as for the events).
    fn fills_in_flight(&self) -> Option<usize> {
        self.checker.as_ref().map(|_| 3)
    }
}

/// An event source yielding one `Resync { host: h1 }`, then nothing.
struct OneResync(bool);

#[async_trait::async_trait]
impl provider_api::InstanceEventSource for OneResync {
    async fn next(&mut self) -> Option<provider_api::InstanceEvent> {
        std::mem::take(&mut self.0).then(|| provider_api::InstanceEvent::Resync {
            host: Identifier::parse("h1").unwrap(),
        })
    }
}

#[async_trait]
impl Checker for FakeChecker {
    async fn check(&self, _timeout: Duration) -> Vec<TargetStatus> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        vec![
            TargetStatus::reachable(id("h1"), Duration::from_millis(3), Some("11.3.0".into())),
            TargetStatus::unreachable(id("h2"), CheckReason::Timeout, "deadline passed"),
        ]
    }
}
