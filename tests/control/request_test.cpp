// The control protocol's request language: one line is one request (no
// smuggled second command), every command checks its arguments, and the
// framer bounds what it holds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/request.hpp"

namespace cg {
namespace {

RequestParse P(std::string_view line) { return parse_request(line); }

TEST(Request, ControlCharactersInsideALineAreRefused) {
  // A CR or NUL inside a line must not let a second command ride along.
  for (const std::string& line : {std::string("add host a.example\rflush all"),
                                 std::string("add host a.example\0flush all", 28),
                                 std::string("check host a.example\x0b"),
                                 std::string("del host\x7f" "a.example")}) {
    const RequestParse p = P(line);
    EXPECT_FALSE(p.req) << line;
    EXPECT_EQ(p.code, 400);
    EXPECT_NE(p.error.find("control character"), std::string::npos) << p.error;
  }
  // One trailing CR (CRLF line ends) and tabs as blanks are fine.
  EXPECT_TRUE(P("add host a.example\r").req);
  EXPECT_TRUE(P("add\thost a.example").req);
  const RequestParse cr = P("add host a.example\r\r");
  EXPECT_FALSE(cr.req);
}

TEST(Request, EveryCommandChecksItsArgumentCount) {
  for (const char* line : {"ping x", "help x", "quit now", "stats x", "info x", "batch x"}) {
    const RequestParse p = P(line);
    EXPECT_FALSE(p.req) << line;
    EXPECT_NE(p.error.find("takes no argument"), std::string::npos) << line << ": " << p.error;
  }
  for (const char* line : {"ping", "help", "quit", "stats", "info", "load", "batch", "  ping  "})
    EXPECT_TRUE(P(line).req) << line;
  EXPECT_FALSE(P("add").req);
  EXPECT_FALSE(P("del").req);
  EXPECT_FALSE(P("check").req);
  EXPECT_FALSE(P("list src 10. extra").req);
  EXPECT_FALSE(P("list nosuchkind").req);
  EXPECT_FALSE(P("frobnicate").req);
  EXPECT_FALSE(P("").req);
}

TEST(Request, FlushNeedsAnExplicitScope) {
  RequestParse p = P("flush");
  EXPECT_FALSE(p.req);
  EXPECT_NE(p.error.find("flush all"), std::string::npos) << p.error;
  // The case that wiped every rule: an argument that is neither scope.
  EXPECT_FALSE(P("flush host tracker.example.net").req);
  EXPECT_FALSE(P("flush everything").req);
  p = P("flush all");
  ASSERT_TRUE(p.req);
  EXPECT_TRUE(p.req->all);
  p = P("flush host");
  ASSERT_TRUE(p.req);
  EXPECT_FALSE(p.req->all);
  EXPECT_EQ(p.req->kind, RuleKind::kHost);
}

// A kind is read as `add` reads it, case-insensitively: `add SRC 1.2.3.4`
// works, and `list SRC`, `hits SRC` and `flush SRC` were "unknown rule kind".
TEST(Request, KindsAreCaseInsensitiveAsInRules) {
  for (const char* line : {"list SRC", "hits Src 10.", "flush SRC", "list set=a HOST"}) {
    const RequestParse p = P(line);
    ASSERT_TRUE(p.req) << line << ": " << p.error;
    EXPECT_TRUE(p.req->kind == RuleKind::kSrc || p.req->kind == RuleKind::kHost) << line;
  }
  EXPECT_FALSE(P("list SRCX").req);
  EXPECT_FALSE(P("flush srcsrcsrcsrcsrcsrcsrc").req);
}

TEST(Request, AddTakesARuleAndAnOptionalTtl) {
  RequestParse p = P("add host Example.ORG. ttl=600");
  ASSERT_TRUE(p.req) << p.error;
  EXPECT_EQ(p.req->verb, Verb::kAdd);
  EXPECT_EQ(p.req->ttl_ms, 600000);
  EXPECT_EQ(format_rule(*p.req->rule), "host example.org");
  for (const char* bad : {"add host a.org ttl=0", "add host a.org ttl=", "add host a.org ttl=1x",
                          "add host a.org ttl=1000000000", "add ttl=5", "del host a.org ttl=5",
                          "check host a.org ttl=5", "add host bad..x"})
    EXPECT_FALSE(P(bad).req) << bad;
}

TEST(Request, BatchLinesAreOnlyAddAndDel) {
  EXPECT_TRUE(parse_batch_line("add host a.test ttl=5").req);
  EXPECT_TRUE(parse_batch_line("del src 192.0.2.1").req);
  EXPECT_FALSE(parse_batch_line("flush all").req);
  EXPECT_FALSE(parse_batch_line("add host a.test\rflush all").req);
  EXPECT_FALSE(parse_batch_line("host a.test").req);
}

// Named sets (issue 12, item 6).
TEST(Request, AddTakesASetBeforeOrAfterTheTtl) {
  for (const char* line : {"add host a.org set=ads ttl=5", "add host a.org ttl=5 set=ads"}) {
    const RequestParse p = P(line);
    ASSERT_TRUE(p.req) << line << ": " << p.error;
    EXPECT_EQ(p.req->set, "ads");
    EXPECT_EQ(p.req->ttl_ms, 5000);
    EXPECT_EQ(format_rule(*p.req->rule), "host a.org");
  }
  EXPECT_EQ(P("add src 192.0.2.1 set=spam_haus-2").req->set, "spam_haus-2");
  EXPECT_EQ(P("add src 192.0.2.1").req->set, "");
  const std::string long_name(kMaxSetName + 1, 'a');
  for (const std::string& bad : std::vector<std::string>{"add host a.org set=", "add host a.org set=Ads", "add host a.org set=a.b",
                                "add host a.org set=" + long_name, "add host a.org set=a set=b",
                                "add host a.org ttl=5 ttl=6", "del host a.org set=ads", "check host a.org set=a",
                                "add set=ads"})
    EXPECT_FALSE(P(bad).req) << bad;
  EXPECT_NE(P("add host a.org set=A").error.find("bad set name 'A'"), std::string::npos);
  EXPECT_TRUE(P("add host a.org set=" + std::string(kMaxSetName, 'z')).req);
  const RequestParse b = parse_batch_line("add host a.test set=ads");
  ASSERT_TRUE(b.req);
  EXPECT_EQ(b.req->set, "ads");
}

// Per-rule actions (issue 10): action=drop|reject after an add's rule, in any
// order with ttl= and set=, also in a batch; only for add, once.
TEST(Request, AddTakesAnActionInAnyOrderWithItsOtherOptions) {
  for (const char* line : {"add host a.org action=reject ttl=5 set=ads", "add host a.org ttl=5 action=reject set=ads",
                           "add host a.org set=ads ttl=5 action=reject"}) {
    const RequestParse p = P(line);
    ASSERT_TRUE(p.req) << line << ": " << p.error;
    EXPECT_EQ(p.req->action, RuleAction::kReject);
    EXPECT_EQ(p.req->ttl_ms, 5000);
    EXPECT_EQ(p.req->set, "ads");
    EXPECT_EQ(format_rule(*p.req->rule), "host a.org");
  }
  EXPECT_EQ(P("add src 192.0.2.1 action=drop").req->action, RuleAction::kDrop);
  EXPECT_EQ(P("add src 192.0.2.1").req->action, RuleAction::kDefault);
  for (const char* bad : {"add host a.org action=", "add host a.org action=Reject", "add host a.org action=default",
                          "add host a.org action=drop action=reject", "del host a.org action=drop",
                          "check host a.org action=reject", "add action=reject"})
    EXPECT_FALSE(P(bad).req) << bad;
  EXPECT_EQ(P("add host a.org action=rst").error, "bad action 'rst': expected drop or reject");
  EXPECT_EQ(P("del host a.org action=drop").error, "action= is only for add");
  const RequestParse b = parse_batch_line("add host a.test action=reject");
  ASSERT_TRUE(b.req) << b.error;
  EXPECT_EQ(b.req->action, RuleAction::kReject);
  EXPECT_FALSE(parse_batch_line("del host a.test action=reject").req);
}

TEST(Request, LoadTakesASetAndReplace) {
  RequestParse p = P("load set=spamhaus replace");
  ASSERT_TRUE(p.req) << p.error;
  EXPECT_EQ(p.req->verb, Verb::kLoad);
  EXPECT_EQ(p.req->set, "spamhaus");
  EXPECT_TRUE(p.req->replace);
  p = P("load replace set=spamhaus");
  ASSERT_TRUE(p.req) << p.error;
  EXPECT_TRUE(p.req->replace);
  p = P("load set=ads");
  ASSERT_TRUE(p.req);
  EXPECT_FALSE(p.req->replace);
  p = P("load");
  ASSERT_TRUE(p.req);
  EXPECT_EQ(p.req->set, "");
  p = P("load replace");
  EXPECT_FALSE(p.req);
  EXPECT_NE(p.error.find("needs set=NAME"), std::string::npos) << p.error;
  for (const char* bad : {"load x", "load set=a set=b", "load set=a replace replace", "load set=A"})
    EXPECT_FALSE(P(bad).req) << bad;
  EXPECT_NE(P("load x").error.find("load takes set=NAME and replace, not 'x'"), std::string::npos);
}

TEST(Request, ListAndHitsTakeASetFirst) {
  RequestParse p = P("list set=ads host a.");
  ASSERT_TRUE(p.req) << p.error;
  EXPECT_EQ(p.req->set, "ads");
  EXPECT_EQ(p.req->kind, RuleKind::kHost);
  EXPECT_EQ(p.req->prefix, "a.");
  p = P("hits set=ads");
  ASSERT_TRUE(p.req) << p.error;
  EXPECT_EQ(p.req->set, "ads");
  EXPECT_FALSE(p.req->kind);
  EXPECT_FALSE(P("list set=Ads").req);
  EXPECT_EQ(P("list host set=ads").req->prefix, "set=ads");  // the set comes first; after the kind it is a prefix
}

std::vector<std::string> drain(LineFramer& f, int* too_long = nullptr) {
  std::vector<std::string> lines;
  for (;;) {
    const LineFramer::Item it = f.next();
    if (it.kind == LineFramer::Kind::kNone) return lines;
    if (it.kind == LineFramer::Kind::kTooLong) {
      if (too_long != nullptr) ++*too_long;
      continue;
    }
    lines.emplace_back(it.line);
  }
}

TEST(LineFramer, SplitsLinesAcrossChunks) {
  LineFramer f(16);
  f.append("pi");
  EXPECT_TRUE(drain(f).empty());
  f.append("ng\nhel");
  EXPECT_EQ(drain(f), std::vector<std::string>{"ping"});
  f.append("p\n\nquit\n");
  EXPECT_EQ(drain(f), (std::vector<std::string>{"help", "", "quit"}));
  EXPECT_EQ(f.buffered(), 0u);
}

TEST(LineFramer, ATooLongLineIsReportedOnceAndNotHeld) {
  LineFramer f(16);
  int too_long = 0;
  f.append(std::string(40, 'x'));
  EXPECT_TRUE(drain(f, &too_long).empty());
  EXPECT_EQ(too_long, 1);
  EXPECT_EQ(f.buffered(), 0u);
  for (int i = 0; i < 1000; ++i) f.append(std::string(1000, 'y'));  // the same line goes on
  EXPECT_TRUE(drain(f, &too_long).empty());
  EXPECT_EQ(too_long, 1);
  EXPECT_LE(f.buffered(), 16u);
  f.append("zzz\nping\n");  // its end, then a good line
  EXPECT_EQ(drain(f, &too_long), std::vector<std::string>{"ping"});
  EXPECT_EQ(too_long, 1);
  // A complete over-long line in one chunk.
  f.append(std::string(17, 'a') + "\nok\n");
  EXPECT_EQ(drain(f, &too_long), std::vector<std::string>{"ok"});
  EXPECT_EQ(too_long, 2);
  // Exactly the limit is allowed.
  f.append(std::string(16, 'b') + "\n");
  EXPECT_EQ(drain(f, &too_long), std::vector<std::string>{std::string(16, 'b')});
}

}  // namespace
}  // namespace cg
