// Tests for the first-flight detectors, alone and behind the pool: a
// post-quantum-sized ClientHello cut at every byte (TCP) and across TLS
// records, HTTP heads cut everywhere and pipelined, DNS over TCP cut
// everywhere and back to back.
#include "cuckoogate/reasm/first_flight.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuckoogate/reasm/pool.hpp"
#include "messages.hpp"

namespace {

using namespace cg::reasm;
using namespace cg::reasm::test;
// The SNI of a ClientHello message, read independently of the detector.
std::string sni_of(const uint8_t* hs, std::size_t n) {
  std::size_t i = 4 + 2 + 32;
  i += 1 + hs[i];
  i += 2 + (hs[i] << 8 | hs[i + 1]);
  i += 1 + hs[i];
  const std::size_t end = i + 2 + (hs[i] << 8 | hs[i + 1]);
  for (i += 2; i + 4 <= end && end <= n;) {
    const std::size_t type = hs[i] << 8 | hs[i + 1];
    const std::size_t len = hs[i + 2] << 8 | hs[i + 3];
    if (type == 0) return std::string(reinterpret_cast<const char*>(hs + i + 9), len - 5);
    i += 4 + len;
  }
  return "";
}

TlsClientHello tls(const Bytes& in, std::size_t n, Bytes& scratch) {
  scratch.assign(kTlsScratch, 0);
  return detect_tls_client_hello(in.data(), n, scratch.data(), scratch.size());
}

TEST(ReasmTls, ClientHelloLooksLikeABrowsers) {
  const Bytes hs = client_hello("www.blocked.example");
  EXPECT_GT(hs.size(), 1500u);
  EXPECT_EQ(sni_of(hs.data(), hs.size()), "www.blocked.example");
}

// Every TCP split point of a one-record ClientHello, through the pool in
// both arrival orders: need more until the last byte, then the exact message.
TEST(ReasmTls, OneRecordCutAtEveryByte) {
  const Bytes hs = client_hello("www.blocked.example");
  const Bytes stream = in_records(hs, kTlsMaxRecord);
  auto pool = Pool::create({.slots = 2, .slot_bytes = 16384 + 512, .max_pending = 4});
  Bytes scratch;
  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    for (bool reversed : {false, true}) {
      SCOPED_TRACE("cut " + std::to_string(cut) + (reversed ? " reversed" : ""));
      const uint32_t h = pool->begin(7);
      const Bytes first(stream.begin(), stream.begin() + cut);
      const Bytes second(stream.begin() + cut, stream.end());
      if (!reversed) {
        pool->append(h, 7, first.data(), first.size());
        const auto d = pool->data(h);
        ASSERT_EQ(detect_tls_client_hello(d.data(), d.size(), scratch.data(), 0).status,
                  cut < 9 ? Frame::kNeedMore : Frame::kTooLarge);  // scratch of 0 bytes
        ASSERT_EQ(tls(Bytes(d.begin(), d.end()), d.size(), scratch).status, Frame::kNeedMore);
        pool->append(h, 7 + cut, second.data(), second.size());
      } else {
        pool->append(h, 7 + cut, second.data(), second.size());
        ASSERT_TRUE(pool->data(h).empty());
        pool->append(h, 7, first.data(), first.size());
      }
      const auto d = pool->data(h);
      const TlsClientHello r = tls(Bytes(d.begin(), d.end()), d.size(), scratch);
      ASSERT_EQ(r.status, Frame::kComplete);
      ASSERT_EQ(Bytes(r.handshake, r.handshake + r.handshake_len), hs);
      ASSERT_EQ(r.consumed, stream.size());
      pool->release(h);
    }
  }
}

