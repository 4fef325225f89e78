// cuckoogatectl: the command-line client of the gateway's control socket
// (protocol: docs/control-protocol.md).
//
// Exit status: 0 success; 1 `check` found the rule absent; 2 any error (the
// gateway answered ERR, the socket could not be reached, bad usage), with a
// one-line message on stderr.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "control/request.hpp"
#include "cuckoogate/feeds/feed.hpp"

namespace {

std::string default_socket() {
  const char* env = std::getenv("CUCKOOGATE_CTL");
  return env != nullptr && *env != '\0' ? env : "/run/cuckoogate/cuckoogate.sock";
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "cuckoogatectl: %s\n", msg.c_str());
  std::exit(2);
}

class Connection {
 public:
  explicit Connection(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (path.size() >= sizeof(a.sun_path)) die("socket path too long: " + path);
    std::memcpy(a.sun_path, path.c_str(), path.size());
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
      die("cannot connect to " + path + ": " + std::strerror(errno) +
          " (is the gateway running? -s SOCKET or $CUCKOOGATE_CTL)");
    // Whoever listens on the path gets our rules and decides our exit codes:
    // only a gateway run by root or by ourselves is believed.
    ucred peer{};
    socklen_t len = sizeof(peer);
    if (::getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0)
      die("cannot read the credentials of the process on " + path + ": " + std::strerror(errno));
    if (peer.uid != 0 && peer.uid != ::getuid())
      die("refusing " + path + ": it is served by uid " + std::to_string(peer.uid) + " (pid " +
          std::to_string(peer.pid) + "), neither root nor you (uid " + std::to_string(::getuid()) + ")");
  }
  ~Connection() { ::close(fd_); }

