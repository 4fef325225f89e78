#include "cuckoogate/feeds/feed.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace cg::feeds {
namespace {

constexpr std::array<std::string_view, 4> kFormatNames = {"rules", "hosts", "domains", "cidr"};

char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

struct Token {
  std::string_view text;
  std::size_t column;  // 1-based
};

// The words of `text` before the first of `comment_chars`, split at the rule
// language's whitespace: a word is what parse_rule sees (so a hosts name
// checked against is_hosts_skip_name is the name added).
std::vector<Token> tokens(std::string_view text, std::string_view comment_chars) {
  const std::size_t end = text.find_first_of(comment_chars);
  if (end != std::string_view::npos) text = text.substr(0, end);
  std::vector<Token> out;
  for (std::size_t i = 0; i < text.size();) {
    if (is_rule_space(text[i])) {
      ++i;
      continue;
    }
    const std::size_t b = i;
    while (i < text.size() && !is_rule_space(text[i])) ++i;
    out.push_back({text.substr(b, i - b), b + 1});
  }
  return out;
}

// `KIND WORD` through the rule language; an error's column is moved from the
// built text back onto the word in the feed's line.
bool word_rule(RuleKind kind, const Token& w, std::size_t line, std::vector<Rule>* out, ParseError* err) {
  std::string text(kind_name(kind));
  const std::size_t lead = text.size() + 1;
  text += ' ';
  text += w.text;
  RuleParse p = parse_rule(text, line);
  if (!p.rule) {
    *err = std::move(p.error);
    err->column = w.column + (err->column > lead ? err->column - lead - 1 : 0);
    return false;
  }
  out->push_back(std::move(*p.rule));
  return true;
}

ParseError error_at(std::size_t line, std::size_t column, std::string expected) {
  return ParseError{line, column, std::move(expected)};
}

bool hosts_line(std::string_view text, std::size_t line, std::vector<Rule>* out, ParseError* err) {
  const std::vector<Token> t = tokens(text, "#");
  if (t.empty()) return true;
  // The address only says where the name would go (0.0.0.0, 127.0.0.1, ::1,
  // fe80::1%lo0): it must be one, and is not used further.
  std::string_view addr = t[0].text;
  if (addr.find(':') != std::string_view::npos) addr = addr.substr(0, addr.find('%'));
  if (!parse_address(addr)) {
    *err = error_at(line, t[0].column, "IP address (a hosts file line is ADDRESS NAME [NAME...])");
    return false;
  }
  if (t.size() == 1) {
    *err = error_at(line, t[0].column + t[0].text.size(), "host name after the address");
    return false;
  }
  std::vector<Rule> got;
  for (std::size_t i = 1; i < t.size(); ++i) {
    if (is_hosts_skip_name(t[i].text)) continue;
    if (!word_rule(RuleKind::kHost, t[i], line, &got, err)) return false;
  }
  out->insert(out->end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
  return true;
}

// domains and cidr: one word per line.
bool word_line(std::string_view text, std::string_view comment_chars, RuleKind kind, std::string_view what,
               std::size_t line, std::vector<Rule>* out, ParseError* err) {
  const std::vector<Token> t = tokens(text, comment_chars);
  if (t.empty()) return true;
  if (t.size() > 1) {
    *err = error_at(line, t[1].column, std::string("end of line (one ") + std::string(what) + " per line)");
    return false;
  }
  return word_rule(kind, t[0], line, out, err);
}

}  // namespace

std::string_view format_name(Format f) noexcept {
  const auto i = static_cast<std::size_t>(f);
  return i < kFormatNames.size() ? kFormatNames[i] : std::string_view{};
}

std::optional<Format> format_from_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < kFormatNames.size(); ++i)
    if (kFormatNames[i] == s) return static_cast<Format>(i);
  return std::nullopt;
}

std::optional<RuleKind> cidr_kind_from_name(std::string_view s) noexcept {
  if (s == "src") return RuleKind::kSrc;
  if (s == "dst") return RuleKind::kDst;
  if (s == "ip") return RuleKind::kIp;
  return std::nullopt;
}

bool is_hosts_skip_name(std::string_view name) noexcept {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  static constexpr std::array<std::string_view, 9> kNames = {
      "localhost",  "localhost.localdomain",   "localhost4", "localhost4.localdomain4",
      "localhost6", "localhost6.localdomain6", "local",      "broadcasthost",
      "0.0.0.0"};
  for (const std::string_view n : kNames)
    if (iequal(name, n)) return true;
  // The IPv6 names hosts files give ::1 and ff02::N (ip6-localhost,
  // ip6-allnodes, ...): one label, so a domain that starts with "ip6-"
  // (ip6-tracker.example.com) is a name like any other.
  return name.size() >= 4 && iequal(name.substr(0, 4), "ip6-") && name.find('.') == std::string_view::npos;
}

bool parse_feed_line(const Options& o, std::string_view text, std::size_t line, std::vector<Rule>* out,
                     ParseError* err) {
  switch (o.format) {
    case Format::kRules: {
      if (tokens(text, "#").empty()) return true;
      RuleParse p = parse_rule(text, line);
      if (!p.rule) {
        *err = std::move(p.error);
        return false;
      }
      out->push_back(std::move(*p.rule));
      return true;
    }
    case Format::kHosts:
      return hosts_line(text, line, out, err);
    case Format::kDomains:
      return word_line(text, "#", RuleKind::kHost, "domain name", line, out, err);
    case Format::kCidr:
      return word_line(text, "#;", o.cidr_kind, "address or prefix", line, out, err);
  }
  *err = error_at(line, 1, "a known feed format");
  return false;
}

RuleFileParse parse_feed(std::string_view text, const Options& o, bool skip_bad) {
  text = skip_bom(text);
  if (o.format == Format::kRules) return parse_rules(text, skip_bad);
  RuleFileParse res;
  std::unordered_set<std::string> seen;
  std::vector<Rule> line_rules;
  std::size_t line = 0;
  while (!text.empty()) {
    ++line;
    const std::size_t nl = text.find('\n');
    const std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    line_rules.clear();
    ParseError e;
    if (!parse_feed_line(o, l, line, &line_rules, &e)) {
      res.errors.push_back(std::move(e));
      continue;
    }
    for (Rule& r : line_rules)
      if (seen.insert(rule_key(r)).second) res.rules.push_back(std::move(r));
  }
  if (!skip_bad && !res.errors.empty()) res.rules.clear();
  return res;
}

std::string progress_text(std::size_t done, double elapsed_s, std::size_t done_bytes, std::size_t total_bytes) {
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  char buf[160];
  int n = std::snprintf(buf, sizeof buf, "%zu rules, %.0f rules/s", done, rate);
  if (total_bytes > 0 && done_bytes > 0 && n > 0 && static_cast<std::size_t>(n) < sizeof buf) {
    const std::size_t shown = done_bytes < total_bytes ? done_bytes : total_bytes;
    const double share = static_cast<double>(shown) / static_cast<double>(total_bytes);
    const double left = elapsed_s * (1 - share) / share;
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ", %.0f%%, ETA %.0f s",
                  std::floor(share * 100), std::ceil(left));
  }
  return buf;
}

}  // namespace cg::feeds
