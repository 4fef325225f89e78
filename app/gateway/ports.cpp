#include "gateway/ports.hpp"

#include "gateway/log.hpp"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace cg {
namespace {

constexpr std::array<uint8_t, 64> symmetric_key() {
  std::array<uint8_t, 64> k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = (i % 2) == 0 ? 0x6d : 0x5a;
  return k;
}
// The symmetric RSS key (setup_port). Not const: rss_conf takes a uint8_t*,
// and the device keeps the pointer, so it lives as long as the program.
std::array<uint8_t, 64> g_symmetric_rss_key = symmetric_key();

}  // namespace

std::string port_name(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  if (rte_eth_dev_get_name_by_port(port, name) != 0) return "port" + std::to_string(port);
  return name;
}

std::string port_iface(uint16_t port) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0 || info.device == nullptr) return "";
  const rte_devargs* da = rte_dev_devargs(info.device);
  if (da == nullptr || da->args == nullptr) return "";
  const std::string_view args = da->args;
  for (std::size_t at = 0; at < args.size();) {  // key=value pairs separated by ','
    const std::size_t end = std::min(args.find(',', at), args.size());
    const std::string_view kv = args.substr(at, end - at);
    if (kv.starts_with("iface=")) return std::string(kv.substr(6));
    at = end + 1;
  }
  return "";
}

bool setup_port(uint16_t port, const PortConfig& c, rte_mempool* pool, std::string* err) {
  const std::string name = port_name(port);
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port, &info); rc != 0) {
    *err = name + ": cannot read device info: " + rte_strerror(-rc);
    return false;
  }
  if (c.rx_queues > info.max_rx_queues || c.tx_queues > info.max_tx_queues) {
    *err = name + ": needs " + std::to_string(c.rx_queues) + " rx / " + std::to_string(c.tx_queues) +
           " tx queues, device has " + std::to_string(info.max_rx_queues) + " / " +
           std::to_string(info.max_tx_queues);
    return false;
  }
  rte_eth_conf conf{};
  if (c.rx_queues > 1) {
    // RSS on IP addresses and L4 ports, masked to what the device can hash.
    const uint64_t want = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_SCTP;
    const uint64_t hf = want & info.flow_type_rss_offloads;
    if (hf != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;
      // Symmetric RSS: both directions of a flow must reach the same queue,
      // so the same worker and its flow table. A Toeplitz key made of the
      // 16-bit pattern 0x6d5a repeated hashes (src, dst) and (dst, src)
      // alike (Woo and Park, "Scalable TCP Session Monitoring with Symmetric
      // Receive-side Scaling"), and every port gets the same key, so the
      // two directions, which arrive on the paired ports, pick the same
      // queue index given the same redirection table. The key is sized to
      // what the device reports (40 bytes when it does not say).
      const std::size_t klen = info.hash_key_size != 0 ? info.hash_key_size : 40;
      conf.rx_adv_conf.rss_conf.rss_key = g_symmetric_rss_key.data();
      conf.rx_adv_conf.rss_conf.rss_key_len =
          static_cast<uint8_t>(std::min<std::size_t>(klen, g_symmetric_rss_key.size()));
    } else if (c.device_spreads) {
      // Without RSS the device chooses. net_af_packet's kernel fanout hashes
      // flows alike both ways but rolls a packet over to another socket when
      // its queue is full (an outside check saw a download's two directions
      // on two workers), and two workers each judge the flow alone.
      CG_LOG(WARNING, gateway,
             "%s: %u rx queues but the device offers no RSS: the device, not a symmetric hash, picks each "
             "packet's queue, so under load a flow's packets can reach two workers (net_af_packet rolls over "
             "to another queue when one is full); use one worker with such devices",
             name.c_str(), static_cast<unsigned>(c.rx_queues));
    }
  }
  if (int rc = rte_eth_dev_configure(port, c.rx_queues, c.tx_queues, &conf); rc != 0) {
    *err = name + ": configure failed: " + rte_strerror(-rc);
    return false;
  }
  uint16_t rxd = c.rx_desc, txd = c.tx_desc;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd); rc != 0) {
    *err = name + ": descriptor counts rejected: " + rte_strerror(-rc);
    return false;
  }
  const int socket = rte_eth_dev_socket_id(port);
  for (uint16_t q = 0; q < c.rx_queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(port, q, rxd, socket, nullptr, pool); rc != 0) {
      *err = name + ": rx queue " + std::to_string(q) + ": " + rte_strerror(-rc);
      return false;
    }
  }
  for (uint16_t q = 0; q < c.tx_queues; ++q) {
    if (int rc = rte_eth_tx_queue_setup(port, q, txd, socket, nullptr); rc != 0) {
      *err = name + ": tx queue " + std::to_string(q) + ": " + rte_strerror(-rc);
      return false;
    }
  }
  if (int rc = rte_eth_dev_start(port); rc != 0) {
    *err = name + ": start failed: " + rte_strerror(-rc);
    return false;
  }
  if (c.promiscuous) rte_eth_promiscuous_enable(port);  // not all vdevs support it: ignore
  return true;
}

void close_port(uint16_t port) {
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
}

}  // namespace cg
