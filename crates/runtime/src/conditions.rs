//! Pure helpers for `metav1.Condition` lists.
//!
//! Status must be deterministic, or a controller retriggers itself forever: a condition keeps its
//! `lastTransitionTime` unless its `status` changes, and the list keeps its order.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition type that summarises the others.
pub const READY: &str = "Ready";
/// Reason of a `Ready=True` summary.
pub const REASON_READY: &str = "Ready";

/// A condition's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `"True"`
    True,
    /// `"False"`
    False,
    /// `"Unknown"`
    Unknown,
}

impl ConditionStatus {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the API string; anything unrecognised counts as `Unknown`.
    pub fn parse(s: &str) -> Self {
        match s {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(b: bool) -> Self {
        if b { Self::True } else { Self::False }
    }
}

/// The desired state of one condition, without the transition time (which
/// [`set_condition`] manages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition {
    /// Condition type, CamelCase (e.g. `HostClaimed`).
    pub type_: String,
    /// Status.
    pub status: ConditionStatus,
    /// CamelCase reason a human can search for.
    pub reason: String,
    /// Human-readable detail.
    pub message: String,
    /// `metadata.generation` this condition was computed from.
    pub observed_generation: Option<i64>,
}

impl NewCondition {
    /// A condition with the given type, status and reason, and an empty message.
    pub fn new(type_: &str, status: ConditionStatus, reason: &str) -> Self {
        Self {
            type_: type_.to_owned(),
            status,
            reason: reason.to_owned(),
            message: String::new(),
            observed_generation: None,
        }
    }

    /// Sets the message.
    #[must_use]
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Sets the observed generation.
    #[must_use]
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }
}

/// Inserts or updates a condition. `lastTransitionTime` becomes `now` only when the condition is
/// new or its status changes. Returns whether the list changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: NewCondition, now: &Time) -> bool {
    let status = new.status.as_str();
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        let before = existing.clone();
        if existing.status != status {
            status.clone_into(&mut existing.status);
            existing.last_transition_time = now.clone();
        }
        existing.reason = new.reason;
        existing.message = new.message;
        existing.observed_generation = new.observed_generation;
        *existing != before
    } else {
        conditions.push(Condition {
            type_: new.type_,
            status: status.to_owned(),
            reason: new.reason,
            message: new.message,
            observed_generation: new.observed_generation,
            last_transition_time: now.clone(),
        });
        true
    }
}