// A ClientHello in two TLS records, the record boundary at every handshake
// byte (so the SNI lands in either record or across them).
TEST(ReasmTls, TwoRecordsCutAtEveryByte) {
  const Bytes hs = client_hello("www.blocked.example");
  Bytes scratch;
  for (std::size_t cut = 1; cut < hs.size(); ++cut) {
    SCOPED_TRACE("cut " + std::to_string(cut));
    const Bytes stream = two_records(hs, cut);
    const TlsClientHello r = tls(stream, stream.size(), scratch);
    ASSERT_EQ(r.status, Frame::kComplete);
    ASSERT_EQ(Bytes(r.handshake, r.handshake + r.handshake_len), hs);
    ASSERT_EQ(sni_of(r.handshake, r.handshake_len), "www.blocked.example");
    // The synthesised record: one header, then the message.
    ASSERT_EQ(r.record_len, 5 + hs.size());
    ASSERT_EQ(r.record[0], 22);
    ASSERT_EQ(r.record[3] << 8 | r.record[4], static_cast<int>(hs.size()));
    // Cut one byte short: the last record is not whole, need more.
    ASSERT_EQ(tls(stream, stream.size() - 1, scratch).status, Frame::kNeedMore);
  }
}

// Two records and a TCP split at every byte of the stream.
TEST(ReasmTls, TwoRecordsAndTcpCutAtEveryByte) {
  const Bytes hs = client_hello("www.blocked.example");
  const Bytes stream = two_records(hs, 700);
  Bytes scratch;
  for (std::size_t n = 0; n < stream.size(); ++n)
    ASSERT_EQ(tls(stream, n, scratch).status, Frame::kNeedMore) << n;
  EXPECT_EQ(tls(stream, stream.size(), scratch).status, Frame::kComplete);
}

TEST(ReasmTls, ManySmallRecordsAndALargeHandshake) {
  Bytes hs = client_hello("a.example");
  // Grow the padding to a 16 KiB handshake (the default limit).
  Bytes big = {1};
  put24(big, kTlsMaxHandshake);
  append(big, fill(kTlsMaxHandshake, 9));
  Bytes scratch;
  for (const Bytes& m : {hs, big}) {
    const Bytes stream = in_records(m, 100);
    const TlsClientHello r = tls(stream, stream.size(), scratch);
    ASSERT_EQ(r.status, Frame::kComplete);
    EXPECT_EQ(Bytes(r.handshake, r.handshake + r.handshake_len), m);
  }
  Bytes too_big = {1};
  put24(too_big, kTlsMaxHandshake + 1);
  const Bytes stream = in_records(too_big, 100);
  EXPECT_EQ(tls(stream, stream.size(), scratch).status, Frame::kTooLarge);
}

// Empty handshake records (length 0) before or between the ClientHello's
// records are skipped, as OpenSSL does: a server takes the ClientHello after
// them, so they must not end inspection (they did: "not TLS").
TEST(ReasmTls, EmptyHandshakeRecordsAreSkipped) {
  const Bytes hs = client_hello("www.blocked.example");
  const Bytes empty = {22, 3, 1, 0, 0};
  Bytes scratch;
  for (const int where : {0, 1, 2}) {  // before, between the two records, three before
    SCOPED_TRACE(where);
    Bytes stream = two_records(hs, 100);
    if (where == 1) {
      stream.insert(stream.begin() + 5 + 100, empty.begin(), empty.end());
    } else {
      for (int k = 0; k < (where == 0 ? 1 : 3); ++k) stream.insert(stream.begin(), empty.begin(), empty.end());
    }
    const TlsClientHello r = tls(stream, stream.size(), scratch);
    ASSERT_EQ(r.status, Frame::kComplete);
    EXPECT_EQ(sni_of(r.handshake, r.handshake_len), "www.blocked.example");
    EXPECT_EQ(r.consumed, stream.size());
    EXPECT_EQ(tls(stream, stream.size() - 1, scratch).status, Frame::kNeedMore);
  }
  EXPECT_EQ(tls(empty, empty.size(), scratch).status, Frame::kNeedMore);  // nothing else yet
}

