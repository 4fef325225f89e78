// Ethernet port set-up for the gateway: queues, descriptor rings, RSS.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>

namespace cg {

struct PortConfig {
  uint16_t rx_queues = 1;
  uint16_t tx_queues = 1;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  bool promiscuous = true;  // a gateway forwards frames not addressed to it
  // The device spreads traffic over the rx queues (run; replay splits its
  // capture itself): with several queues and no RSS to set, a warning says
  // that the device, not symmetric RSS, picks each packet's queue.
  bool device_spreads = false;
};

// Configures and starts `port`. With several rx queues, RSS spreads flows
// over them, limited to the hash functions the device reports. Descriptor
// counts are adjusted to the device's limits. false and *err on failure.
bool setup_port(uint16_t port, const PortConfig& c, rte_mempool* pool, std::string* err);

// Stops and closes a port (net_pcap flushes its output file on close).
void close_port(uint16_t port);

std::string port_name(uint16_t port);

// The kernel interface a port works on: the `iface=` argument of its vdev
// (net_af_packet, net_pcap's live mode), "" for any other device.
std::string port_iface(uint16_t port);

}  // namespace cg