/// Removes a condition; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of the given type.
pub fn get_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition exists with status `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether the condition exists with status `False`.
pub fn is_false(conditions: &[Condition], type_: &str) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == "False")
}

/// Computes `Ready` from the listed condition types, checked in the given order:
/// - any `False` → `Ready=False` with the first false condition's reason and message;
/// - else any `Unknown` or missing → `Ready=Unknown` (reason of the first such condition, or
///   `<Type>NotReported` when missing);
/// - else `Ready=True`, reason `Ready`.
///
/// The message names the deciding condition type, so `kubectl get` output explains itself.
pub fn summarize_ready(
    conditions: &[Condition],
    types: &[&str],
    observed_generation: Option<i64>,
) -> NewCondition {
    let lookup = |t: &str| get_condition(conditions, t);
    let first_false = types
        .iter()
        .filter_map(|t| lookup(t))
        .find(|c| ConditionStatus::parse(&c.status) == ConditionStatus::False);
    if let Some(c) = first_false {
        return NewCondition::new(READY, ConditionStatus::False, &c.reason)
            .message(prefixed(&c.type_, &c.message))
            .observed_generation(observed_generation);
    }
    let first_unknown = types.iter().find_map(|t| match lookup(t) {
        None => Some((*t, format!("{t}NotReported"), String::new())),
        Some(c) if ConditionStatus::parse(&c.status) != ConditionStatus::True => {
            Some((*t, c.reason.clone(), c.message.clone()))
        }
        Some(_) => None,
    });
    if let Some((t, reason, message)) = first_unknown {
        return NewCondition::new(READY, ConditionStatus::Unknown, &reason)
            .message(prefixed(t, &message))
            .observed_generation(observed_generation);
    }
    NewCondition::new(READY, ConditionStatus::True, REASON_READY)
        .observed_generation(observed_generation)
}

fn prefixed(type_: &str, message: &str) -> String {
    if message.is_empty() {
        type_.to_owned()
    } else {
        format!("{type_}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn cond(type_: &str, status: ConditionStatus, reason: &str) -> NewCondition {
        NewCondition::new(type_, status, reason)
    }

    #[test]
    fn set_adds_then_keeps_transition_time_when_status_unchanged() {
        let mut list = Vec::new();
        assert!(set_condition(
            &mut list,
            cond("HostClaimed", ConditionStatus::False, "Waiting").observed_generation(Some(1)),
            &t(10)
        ));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, t(10));

        // Same status, new message and generation: updated, transition time kept.
        assert!(set_condition(
            &mut list,
            cond("HostClaimed", ConditionStatus::False, "Waiting")
                .message("no host fits")
                .observed_generation(Some(2)),
            &t(20)
        ));
        assert_eq!(list[0].last_transition_time, t(10));
        assert_eq!(list[0].message, "no host fits");
        assert_eq!(list[0].observed_generation, Some(2));

        // Identical: no change.
        assert!(!set_condition(
            &mut list,
            cond("HostClaimed", ConditionStatus::False, "Waiting")
                .message("no host fits")
                .observed_generation(Some(2)),
            &t(30)
        ));

        // Status flips: transition time moves.
        assert!(set_condition(
            &mut list,
            cond("HostClaimed", ConditionStatus::True, "Claimed"),
            &t(40)
        ));
        assert_eq!(list[0].last_transition_time, t(40));
        assert_eq!(list[0].status, "True");
        assert_eq!(list[0].observed_generation, None);
    }

    #[test]
    fn order_is_stable_and_get_is_true() {
        let mut list = Vec::new();
        set_condition(&mut list, cond("A", true.into(), "Ok"), &t(1));
        set_condition(&mut list, cond("B", false.into(), "No"), &t(1));
        set_condition(&mut list, cond("A", false.into(), "No"), &t(2));
        let types: Vec<_> = list.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["A", "B"]);
        assert!(!is_true(&list, "A"));
        assert!(is_false(&list, "A"));
        assert!(!is_true(&list, "C"));
        assert!(!is_false(&list, "C"));
        assert_eq!(get_condition(&list, "B").unwrap().reason, "No");
        assert!(remove_condition(&mut list, "A"));
        assert!(!remove_condition(&mut list, "A"));
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn summary_all_true() {
        let mut list = Vec::new();
        set_condition(&mut list, cond("A", true.into(), "Ok"), &t(1));
        set_condition(&mut list, cond("B", true.into(), "Ok"), &t(1));
        let ready = summarize_ready(&list, &["A", "B"], Some(3));
        assert_eq!(ready.status, ConditionStatus::True);
        assert_eq!(ready.reason, REASON_READY);
        assert_eq!(ready.type_, READY);
        assert_eq!(ready.observed_generation, Some(3));
    }

    #[test]
    fn summary_first_false_wins_over_unknown_and_order() {
        let mut list = Vec::new();
        set_condition(
            &mut list,
            cond("A", ConditionStatus::Unknown, "Probing"),
            &t(1),
        );
        set_condition(
            &mut list,
            cond("B", false.into(), "MaasUnavailable").message("503"),
            &t(1),
        );
        set_condition(&mut list, cond("C", false.into(), "NoHost"), &t(1));
        let ready = summarize_ready(&list, &["A", "C", "B"], None);
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, "NoHost");
        assert_eq!(ready.message, "C");
        let ready = summarize_ready(&list, &["A", "B", "C"], None);
        assert_eq!(ready.reason, "MaasUnavailable");
        assert_eq!(ready.message, "B: 503");
    }

    #[test]
    fn summary_missing_or_unknown_is_unknown() {
        let mut list = Vec::new();
        set_condition(&mut list, cond("A", true.into(), "Ok"), &t(1));
        let ready = summarize_ready(&list, &["A", "B"], None);
        assert_eq!(ready.status, ConditionStatus::Unknown);
        assert_eq!(ready.reason, "BNotReported");
        set_condition(
            &mut list,
            cond("B", ConditionStatus::Unknown, "Probing").message("first probe"),
            &t(1),
        );
        let ready = summarize_ready(&list, &["A", "B"], None);
        assert_eq!(ready.reason, "Probing");
        assert_eq!(ready.message, "B: first probe");
        // Conditions not listed do not count.
        set_condition(&mut list, cond("Z", false.into(), "Ignored"), &t(1));
        set_condition(&mut list, cond("B", true.into(), "Ok"), &t(1));
        assert_eq!(
            summarize_ready(&list, &["A", "B"], None).status,
            ConditionStatus::True
        );
    }

    #[test]
    fn summary_is_deterministic() {
        let mut list = Vec::new();
        set_condition(&mut list, cond("A", false.into(), "X"), &t(1));
        let a = summarize_ready(&list, &["A"], Some(1));
        let b = summarize_ready(&list, &["A"], Some(1));
        assert_eq!(a, b);
        let mut with_ready = list.clone();
        assert!(set_condition(&mut with_ready, a.clone(), &t(5)));
        assert!(!set_condition(&mut with_ready, b, &t(6)));
    }

    #[test]
    fn status_strings() {
        for s in [
            ConditionStatus::True,
            ConditionStatus::False,
            ConditionStatus::Unknown,
        ] {
            assert_eq!(ConditionStatus::parse(s.as_str()), s);
        }
        assert_eq!(ConditionStatus::parse("yes"), ConditionStatus::Unknown);
    }
}
