//! The echo function of the fibers paper: `GET` answers the 4-byte body `echo`, `POST`
//! answers the request body (Content-Length or chunked) with its Content-Type.

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
            Ok(data) => {
                let ct = req
                    .header("Content-Type")
                    .map_or(b"application/octet-stream".to_vec(), <[u8]>::to_vec);
                Response::new(200).header("Content-Type", ct).body(data)
            }
            // The driver answers the body error (413, 400, 408) itself.
            Err(_) => Response::error(400),
        },
        _ => Response::error(405).header("Allow", ALLOW),
    }
}
