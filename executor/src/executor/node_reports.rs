//! What the executor tells the scheduler about its agent, apart from pods: the node
//! credential's key, the periodic node status and the image store's contents.

use super::*;

impl<A: Agent> Executor<A> {
    /// Sends the node credential's public key to the scheduler (executor MESSAGE), and
    /// again until it answers.
    pub(super) async fn send_node_key(&mut self) {
        let Some(answers) = self.options.credential.as_ref().map(|c| c.answers()) else {
            return;
        };
        self.key_resend.sent(answers, Instant::now());
        self.call_node_key().await;
    }

    /// One [`NODE_STATUS_MESSAGE`]; one that is lost is made up by the next.
    pub(super) async fn send_node_status(&mut self) {
        let call = Call {
            executor_id: Some(self.env.executor_id.clone()),
            framework_id: Some(self.env.framework_id.clone()),
            r#type: Some(call::Type::Message as i32),
            message: Some(call::Message {
                data: NODE_STATUS_MESSAGE.to_vec(),
            }),
            ..Default::default()
        };
        if let Err(e) = self.agent.call(call).await {
            tracing::debug!(error = %e, "node status not sent; the next one goes in time");
        }
    }

    /// The image store's listing ([`crate::node_images`]), once there is
    /// one; one that is lost is made up by the next change or the next
    /// scheduler's request.
    pub(super) async fn send_node_images(&mut self) {
        let Some(listed) = self
            .node_images
            .as_mut()
            .and_then(|w| w.borrow_and_update().clone())
        else {
            return;
        };
        let call = Call {
            executor_id: Some(self.env.executor_id.clone()),
            framework_id: Some(self.env.framework_id.clone()),
            r#type: Some(call::Type::Message as i32),
            message: Some(call::Message {
                data: listed.encode(),
            }),
            ..Default::default()
        };
        if let Err(e) = self.agent.call(call).await {
            tracing::debug!(error = %e, "node images not sent; they go again with the next change");
        }
    }

    /// One executor MESSAGE with the node credential's public key; when to send it
    /// again depends on whether the agent took it.
    pub(super) async fn call_node_key(&mut self) {
        let Some(data) = self.options.credential.as_ref().map(|c| c.key_message()) else {
            return;
        };
        let call = Call {
            executor_id: Some(self.env.executor_id.clone()),
            framework_id: Some(self.env.framework_id.clone()),
            r#type: Some(call::Type::Message as i32),
            message: Some(call::Message { data }),
            ..Default::default()
        };
        let now = Instant::now();
        match self.agent.call(call).await {
            Ok(()) => self.key_resend.delivered(now),
            // Say a 503 while the agent recovers: it goes again shortly.
            Err(e @ AgentError::Unreachable(_)) => {
                tracing::debug!(error = %e, "the node key was not delivered; sending it again shortly");
                self.key_resend.undelivered(now);
            }
            Err(e @ AgentError::Refused(_)) => {
                tracing::warn!(error = %e, "could not send the node key to the scheduler");
                self.key_resend.delivered(now);
            }
        }
    }
}
