//! The echo function of the fibers paper: `GET` answers the 4-byte body `echo`, `POST`
//! answers the request body (Content-Length or chunked) as `application/octet-stream` with
//! `X-Content-Type-Options: nosniff`: never with the client's Content-Type, which would let a
//! page post `text/html` with a script to it and have it run from the site's origin
//! (reflected XSS). Preconditions are evaluated before the body is read (RFC 9110 §13.2.1):
//! the function has no validators, so `If-Match: *` holds, any other `If-Match` gives 412 and
//! `If-None-Match: *` gives 304 (GET, HEAD) or 412 (POST).

use weft_http::Method;

use crate::body::RequestBody;
use crate::response::Response;
use crate::Request;

/// Methods the echo function answers.
pub const ALLOW: &str = "GET, HEAD, POST";

/// Handles one echo request.
pub fn handle(req: &Request, body: &mut RequestBody<'_>) -> Response {
    if matches!(req.method(), Method::Get | Method::Head | Method::Post) {
        if let Some(failed) = super::unvalidated_preconditions(req) {
            return failed;
        }
    }
    match req.method() {
        Method::Get | Method::Head => Response::new(200)
            .header("Content-Type", "text/plain")
            .body("echo"),
        Method::Post => match body.read_all() {
            Ok(data) => Response::new(200)
                .header("Content-Type", "application/octet-stream")
                .header("X-Content-Type-Options", "nosniff")
                .body(data),
            // The driver answers the body error (413, 400, 408) itself.
            Err(_) => Response::error(400),
        },
        _ => Response::error(405).header("Allow", ALLOW),
    }
}
