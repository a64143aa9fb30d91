//! The one job assembly every front uses (issue #63): `binder`'s warm path, `binder-full`
//! and both plugins (through `binder_host::front`) build a job here and nowhere else.
//!
//! A [`JobSpec`] is what makes tasks one job: the shape's bytes, the command line's
//! requests (none from the warm path or a plugin), the site file's bytes and the GPU
//! variables, composed into the [`JobKey`] with the envelope that key holds, so that no
//! front can key a plan without its envelope or pair a key with another envelope. Each
//! task's [`Job`] is then [`JobSpec::task`]: the spec and the task's identity.

use super::line::{JobKey, Requests};
use crate::envelope::Envelope;
use crate::identity::Identity;

/// A job as every front assembles it, before its tasks: where the shape came from, the
/// key its plan is found by, the allocation the plan stays in, and the requests a task
/// carries into the flow.
#[derive(Debug, Clone)]
pub struct JobSpec {
    origin: String,
    key: JobKey,
    envelope: Envelope,
    gpus_per_task: Option<usize>,
    verbose: bool,
}

impl JobSpec {
    /// The job that runs `shape` (its bytes; `origin` names it in messages) with the
    /// command line's `requests` and the site file's bytes, keyed by the GPU variables
    /// `env` gives, inside `envelope`. Not verbose.
    pub fn new(
        origin: &str,
        shape: &str,
        requests: &Requests,
        site: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        envelope: Envelope,
    ) -> JobSpec {
        JobSpec {
            origin: origin.to_owned(),
            key: JobKey::new(shape, requests, site, env, &envelope),
            gpus_per_task: requests.gpus_per_task,
            envelope,
            verbose: false,
        }
    }

    /// The same job, saying on stderr what the envelope and the ledger decided
    /// (`--verbose`, `--binder-verbose`, `-o binder-verbose`).
    #[must_use]
    pub fn verbose(mut self, verbose: bool) -> JobSpec {
        self.verbose = verbose;
        self
    }

    /// The job's allocation on this node (SEMANTICS §4.1).
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// Where the shape came from, for messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The key the job's plan is found by.
    pub fn key(&self) -> &JobKey {
        &self.key
    }

    /// Task `identity` of this job.
    pub fn task<'a>(&'a self, identity: &'a Identity) -> Job<'a> {
        Job {
            origin: &self.origin,
            text: self.key.as_str(),
            identity,
            gpus_per_task: self.gpus_per_task,
            verbose: self.verbose,
            envelope: &self.envelope,
        }
    }
}

/// What a launch plans: one task of a [`JobSpec`], the only way one is made.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    /// Where the shape came from (a path, `--ge`), for messages.
    pub origin: &'a str,
    /// The text the plan is keyed by ([`JobKey`]): private, so that a job is only made
    /// by [`JobSpec::task`] from a key that holds its envelope.
    text: &'a str,
    /// Which task of how many this is.
    pub identity: &'a Identity,
    /// `--gpus-per-task`, which changes the plan.
    pub gpus_per_task: Option<usize>,
    /// `--verbose`: say on stderr what the ledger decided.
    pub verbose: bool,
    /// The job's allocation on this node (SEMANTICS §4.1), which every plan stays in.
    pub envelope: &'a Envelope,
}

impl<'a> Job<'a> {
    /// The text the plan is keyed by.
    pub fn text(&self) -> &'a str {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key holds the envelope the job's tasks plan in: two allocations of one shape
    /// are two jobs, and a task carries the spec's requests.
    #[test]
    fn a_task_carries_its_specs_key_envelope_and_requests() {
        let none = |_: &str| None;
        let requests = Requests {
            gpus_per_task: Some(2),
            ..Requests::default()
        };
        let here = JobSpec::new("s.yaml", "s", &requests, None, &none, Envelope::allowed());
        let there = JobSpec::new(
            "s.yaml",
            "s",
            &requests,
            None,
            &none,
            Envelope::given_cores(vec![1], None, "a test's"),
        );
        assert_ne!(here.key(), there.key());
        let identity = Identity::given(0, 1);
        let task = here.clone().verbose(true);
        let task = task.task(&identity);
        assert_eq!(task.text(), here.key().as_str());
        assert_eq!(task.gpus_per_task, Some(2));
        assert!(task.verbose);
        assert!(!here.task(&identity).verbose);
        assert_eq!(task.origin, "s.yaml");
    }
}