TEST(ReasmTls, BytesAfterTheMessageAreNotConsumed) {
  const Bytes hs = client_hello("x.example");
  Bytes stream = in_records(hs, kTlsMaxRecord);
  const std::size_t first = stream.size();
  stream.insert(stream.end(), {20, 3, 3, 0, 1, 1});  // ChangeCipherSpec
  Bytes scratch;
  const TlsClientHello r = tls(stream, stream.size(), scratch);
  ASSERT_EQ(r.status, Frame::kComplete);
  EXPECT_EQ(r.consumed, first);
}

TEST(ReasmTls, NotTlsOrMalformedIsInvalid) {
  Bytes scratch;
  const Bytes get = {'G', 'E', 'T', ' '};
  EXPECT_EQ(tls(get, 1, scratch).status, Frame::kInvalid);  // on the first byte
  const Bytes not_a_version = {22, 0x10, 0, 0, 5};  // Go takes a first record's version below 0x1000 only
  EXPECT_EQ(tls(not_a_version, 2, scratch).status, Frame::kInvalid);
  const Bytes huge_record = {22, 3, 1, 0x40, 0x01, 1};
  EXPECT_EQ(tls(huge_record, 6, scratch).status, Frame::kInvalid);
  const Bytes server_hello = {22, 3, 3, 0, 4, 2, 0, 0, 0};
  EXPECT_EQ(tls(server_hello, server_hello.size(), scratch).status, Frame::kInvalid);
  // A ChangeCipherSpec record between two parts of the ClientHello; an
  // alert record whose length is not an alert's (2) before it.
  const Bytes hs = client_hello("x.example");
  Bytes stream = two_records(hs, 100);
  stream[5 + 100] = 20;
  EXPECT_EQ(tls(stream, stream.size(), scratch).status, Frame::kInvalid);
  const Bytes long_alert = {21, 3, 1, 0, 3, 1, 0x70, 0};
  EXPECT_EQ(tls(long_alert, long_alert.size(), scratch).status, Frame::kInvalid);
}

// What Go's crypto/tls takes before a ClientHello (an outside check had a Go
// server serve the SNI behind each of these while the gateway let it pass as
// "not TLS"): 2-byte alert records before the message or between its
// records (warning alerts are dropped until the version is agreed), and
// record versions other than 3.x below 0x1000.
TEST(ReasmTls, AlertRecordsAndOddRecordVersionsBeforeTheClientHelloAreSkipped) {
  const Bytes hs = client_hello("www.blocked.example");
  const Bytes alert = {21, 3, 1, 0, 2, 1, 0x70};  // warning, no_renegotiation
  Bytes scratch;
  for (const int where : {0, 1, 2}) {  // before, between the two records, three before
    SCOPED_TRACE(where);
    Bytes stream = two_records(hs, 100);
    if (where == 1) {
      stream.insert(stream.begin() + 5 + 100, alert.begin(), alert.end());
    } else {
      for (int k = 0; k < (where == 0 ? 1 : 3); ++k) stream.insert(stream.begin(), alert.begin(), alert.end());
    }
    const TlsClientHello r = tls(stream, stream.size(), scratch);
    ASSERT_EQ(r.status, Frame::kComplete);
    EXPECT_EQ(sni_of(r.handshake, r.handshake_len), "www.blocked.example");
    EXPECT_EQ(r.consumed, stream.size());
    for (std::size_t n = 1; n < stream.size(); ++n) ASSERT_EQ(tls(stream, n, scratch).status, Frame::kNeedMore) << n;
  }
  for (const uint8_t major : {0, 2, 0x0f}) {
    SCOPED_TRACE(int{major});
    Bytes stream = two_records(hs, 100);
    stream[1] = major;
    stream[5 + 100 + 1] = major;
    const TlsClientHello r = tls(stream, stream.size(), scratch);
    ASSERT_EQ(r.status, Frame::kComplete);
    EXPECT_EQ(sni_of(r.handshake, r.handshake_len), "www.blocked.example");
    EXPECT_EQ(r.record[1], major);  // the synthesised record keeps the first one's version
  }
}

// ---- HTTP ---------------------------------------------------------------

