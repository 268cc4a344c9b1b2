/* ort-serve: the HTTP/1.1 request head parser (RFC 9112), strict and
 * bounded, because it is the first thing that reads what a client sends.
 * It parses the request line and the header fields that the server acts
 * on (Content-Length, Transfer-Encoding, Connection, Expect, Host,
 * Inference-Header-Content-Length) and refuses what it does not accept
 * with the status to answer: 400 (malformed: bare LF, a control byte,
 * whitespace before a colon, a folded line, a bad or conflicting
 * Content-Length, no Host in HTTP/1.1), 414 (a request line over
 * SRV_URI_MAX), 431 (a head over SRV_HEAD_MAX bytes or SRV_HEADERS_MAX
 * fields), 417 (an Expect other than 100-continue), 501 (Transfer-Encoding:
 * bodies come with Content-Length here), 505 (not HTTP/1.x).  It reads only
 * buf[0..len), writes only *h, and keeps no state between calls: the caller
 * (serve_conn.c) calls it again when more bytes arrive.  The fuzz target
 * tests/fuzz/fuzz_http_head.c drives it directly. */
#include "serve_hparse.h"

#include <string.h>
#include <strings.h>

/* RFC 9110 token characters. */
static int tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A field value byte: visible, space, tab, or obs-text (>= 0x80). */
static int vchar(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int fail(srv_hhead *h, int status, const char *why)
{
	h->err = why;
	return -status;
}

/* Where the head ends (its empty line included), 0 when not yet there.
 * A bare LF also ends it, so that lines() refuses it at once instead of
 * waiting for a CRLF that never comes. */
static size_t head_end(const char *buf, size_t len)
{
	for (size_t i = 1; i < len; i++)
		if (buf[i] == '\n' && (buf[i - 1] == '\n' || (i >= 2 && buf[i - 1] == '\r' &&
							       buf[i - 2] == '\n')))
			return i + 1;
	return 0;
}

/* A decimal of 1..18 digits (no sign, no spaces); -1 otherwise. */
static int64_t decimal(const char *v, size_t n)
{
	int64_t x = 0;
	if (n == 0 || n > 18)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (v[i] - '0');
	}
	return x;
}

/* Whether the comma-separated list v[0..n) holds token tok. */
static int has_token(const char *v, size_t n, const char *tok)
{
	size_t k = strlen(tok), i = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < n && v[i] != ',')
			i++;
		size_t e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - s == k && strncasecmp(v + s, tok, k) == 0)
			return 1;
	}
	return 0;
}

