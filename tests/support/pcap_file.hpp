// Reading and writing classic pcap files with libpcap, for tests and the
// capture generator. Errors throw std::runtime_error naming the file: these
// helpers run only in test set-up, never on the data path.
#pragma once

#include <pcap/pcap.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cg::test {

inline void write_pcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  if (dead == nullptr) throw std::runtime_error("pcap_open_dead failed");
  pcap_dumper_t* d = pcap_dump_open(dead, path.c_str());
  if (d == nullptr) {
    std::string err = pcap_geterr(dead);
    pcap_close(dead);
    throw std::runtime_error("cannot write " + path + ": " + err);
  }
  uint32_t usec = 0;
  for (const auto& f : frames) {
    pcap_pkthdr h{};
    h.ts.tv_sec = 1700000000;
    h.ts.tv_usec = usec++;
    h.caplen = h.len = static_cast<uint32_t>(f.size());
    pcap_dump(reinterpret_cast<u_char*>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
}

inline std::vector<std::vector<uint8_t>> read_pcap(const std::string& path) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  if (p == nullptr) throw std::runtime_error("cannot read " + path + ": " + err);
  std::vector<std::vector<uint8_t>> out;
  pcap_pkthdr* h;
  const u_char* data;
  while (pcap_next_ex(p, &h, &data) == 1) out.emplace_back(data, data + h->caplen);
  pcap_close(p);
  return out;
}

}  // namespace cg::test
