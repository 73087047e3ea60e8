//! The v1 scheduler API: `Call` (scheduler → master) and `Event` (master → scheduler).

include!(concat!(env!("OUT_DIR"), "/mesos.v1.scheduler.rs"));
include!(concat!(env!("OUT_DIR"), "/mesos.v1.scheduler.json.rs"));

impl Call {
    /// The call's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<call::Type> {
        self.r#type.and_then(|t| call::Type::try_from(t).ok())
    }
}

impl Event {
    /// The event's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<event::Type> {
        self.r#type.and_then(|t| event::Type::try_from(t).ok())
    }
}
