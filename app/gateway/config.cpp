#include "gateway/config.hpp"

#include <cstdlib>
#include <toml++/toml.h>

namespace cg {

std::string default_ctl_path() {
  const char* env = std::getenv("CUCKOOGATE_CTL");
  return env != nullptr && *env != '\0' ? env : "/run/cuckoogate/cuckoogate.sock";
}

namespace {

// Known keys per table: an unknown key is an error (a typo must not be ignored).
bool check_keys(const toml::table& t, std::initializer_list<std::string_view> known,
                const std::string& where, std::string* err) {
  for (const auto& [k, v] : t) {
    bool ok = false;
    for (std::string_view n : known) ok = ok || k.str() == n;
    if (!ok) {
      *err = where + ": unknown key '" + std::string(k.str()) + "'";
      return false;
    }
  }
  return true;
}

bool string_list(const toml::node* n, std::vector<std::string>& out, const std::string& where,
                 std::string* err) {
  if (n == nullptr) return true;
  const toml::array* a = n->as_array();
  if (a == nullptr) {
    *err = where + ": expected an array of strings";
    return false;
  }
  for (const auto& e : *a) {
    if (!e.is_string()) {
      *err = where + ": expected an array of strings";
      return false;
    }
    out.push_back(std::string(*e.value<std::string>()));
  }
  return true;
}

template <class T>
bool integer(const toml::table& t, const char* key, T lo, T hi, T& out, const std::string& where,
             std::string* err) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return true;
  auto v = n->value<int64_t>();
  if (!n->is_integer() || !v || *v < static_cast<int64_t>(lo) || *v > static_cast<int64_t>(hi)) {
    *err = where + "." + key + ": expected an integer from " + std::to_string(lo) + " to " +
           std::to_string(hi);
    return false;
  }
  out = static_cast<T>(*v);
  return true;
}

std::string port_ref(const toml::node& n) {
  if (n.is_integer()) return std::to_string(*n.value<int64_t>());
  if (n.is_string()) return std::string(*n.value<std::string>());
  return {};
}

}  // namespace

bool load_config(const std::string& path, GatewayConfig& c, std::string* err) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    *err = path + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column) +
           ": " + std::string(e.description());
    return false;
  }
  if (!check_keys(root, {"eal", "gateway", "pair"}, path, err)) return false;
  if (const toml::table* eal = root["eal"].as_table()) {
    if (!check_keys(*eal, {"args"}, path + ": [eal]", err)) return false;
    if (!string_list(eal->get("args"), c.eal, path + ": eal.args", err)) return false;
  } else if (root.contains("eal")) {
    *err = path + ": 'eal' must be a table";
    return false;
  }
  if (const toml::table* g = root["gateway"].as_table()) {
    const std::string w = path + ": gateway";
    if (!check_keys(*g, {"workers", "verify", "malformed", "capacity", "ctl", "state_dir", "rules",
                         "rx_desc", "tx_desc"}, w, err))
      return false;
    unsigned workers = 0;
    if (g->contains("workers")) {
      if (!integer(*g, "workers", 1u, 128u, workers, w, err)) return false;
      c.workers = workers;
    }
    if (const toml::node* v = g->get("verify")) {
      if (!v->is_boolean()) {
        *err = w + ".verify: expected true or false";
        return false;
      }
      c.verify = *v->value<bool>();
    }
    if (const toml::node* m = g->get("malformed")) {
      const auto s = m->value<std::string>();
      if (!s || (*s != "pass" && *s != "drop")) {
        *err = w + ".malformed: expected \"pass\" or \"drop\"";
        return false;
      }
      c.drop_malformed = *s == "drop";
    }
    // rte_hash holds at most 2^30 entries and the exact set asks for capacity * 1.25.
    if (!integer(*g, "capacity", std::size_t{1}, std::size_t{858993459}, c.capacity, w, err)) return false;
    if (!integer(*g, "rx_desc", uint16_t{64}, uint16_t{32768}, c.rx_desc, w, err)) return false;
    if (!integer(*g, "tx_desc", uint16_t{64}, uint16_t{32768}, c.tx_desc, w, err)) return false;
    for (const char* key : {"ctl", "state_dir"}) {
      if (const toml::node* s = g->get(key)) {
        if (!s->is_string()) {
          *err = w + "." + key + ": expected a string";
          return false;
        }
        (std::string_view(key) == "ctl" ? c.ctl : c.state_dir) = *s->value<std::string>();
      }
    }
    if (!string_list(g->get("rules"), c.rules, w + ".rules", err)) return false;
  } else if (root.contains("gateway")) {
    *err = path + ": 'gateway' must be a table";
    return false;
  }
  if (const toml::node* pn = root.get("pair")) {
    const toml::array* pairs = pn->as_array();
    if (pairs == nullptr) {
      *err = path + ": 'pair' must be an array of tables ([[pair]])";
      return false;
    }
    for (std::size_t i = 0; i < pairs->size(); ++i) {
      const std::string w = path + ": pair[" + std::to_string(i) + "]";
      const toml::table* t = (*pairs)[i].as_table();
      const toml::array* ports = t ? (*t)["ports"].as_array() : nullptr;
      if (t == nullptr || !check_keys(*t, {"ports"}, w, err)) {
        if (err->empty()) *err = w + ": expected a table";
        return false;
      }
      if (ports == nullptr || ports->size() != 2 || port_ref((*ports)[0]).empty() ||
          port_ref((*ports)[1]).empty()) {
        *err = w + ".ports: expected two port names or numbers";
        return false;
      }
      c.pairs.push_back({port_ref((*ports)[0]), port_ref((*ports)[1])});
    }
  }
  return true;
}

}  // namespace cg