HttpHead http(const std::string& s, std::size_t n = std::string::npos,
              std::size_t max_head = kHttpMaxHead) {
  return detect_http_head(reinterpret_cast<const uint8_t*>(s.data()), std::min(n, s.size()),
                          max_head);
}

TEST(ReasmHttp, HeadCutAtEveryByte) {
  for (const std::string head : {
           "GET /secret HTTP/1.1\r\nHost: www.blocked.example\r\nAccept: */*\r\n\r\n",
           "GET /secret HTTP/1.1\nHost: www.blocked.example\nAccept: */*\n\n",
           "GET /secret HTTP/1.1\r\nHost: www.blocked.example\n\r\n"}) {
    for (std::size_t n = 0; n < head.size(); ++n)
      ASSERT_EQ(http(head, n).status, Frame::kNeedMore) << n << " of " << head;
    const HttpHead h = http(head);
    ASSERT_EQ(h.status, Frame::kComplete);
    EXPECT_EQ(h.head_end, head.size());
    EXPECT_EQ(h.body, HttpBody::kNone);
    EXPECT_EQ(h.next, head.size());
    // What follows the head does not change where it ends.
    EXPECT_EQ(http(head + "GET / HTTP/1.1\r\n").head_end, head.size());
  }
}

TEST(ReasmHttp, LeadingEmptyLinesAreSkipped) {
  const HttpHead h = http("\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_EQ(h.status, Frame::kComplete);
  EXPECT_EQ(h.start, 3u);
  EXPECT_EQ(http("\r\n\r").status, Frame::kNeedMore);
  EXPECT_EQ(http("\r\nX").status, Frame::kNeedMore);
  EXPECT_EQ(http("\r\n\r\n\x01").status, Frame::kInvalid);
}

// nginx and Node skip every CR and LF before the request line on its own, a
// lone CR too; taking one for "not HTTP" ended inspection, and nginx served
// the request behind it (an outside check).
TEST(ReasmHttp, LoneCrsBeforeTheRequestLineAreSkipped) {
  for (const std::string lead : {"\r", "\r\r\n\r", "\n\r\r"}) {
    const std::string s = lead + "GET /secret HTTP/1.1\r\nHost: www.blocked.example\r\n\r\n";
    const HttpHead h = http(s);
    ASSERT_EQ(h.status, Frame::kComplete) << s;
    EXPECT_EQ(h.start, lead.size());
    EXPECT_EQ(h.head_end, s.size());
    for (std::size_t n = 0; n < s.size(); ++n) ASSERT_EQ(http(s, n).status, Frame::kNeedMore) << n;
  }
  EXPECT_EQ(http("\rX").status, Frame::kNeedMore);
}

TEST(ReasmHttp, AnyMethodTokenButNotBinary) {
  EXPECT_EQ(http("PURGE  /x HTTP/1.1\r\n\r\n").status, Frame::kComplete);
  EXPECT_EQ(http("G").status, Frame::kNeedMore);
  EXPECT_EQ(http("\x16\x03\x01").status, Frame::kInvalid);
  EXPECT_EQ(http("GET\r\n\r\n").status, Frame::kInvalid);
  EXPECT_EQ(http("SSH-2.0-OpenSSH_9.2\r\n").status, Frame::kInvalid);
}

// Lines only Python's http.server reads (cuckoogate/keys/request_line.hpp)
// are heads too, from the first byte: whitespace before the method, other
// separators after it. Until their line ends, more is needed.
TEST(ReasmHttp, LinesPythonReadsAreHeadsFromTheFirstByte) {
  for (const std::string& s : {std::string(" GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
                              std::string("GET\x0b/\x0cHTTP/1.1\r\n\r\n"), std::string("\r\tGET / HTTP/1.0\n\n"),
                              std::string("GET\xa0/secret\r\nHost: a\r\n\r\n")}) {
    const HttpHead h = http(s);
    ASSERT_EQ(h.status, Frame::kComplete) << s;
    EXPECT_EQ(h.start, 0u);
    EXPECT_EQ(h.head_end, s.size());
    for (std::size_t n = 0; n < s.size(); ++n) ASSERT_EQ(http(s, n).status, Frame::kNeedMore) << n;
  }
  for (const char* s : {" GET / x HTTP/1.1\r\n\r\n", " POST /\r\n\r\n", " GET / xHTTP/1.1\r\n\r\n", "\x0b\x16\x03\n"})
    EXPECT_EQ(http(s).status, Frame::kInvalid) << s;
  // Bytes that rule a line out are told at once, before any line end (a
  // review: a binary protocol whose first byte is whitespace was held).
  for (const char* s : {" \x10\x00", "\xa0\x01\x00\x00\xd4\x07", " GET / HTTQ", " G(T", "\t1GET"})
    EXPECT_EQ(http(s).status, Frame::kInvalid) << s;
  const std::string line = " GET /" + std::string(100, 'a');  // no line end within max_head
  EXPECT_EQ(http(line, line.size(), 64).status, Frame::kTooLarge);
  EXPECT_EQ(http(line, 60, 64).status, Frame::kNeedMore);
}

TEST(ReasmHttp, HeadLimit) {
  const std::string head = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  EXPECT_EQ(http(head, head.size(), head.size()).status, Frame::kComplete);
  EXPECT_EQ(http(head, head.size(), head.size() - 1).status, Frame::kTooLarge);
  // Still unfinished and already over the limit: too large, not need more.
  EXPECT_EQ(http(head, 60, 50).status, Frame::kTooLarge);
  EXPECT_EQ(http(head, 40, 50).status, Frame::kNeedMore);
}

TEST(ReasmHttp, BodyFraming) {
  HttpHead h = http("POST /u HTTP/1.1\r\ncontent-LENGTH:  12 \r\n\r\n");
  ASSERT_EQ(h.status, Frame::kComplete);
  EXPECT_EQ(h.body, HttpBody::kLength);
  EXPECT_EQ(h.content_length, 12u);
  EXPECT_EQ(h.next, h.head_end + 12);
  h = http("POST /u HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(h.status, Frame::kComplete);
  // A length this cannot read is still a request (lenient servers serve
  // it: Node "Transfer-Encoding: identity", Python "-1", "5" and "6"): a
  // whole head, judged, with no knowable next request.
  for (const char* framing :
       {"Content-Length: 5\r\nContent-Length: 6", "Content-Length: 5x", "Content-Length: 99999999999999999999",
        "Content-Length:", "Content-Length: -1", "Content-Length: +5", "Content-Length: 1e3",
        "Transfer-Encoding: chunked, gzip", "Transfer-Encoding: identity", "Transfer-Encoding: xchunked",
        "Content-Length: 3\r\nTransfer-Encoding: identity"}) {
    const std::string head = std::string("POST / HTTP/1.1\r\nHost: h\r\n") + framing + "\r\n\r\n";
    h = http(head);
    ASSERT_EQ(h.status, Frame::kComplete) << framing;
    EXPECT_EQ(h.body, HttpBody::kUnknown) << framing;
    EXPECT_EQ(h.head_end, head.size()) << framing;
    EXPECT_EQ(h.next, h.head_end) << framing;
  }
  h = http("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\nContent-Length: 3\r\n\r\n");
  ASSERT_EQ(h.status, Frame::kComplete);
  EXPECT_EQ(h.body, HttpBody::kChunked);
  h = http("POST / HTTP/1.1\r\nContent-Length: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(h.body, HttpBody::kChunked);  // chunked decides (RFC 9112 §6.3)
  // Header names are matched whole: not a Content-Length.
  h = http("POST / HTTP/1.1\r\nX-Content-Length: 3\r\n\r\n");
  EXPECT_EQ(h.body, HttpBody::kNone);
}

TEST(ReasmHttp, ChunkedBodyEnd) {
  const std::string body = "4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: x\r\n\r\n";
  const auto* p = reinterpret_cast<const uint8_t*>(body.data());
  std::size_t end = 0;
  for (std::size_t n = 0; n < body.size(); ++n)
    ASSERT_EQ(find_chunked_end(p, n, &end), Frame::kNeedMore) << n;
  ASSERT_EQ(find_chunked_end(p, body.size(), &end), Frame::kComplete);
  EXPECT_EQ(end, body.size());
  const std::string lf = "3\nabc\n0\n\nGET";
  ASSERT_EQ(find_chunked_end(reinterpret_cast<const uint8_t*>(lf.data()), lf.size(), &end),
            Frame::kComplete);
  EXPECT_EQ(end, lf.size() - 3);
  for (const std::string bad : {"x\r\n", "4\r\nWikiX\r\n", "4@\r\n"})
    EXPECT_EQ(find_chunked_end(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), &end),
              Frame::kInvalid) << bad;
  const std::string huge = "80000001\r\n";
  EXPECT_EQ(find_chunked_end(reinterpret_cast<const uint8_t*>(huge.data()), huge.size(), &end),
            Frame::kTooLarge);
}

// What the worker will do on a keep-alive connection: after each append,
// judge every complete request head and consume it with its body.
std::vector<std::string> requests_in(Pool& pool, uint32_t h) {
  std::vector<std::string> found;
  for (;;) {
    const auto d = pool.data(h);
    const HttpHead head = detect_http_head(d.data(), d.size());
    if (head.status != Frame::kComplete) return found;
    found.emplace_back(reinterpret_cast<const char*>(d.data()) + head.start,
                       head.head_end - head.start);
    uint64_t next = head.next;
    if (head.body == HttpBody::kChunked) {
      std::size_t end = 0;
      if (find_chunked_end(d.data() + head.head_end, d.size() - head.head_end, &end) !=
          Frame::kComplete) {
        found.pop_back();  // judged again once the body is whole
        return found;
      }
      next = head.head_end + end;
    }
    EXPECT_TRUE(pool.consume(h, static_cast<uint32_t>(next)));
  }
}

TEST(ReasmHttp, PipelinedRequestsCutAtEveryByte) {
  const std::string r1 = "GET /a HTTP/1.1\r\nHost: ok.example\r\n\r\n";
  const std::string r2 = "POST /b HTTP/1.1\r\nHost: ok.example\r\nContent-Length: 10\r\n\r\n";
  const std::string r3 = "PUT /c HTTP/1.1\nHost: ok.example\nTransfer-Encoding: chunked\n\n";
  const std::string r4 = "GET /secret HTTP/1.1\r\nHost: www.blocked.example\r\n\r\n";
  const std::string stream = r1 + r2 + "0123456789" + r3 + "3\nabc\n0\n\n" + r4;
  auto pool = Pool::create({.slots = 1, .slot_bytes = 1024, .max_pending = 4});
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    SCOPED_TRACE("cut " + std::to_string(cut));
    const uint32_t h = pool->begin(0xfffffff0u);
    std::vector<std::string> got;
    const auto* p = reinterpret_cast<const uint8_t*>(stream.data());
    pool->append(h, 0xfffffff0u, p, static_cast<uint32_t>(cut));
    for (auto& s : requests_in(*pool, h)) got.push_back(s);
    pool->append(h, 0xfffffff0u + static_cast<uint32_t>(cut), p + cut,
                 static_cast<uint32_t>(stream.size() - cut));
    for (auto& s : requests_in(*pool, h)) got.push_back(s);
    ASSERT_EQ(got, (std::vector<std::string>{r1, r2, r3, r4}));
    EXPECT_TRUE(pool->data(h).empty());
    pool->release(h);
  }
}

TEST(ReasmHttp, ContentLengthBodyLargerThanTheSlotIsSkipped) {
  auto pool = Pool::create({.slots = 1, .slot_bytes = 256, .max_pending = 4});
  const std::string r1 = "POST /up HTTP/1.1\r\nContent-Length: 5000\r\n\r\n";
  const std::string r2 = "GET /secret HTTP/1.1\r\nHost: www.blocked.example\r\n\r\n";
  const std::string stream = r1 + std::string(5000, 'b') + r2;
  const auto* p = reinterpret_cast<const uint8_t*>(stream.data());
  const uint32_t h = pool->begin(0);
  std::vector<std::string> got;
  for (std::size_t off = 0; off < stream.size(); off += 100) {
    const auto n = static_cast<uint32_t>(std::min<std::size_t>(100, stream.size() - off));
    ASSERT_NE(pool->append(h, static_cast<uint32_t>(off), p + off, n), Append::kOverflow) << off;
    for (auto& s : requests_in(*pool, h)) got.push_back(s);
  }
  EXPECT_EQ(got, (std::vector<std::string>{r1, r2}));
  EXPECT_EQ(pool->stats().overlaps, 0u);
}

// ---- DNS over TCP -------------------------------------------------------

TEST(ReasmDns, QueryCutAtEveryByte) {
  const Bytes q = dns_query("www.blocked.example", 0x1234);
  for (std::size_t n = 0; n < q.size(); ++n)
    ASSERT_EQ(detect_dns_tcp(q.data(), n).status, Frame::kNeedMore) << n;
  const DnsMessage m = detect_dns_tcp(q.data(), q.size());
  ASSERT_EQ(m.status, Frame::kComplete);
  EXPECT_EQ(m.message, q.data() + 2);
  EXPECT_EQ(m.message_len, q.size() - 2);
  EXPECT_EQ(m.next, q.size());
}

// A message shorter than a DNS header is framed and marked to skip:
// dnsmasq reads it, ignores it and answers the query behind it, which an
// outside check had pass when this was "not DNS".
TEST(ReasmDns, MessagesShorterThanAHeaderAreSkipped) {
  const Bytes q = {0, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (std::size_t n = 0; n < q.size(); ++n) ASSERT_EQ(detect_dns_tcp(q.data(), n).status, Frame::kNeedMore) << n;
  const DnsMessage m = detect_dns_tcp(q.data(), q.size());
  ASSERT_EQ(m.status, Frame::kComplete);
  EXPECT_TRUE(m.skip);
  EXPECT_EQ(m.next, q.size());
  const Bytes empty = {0, 0, 0, 1};
  const DnsMessage e = detect_dns_tcp(empty.data(), empty.size());
  ASSERT_EQ(e.status, Frame::kComplete);
  EXPECT_TRUE(e.skip);
  EXPECT_EQ(e.next, 2u);
  const Bytes header = {0, 12, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const DnsMessage h = detect_dns_tcp(header.data(), header.size());
  ASSERT_EQ(h.status, Frame::kComplete);
  EXPECT_FALSE(h.skip);
}

TEST(ReasmDns, QueriesBackToBackCutAtEveryByte) {
  Bytes stream = dns_query("a.example", 1);
  append(stream, dns_query("www.blocked.example", 2));
  append(stream, dns_query("c.example", 3));
  auto pool = Pool::create({.slots = 1, .slot_bytes = 512, .max_pending = 2});
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    SCOPED_TRACE("cut " + std::to_string(cut));
    const uint32_t h = pool->begin(99);
    std::vector<uint16_t> ids;
    auto drain = [&] {
      for (;;) {
        const auto d = pool->data(h);
        const DnsMessage m = detect_dns_tcp(d.data(), d.size());
        if (m.status != Frame::kComplete) return;
        ids.push_back(static_cast<uint16_t>(m.message[0] << 8 | m.message[1]));
        ASSERT_TRUE(pool->consume(h, static_cast<uint32_t>(m.next)));
      }
    };
    // Second half first: held out of order until the first arrives.
    pool->append(h, 99 + static_cast<uint32_t>(cut), stream.data() + cut,
                 static_cast<uint32_t>(stream.size() - cut));
    drain();
    pool->append(h, 99, stream.data(), static_cast<uint32_t>(cut));
    drain();
    ASSERT_EQ(ids, (std::vector<uint16_t>{1, 2, 3}));
    pool->release(h);
  }
}

}  // namespace