static int is_name(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* Acts on one field name: value (trimmed, length n). */
static int field(srv_hhead *h, const char *name, size_t nn, const char *v, size_t n)
{
	if (is_name(name, nn, "content-length")) {
		int64_t x = decimal(v, n);
		if (x < 0 || (h->content_length >= 0 && h->content_length != x))
			return fail(h, 400, "invalid or conflicting Content-Length");
		h->content_length = x;
	} else if (is_name(name, nn, "transfer-encoding")) {
		return fail(h, 501, "Transfer-Encoding is not supported: send the body with "
			    "Content-Length");
	} else if (is_name(name, nn, "connection")) {
		if (has_token(v, n, "close"))
			h->conn_close = 1;
		if (has_token(v, n, "keep-alive"))
			h->conn_keep = 1;
	} else if (is_name(name, nn, "expect")) {
		if (n != 12 || strncasecmp(v, "100-continue", 12) != 0)
			return fail(h, 417, "the only expectation supported is 100-continue");
		h->expect_continue = 1;
	} else if (is_name(name, nn, "host")) {
		h->has_host = 1;
	} else if (is_name(name, nn, "inference-header-content-length")) {
		if ((h->infer_hlen = decimal(v, n)) < 0)
			return fail(h, 400, "invalid Inference-Header-Content-Length");
	}
	return 0;
}

/* The request line at p (its CRLF at p + n). */
static int request_line(srv_hhead *h, const char *p, size_t n)
{
	size_t i = 0, m, u;
	while (i < n && tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i >= sizeof(h->method) || i == n || p[i] != ' ')
		return fail(h, 400, "malformed request line");
	memcpy(h->method, p, i);
	h->method[i] = '\0';
	m = ++i;
	while (i < n && (unsigned char)p[i] > 0x20 && p[i] != 0x7f)
		i++;
	u = i - m;
	if (u == 0 || i == n || p[i] != ' ')
		return fail(h, 400, "malformed request line");
	if (u >= sizeof(h->uri))
		return fail(h, 414, "request target too long");
	memcpy(h->uri, p + m, u);
	h->uri[u] = '\0';
	i++;
	if (n - i != 8 || memcmp(p + i, "HTTP/", 5) != 0 || p[i + 5] < '0' || p[i + 5] > '9' ||
	    p[i + 6] != '.' || p[i + 7] < '0' || p[i + 7] > '9')
		return fail(h, 400, "malformed HTTP version");
	if (p[i + 5] != '1')
		return fail(h, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
	h->minor = p[i + 7] - '0';
	return 0;
}

/* One header field line at p, n bytes before its CRLF. */
static int field_line(srv_hhead *h, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && tchar((unsigned char)p[i]))
		i++;
	if (i == 0 || i == n || p[i] != ':')
		return fail(h, 400, "malformed header field");
	size_t nn = i++;
	for (size_t k = i; k < n; k++)
		if (!vchar((unsigned char)p[k]))
			return fail(h, 400, "a control character in a header field");
	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	size_t e = n;
	while (e > i && (p[e - 1] == ' ' || p[e - 1] == '\t'))
		e--;
	if (++h->n_fields > SRV_HEADERS_MAX)
		return fail(h, 431, "too many header fields");
	return field(h, p, nn, p + i, e - i);
}

/* Every line of the head [start, end): CRLF only, no bare CR or LF; the
 * empty line ends it. */
static int lines(srv_hhead *h, const char *buf, size_t start, size_t end)
{
	size_t p = start;
	int first = 1, rc;
	while (p < end) {
		const char *lf = memchr(buf + p, '\n', end - p);
		size_t n = (size_t)(lf - (buf + p));
		if (n == 0 || buf[p + n - 1] != '\r' || memchr(buf + p, '\r', n - 1))
			return fail(h, 400, "a line not ended by CRLF");
		if (--n == 0)
			break;
		if (!first && (buf[p] == ' ' || buf[p] == '\t'))
			return fail(h, 400, "folded header lines are not accepted");
		rc = first ? request_line(h, buf + p, n) : field_line(h, buf + p, n);
		if (rc)
			return rc;
		first = 0;
		p += n + 2;
	}
	return first ? fail(h, 400, "no request line") : 0;
}

int srv_hparse(const char *buf, size_t len, srv_hhead *h)
{
	size_t start = 0, end;
	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	h->infer_hlen = -1;
	/* RFC 9112 2.2: empty lines before a request line are ignored */
	while (start + 1 < len && buf[start] == '\r' && buf[start + 1] == '\n' &&
	       start < SRV_HEAD_MAX)
		start += 2;
	size_t lim = len < SRV_HEAD_MAX ? len : SRV_HEAD_MAX;
	end = head_end(buf + start, lim > start ? lim - start : 0);
	if (!end) {
		if (len < SRV_HEAD_MAX)
			return 0;
		return memchr(buf, '\n', SRV_HEAD_MAX) ? fail(h, 431, "request head too large") :
							 fail(h, 414, "request line too long");
	}
	end += start;
	int rc = lines(h, buf, start, end);
	if (rc)
		return rc;
	if (h->minor == 1 && !h->has_host)
		return fail(h, 400, "HTTP/1.1 request without Host");
	h->keep_alive = h->minor == 1 ? !h->conn_close : (h->conn_keep && !h->conn_close);
	h->head_len = end;
	return (int)end;
}