  void send(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        // The gateway says why before it closes (ERR 408 after its idle
        // timeout, ERR 413 past a size limit): that, not EPIPE, is the news.
        const std::string why = said_before_closing();
        if (!why.empty()) die("the gateway closed the connection: " + why);
        die(std::string("connection lost while sending: ") + std::strerror(e));
      }
      off += static_cast<std::size_t>(n);
    }
  }

  // The first line the gateway sent and nobody read yet, if any is there
  // now (without waiting); "" if none.
  std::string said_before_closing() {
    char tmp[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
    const std::size_t nl = buf_.find('\n');
    return nl == std::string::npos ? buf_ : buf_.substr(0, nl);
  }

  // True once the gateway has sent something (or within `limit`, false).
  bool wait_readable(std::chrono::nanoseconds limit) {
    if (buf_.find('\n') != std::string::npos) return true;
    pollfd p{fd_, POLLIN, 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
    return ::poll(&p, 1, static_cast<int>(ms) + 1) > 0;
  }

  std::string read_line() {
    for (;;) {
      const std::size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      char tmp[65536];
      const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("the gateway closed the connection before answering");
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }

  // A response: its first line, and the payload lines when `multi` and OK.
  struct Response {
    std::string first;
    std::vector<std::string> body;
    bool ok() const { return first.rfind("OK", 0) == 0; }
  };
  Response read_response(bool multi) {
    Response r;
    r.first = read_line();
    if (multi && r.ok()) {
      for (std::string l = read_line(); l != "."; l = read_line()) r.body.push_back(std::move(l));
    }
    return r;
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

// "ERR 404 not in blocklist: ..." -> "not in blocklist: ..." for messages.
std::string err_text(const std::string& first) {
  if (first.rfind("ERR ", 0) != 0) return "unexpected answer: " + first;
  const std::size_t sp = first.find(' ', 4);
  return sp == std::string::npos ? first : first.substr(sp + 1);
}

// Sends one request and reads its response. An ERR answer is reported on
// stderr (prefixed by `what`, if any) and gives nullopt.
std::optional<Connection::Response> request(Connection& c, const std::string& req, bool multi,
                                            const std::string& what = "") {
  c.send(req + "\n");
  Connection::Response resp = c.read_response(multi);
  if (resp.ok()) return resp;
  std::fprintf(stderr, "cuckoogatectl: %s%s\n", what.empty() ? "" : (what + ": ").c_str(),
               err_text(resp.first).c_str());
  return std::nullopt;
}

// "head w1 w2 ...": a request line from command-line words.
std::string join(std::string head, const std::vector<std::string>& words) {
  for (const auto& w : words) head += (head.empty() ? "" : " ") + w;
  return head;
}

// Rules on the command line: each argument is a whole rule when every
// argument holds a blank ("src 1.2.3.4" "host a.org"); otherwise all the
// arguments together are one rule (add src 1.2.3.4).
std::vector<std::string> rules_from_args(const std::vector<std::string>& args) {
  bool all_whole = true;
  for (const auto& a : args) all_whole = all_whole && a.find(' ') != std::string::npos;
  if (all_whole) return args;
  std::string joined;
  for (const auto& a : args) joined += (joined.empty() ? "" : " ") + a;
  return {joined};
}

// `key value` lines -> JSON, keys split on '.' into nested objects.
nlohmann::json lines_to_json(const std::vector<std::string>& lines) {
  nlohmann::json j = nlohmann::json::object();
  for (const std::string& l : lines) {
    const std::size_t sp = l.find(' ');
    if (sp == std::string::npos) continue;
    const std::string key = l.substr(0, sp), val = l.substr(sp + 1);
    nlohmann::json* node = &j;
    std::size_t start = 0;
    for (std::size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
      node = &(*node)[key.substr(start, dot - start)];
    nlohmann::json v;
    char* end = nullptr;
    errno = 0;
    const unsigned long long u = std::strtoull(val.c_str(), &end, 10);
    if (!val.empty() && *end == '\0' && errno == 0 && val[0] != '-') {
      v = u;
    } else {
      const double d = std::strtod(val.c_str(), &end);
      if (!val.empty() && *end == '\0') v = d;
      else if (val == "true" || val == "false") v = val == "true";
      else v = val;
    }
    (*node)[key.substr(start)] = v;
  }
  return j;
}

// A request line is one request: an argument holding a line break could
// smuggle a second command (`add "$(printf 'host a\nflush all')"`), so such
// arguments are refused before anything is sent. (argv cannot hold a NUL.)
void refuse_line_breaks(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    const std::size_t bad = a.find_first_of("\r\n");
    if (bad == std::string::npos) continue;
    std::string shown = a.substr(0, bad);
    if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
    die(std::string("argument '") + shown + (a[bad] == '\n' ? "\\n" : "\\r") +
        "...' holds a line break: one argument is one rule, nothing was sent");
  }
}

// Values that become one word of a request (a flush scope, list's KIND and
// PREFIX) must be one word, and a set name one the gateway accepts: a blank
// inside would add words of its own (--set "ads replace" turned a load into a
// replace of the set, --set "x ttl=5" gave rules an expiry).
void refuse_blanks(const std::vector<std::string>& words) {
  for (const auto& w : words) {
    if (w.find_first_of(" \t\v\f") == std::string::npos) continue;
    die("argument '" + w.substr(0, 60) + "' holds a blank: it must be one word, nothing was sent");
  }
}
void refuse_bad_set_name(const CLI::Option* opt, const std::string& name) {
  if (opt->count() == 0 || cg::valid_set_name(name)) return;
  die("bad set name '" + name.substr(0, cg::kMaxSetName) + "': " + cg::set_name_expected() + "; nothing was sent");
}

// add/del: one rule is one request; several rules go as one `batch`, applied
// all or nothing.
int cmd_rules(Connection& c, const std::string& verb, const std::vector<std::string>& args,
              const std::string& suffix = "") {
  const auto rules = rules_from_args(args);
  if (rules.size() == 1) {
    const auto resp = request(c, verb + " " + rules[0] + suffix, false, rules[0]);
    if (!resp) return 2;
    std::printf("%s: %s\n", rules[0].c_str(), resp->first.substr(3).c_str());
    return 0;
  }
  std::string req = "batch\n";
  for (const auto& r : rules) req += verb + " " + r + suffix + "\n";
  req += ".";
  const auto resp = request(c, req, true, "");  // the gateway says "batch rejected, nothing applied"
  if (!resp) return 2;
  for (std::size_t i = 0; i < rules.size() && i < resp->body.size(); ++i)
    std::printf("%s: %s\n", rules[i].c_str(), resp->body[i].c_str());
  return 0;
}

// Largest rule file `load` sends (the gateway holds at most 512 MiB of
// parsed rules per load; a file this size is far past that anyway).
constexpr off_t kMaxLoadFile = off_t{1} << 30;
// Bad lines printed by `load --skip-bad` (the rest are only counted).
constexpr std::size_t kBadLinesShown = 5;

struct LoadArgs {
  std::string file;
  std::string set;       // --set NAME
  bool replace = false;  // --replace
  cg::feeds::Options feed;
  bool skip_bad = false;
};

// Progress of a load on a terminal (stderr only, only if it is a tty, only
// once the load has taken a second): rules sent, rate, share and time left.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  Progress(bool on, std::size_t total_bytes) : on_(on), total_(total_bytes) {}
  void update(std::size_t rules, std::size_t bytes) {
    if (!on_) return;
    const auto now = Clock::now();
    if (now - start_ < std::chrono::seconds(1) || (shown_ && now - last_ < std::chrono::milliseconds(250)))
      return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\rloading: %s   ", cg::feeds::progress_text(rules, seconds(), bytes, total_).c_str());
    std::fflush(stderr);
  }
  // Everything is sent; the gateway applies the batch before it answers.
  // Says so if the load is already past a second, or once it gets there.
  void wait_for(Connection& c, std::size_t rules) {
    if (!on_) return;
    const auto waited = Clock::now() - start_;
    if (waited < std::chrono::seconds(1) && c.wait_readable(std::chrono::seconds(1) - waited)) return;
    shown_ = true;
    std::fprintf(stderr, "\rloading: sent %s, waiting for the gateway to apply them...\n",
                 cg::feeds::progress_text(rules, seconds(), 0, 0).c_str());
  }
  void done(std::size_t rules) {
    if (on_ && shown_)
      std::fprintf(stderr, "loaded %zu rules in %.1f s (%.0f rules/s)\n", rules, seconds(),
                   static_cast<double>(rules) / seconds());
  }

 private:
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool on_;
  std::size_t total_;
  bool shown_ = false;
  Clock::time_point start_ = Clock::now(), last_{};
};

// A rule file's load error as the gateway words it ("... nothing applied:
// line 2, column 1: expected ...", or "line 2: ..."), with the line named
// FILE:2:1 as the errors of every other format are: the gateway parsed the
// file's lines as they are, so its line numbers are the file's.
std::string name_the_file(const std::string& msg, const std::string& file) {
  const std::size_t at = msg.find(": line ");
  if (at == std::string::npos) return msg;
  std::size_t line = 0, column = 0;
  int used = 0;
  const char* rest = msg.c_str() + at + 7;
  std::string where;
  if (std::sscanf(rest, "%zu, column %zu: %n", &line, &column, &used) == 2 && used > 0) {
    where = file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  } else if (std::sscanf(rest, "%zu: %n", &line, &used) == 1 && used > 0) {
    where = file + ":" + std::to_string(line) + ": ";
  } else {
    return msg;
  }
  return msg.substr(0, at + 2) + where + (rest + used);
}

// A hint for a rule file the gateway refused for its kind: the feed format
// its first lines read as ("" if none), so that a hosts file loaded without
// --format is named as one. A format fits when none of the lines is bad for
// it and one gives a rule.
std::string feed_format_hint(const std::vector<std::string>& first_lines) {
  using cg::feeds::Format;
  for (const Format f : {Format::kHosts, Format::kCidr, Format::kDomains}) {
    std::size_t produced = 0;
    bool fits = true;
    for (const std::string& l : first_lines) {
      std::vector<cg::Rule> rules;
      cg::ParseError e;
      fits = fits && cg::feeds::parse_feed_line({.format = f}, l, 1, &rules, &e);
      produced += rules.size();
    }
    if (fits && produced != 0) {
      const std::string name(cg::feeds::format_name(f));
      return " (its first lines read as a " + name + " feed: --format " + name + ")";
    }
  }
  return "";
}

// The input of `load` and `add --file`: FILE, or standard input for "-".
// Only a regular file: a directory reads as empty, /dev/zero never ends and
// a FIFO can block forever (O_NONBLOCK, so opening a FIFO cannot hang).
// *total: the file's size (0 for standard input).
std::istream* open_input(const std::string& file, std::ifstream& fin, std::size_t* total) {
  // Its own buffer for std::cin (no stdio underneath): in_avail() then says
  // when the next line needs a read(). Nothing has used the standard streams.
  std::ios::sync_with_stdio(false);
  *total = 0;
  if (file == "-") return &std::cin;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) die("cannot open " + file + ": " + std::strerror(errno));
  struct stat st;
  const bool stat_ok = ::fstat(fd, &st) == 0;
  ::close(fd);
  if (!stat_ok) die("cannot stat " + file + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) die(file + ": is a directory, not a rule file");
  if (!S_ISREG(st.st_mode)) die(file + ": not a regular file (use - to read standard input)");
  if (st.st_size > kMaxLoadFile)
    die(file + ": " + std::to_string(st.st_size) + " bytes, more than one request takes (" +
        std::to_string(kMaxLoadFile >> 20) + " MiB); split it");
  fin.open(file, std::ios::binary);
  if (!fin) die("cannot open " + file);
  *total = static_cast<std::size_t>(st.st_size);
  return &fin;
}

// What the gateway's trim() takes off both ends of a request or stream line
// (control/protocol.cpp): a line that is "." after it ends a load.
constexpr const char* kServerTrims = " \t\r";

// What the gateway reads of a rule file line: the text before a '#',
// without trailing blanks ("" for a blank or comment line; leading blanks
// stay, so the gateway's columns are the file's). A long comment or
// trailing blanks would otherwise exceed the request line limit (8192
// bytes) that no rule reaches.
std::string_view rule_text(std::string_view line) {
  line = line.substr(0, std::min(line.find('#'), line.size()));
  return line.substr(0, line.find_last_not_of(" \t\r\v\f") + 1);  // all blank: npos + 1 == 0
}

// Before waiting for a pipe that has nothing more yet, the lines ready go
// out: a slow producer (curl of a feed over a slow link) then keeps the
// connection busy, and the gateway's idle timeout (ctl_idle_timeout, 30 s)
// counts only real silence.
void send_before_waiting(Connection& c, bool piped, std::string& chunk) {
  if (!piped || chunk.empty() || std::cin.rdbuf()->in_avail() > 0) return;
  pollfd p{STDIN_FILENO, POLLIN, 0};
  if (::poll(&p, 1, 0) != 0) return;
  c.send(chunk);
  chunk.clear();
}

// True if a rule line carries an add option (" ttl=", " set=", " action="),
// as a `list` line does.
bool has_add_option(std::string_view rule) {
  for (const std::string_view o : {" ttl=", " set=", " action="})
    if (rule.find(o) != std::string_view::npos) return true;
  return false;
}

// add --file: the rules of FILE (or standard input), one `list` line each
// (RULE [ttl=SECONDS] [set=NAME] [action=drop|reject]; blank lines and '#'
// comments allowed), added as one batch, all or nothing: what `list` printed
// is restored by `add --file`. `suffix` (--ttl, --set, --action) goes after
// every line. Every line is sent, a blank or comment one as an empty line
// (which a batch skips), so the gateway's line numbers are the file's.
int cmd_add_file(Connection& c, const std::string& file, const std::string& suffix) {
  const std::string shown_name = file == "-" ? "stdin" : file;
  std::ifstream fin;
  std::size_t total = 0;
  std::istream* in = open_input(file, fin, &total);
  std::string chunk = "batch\n", line;
  std::size_t lines = 0, rules = 0, read = 0;
  std::vector<std::pair<std::size_t, std::size_t>> indented;  // (line, leading blanks): for error columns
  for (;;) {
    send_before_waiting(c, in == &std::cin, chunk);
    if (!std::getline(*in, line)) break;
    read += line.size() + 1;
    if (read > static_cast<std::size_t>(kMaxLoadFile))
      die(shown_name + ": more than one request takes (" + std::to_string(kMaxLoadFile >> 20) +
          " MiB); split it (nothing added)");
    if (++lines == 1) line.erase(0, line.size() - cg::feeds::skip_bom(line).size());
    const std::string_view rule = rule_text(line);
    if (!rule.empty()) {
      if (const std::size_t lead = rule.find_first_not_of(kServerTrims); lead != 0) indented.emplace_back(lines, lead);
      chunk += "add ";
      chunk += rule;
      chunk += suffix;
      ++rules;
    }
    chunk += '\n';
    if (chunk.size() >= (1u << 16)) {
      c.send(chunk);
      chunk.clear();
    }
  }
  // Exiting closes the connection before the final '.': the gateway
  // discards the batch, nothing of it is applied.
  if (in->bad()) die("cannot read " + shown_name + " (nothing added)");
  if (rules == 0) {
    std::printf("no rules in %s, nothing added\n", shown_name.c_str());
    return 0;
  }
  c.send(chunk + ".\n");
  const Connection::Response resp = c.read_response(true);
  if (!resp.ok()) {
    std::string msg = name_the_file(err_text(resp.first), shown_name);
    // The gateway parses each line's rule on its own ("FILE:N: bad rule:
    // line 1, column C: ..."): the column is counted from the rule's first
    // letter, so FILE:N:C adds the line's leading blanks.
    const std::string inner = ": bad rule: line 1, column ";
    std::size_t line_no = 0, column = 0;
    int used = 0;
    const std::size_t at = msg.find(inner), head = msg.find(": " + shown_name + ":");
    if (at != std::string::npos && head != std::string::npos && head < at &&
        std::sscanf(msg.c_str() + head + 3 + shown_name.size(), "%zu", &line_no) == 1 &&
        std::sscanf(msg.c_str() + at + inner.size(), "%zu: %n", &column, &used) == 1 && used > 0) {
      for (const auto& [l, lead] : indented) column += l == line_no ? lead : 0;
      msg = msg.substr(0, head + 2) + shown_name + ":" + std::to_string(line_no) + ":" + std::to_string(column) +
            ": " + msg.substr(at + inner.size() + static_cast<std::size_t>(used));
    }
    std::fprintf(stderr, "cuckoogatectl: add: %s\n", msg.c_str());
    return 2;
  }
  // One outcome a rule, in order: counted by word.
  std::vector<std::pair<std::string, std::size_t>> counts;
  for (const std::string& o : resp.body) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == o; });
    if (it == counts.end()) counts.emplace_back(o, 1);
    else ++it->second;
  }
  std::string summary;
  for (const auto& [word, n] : counts) summary += (summary.empty() ? "" : ", ") + word + " " + std::to_string(n);
  std::printf("%s: %zu rule%s: %s\n", shown_name.c_str(), rules, rules == 1 ? "" : "s", summary.c_str());
  return 0;
}

