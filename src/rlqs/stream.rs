//! One `StreamRateLimitQuotas` call: a task reads the client's reports into the hub until the
//! client closes, an error ends the stream, or the service shuts down; the responses go out
//! through the stream's outbox.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

use super::RlqsService;
use super::assign::{Pending, assign_into, send};
use super::ghost::reshare;
use super::hub::Hub;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaService;
use crate::rls::proto::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};

/// The responses of one stream, as tonic sends them.
#[derive(Debug)]
pub struct ResponseStream {
    receiver: mpsc::UnboundedReceiver<Result<RateLimitQuotaResponse, Status>>,
}

impl futures_util::Stream for ResponseStream {
    type Item = Result<RateLimitQuotaResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

#[tonic::async_trait]
impl RateLimitQuotaService for RlqsService {
    type StreamRateLimitQuotasStream = ResponseStream;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<ResponseStream>, Status> {
        let (outbox, receiver) = mpsc::unbounded_channel();
        if self.hub.start_ticking() {
            tokio::spawn(super::tick::run(Arc::downgrade(&self.hub)));
        }
        let Some(id) = self.hub.join(outbox.clone()) else {
            return Err(Status::unavailable(
                "the rate limit quota service is shutting down",
            ));
        };
        tokio::spawn(serve(
            Arc::clone(&self.hub),
            id,
            request.into_inner(),
            outbox,
        ));
        Ok(Response::new(ResponseStream { receiver }))
    }
}

/// Reads stream `id`'s reports until it ends, then forgets it.
async fn serve(
    hub: Arc<Hub>,
    id: u64,
    mut reports: Streaming<RateLimitQuotaUsageReports>,
    outbox: super::hub::Outbox,
) {
    let mut closing = hub.closing.subscribe();
    loop {
        let report = tokio::select! {
            report = reports.message() => report,
            _ = closing.wait_for(|closing| *closing) => break,
        };
        match report {
            Ok(Some(report)) => match hub.report(id, report, Instant::now()) {
                Ok(watched) => {
                    if !watched.now.is_empty() {
                        let mut state = hub.lock();
                        let mut pending = Pending::new();
                        for key in &watched.now {
                            reshare(&hub, &mut state, key, Instant::now());
                            assign_into(&hub, &mut state, key, Instant::now(), &mut pending);
                        }
                        send(&state, pending);
                    }
                    if !watched.first_sync.is_empty() {
                        super::tick::first_sync(&hub, watched.first_sync).await;
                    }
                }
                Err(status) => {
                    tracing::debug!(%status, "an RLQS stream ended on bad input");
                    let _ = outbox.send(Err(status));
                    break;
                }
            },
            // The client closed its side, or the connection went.
            Ok(None) | Err(_) => break,
        }
    }
    hub.leave(id);
}
