//! The health check (`[health] path`, `--health PATH`): `200 ok` while the server serves,
//! `503` from the moment a drain begins (SIGTERM's graceful shutdown), so a load balancer or
//! an orchestrator's readiness probe stops sending new work before the connections close.
//! It answers any client (probes come from the load balancer's addresses, not loopback), and
//! its requests stay out of the access log unless `[health] log = true`.

use weft_http::Method;

use crate::response::Response;
use crate::shutdown::Shutdown;
use crate::Request;

/// Methods the health check answers.
pub const ALLOW: &str = "GET, HEAD";

/// Answers one health request.
pub fn handle(req: &Request, shutdown: &Shutdown) -> Response {
    if !matches!(req.method(), Method::Get | Method::Head) {
        return Response::error(405).header("Allow", ALLOW);
    }
    let (status, body) = if shutdown.is_set() {
        (503, "draining\n")
    } else {
        (200, "ok\n")
    };
    // A cache between the prober and weft must not answer for it.
    Response::text(status, body).header("Cache-Control", "no-store")
}