int cmd_load(Connection& c, const LoadArgs& a) {
  const std::string& file = a.file;
  const std::string shown_name = file == "-" ? "stdin" : file;
  std::ifstream fin;
  std::size_t total = 0;
  std::istream* in = open_input(file, fin, &total);
  // Rule files go to the gateway as they are (it parses them and names the
  // bad line); other feed formats, and --skip-bad, are parsed here, so that
  // errors name the feed's own lines and only good rules are sent.
  const bool convert = a.feed.format != cg::feeds::Format::kRules || a.skip_bad;
  Progress progress(isatty(STDERR_FILENO) != 0, total);
  std::string head = "load";
  if (!a.set.empty()) head += " set=" + a.set;
  if (a.replace) head += " replace";
  c.send(head + "\n");
  std::string chunk, line;
  std::vector<std::string> first_lines;  // up to 8 lines that are not blank, for feed_format_hint()
  std::vector<cg::Rule> line_rules;
  std::size_t read = 0, lines = 0, rules = 0, bad = 0, written = 0;  // written: lines not blank
  bool options = false;  // a line carries an add option (has_add_option)
  const bool piped = in == &std::cin;
  for (;;) {
    send_before_waiting(c, piped, chunk);
    if (!std::getline(*in, line)) break;
    ++lines;
    read += line.size() + 1;
    if (lines == 1) line.erase(0, line.size() - cg::feeds::skip_bom(line).size());
    written += line.find_first_not_of(" \t\r\v\f") != std::string::npos;
    if (!convert) {
      // Only what the gateway reads of a line is sent (rule_text), so the
      // file loads from here as from the config. Every line is still sent,
      // so the gateway's line numbers are the file's.
      const std::string_view rule = rule_text(line);
      // The server ends a load at a line that is '.' after trimming blanks; no
      // rule starts with '.', so such a line is refused before anything is sent.
      if (!rule.empty() && rule[rule.find_first_not_of(kServerTrims)] == '.')
        die(file + ":" + std::to_string(lines) + ": a rule line may not start with '.'");
      if (!rule.empty() && rules++ < 8) first_lines.emplace_back(rule);
      options = options || has_add_option(rule);
      chunk += rule;
      chunk += '\n';
    } else {
      line_rules.clear();
      cg::ParseError e;
      if (!cg::feeds::parse_feed_line(a.feed, line, lines, &line_rules, &e)) {
        const std::string where = shown_name + ":" + std::to_string(e.line) + ":" + std::to_string(e.column) +
                                  ": expected " + e.expected;
        // Exiting closes the connection before the final '.': the gateway
        // discards the stream, nothing of it is applied.
        if (!a.skip_bad) die(where + " (nothing loaded; --skip-bad loads the good lines)");
        if (++bad <= kBadLinesShown) std::fprintf(stderr, "cuckoogatectl: %s (line skipped)\n", where.c_str());
        continue;
      }
      for (const cg::Rule& r : line_rules) {
        chunk += cg::format_rule(r);
        chunk += '\n';
      }
      rules += line_rules.size();
    }
    if (chunk.size() >= (1u << 16)) {
      c.send(chunk);
      chunk.clear();
    }
    if ((lines & 1023) == 0) progress.update(rules, read);
  }
  if (bad > 0)
    std::fprintf(stderr, "cuckoogatectl: %s: skipped %zu bad line%s\n", shown_name.c_str(), bad,
                 bad == 1 ? "" : "s");
  // Every line bad (an HTML error page where the feed should be, say): a
  // replace would empty the set. Exiting before the final '.' applies nothing.
  if (a.replace && bad > 0 && rules == 0)
    die(shown_name + ": every line was bad, no rule to replace set " + a.set + " with (nothing changed)");
  // No rule, but not empty either: only comments, or only entries a feed
  // format skips (a hosts file cut after its header and localhost lines).
  // A truncated download must not empty the set; an empty input does.
  if (a.replace && rules == 0 && written > 0)
    die(shown_name + ": no rule in it (only comments or skipped entries), nothing to replace set " + a.set +
        " with (nothing changed; an empty input empties the set)");
  chunk += '.';  // ends the stream; request() adds the newline
  c.send(chunk + "\n");
  progress.wait_for(c, rules);
  Connection::Response resp = c.read_response(false);
  if (!resp.ok()) {
    const std::string why = err_text(resp.first);
    // A `list` output given to load: its options are add's.
    const std::string hint = convert ? ""
                             : why.find("expected rule kind") != std::string::npos ? feed_format_hint(first_lines)
                             : options ? " (ttl=, set= and action= are add options: a list is restored with "
                                         "'cuckoogatectl add --file FILE')"
                                       : "";
    std::fprintf(stderr, "cuckoogatectl: load: %s%s\n", (convert ? why : name_the_file(why, shown_name)).c_str(),
                 hint.c_str());
    return 2;
  }
  progress.done(rules);
  std::printf("%s\n", resp.first.substr(3).c_str());
  return 0;
}

