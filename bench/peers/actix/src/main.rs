//! `peer-actix ADDR WORKERS`: /plaintext and /json as the TechEmpower tests ask.

use actix_web::{http::header::ContentType, web, App, HttpResponse, HttpServer};

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

async fn plaintext() -> HttpResponse {
    HttpResponse::Ok()
        .content_type(ContentType::plaintext())
        .body("Hello, World!")
}

async fn json() -> HttpResponse {
    HttpResponse::Ok().json(Message {
        message: "Hello, World!",
    })
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let workers: usize = args.next().map_or(1, |w| w.parse().expect("WORKERS"));
    HttpServer::new(|| {
        App::new()
            .route("/plaintext", web::get().to(plaintext))
            .route("/json", web::get().to(json))
    })
    .workers(workers)
    .bind(addr)?
    .run()
    .await
}
