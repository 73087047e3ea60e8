//! The image store of each agent on its Node (`status.images`, and the
//! `ephemeral-storage` capacity): each executor says what its store holds
//! ([`executor::NODE_IMAGES_MESSAGE`]) when it starts, after pulls and
//! image gc, and when a new scheduler asks; the core keeps the latest per
//! agent and writes the agent's Node only when it changed
//! ([`crate::objects::set_node_images`]). A message it cannot read is
//! logged and changes nothing.

use mesos::proto::scheduler::event;

use super::Core;
use super::effect::{Effect, Write};

impl Core {
    /// A message from an executor: if it is its store's images, onto its Node.
    pub(super) fn on_node_images(&mut self, message: &event::Message) {
        let images = match executor::NodeImages::decode(&message.data) {
            Ok(Some(images)) => images,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(agent = ?message.agent_id.as_ref().map(|a| &a.value), error = %e, "ignored an executor's node images message");
                return;
            }
        };
        let Some(agent) = message.agent_id.as_ref().map(|a| a.value.as_str()) else {
            return;
        };
        if let Some(node) = self.agents.set_images(agent, images) {
            self.emit(Effect::Store(vec![Write::Node(Box::new(node))]));
        }
    }
}
