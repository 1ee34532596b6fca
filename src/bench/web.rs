//! `troupe bench web`: `web_fetch` of a 1 MB article page served from
//! loopback, through the guard, the HTTP client, the article extractor and
//! the head/tail cut with its spill file; then the same page again from the
//! 15-minute cache.
//!
//! Each cold fetch asks for a new address (`?i=N`), so none is answered from
//! the cache; the server is a minimal HTTP/1.1 responder on 127.0.0.1, and
//! the tool is set up with `allow_private_addresses` so the guard lets it
//! through, as a user reaching their own service would.

use std::time::Instant;

use anyhow::Context as _;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe_runtime::home::Home;
use troupe_runtime::tool::{Tool, ToolContext};
use troupe_tools::web::fetch::{web_fetch, WebReader};

/// A news article of about `bytes` bytes, with navigation, a sidebar and a footer.
fn page(bytes: usize) -> String {
    let mut body = String::with_capacity(bytes + 4096);
    let mut i = 0;
    while body.len() < bytes {
        body.push_str(&format!(
            "<h2>Section {i}</h2><p>Paragraph {i} tells how the river changed its course over \
             the seasons, with <a href=\"/floods/{i}\">floods</a> in spring and <em>quiet \
             shallows</em> in late summer, and why the old bridge had to be rebuilt twice.</p>\
             <ul><li>First point of section {i}</li><li>Second point</li></ul>\n"
        ));
        i += 1;
    }
    format!(
        "<!doctype html><html><head><title>The River</title><style>p{{margin:0}}</style>\
         <script>var x = 1;</script></head><body><nav><a href=\"/\">Home</a> <a href=\"/news\">News</a></nav>\
         <aside class=\"sidebar\">Trending: nothing</aside><article><h1>The River</h1>{body}</article>\
         <footer>Copyright</footer></body></html>"
    )
}

/// Serves `body` as HTML to every request, one connection per request.
async fn serve(body: String) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let response = std::sync::Arc::new(
        [
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            body.into_bytes(),
        ]
        .concat(),
    );
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = std::sync::Arc::clone(&response);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok((format!("http://{addr}/article"), task))
}

/// `n` cold fetches of a 1 MB page, then `n` cached ones.
pub async fn fetch(n: usize) -> anyhow::Result<serde_json::Value> {
    let html = page(1024 * 1024);
    let page_bytes = html.len();
    let (url, server) = serve(html).await?;
    let dir = tempfile::tempdir()?;
    let ctx = ToolContext::standalone(Home::new(dir.path().join("home")), dir.path().into());
    let settings = troupe_runtime::config::Web {
        allow_private_addresses: true,
        ..Default::default()
    };
    let tool = web_fetch::tool(WebReader::new(&settings));
    let mut cold = Vec::with_capacity(n);
    let mut markdown_chars = 0;
    for i in 0..n {
        let args = json!({"url": format!("{url}?i={i}")});
        let started = Instant::now();
        let result = tool.call(args, &ctx).await;
        cold.push(started.elapsed());
        anyhow::ensure!(!result.is_error(), "web_fetch failed: {}", result.text);
        markdown_chars = result.data["chars"].as_u64().context("no size")?;
    }
    let mut cached = Vec::with_capacity(n);
    let args = json!({"url": format!("{url}?i=0")});
    for _ in 0..n {
        let started = Instant::now();
        let result = tool.call(args.clone(), &ctx).await;
        cached.push(started.elapsed());
        anyhow::ensure!(result.data["cached"] == true, "not answered from the cache");
    }
    server.abort();
    // The extractor alone, and the whole-page fallback alone, on the same page.
    let html = page(1024 * 1024);
    let mut article = Vec::with_capacity(n);
    let mut whole = Vec::with_capacity(n);
    for _ in 0..n.min(10) {
        let started = Instant::now();
        let extracted = troupe_tools::web::extract::html_to_markdown(&html, &url);
        article.push(started.elapsed());
        anyhow::ensure!(extracted.article, "the article was not found");
        let started = Instant::now();
        let _ = troupe_tools::web::extract::whole_page(&html);
        whole.push(started.elapsed());
    }
    Ok(json!({
        "extract": super::percentiles(article),
        "whole_page": super::percentiles(whole),
        "workload": "web",
        "n": n,
        "page_bytes": page_bytes,
        "markdown_chars": markdown_chars,
        "cold": super::percentiles(cold),
        "cached": super::percentiles(cached),
    }))
}
