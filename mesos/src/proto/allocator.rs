//! The allocator's shared messages: `InverseOfferStatus`, a framework's last
//! answer to an inverse offer, as the maintenance status reports it.

include!(concat!(env!("OUT_DIR"), "/mesos.v1.allocator.rs"));
include!(concat!(env!("OUT_DIR"), "/mesos.v1.allocator.json.rs"));
