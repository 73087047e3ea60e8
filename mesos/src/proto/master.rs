//! The master's v1 operator API (`POST /api/v1`), trimmed to maintenance,
//! agent draining and GET_AGENTS:
//! every call type decodes, so the others can be refused by name.

include!(concat!(env!("OUT_DIR"), "/mesos.v1.master.rs"));
include!(concat!(env!("OUT_DIR"), "/mesos.v1.master.json.rs"));

impl Call {
    /// The call's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<call::Type> {
        self.r#type.and_then(|t| call::Type::try_from(t).ok())
    }
}

impl Response {
    /// The response's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<response::Type> {
        self.r#type.and_then(|t| response::Type::try_from(t).ok())
    }
}