int cmd_multi(Connection& c, const std::string& req, bool json, const char* empty_note = nullptr) {
  const auto resp = request(c, req, true);
  if (!resp) return 2;
  if (json) {
    std::printf("%s\n", lines_to_json(resp->body).dump(2).c_str());
  } else {
    for (const auto& l : resp->body) std::printf("%s\n", l.c_str());
    if (resp->body.empty() && empty_note != nullptr && isatty(STDOUT_FILENO)) std::printf("%s\n", empty_note);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cuckoogatectl " CUCKOOGATE_VERSION " - control a running cuckoogate gateway"};
  std::string sock = default_socket();
  // --ctl: the gateway's own name for the same path (`cuckoogate run --ctl`).
  const CLI::Option* sock_opt = app.add_option("-s,--socket,--ctl", sock, "Control socket (default $CUCKOOGATE_CTL or "
                                                                        "/run/cuckoogate/cuckoogate.sock)");
  app.set_version_flag("--version", CUCKOOGATE_VERSION);
  app.require_subcommand(1);
  std::vector<std::string> add_args, del_args, check_args, list_args;
  LoadArgs load_args;
  std::string load_format = "rules", load_as;
  bool stats_json = false, info_json = false;
  auto* add = app.add_subcommand("add", "Add rules: add \"src 1.2.3.4\" \"host example.org\", or add src 1.2.3.4");
  std::string add_file;
  add->add_option("rule", add_args, "Rule(s)");
  add->add_option("--file", add_file,
                  "Add the rules of FILE (- for stdin), one `list` line each (RULE [ttl=S] [set=NAME] "
                  "[action=A]), as one batch: all or nothing; restores what list printed");
  std::string add_set, list_set, hits_set;
  const CLI::Option* add_set_opt = add->add_option("--set", add_set, "The named set new rules join (default: default)");
  std::string add_action;
  add->add_option("--action", add_action,
                  "What a blocked packet gets from these rules: drop or reject (default: the gateway's --action)")
      ->check(CLI::IsMember({"drop", "reject"}));
  unsigned ttl = 0;
  // Decimal digits only, as the protocol's ttl= reads them: CLI11 alone would
  // also take 0x10, +5 and " 5".
  add->add_option("--ttl", ttl, "The rules expire after SECONDS")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos
                       ? std::string()
                       : std::string("expected decimal seconds, got '" + v + "'");
          },
          "SECONDS"))
      ->check(CLI::Range(1u, 999999999u));
  auto* del = app.add_subcommand("del", "Delete rules (same forms as add)");
  del->add_option("rule", del_args, "Rule(s)")->required();
  auto* check = app.add_subcommand("check", "Is the rule in the blocklist? Exit 0 yes, 1 no");
  check->add_option("rule", check_args, "One rule, quoted or as words (check host example.org)")->required();
  auto* load = app.add_subcommand("load", "Bulk-load a rule file or feed (or - for stdin) as one batch: all or nothing");
  load->add_option("file", load_args.file, "Rule file or feed, or - for stdin")->required();
  load->add_option("--format", load_format, "rules (default), hosts (hosts file), domains (one name a line), "
                                            "cidr (one address or prefix a line)")
      ->check(CLI::IsMember({"rules", "hosts", "domains", "cidr"}));
  load->add_option("--as", load_as, "cidr: the rule kind of each line, src, dst or ip (default ip)")
      ->check(CLI::IsMember({"src", "dst", "ip"}));
  load->add_flag("--skip-bad", load_args.skip_bad, "Load the good lines, count and skip the bad ones");
  const CLI::Option* load_set_opt =
      load->add_option("--set", load_args.set, "The named set the rules join (default: default)");
  load->add_flag("--replace", load_args.replace,
                 "With --set: the set becomes exactly these rules, in one atomic change");
  auto* list = app.add_subcommand("list", "List rules in order: list [KIND] [PREFIX]");
  list->add_option("args", list_args, "KIND (flow, src, dst, ip, service, url, host) and PREFIX");
  const CLI::Option* list_set_opt = list->add_option("--set", list_set, "Only the rules of this named set");
  std::vector<std::string> hits_args;
  auto* hits = app.add_subcommand("hits", "Rules with their confirmed-hit counts: hits [KIND] [PREFIX]");
  hits->add_option("args", hits_args, "KIND and PREFIX, as for list");
  const CLI::Option* hits_set_opt = hits->add_option("--set", hits_set, "Only the rules of this named set");
  auto* stats = app.add_subcommand("stats", "Packet counters, totals and per worker");
  stats->add_flag("--json", stats_json, "Print JSON");
  auto* info = app.add_subcommand("info", "Filter capacity, load, fingerprint bits, memory");
  info->add_flag("--json", info_json, "Print JSON");
  std::string flush_scope;
  auto* flush = app.add_subcommand("flush", "Remove rules: 'flush all' every rule, 'flush KIND' one kind");
  flush->add_option("scope", flush_scope, "all, or a rule kind (flow, src, dst, ip, service, url, host)")
      ->required();
  auto* ping = app.add_subcommand("ping", "Check that the gateway answers");

  // The first word that is not an option (or the socket option's value) names the
  // command; CLI11 alone says "A subcommand is required" for a misspelt one.
  for (int i = 1; i < argc; ++i) {
    const std::string_view w = argv[i];
    if (sock_opt->check_name(std::string(w))) {
      ++i;
      continue;
    }
    if (w.starts_with("-")) continue;
    bool known = false;
    for (const CLI::App* sc : app.get_subcommands([](CLI::App*) { return true; })) known |= sc->get_name() == w;
    if (!known) {
      std::fprintf(stderr, "cuckoogatectl: unknown command '%.64s' (try --help)\n", argv[i]);
      return 2;
    }
    break;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help/--version: 0; bad usage: 2
  }
  if (list_args.size() > 2) die("list takes at most KIND and PREFIX");
  if (hits_args.size() > 2) die("hits takes at most KIND and PREFIX");
  for (const auto* args : {&add_args, &del_args, &check_args, &list_args, &hits_args})
    refuse_line_breaks(*args);
  refuse_line_breaks({flush_scope, add_set, list_set, hits_set, load_args.set});
  refuse_blanks(list_args);
  refuse_blanks(hits_args);
  refuse_blanks({flush_scope});
  refuse_bad_set_name(add_set_opt, add_set);
  refuse_bad_set_name(load_set_opt, load_args.set);
  refuse_bad_set_name(list_set_opt, list_set);
  refuse_bad_set_name(hits_set_opt, hits_set);
  if (load_args.replace && load_args.set.empty()) die("--replace needs --set NAME: the set it replaces");
  if (add->parsed() && add_file.empty() == add_args.empty())
    die(add_file.empty() ? "add needs rules, or --file FILE" : "add takes rules or --file FILE, not both");
  if (load->parsed()) {
    load_args.feed.format = *cg::feeds::format_from_name(load_format);  // checked by IsMember
    if (!load_as.empty() && load_args.feed.format != cg::feeds::Format::kCidr)
      die("--as applies to --format cidr only");
    if (!load_as.empty()) load_args.feed.cidr_kind = *cg::feeds::cidr_kind_from_name(load_as);
  }

  Connection c(sock);
  if (add->parsed()) {
    const std::string suffix = (ttl ? " ttl=" + std::to_string(ttl) : "") +
                               (add_set.empty() ? "" : " set=" + add_set) +
                               (add_action.empty() ? "" : " action=" + add_action);
    return add_file.empty() ? cmd_rules(c, "add", add_args, suffix) : cmd_add_file(c, add_file, suffix);
  }
  if (del->parsed()) return cmd_rules(c, "del", del_args);
  if (check->parsed()) {
    const auto resp = request(c, join("check", check_args), false);
    if (!resp) return 2;
    const bool present = resp->first == "OK present";
    std::printf("%s\n", present ? "present" : "absent");
    return present ? 0 : 1;
  }
  if (load->parsed()) return cmd_load(c, load_args);
  if (list->parsed())
    return cmd_multi(c, join(list_set.empty() ? "list" : "list set=" + list_set, list_args), false, "(no rules match)");
  if (hits->parsed())
    return cmd_multi(c, join(hits_set.empty() ? "hits" : "hits set=" + hits_set, hits_args), false, "(no rules match)");
  if (stats->parsed()) return cmd_multi(c, "stats", stats_json);
  if (info->parsed()) return cmd_multi(c, "info", info_json);
  if (flush->parsed()) {
    const auto resp = request(c, "flush " + flush_scope, false);
    if (!resp) return 2;
    std::printf("%s\n", resp->first.substr(3).c_str());
    return 0;
  }
  if (ping->parsed()) {
    const auto resp = request(c, "ping", false);
    if (!resp) return 2;
    std::printf("%s\n", resp->first.substr(3).c_str());
    return 0;
  }
  return 2;
}
