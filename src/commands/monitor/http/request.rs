//! A request's head (request line and header fields), parsed from the
//! bytes received, within the edge's limits: pure, so that every refusal
//! is a unit test. A scrape is `GET /metrics` with a few short headers
//! and no body; anything far from that is answered with its status and
//! the connection closed.

/// The longest head taken (request line and headers): Prometheus sends a
/// few hundred bytes.
pub const MAX_HEAD: usize = 16 << 10;
/// The most header fields taken.
pub const MAX_HEADERS: usize = 64;
/// The longest request target.
pub const MAX_URL: usize = 2048;

/// What a request asks, once its head is complete and within the limits.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// GET or HEAD; any other method is [`Method::Other`] (answered 405).
    pub method: Method,
    /// The target's path, without its query.
    pub path: String,
    pub accept: Option<String>,
    pub authorization: Option<String>,
    /// Whether the connection stays open after the answer (HTTP/1.1
    /// without `Connection: close`, or HTTP/1.0 with `keep-alive`).
    pub keep_alive: bool,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// A request refused before it is served: its status and why (the
/// answer's body). The connection is closed after it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub why: &'static str,
}

const fn refuse(status: u16, why: &'static str) -> Refusal {
    Refusal { status, why }
}

/// Where the head in `buf` ends (the index after its blank line), if it
/// is all there.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses a complete head (`buf` up to and including its blank line).
pub fn parse(head: &[u8]) -> Result<Request, Refusal> {
    if head.len() > MAX_HEAD {
        return Err(refuse(431, "request header fields too large\n"));
    }
    let text = std::str::from_utf8(head).map_err(|_| refuse(400, "the request head is not text\n"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refuse(400, "malformed request line\n"));
    };
    if target.len() > MAX_URL {
        return Err(refuse(414, "URI too long\n"));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(refuse(505, "HTTP/1.0 and HTTP/1.1 only\n")),
    };
    if !target.starts_with('/') {
        return Err(refuse(400, "the target must be a path (/metrics)\n"));
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => Method::Other,
        _ => return Err(refuse(400, "malformed method\n")),
    };
    let mut req = Request {
        method,
        path: target.split('?').next().unwrap_or_default().to_string(),
        accept: None,
        authorization: None,
        keep_alive: http11,
    };
    let mut fields = 0;
    for l in lines.take_while(|l| !l.is_empty()) {
        fields += 1;
        if fields > MAX_HEADERS {
            return Err(refuse(431, "too many header fields\n"));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(refuse(400, "malformed header field\n"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(refuse(400, "malformed header field name\n"));
        }
        let value = value.trim();
        let is = |n: &str| name.eq_ignore_ascii_case(n);
        if is("content-length") {
            // A scrape has no body: one is refused, never read (nor
            // anything allocated from its length).
            if value != "0" {
                return Err(refuse(413, "a scrape has no body\n"));
            }
        } else if is("transfer-encoding") {
            return Err(refuse(413, "a scrape has no body (no Transfer-Encoding)\n"));
        } else if is("accept") {
            req.accept = Some(value.to_string());
        } else if is("authorization") {
            req.authorization = Some(value.to_string());
        } else if is("connection") {
            let says = |t: &str| value.split(',').any(|v| v.trim().eq_ignore_ascii_case(t));
            if says("close") {
                req.keep_alive = false;
            } else if says("keep-alive") {
                req.keep_alive = true;
            }
        } else if is("expect") {
            return Err(refuse(417, "a scrape has no body to expect\n"));
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Request, Refusal> {
        parse(s.as_bytes())
    }

    #[test]
    fn a_scrape_is_parsed() {
        let r = p("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\nAuthorization: Basic eA==\r\n\r\n")
            .unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/metrics");
        assert_eq!(r.accept.as_deref(), Some("text/plain"));
        assert_eq!(r.authorization.as_deref(), Some("Basic eA=="));
        assert!(r.keep_alive);
        assert!(!p("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive);
        assert!(p("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().keep_alive);
        assert!(!p("HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap().keep_alive);
        assert_eq!(p("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap().method, Method::Other);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn what_is_not_a_scrape_is_refused_with_its_status() {
        let status = |s: &str| p(s).unwrap_err().status;
        assert_eq!(status("GET /metrics HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n"), 413);
        assert_eq!(status("GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"), 413);
        assert_eq!(status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 413);
        assert_eq!(status("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n"), 417);
        let many: String = (0..MAX_HEADERS + 1).map(|i| format!("X-{i}: a\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\n{many}\r\n")), 431);
        assert_eq!(status(&format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_URL))), 414);
        assert_eq!(status("GET / HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status("GET  / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET http://x/ HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("get / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
        assert_eq!(status("GET / HTTP/1.1\r\nA B: c\r\n\r\n"), 400);
        assert_eq!(parse(b"GET / HTTP/1.1\r\nX: \xff\r\n\r\n").unwrap_err().status, 400);
        assert_eq!(parse(&vec![b'a'; MAX_HEAD + 1]).unwrap_err().status, 431);
    }
}
