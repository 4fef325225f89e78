#!/usr/bin/env python3
"""Prints N mixed rules, all seven kinds in equal shares (gateway_bench's rule_mix,
bench/gateway_inputs.hpp): the rule file of load_bench_gateway.sh and restart_bench_gateway.sh.

    bench/mixed_rules.py N > rules
"""
import sys


def addr(i):
    return "10.%d.%d.%d" % ((i >> 16) & 255, (i >> 8) & 255, i & 255)


def rule(i):
    j, k = i // 7, i % 7
    if k == 0:
        return "src " + addr(j)
    if k == 1:
        return "dst " + addr(j)
    if k == 2:
        return "ip " + addr(j)
    if k == 3:
        return "flow tcp %s:1000 %s:80" % (addr(j), addr(j + 1))
    if k == 4:
        return "service tcp %s:443" % addr(j)
    if k == 5:
        return "host h%d.example.net" % j
    return "url example.org/p/%d" % j


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip())
    sys.stdout.write("\n".join(rule(i) for i in range(int(sys.argv[1]))) + "\n")
