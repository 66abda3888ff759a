//! The echo function of the fibers paper: `GET` answers the 4-byte body `echo`, `POST`
//! answers the request body (Content-Length or chunked) as `application/octet-stream` with
//! `X-Content-Type-Options: nosniff`: never with the client's Content-Type, which would let a
//! page post `text/html` with a script to it and have it run from the site's origin
//! (reflected XSS).

use weft_http::Method;

use crate::body::RequestBody;
use crate::response::Response;
use crate::Request;

/// Methods the echo function answers.
pub const ALLOW: &str = "GET, HEAD, POST";

/// Handles one echo request.
pub fn handle(req: &Request, body: &mut RequestBody<'_>) -> Response {
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
