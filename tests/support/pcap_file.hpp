// Reading and writing classic pcap files with libpcap, for tests and the
// capture generator. Errors throw std::runtime_error naming the file: these
// helpers run only in test set-up, never on the data path.
#pragma once

#include <pcap/pcap.h>

#include <cstddef>
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

// `frames` `times` over, in order: the capture for a long looping replay.
// `cuckoogate replay --loop N` re-reads its input file on every pass, so the
// same packet stream costs it far less as N/k passes over k copies (a 2-frame
// capture looped 200000 times: 2.2 CPU-s of set-up; 100 copies looped 2000
// times: 0.2 CPU-s).
inline std::vector<std::vector<uint8_t>> repeated(const std::vector<std::vector<uint8_t>>& frames,
                                                  std::size_t times) {
  std::vector<std::vector<uint8_t>> out;
  out.reserve(frames.size() * times);
  for (std::size_t i = 0; i < times; ++i) out.insert(out.end(), frames.begin(), frames.end());
  return out;
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
