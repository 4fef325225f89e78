// DPDK smoke test: EAL starts without hugepages or PCI, a net_pcap vdev
// replays a capture the test writes, and a second net_pcap vdev writes
// exactly the same frames back out. Guards the environment every gateway
// test depends on.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "eal_test_main.hpp"
#include "packet_builder.hpp"
#include "pcap_file.hpp"

namespace {

std::string g_dir;

std::vector<cg::test::Bytes> sample_frames() {
  using cg::test::Packet;
  std::vector<cg::test::Bytes> v;
  v.push_back(Packet().ipv4("10.0.0.1", "10.0.0.2").tcp(1234, 80).payload("hello").frame());
  v.push_back(Packet().vlan(7).ipv6("2001:db8::1", "2001:db8::2").udp(5353, 53).frame());
  v.push_back(Packet().ipv4("192.0.2.1", "198.51.100.1").icmp().frame());
  for (int i = 0; i < 100; ++i)
    v.push_back(Packet().ipv4("10.1.0.1", "10.2.0.2").udp(static_cast<uint16_t>(1000 + i), 9).frame());
  return v;
}

TEST(EalPcap, ReplaysCaptureThroughNetPcapUnchanged) {
  ASSERT_EQ(rte_eth_dev_count_avail(), 2u);
  uint16_t in_port = 0, out_port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_pcap_in", &in_port), 0);
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_pcap_out", &out_port), 0);

  rte_mempool* pool = rte_pktmbuf_pool_create("eal_test_pool", 1023, 0, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  ASSERT_NE(pool, nullptr);
  for (uint16_t port : {in_port, out_port}) {
    rte_eth_conf conf{};
    ASSERT_EQ(rte_eth_dev_configure(port, 1, 1, &conf), 0);
    ASSERT_EQ(rte_eth_rx_queue_setup(port, 0, 128, rte_eth_dev_socket_id(port), nullptr, pool), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(port, 0, 128, rte_eth_dev_socket_id(port), nullptr), 0);
    ASSERT_EQ(rte_eth_dev_start(port), 0);
  }
  const auto expected = sample_frames();
  size_t received = 0;
  for (int idle = 0; idle < 1000 && received < expected.size();) {
    rte_mbuf* burst[32];
    const uint16_t n = rte_eth_rx_burst(in_port, 0, burst, 32);
    if (n == 0) { ++idle; usleep(100); continue; }
    received += n;
    uint16_t sent = rte_eth_tx_burst(out_port, 0, burst, n);
    for (uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(burst[i]);
    EXPECT_EQ(sent, n);
  }
  EXPECT_EQ(received, expected.size());
  for (uint16_t port : {in_port, out_port}) {
    EXPECT_EQ(rte_eth_dev_stop(port), 0);
    EXPECT_EQ(rte_eth_dev_close(port), 0);  // flushes and closes the tx pcap
  }
  const auto got = cg::test::read_pcap(g_dir + "/out.pcap");
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "frame " << i;
  rte_mempool_free(pool);
}

}  // namespace

// The two net_pcap ports read and write files in the scratch directory.
int main(int argc, char** argv) {
  return cg::test::run_eal_tests(argc, argv, "eal-test", &g_dir, [](const std::string& dir) {
    cg::test::write_pcap(dir + "/in.pcap", sample_frames());
    cg::test::write_pcap(dir + "/empty.pcap", {});
    return std::vector<std::string>{
        "--vdev=net_pcap_in,rx_pcap=" + dir + "/in.pcap,tx_pcap=" + dir + "/in-tx.pcap",
        "--vdev=net_pcap_out,rx_pcap=" + dir + "/empty.pcap,tx_pcap=" + dir + "/out.pcap"};
  });
}
